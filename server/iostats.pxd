# Cython declarations for iostats.py (its "augmenting" .pxd): the counters are C integers,
# which the connection (connection.pxd types its ``stats`` local) adds to without an
# attribute lookup. See docs/hot-core.md.

cdef class IOStats:
    cdef public long long net_input_bytes, net_output_bytes, net_repl_input_bytes, net_repl_output_bytes
    cdef public long long total_reads_processed, total_writes_processed
