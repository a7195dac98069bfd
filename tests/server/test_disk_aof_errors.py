"""When the AOF cannot be written or fsynced: MISCONF until it can again (everysec, no),
or exit (always); side by side with redis-server where the kernel can be made to fail.

The failure is real: the server runs under RLIMIT_FSIZE, so the kernel takes only part
of a write that crosses the limit and refuses the rest (EFBIG; both servers ignore
SIGXFSZ here), exactly the short write a full disk gives. Raising the limit from
outside (prlimit) is the disk getting space back. A failing fsync cannot be produced
without root, so that path is driven in-process with os.fdatasync failing.
"""

from __future__ import annotations

import errno
import os
import resource
import signal
import threading

from rill.persistence import aof

from tests.support import (
    RawClient,
    RecordingTransport,
    StepLoop,
    encode_command,
    start_redis,
    start_rill,
    wait_until,
)

LIMIT = 20_000  # bytes an AOF file may grow to before the kernel refuses
VALUE = "x" * 500
INCR = os.path.join("appendonlydir", "appendonly.aof.1.incr.aof")


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, resource.RLIM_INFINITY))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def _start(kind: str, policy: str):
    args = ("--appendonly", "yes", "--appendfsync", policy)
    return (start_rill if kind == "rill" else start_redis)(*args, preexec_fn=_limited)


def _fill_until_refused(c: RawClient) -> tuple[int, bytes]:
    for i in range(LIMIT // len(VALUE) + 10):
        reply = c.call("SET", f"k{i}", VALUE)
        if reply != b"+OK\r\n":
            return i, reply
    raise AssertionError("the AOF never failed")


def _status(c: RawClient) -> str:
    info = c.call("INFO", "persistence").decode()
    return next(line for line in info.split("\r\n") if line.startswith("aof_last_write_status:"))


def _everysec_run(kind: str) -> dict:
    srv = _start(kind, "everysec")
    try:
        c = RawClient(srv.port)
        refused_at, refusal = _fill_until_refused(c)
        seen = {
            "refused_at": refused_at,
            "refusal": refusal,
            "again": c.call("SET", "other", "v"),
            "ping": c.call("PING"),
            "read": c.call("GET", "k0")[:8],
            "status": _status(c),
        }
        resource.prlimit(srv.proc.pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        # Redis retries a failed write once a second; writes are accepted once it lands.
        wait_until(lambda: c.call("SET", "after", "v") == b"+OK\r\n", timeout=10)
        seen["status_after"] = _status(c)
        c.close()
    finally:
        srv.stop()
    seen["incr"] = open(os.path.join(srv.workdir, INCR), "rb").read()
    seen["workdir"] = srv.workdir
    return seen


def test_a_failing_aof_write_refuses_writes_until_it_lands_as_redis_does():
    redis = _everysec_run("redis")
    rill = _everysec_run("rill")
    assert rill["refusal"] == redis["refusal"] == (
        b"-MISCONF Errors writing to the AOF file: No space left on device\r\n")  # a short write
    assert rill["again"] == rill["ping"] == rill["refusal"]
    assert rill["read"] == redis["read"] == b"$500\r\nxx"
    assert rill["status"] == redis["status"] == "aof_last_write_status:err"
    assert rill["status_after"] == redis["status_after"] == "aof_last_write_status:ok"
    assert rill["refused_at"] == redis["refused_at"]
    # The torn write was truncated away and retried whole: the same bytes as Redis's file,
    # every acknowledged SET in it, none of the refused ones.
    assert rill["incr"] == redis["incr"]
    commands = list(aof.CommandParser(rill["incr"]))
    assert [argv[1] for argv in commands[1:]] == [
        b"k%d" % i for i in range(rill["refused_at"])] + [b"after"]
    with start_rill("--appendonly", "yes", workdir=rill["workdir"]) as srv:
        c = RawClient(srv.port)
        assert c.call("DBSIZE") == b":%d\r\n" % (rill["refused_at"] + 1)
        c.close()


def _always_run(kind: str) -> dict:
    srv = _start(kind, "always")
    c = RawClient(srv.port)
    acked = 0
    try:
        while acked < LIMIT // len(VALUE) + 10:
            assert c.call("SET", f"k{acked}", VALUE) == b"+OK\r\n"
            acked += 1
    except ConnectionError:
        pass
    finally:
        c.close()
    code = srv.proc.wait(10)
    srv.stop()
    return {"acked": acked, "code": code, "incr": open(os.path.join(srv.workdir, INCR), "rb").read(),
            "workdir": srv.workdir, "log": srv.log()}


def test_appendfsync_always_exits_rather_than_ack_what_it_cannot_write():
    redis = _always_run("redis")
    rill = _always_run("rill")
    assert rill["code"] == redis["code"] == 1
    assert "Can't recover from AOF write error when the AOF fsync policy is 'always'. Exiting..." in rill["log"]
    assert 0 < rill["acked"] == redis["acked"]
    assert rill["incr"] == redis["incr"]  # whole commands only: the short write was cut off
    with start_rill("--appendonly", "yes", workdir=rill["workdir"]) as srv:
        c = RawClient(srv.port)
        assert c.call("DBSIZE") == b":%d\r\n" % rill["acked"]  # every acknowledged write
        c.close()


class _ThreadSafeStepLoop(StepLoop):
    """The fsync thread wakes the loop with call_soon_threadsafe."""

    def __init__(self) -> None:
        super().__init__()
        self.woken = threading.Event()

    def call_soon_threadsafe(self, cb, *args):
        self.callbacks.append((cb, args))
        self.woken.set()


def test_a_failing_background_fsync_refuses_writes_until_one_succeeds(tmp_path, monkeypatch):
    from rill.server.commands import load_all
    from rill.server.config import Config
    from rill.server.connection import Connection
    from rill.server.server import Server

    load_all()
    cwd = os.getcwd()
    config = Config()
    for name, value in (("dir", str(tmp_path)), ("appendonly", "yes"), ("appendfsync", "everysec"),
                        ("protected-mode", "no")):
        config.set(name, value, startup=True)
    os.chdir(cwd)  # setting dir moves into it, as Redis does
    server = Server(config)
    loop = server.loop = _ThreadSafeStepLoop()
    p = server.persistence
    p.load_at_startup()
    transport = RecordingTransport()
    conn = Connection(server)
    conn.connection_made(transport)

    def call(*argv: bytes) -> bytes:
        transport.written.clear()
        conn.data_received(encode_command(argv))
        loop.run_iteration()
        return b"".join(transport.written)

    def fsync_outcome() -> None:
        """Let a second pass, run the cron's flush, and wait for the thread's verdict."""
        loop.woken.clear()
        p.writer.last_fsync -= 2
        p.cron()
        assert loop.woken.wait(10)
        loop.run_iteration()

    real = os.fdatasync

    def failing(fd: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "fdatasync", failing)
    assert call(b"SET", b"a", b"1") == b"+OK\r\n"
    fsync_outcome()
    misconf = b"-MISCONF Errors writing to the AOF file: Input/output error\r\n"
    assert call(b"SET", b"b", b"2") == misconf
    assert call(b"PING") == misconf
    assert call(b"GET", b"a") == b"$1\r\n1\r\n"
    assert b"aof_last_write_status:err" in call(b"INFO", b"persistence")
    monkeypatch.setattr(os, "fdatasync", real)
    fsync_outcome()  # retried although nothing new was written
    assert call(b"SET", b"b", b"2") == b"+OK\r\n"
    assert b"aof_last_write_status:ok" in call(b"INFO", b"persistence")
    p.at_shutdown()

