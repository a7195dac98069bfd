"""Crash safety: SIGKILL in the middle of a write load, restart, and count what survived.

With appendfsync always every write rill acknowledged must be there after the
restart: the AOF is written and fsynced before a reply leaves.  With everysec it
is written once per loop iteration and fsynced within a second, so what a kill
may lose is at most the last second: every write acknowledged more than a second
before the kill must survive.  Twenty kill/restart rounds for "always" and three
longer ones for "everysec" keep this under about half a minute.

A kill rarely lands exactly in the window these rules allow, so the ordering
itself is also checked deterministically in test_disk_aof.py; these
rounds prove the end-to-end path: torn tails repaired, every file reloadable,
nothing lost that the policy promises to keep.
"""

from __future__ import annotations

import os
import random
import socket
import threading
import time

import pytest

from tests.server.persistence_helpers import rill_in
from tests.support import RawClient, encode_command


class Load:
    """Pipelined writes on one connection; remembers which ones were acknowledged."""

    def __init__(self, port: int, start: int, count: int) -> None:
        self.port = port
        self.start = start
        self.count = count
        self.acked = 0
        self.sent = 0
        self.ack_times: list[float] = []

    def command(self, i: int) -> bytes:
        kind = i % 4
        if kind == 0:
            return encode_command([b"INCR", b"counter"])
        if kind == 1:
            return encode_command([b"RPUSH", b"list", b"%d" % i])
        if kind == 2:
            return encode_command([b"XADD", b"s", b"%d-1" % (i + 1), b"i", b"%d" % i])
        return encode_command([b"SET", b"k%d" % i, b"%d" % i])

    def run(self) -> None:
        try:
            sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        except OSError:
            return
        buf = b""
        try:
            batch = 50
            i = self.start
            end = self.start + self.count
            while i < end:
                n = min(batch, end - i)
                sock.sendall(b"".join(self.command(j) for j in range(i, i + n)))
                self.sent = i + n - self.start
                got = 0
                while got < n:
                    data = sock.recv(65536)
                    if not data:
                        return
                    buf += data
                    while b"\r\n" in buf:
                        line, buf = buf.split(b"\r\n", 1)
                        if line.startswith(b"-"):
                            raise AssertionError(line)
                        if line.startswith(b"$"):  # XADD's ID: skip its payload line
                            while b"\r\n" not in buf:
                                more = sock.recv(65536)
                                if not more:
                                    return
                                buf += more
                            buf = buf.split(b"\r\n", 1)[1]
                        got += 1
                        self.acked += 1
                        self.ack_times.append(time.monotonic())
                i += n
        except OSError:
            return
        finally:
            sock.close()


def check(c: RawClient, rounds: list[tuple[int, int]]) -> None:
    """Everything acknowledged in every round is present (unacknowledged writes may be too)."""
    import redis

    r = redis.Redis(port=c.sock.getpeername()[1])
    acked = [i for start, n in rounds for i in range(start, start + n)]
    assert int(r.get("counter") or 0) >= sum(1 for i in acked if i % 4 == 0)
    in_list = set(r.lrange("list", 0, -1))
    in_stream = {sid for sid, _ in r.xrange("s")}
    keys = [f"k{i}" for i in acked if i % 4 == 3]
    values = r.mget(keys) if keys else []
    for i in acked:
        if i % 4 == 1:
            assert b"%d" % i in in_list, i
        elif i % 4 == 2:
            assert b"%d-1" % (i + 1) in in_stream, i
    assert values == [k[1:].encode() for k in keys]
    r.close()


@pytest.mark.parametrize("policy, rounds", [("always", 20), ("everysec", 3)])
def test_sigkill_keeps_what_the_fsync_policy_promises(tmp_path, policy, rounds):
    workdir = str(tmp_path)
    rng = random.Random(1234)
    history: list[tuple[int, int]] = []
    start = 0
    port = None
    for _ in range(rounds):
        srv = rill_in(workdir, "--appendonly", "yes", "--appendfsync", policy, port=port)
        port = srv.port
        c = RawClient(srv.port)
        check(c, history)
        c.close()
        # Writes continue after the highest index ever sent, so rounds never overlap.
        load = Load(srv.port, start, 4000 if policy == "always" else 40000)
        t = threading.Thread(target=load.run)
        t.start()
        # everysec rounds run past a second so that some writes fall outside the window
        time.sleep(rng.uniform(0.03, 0.25) if policy == "always" else rng.uniform(1.2, 1.6))
        killed_at = time.monotonic()
        srv.kill()  # SIGKILL
        t.join(10)
        if policy == "always":
            kept = load.acked
        else:
            kept = sum(1 for at in load.ack_times if at < killed_at - 1.0)
            assert kept > 0
        history.append((start, kept))
        start += load.sent
    srv = rill_in(workdir, "--appendonly", "yes", port=port)
    c = RawClient(srv.port)
    check(c, history)
    assert sum(a for _, a in history) > rounds * 10
    c.close()
    srv.stop()
    # The repaired files still parse for Redis's own checker (required in CI).
    import subprocess

    from tests.support import optional_tool

    checker = optional_tool("redis-check-aof")
    if checker is not None:
        out = subprocess.run([checker, os.path.join(workdir, "appendonlydir", "appendonly.aof.manifest")],
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stdout
