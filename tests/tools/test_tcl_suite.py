"""Redis's own Tcl units, run against rill in both modes beside redis-server, in every CI run.

The tree is Redis 7.0.15's release (tools/redis_suite.py: Debian's copy of the tarball,
SHA-256 checked, cached under .cache/). Each unit runs as the README's
``tools/run_tcl_units.py`` runs it: a fresh server on a free port, ``runtest --single UNIT
--clients 1 --durable`` against it as an external server. redis-server runs it first, in the
same way, on the same machine: the oracle says which tests an external server passes here.
rill must pass every one of them, compiled and, for the types the compiled core carries, as
pure Python too (issue 24: the Tcl units in both modes). The chosen units are the data types
and the keyspace (the project's centre), transactions, the protocol, pub/sub and tracking,
functions; ``make tcl`` runs any other.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from tests.support import require_tool

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


suite = _load("redis_suite")
units = _load("run_tcl_units")

# The types the compiled core carries run in both modes; the rest, compiled (the mode
# rill-server runs where a compiler is), which keeps the suite's share of CI to minutes.
BOTH_MODES = [
    "unit/type/stream",
    "unit/type/stream-cgroups",
    "unit/type/list",
    "unit/type/incr",
    "unit/type/string",
    "unit/type/hash",
]
COMPILED_ONLY = [
    "unit/keyspace",
    "unit/expire",
    "unit/multi",
    "unit/protocol",
    "unit/pubsub",
    "unit/tracking",
    "unit/functions",
    "unit/bitops",
    "unit/slowlog",
    "unit/scripting",
]
UNITS = BOTH_MODES + COMPILED_ONLY

# Tests redis-server passes here that rill does not run, each with the reason. Nothing else
# may differ.
NOT_RUN_ON_RILL = {
    # tagged "if jemalloc" (string.tcl): it asserts jemalloc's size classes, and the suite
    # runs it only when INFO says mem_allocator:jemalloc. rill says pymalloc, which is true.
    "trim on SET with big value",
}

# Tests redis-server passes here that rill fails, each with the reason (README "Status").
KNOWN_FAILURES = {
    # lupa calls a Python function with itself as an extra first argument and checks the
    # stack before it reads any: a call with 8001 arguments (the test's) is refused.
    "Script check unpack with massive arguments",
}

TIMEOUT = 600.0  # per unit and server; the slowest chosen unit takes about a minute


@pytest.fixture(scope="module")
def tree() -> Path:
    require_tool("tclsh")
    require_tool("redis-server")
    try:
        return suite.ensure()
    except OSError as exc:  # offline: only CI insists (require_tool's rule)
        if os.environ.get("CI"):
            raise
        pytest.skip(f"Redis's test suite could not be fetched ({exc})")


def _run(server_argv: list[str], tree: Path, unit: str, log: Path) -> tuple[list[str], list[str], str]:
    units.run_unit(server_argv, tree, unit, log, TIMEOUT)
    return units.parse(log)


@pytest.mark.parametrize("unit", UNITS)
def test_unit_passes_on_rill_as_on_redis(unit: str, tree: Path, tmp_path: Path) -> None:
    work = suite.writable_copy(tree, tmp_path / "tree")
    rill = str(Path(sys.executable).with_name("rill-server"))
    redis_ok, redis_err, redis_exit = _run([shutil.which("redis-server")], work, unit, tmp_path / "redis.log")
    assert redis_exit == "0" and not redis_err and redis_ok, (tmp_path / "redis.log").read_text()[-3000:]
    expected = set(redis_ok) - NOT_RUN_ON_RILL - KNOWN_FAILURES
    modes = [("compiled", [rill]), ("pure", ["env", "RILL_PURE=1", rill])]
    for mode, argv in modes if unit in BOTH_MODES else modes[:1]:
        log = tmp_path / f"rill-{mode}.log"
        ok, err, code = _run(argv, work, unit, log)
        assert f"Hot core: {mode}" in log.with_suffix(".server.log").read_text()
        missing = sorted(expected - set(ok))
        failed = sorted(set(err) - KNOWN_FAILURES)
        assert (failed, missing) == ([], []), f"{unit} ({mode}):\n" + log.read_text()[-3000:]
        # a non-zero exit is only the known failures' (not a crash or a timeout of the harness)
        assert code == "0" or (err and set(err) <= KNOWN_FAILURES), f"{unit} ({mode}): exit {code}"


def test_the_readme_names_the_units_ci_runs():
    readme = (ROOT / "README.md").read_text()
    section = next(p for p in readme.split("\n\n") if "tests/tools/test_tcl_suite.py" in p)
    both, compiled = section.split("compiled only:")
    assert re.findall(r"`(unit/[\w/-]+)`", both) == BOTH_MODES
    assert re.findall(r"`(unit/[\w/-]+)`", compiled) == COMPILED_ONLY
