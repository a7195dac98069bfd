"""Test support: real server processes on free ports and a raw RESP client.

Everything that crosses the network starts a real ``rill-server`` process
(and, for side-by-side checks, Debian's ``redis-server`` as the oracle).
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import NoReturn

import pytest

_SCRATCH: list[str] = []


@atexit.register
def _remove_scratch() -> None:
    for path in _SCRATCH:
        shutil.rmtree(path, ignore_errors=True)


def scratch_dir(prefix: str) -> str:
    """A fresh temporary directory for a server's files, removed when the test run ends
    (not when the server stops: a test may restart it on the same files)."""
    path = tempfile.mkdtemp(prefix=prefix)
    _SCRATCH.append(path)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Backoff:
    """The pauses between polls of a condition: 5 ms at first, doubling up to 50 ms. Most
    conditions (a server listening, a replica in sync) hold within a few tens of ms, so a
    fixed 50 ms pause lost ~25 ms a wait on average; a long wait still polls at 50 ms."""

    def __init__(self, first: float = 0.005, most: float = 0.05) -> None:
        self.pause = first
        self.most = most

    def __call__(self) -> None:
        time.sleep(self.pause)
        self.pause = min(self.pause * 2, self.most)


class ServerProcess:
    """A server process on a free port, started with redis-server style arguments."""

    def __init__(self, argv: list[str], port: int, workdir: str, preexec_fn=None) -> None:
        self.argv = argv
        self.port = port
        self.workdir = workdir
        self.preexec_fn = preexec_fn  # run in the child before exec (resource limits)
        self.proc: subprocess.Popen | None = None
        self.logfile = os.path.join(workdir, "server.log")

    def start(self, timeout: float = 15.0, loading_ok: bool = False) -> ServerProcess:
        """Start and wait until it answers; ``loading_ok``: an answer of -LOADING will do
        (for tests of what a loading server says)."""
        with open(self.logfile, "ab") as log:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(self.argv, cwd=self.workdir, stdout=log, stderr=subprocess.STDOUT,
                                         preexec_fn=self.preexec_fn)
        deadline = time.monotonic() + timeout
        pause = Backoff()
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.log()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    s.sendall(b"PING\r\n")
                    reply = s.recv(64)
                    # A server still loading its data set answers -LOADING (a big AOF on
                    # a loaded machine): the tests' first command would meet it too.
                    if reply and (loading_ok or not reply.startswith(b"-LOADING")):
                        return self
                    pause()
            except OSError:
                pause()
        # The test fails here and never reaches its stop(): a server left running would
        # hold its port and CPU for the rest of the session.
        self.kill()
        raise RuntimeError(f"server did not start: {self.log()}")

    def log(self) -> str:
        try:
            with open(self.logfile, "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def rill_process(*args: str, workdir: str | None = None, port: int | None = None,
                 config_file: str | None = None, preexec_fn=None) -> ServerProcess:
    """A ``rill-server`` process, not started yet, on a free port with extra redis-server
    style arguments (for tests that start several at once, or restart one on its files)."""
    port = port or free_port()
    workdir = workdir or scratch_dir("rill-test-")
    # DEBUG is refused by default, as in Redis; the tests need it (as Redis's own do).
    argv = [sys.executable, "-m", "rill.server.main", *([config_file] if config_file else []),
            "--port", str(port), "--save", "", "--dir", workdir, "--enable-debug-command", "yes", *args]
    return ServerProcess(argv, port, workdir, preexec_fn)


def start_rill(*args: str, workdir: str | None = None, port: int | None = None,
               config_file: str | None = None, preexec_fn=None, loading_ok: bool = False) -> ServerProcess:
    """Start ``rill-server`` on a free port with extra redis-server style arguments."""
    return rill_process(*args, workdir=workdir, port=port, config_file=config_file,
                        preexec_fn=preexec_fn).start(loading_ok=loading_ok)


def wait_until(predicate, timeout: float = 15.0):
    """Poll ``predicate`` until it returns something true, and return that; fail the
    test if it never does within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    pause = Backoff()
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        pause()
    raise AssertionError("condition not reached in time")


