"""Shared fixtures: a rill-server per test session, the redis-server oracle, clients."""

from __future__ import annotations

import os

import pytest
import redis
from hypothesis import settings

from tests.support import (
    RawClient,
    hypothesis_profile,
    require_module,
    require_tool,
    scratch_dir,
    start_redis,
    start_rill,
)

# Bytecode for the interpreters the tests start (every rill-server, hundreds a run): each is
# a fresh process importing ~110 modules, and with PYTHONDONTWRITEBYTECODE set (CI's
# environment sets it) each one compiled them all from source again, two thirds of a
# server's start-up (2.05e9 user instructions start to shutdown, 0.67e9 with bytecode
# cached). The cache goes to a scratch directory, so nothing is written into the tree;
# a PYTHONPYCACHEPREFIX of the caller's own is kept.
if not os.environ.get("PYTHONPYCACHEPREFIX"):
    os.environ["PYTHONPYCACHEPREFIX"] = scratch_dir("rill-test-pyc-")
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# hypothesis profiles. "ci": every draw derives from the test itself (derandomize) and
# nothing is replayed from a local example database, so whether CI passes never depends
# on luck; the cases random exploration has found are pinned as @example on their tests.
# "dev" (local runs): random draws, failures remembered in .hypothesis/. No profile has a
# deadline: timings belong in benchmarks, and a loaded machine is no failure. "fuzz": random
# draws and more of them (for tests that don't fix max_examples themselves), each failure
# printed as a reproduction blob. HYPOTHESIS_PROFILE overrides the choice. A property whose
# large count is there to explore takes it from tests.support.examples: the full count in
# "dev" and "fuzz", a smaller one in "ci", whose fixed draws gain little from the rest.
_hypothesis_default = settings.get_profile("default")  # not hypothesis's own CI profile
settings.register_profile("ci", _hypothesis_default, derandomize=True, database=None,
                          deadline=None, print_blob=True)
settings.register_profile("dev", _hypothesis_default, deadline=None)
settings.register_profile("fuzz", _hypothesis_default, max_examples=1000, database=None, deadline=None,
                          print_blob=True)
settings.load_profile(hypothesis_profile())


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "requires(*tools, modules=()): outside tools on PATH and Python modules the test "
        "needs; skipped locally without them, failed under CI=true",
    )


def pytest_runtest_setup(item):
    for mark in item.iter_markers("requires"):
        for tool in mark.args:
            require_tool(tool)
        for module in mark.kwargs.get("modules", ()):
            require_module(module)


@pytest.fixture(scope="session")
def rill_server():
    server = start_rill()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def oracle_server():
    """Debian's redis-server 7.0: skipped locally when absent, failed in CI."""
    server = start_redis()
    yield server
    server.stop()


@pytest.fixture
def inproc():
    """An in-process Server (no sockets); every propagated (db, argv) lands in one list."""
    from rill.server.commands import load_all
    from rill.server.server import Server

    load_all()
    server = Server()
    server.config.set("enable-debug-command", "yes", startup=True)  # as start_rill's servers
    effects: list = []
    server.propagation.attach("observer", effects.extend)
    return server, server.new_client(), effects


@pytest.fixture
def r(rill_server):
    """A redis-py client on a flushed rill."""
    client = redis.Redis(port=rill_server.port)
    client.flushall()
    yield client
    client.close()


@pytest.fixture
def raw(rill_server):
    client = RawClient(rill_server.port)
    client.call("FLUSHALL")
    yield client
    client.close()


class SideBySide:
    """Runs the same commands on rill and on redis-server and compares the reply bytes."""

    def __init__(self, rill_port: int, oracle_port: int, resp3: bool = False) -> None:
        self.rill = RawClient(rill_port)
        self.oracle = RawClient(oracle_port)
        for c in (self.rill, self.oracle):
            c.call("FLUSHALL")
            if resp3:
                c.call("HELLO", "3")

    def both(self, *args) -> tuple[bytes, bytes]:
        return self.rill.call(*args), self.oracle.call(*args)

    def check(self, *args) -> bytes:
        """Assert both replies are identical; return it."""
        mine, theirs = self.both(*args)
        assert mine == theirs, f"{args!r}: rill {mine!r} != redis {theirs!r}"
        return mine

    def run(self, script: list[tuple]) -> None:
        for args in script:
            self.check(*args)

    def close(self) -> None:
        self.rill.close()
        self.oracle.close()


@pytest.fixture
def sbs(rill_server, oracle_server):
    """Side-by-side RESP2 comparison against the oracle."""
    s = SideBySide(rill_server.port, oracle_server.port)
    yield s
    s.close()


@pytest.fixture
def sbs3(rill_server, oracle_server):
    """Side-by-side RESP3 comparison against the oracle."""
    s = SideBySide(rill_server.port, oracle_server.port, resp3=True)
    yield s
    s.close()
