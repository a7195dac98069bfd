"""Shared by the persistence tests: a standard dataset and how to compare datasets.

``populate`` writes one of each thing persistence must keep (strings of every
encoding, a TTL, a list, a multi-node stream with tombstones, consumer groups,
pending entries, an idle consumer, another database); ``snapshot`` reads it
back as exact reply bytes, with the few fields that legitimately change across
a reload (wall-clock idle times) masked.
"""

from __future__ import annotations

import os
import re
import time

from tests.support import RawClient, ServerProcess, free_port, start_redis, start_rill

FAR_FUTURE_MS = 4102444800000


def rill_in(workdir: str, *args: str, port: int | None = None) -> ServerProcess:
    return start_rill(*args, workdir=workdir, port=port)


def redis_in(workdir: str, *args: str) -> ServerProcess:
    return start_redis(*args, workdir=workdir)


def populate(c: RawClient, entries: int = 250) -> None:
    """Every kind of value persistence must carry, deterministic (explicit IDs and times)."""
    c.call("SET", "str", "hello")
    c.call("SET", "int", "12345")
    c.call("SET", "big", "x" * 200)
    c.call("SET", "raw", "ab")
    c.call("APPEND", "raw", "cd")
    c.call("SET", "ttl", "v")
    c.call("PEXPIREAT", "ttl", str(FAR_FUTURE_MS))
    c.call("RPUSH", "list", "a", "b", "1", "-2", "c" * 100)
    cmd = [b"XADD", b"s"]
    for i in range(1, entries + 1):
        c.send_raw(_encode([*cmd, b"%d-1" % i, b"f", b"v%d" % i, b"n", b"%d" % i]))
    for _ in range(entries):
        c.read_reply()
    c.call("XDEL", "s", "5-1", "100-1")
    c.call("XADD", "s", "MAXLEN", "=", str(entries - 10), f"{entries + 1}-1", "other", "shape")
    c.call("XGROUP", "CREATE", "s", "g1", "0")
    c.call("XGROUP", "CREATE", "s", "g2", "$")
    c.call("XREADGROUP", "GROUP", "g1", "alice", "COUNT", "3", "STREAMS", "s", ">")
    c.call("XREADGROUP", "GROUP", "g1", "bob", "COUNT", "2", "STREAMS", "s", ">")
    c.call("XGROUP", "CREATECONSUMER", "s", "g1", "carol")
    c.call("XADD", "empty", "MAXLEN", "0", "7-7", "a", "b")
    c.call("SELECT", "3")
    c.call("SET", "indb3", "yes")
    c.call("SELECT", "0")


def _encode(args: list[bytes]) -> bytes:
    from tests.support import encode_command

    return encode_command(args)


SNAPSHOT = [
    ("DBSIZE",),
    ("GET", "str"), ("GET", "int"), ("GET", "big"), ("GET", "raw"), ("GET", "ttl"),
    ("PEXPIRETIME", "ttl"), ("TTL", "str"),
    ("LRANGE", "list", "0", "-1"),
    ("XLEN", "s"), ("XRANGE", "s", "-", "+"), ("XREVRANGE", "s", "+", "-", "COUNT", "5"),
    ("XINFO", "STREAM", "s", "FULL"),
    ("XINFO", "STREAM", "empty", "FULL"),
    ("XINFO", "GROUPS", "s"),
    ("XPENDING", "s", "g1"),
    ("XPENDING", "s", "g1", "-", "+", "10"),
    ("TYPE", "s"), ("TYPE", "list"),
    ("SELECT", "3"), ("GET", "indb3"), ("SELECT", "0"),
]

# Time-dependent numbers in replies: idle times (ms since now) and, when a dataset went
# through an AOF rewrite, consumers' seen/active times (a rewrite does not keep them).
_IDLE = re.compile(rb"(\$4\r\nidle\r\n:)\d+|(\$8\r\ninactive\r\n:)-?\d+")


def snapshot(c: RawClient, mask_seen: bool = False) -> list[bytes]:
    out = []
    for cmd in SNAPSHOT:
        reply = c.call(*cmd)
        if cmd[:2] == ("XPENDING", "s") and len(cmd) > 3:
            reply = _mask_pending_idle(reply)
        reply = _IDLE.sub(lambda m: (m.group(1) or m.group(2)) + b"0", reply)
        if mask_seen:
            reply = re.sub(rb"(\$9\r\nseen-time\r\n:)\d+", rb"\g<1>0", reply)
            reply = re.sub(rb"(\$11\r\nactive-time\r\n:)-?\d+", rb"\g<1>0", reply)
        out.append(reply)
    return out


def _mask_pending_idle(reply: bytes) -> bytes:
    # Extended XPENDING rows: *4 $id $consumer :idle :count -> zero the idle.
    return re.sub(rb"(\*4\r\n\$\d+\r\n[^\r]+\r\n\$\d+\r\n[^\r]+\r\n:)\d+", rb"\g<1>0", reply)


def wait_for(predicate, timeout: float = 10.0, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def info_field(c: RawClient, name: str) -> str:
    text = c.call("INFO", "persistence").decode()
    for line in text.split("\r\n"):
        if line.startswith(name + ":"):
            return line.split(":", 1)[1]
    raise KeyError(name)


def wait_bgsave(c: RawClient) -> None:
    assert wait_for(lambda: info_field(c, "rdb_bgsave_in_progress") == "0")


def wait_rewrite(c: RawClient) -> None:
    assert wait_for(lambda: info_field(c, "aof_rewrite_in_progress") == "0"
                    and info_field(c, "aof_rewrite_scheduled") == "0")


def start_expecting_failure(argv_args: list[str], workdir: str, timeout: float = 10.0) -> tuple[int, str]:
    """Run rill-server that must refuse to start; (exit code, log)."""
    import subprocess
    import sys

    port = free_port()
    argv = [sys.executable, "-m", "rill.server.main", "--port", str(port), "--save", "",
            "--dir", workdir, *argv_args]
    proc = subprocess.run(argv, cwd=workdir, capture_output=True, timeout=timeout)
    return proc.returncode, (proc.stdout + proc.stderr).decode(errors="replace")


def files(path: str) -> list[str]:
    return sorted(os.listdir(path)) if os.path.isdir(path) else []