def redis_server_binary() -> str | None:
    return shutil.which("redis-server")


# -- what a test needs from the machine --------------------------------------------------------

# Where each outside tool a test may need comes from (Debian packages; .ci/run installs them).
TOOL_SOURCES = {
    "redis-server": "apt-get install redis-server",
    "redis-cli": "apt-get install redis-tools",
    "redis-check-rdb": "apt-get install redis-tools",
    "redis-check-aof": "apt-get install redis-tools",
    "redis-benchmark": "apt-get install redis-tools",
    "java": "apt-get install default-jre-headless",
    "make": "apt-get install make",
    "ss": "apt-get install iproute2",
    "openssl": "apt-get install openssl",
}
# Python modules from rill's extras that some tests need (make test installs them all).
MODULE_SOURCES = {
    "lzf": "the lzf extra: python-lzf, built from source (needs a C compiler, python3-dev)",
    "pyspark": "the spark extra: pyspark",
    "importlinter": "the lint extra: import-linter",
}


def in_ci() -> bool:
    """Whether this is a CI run (``CI`` set, as CI systems and .ci/run do)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def hypothesis_profile() -> str:
    """The hypothesis profile a run loads (tests/conftest.py): ``HYPOTHESIS_PROFILE``, else
    "ci" under CI, else "dev"."""
    return os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if in_ci() else "dev")


def examples(full: int, ci: int) -> int:
    """``max_examples`` for a property whose large count is there to explore: ``full`` in
    the "dev" (local, random draws) and "fuzz" profiles, ``ci`` in the derandomised "ci"
    profile, which draws the same examples every run, so that the rest of a large count
    re-checks the same fixed cases at a cost on every CI run."""
    return ci if hypothesis_profile() == "ci" else full


def unavailable(what: str, source: str) -> NoReturn:
    """``what`` is missing, so the calling test cannot run: a skip locally, a failure
    under CI, where a skipped oracle test would pass without having checked anything."""
    if in_ci():
        pytest.fail(f"{what} is required in CI ({source})", pytrace=False)
    pytest.skip(f"{what} not available ({source})")


def require_tool(name: str) -> str:
    """The path of the outside tool ``name``; skips locally and fails in CI without it."""
    path = shutil.which(name)
    if path is None:
        unavailable(name, TOOL_SOURCES.get(name, "not on PATH"))
    return path


def optional_tool(name: str) -> str | None:
    """The path of ``name`` for a check that is extra locally (None when it is absent),
    but required in CI."""
    path = shutil.which(name)
    if path is None and in_ci():
        unavailable(name, TOOL_SOURCES.get(name, "not on PATH"))
    return path


def require_module(name: str) -> ModuleType:
    """Import the Python module ``name``; skips locally and fails in CI without it."""
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError:
        unavailable(f"Python module {name}", MODULE_SOURCES.get(name, "pip install"))


def require_java() -> str:
    """The java that PySpark will launch: $JAVA_HOME/bin/java when JAVA_HOME is set (as
    PySpark prefers), else java on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return os.path.join(home, "bin", "java")
    return require_tool("java")


def start_redis(*args: str, workdir: str | None = None, preexec_fn=None, loading_ok: bool = False,
                config_file: str | None = None) -> ServerProcess:
    """Start Debian's redis-server (the oracle) on a free port; without one the calling
    test skips locally and fails in CI."""
    binary = require_tool("redis-server")
    port = free_port()
    workdir = workdir or scratch_dir("redis-oracle-")
    argv = [binary, *([config_file] if config_file else []), "--port", str(port), "--save", "",
            "--appendonly", "no", "--dir", workdir, "--enable-debug-command", "yes", *args]
    return ServerProcess(argv, port, workdir, preexec_fn).start(loading_ok=loading_ok)


