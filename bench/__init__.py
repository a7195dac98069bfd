"""Side-by-side benchmarks: rill against Debian's redis-server, in one run on one machine.

``make bench`` (or ``python -m bench``) starts both servers on free ports, runs every
workload registered in :mod:`bench.workloads` against each, and prints both rates, the
ratio and the target the issues set. Workloads whose commands rill does not serve yet
are skipped with a note. Numbers are for reading, never for pass/fail tests.
"""