@contextmanager
def stale_replicas(key: str, value: str) -> Iterator[tuple[RawClient, RawClient]]:
    """rill and redis-server side by side, each holding ``key`` and then, told
    replica-serve-stale-data no, made a replica of a port where nothing listens: both
    stale until the body ends, when they become masters again."""
    nowhere = str(free_port())
    with start_rill() as rill, start_redis() as twin:
        mine, theirs = RawClient(rill.port), RawClient(twin.port)
        for c in (mine, theirs):
            c.call("SET", key, value)
            c.call("CONFIG", "SET", "replica-serve-stale-data", "no")
            c.call("REPLICAOF", "127.0.0.1", nowhere)
        yield mine, theirs
        for c in (mine, theirs):
            c.call("REPLICAOF", "NO", "ONE")
            c.close()


def encode_command(args: Iterable[bytes | str | int]) -> bytes:
    parts = []
    items = [a if isinstance(a, bytes) else str(a).encode() for a in args]
    parts.append(b"*%d\r\n" % len(items))
    for a in items:
        parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(parts)


class RawClient:
    """Sends commands and returns each reply's exact bytes, for byte-for-byte checks."""

    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = b""

    def close(self) -> None:
        self.sock.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def call(self, *args: bytes | str | int) -> bytes:
        self.sock.sendall(encode_command(args))
        return self.read_reply()

    def _fill(self) -> None:
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("connection closed")
        self.buf += data

    def _line(self, pos: int) -> int:
        while True:
            i = self.buf.find(b"\r\n", pos)
            if i >= 0:
                return i
            self._fill()

    def _skip(self, pos: int) -> int:
        end = self._line(pos)
        t = self.buf[pos : pos + 1]
        head = self.buf[pos + 1 : end]
        pos = end + 2
        if t in (b"$", b"=", b"!"):
            n = int(head)
            if n < 0:
                return pos
            while len(self.buf) < pos + n + 2:
                self._fill()
            return pos + n + 2
        if t in (b"*", b"~", b">", b"%", b"|"):
            n = int(head)
            if n < 0:
                return pos
            if t in (b"%", b"|"):
                n *= 2
            for _ in range(n):
                pos = self._skip(pos)
            if t == b"|":
                pos = self._skip(pos)
            return pos
        return pos

    def read_reply(self) -> bytes:
        while not self.buf:
            self._fill()
        end = self._skip(0)
        reply, self.buf = self.buf[:end], self.buf[end:]
        return reply

    def closed_by_peer(self, timeout: float = 2.0) -> bool:
        """Whether the server closes the connection (after protocol errors, QUIT)."""
        self.sock.settimeout(timeout)
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    return True
                self.buf += data
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False

    def silent(self, wait: float = 0.1) -> bool:
        """Nothing arrives for ``wait`` seconds (0: nothing has arrived yet, without waiting)."""
        self.sock.settimeout(wait)
        try:
            data = self.sock.recv(65536)
        except (TimeoutError, BlockingIOError):  # the latter when wait is 0: a non-blocking read
            return True
        finally:
            self.sock.settimeout(10.0)
        self.buf += data
        return False


def decoded_reply(port: int, *args: bytes | str | int):
    """One command's reply as hiredis decodes it, without a client library's reply
    callbacks (redis-py folds SCAN-family pages into dicts and tuples)."""
    from hiredis import Reader

    client = RawClient(port)
    try:
        reader = Reader()
        reader.feed(client.call(*args))
        return reader.gets()
    finally:
        client.close()


class Waiter(RawClient):
    """A connection that sends a blocking command and reads its reply later."""

    def send(self, *args) -> None:
        self.sock.sendall(encode_command(args))

    def reply(self, timeout: float = 5.0) -> bytes:
        self.sock.settimeout(timeout)
        try:
            return self.read_reply()
        finally:
            self.sock.settimeout(10.0)


def keyevents(port: int, script: Iterable[tuple], classes: str = "KEA", flush: bool = True,
              end: tuple = ("ZADD", "end-marker", "1", "x")) -> list[tuple[bytes, bytes]]:
    """The (event, key) keyevent notifications ``script`` raises, in order, with
    notify-keyspace-events set to ``classes`` for the run. ``end`` writes the key
    "end-marker" with an event ``classes`` enables, so the reader knows it has all."""
    cmd = RawClient(port)
    if flush:
        cmd.call("FLUSHALL")
    cmd.call("CONFIG", "SET", "notify-keyspace-events", classes)
    sub = RawClient(port)
    sub.call("PSUBSCRIBE", "__keyevent@0__:*")
    for args in script:
        cmd.call(*args)
    cmd.call(*end)
    events = []
    while True:
        msg = sub.read_reply().split(b"\r\n")
        event, key = msg[6].split(b":", 1)[1], msg[8]
        if key == b"end-marker":
            break
        events.append((event, key))
    cmd.call("CONFIG", "SET", "notify-keyspace-events", "")
    sub.close()
    cmd.close()
    return events


def run_inproc(server, client, *args) -> bytes:
    """Run one command on an in-process Server and return the reply bytes it queued."""
    client.out.clear()
    server.execute(client, [a if isinstance(a, bytes) else str(a).encode() for a in args])
    return b"".join(client.out)


def inproc_keyevents(server, client, script: Iterable[tuple], monkeypatch) -> list[tuple[bytes, bytes]]:
    """The (event, key) notifications an in-process Server raises for ``script``, caught at
    the keyspace notifier: what ``keyevents`` reads from a real server, without sockets."""
    from rill.server import notify

    events: list[tuple[bytes, bytes]] = []
    monkeypatch.setattr(notify, "notifier", lambda db, cls, event, key: events.append((event, key)))
    for args in script:
        run_inproc(server, client, *args)
    return events


def redis_aof_commands(workdir: str, script: Iterable[tuple], after=None) -> list[list[bytes]]:
    """What redis-server (appendonly yes, appendfsync always) writes to its incr AOF for
    ``script``, as commands. ``after(client)`` may run more against it before it stops."""
    from pathlib import Path

    from rill.persistence import aof

    redis = start_redis("--appendonly", "yes", "--appendfsync", "always", workdir=workdir)
    try:
        cli = RawClient(redis.port)
        for args in script:
            cli.call(*args)
        if after is not None:
            after(cli)
        cli.close()
    finally:
        redis.stop()
    (incr,) = Path(workdir, "appendonlydir").glob("*.incr.aof")
    return list(aof.CommandParser(incr.read_bytes()))


def effects_as_aof(effects: Iterable[tuple[int, list[bytes]]]) -> list[list[bytes]]:
    """Propagated (db, argv) effects as an AOF holds them: a SELECT before each change of DB
    (the AOF of a fresh server starts in DB 0 after its own leading SELECT)."""
    out: list[list[bytes]] = []
    db = 0
    for effect_db, argv in effects:
        if effect_db != db:
            out.append([b"SELECT", b"%d" % effect_db])
            db = effect_db
        out.append(argv)
    return out


class StepLoop:
    """An event-loop double for in-process Connections: call_soon callbacks wait
    until :meth:`run_iteration`, which plays "the next loop iteration"."""

    def __init__(self) -> None:
        self.callbacks: list = []

    def call_soon(self, cb, *args):
        self.callbacks.append((cb, args))

    def call_at(self, *args):  # blocking timeouts never fire here
        return None

    def time(self) -> float:
        return 0.0

    def run_iteration(self) -> None:
        callbacks, self.callbacks = self.callbacks, []
        for cb, args in callbacks:
            cb(*args)


class RecordingTransport:
    """A loopback transport double that hands every write to ``on_write`` and records closing."""

    def __init__(self, on_write=None) -> None:
        self.written: list[bytes] = []
        self.on_write = on_write or self.written.append
        self.closed = False

    _EXTRA = {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 6379)}

    def get_extra_info(self, name, default=None):
        return self._EXTRA.get(name, default)

    def write(self, data: bytes) -> None:
        assert not self.closed, "write after close"
        self.on_write(data)

    def close(self) -> None:
        self.closed = True

    def get_write_buffer_size(self) -> int:
        return 0  # every write is handed on at once

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass
