"""shutdown-timeout, side by side with redis-server 7.0: SHUTDOWN (and SIGTERM) waits for
a lagging replica to acknowledge the whole stream, with writes paused, for at most
shutdown-timeout seconds; SHUTDOWN NOW does not wait; SHUTDOWN ABORT cancels.

The replica is this test speaking the replica's side of the protocol, so it lags (never
acknowledges) until told to catch up.
"""

from __future__ import annotations

import signal
import socket
from collections.abc import Callable

import pytest

from tests.support import RawClient, ServerProcess, start_redis, start_rill, wait_until

ServerStarter = Callable[..., ServerProcess]
SERVERS = {"rill": start_rill, "redis": start_redis}
FAILED = b"-ERR Errors trying to SHUTDOWN. Check logs.\r\n"


class FakeReplica:
    """A replica that did its full sync and acknowledges only when told to."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=20)
        self.buf = b""
        for cmd in (b"REPLCONF listening-port 6380\r\n", b"REPLCONF capa psync2\r\n"):
            self.sock.sendall(cmd)
            assert self._line() == b"+OK"
        self.sock.sendall(b"PSYNC ? -1\r\n")
        line = self._line()
        while not line.startswith(b"+FULLRESYNC"):  # a newline keepalive may come first
            line = self._line()
        bulk = self._line()
        while not bulk.startswith(b"$"):
            bulk = self._line()
        self._take(int(bulk[1:]))  # the snapshot; the stream follows, unread

    def _fill(self) -> None:
        data = self.sock.recv(65536)
        assert data, "master closed the link"
        self.buf += data

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf and not self.buf.startswith(b"\n"):
            self._fill()
        if self.buf.startswith(b"\n"):
            self.buf = self.buf[1:]
            return b""
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _take(self, n: int) -> bytes:
        while len(self.buf) < n:
            self._fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def ack(self, offset: int) -> None:
        self.sock.sendall(b"*3\r\n$8\r\nREPLCONF\r\n$3\r\nACK\r\n$%d\r\n%d\r\n" % (len(str(offset)), offset))

    def close(self) -> None:
        self.sock.close()


def _info(c: RawClient, field: str) -> str | None:
    text = c.call("INFO", "everything").decode()
    if f"\r\n{field}:" not in text:
        return None
    return text.split(f"\r\n{field}:", 1)[1].split("\r\n", 1)[0]


def _replica_online(c: RawClient) -> bool:
    return "state=online" in (_info(c, "slave0") or "")


def _started(start: ServerStarter, *args: str) -> tuple[ServerProcess, RawClient, FakeReplica]:
    srv = start(*args)
    c = RawClient(srv.port)
    replica = FakeReplica(srv.port)
    wait_until(lambda: _replica_online(c))
    assert c.call("SET", "k", "v") == b"+OK\r\n"
    return srv, c, replica


@pytest.mark.parametrize("which", SERVERS)
def test_shutdown_waits_for_the_lagging_replica(which):
    srv, admin, replica = _started(SERVERS[which], "--shutdown-timeout", "600")
    try:
        caller = RawClient(srv.port)
        caller.send_raw(b"SHUTDOWN\r\n")
        wait_until(lambda: _info(admin, "shutdown_in_milliseconds"))
        assert srv.proc.poll() is None
        # Writes wait meanwhile; reads do not.
        writer = RawClient(srv.port)
        writer.send_raw(b"SET k2 v\r\n")
        assert admin.call("GET", "k") == b"$1\r\nv\r\n"
        assert not writer.closed_by_peer(0.3) and writer.buf == b""  # no reply yet
        # Once the replica acknowledges everything (the GETACK included), rill exits.
        def caught_up() -> bool:
            if srv.proc.poll() is not None:
                return True
            try:
                replica.ack(int(_info(admin, "master_repl_offset") or 0))
            except OSError:
                pass
            return srv.proc.poll() is not None
        wait_until(caught_up, timeout=30)
        assert srv.proc.wait(15) == 0
        assert "1 of 1 replicas are in sync when shutting down." in srv.log()
    finally:
        replica.close()
        srv.stop()


@pytest.mark.parametrize("which", SERVERS)
def test_shutdown_gives_up_waiting_after_the_timeout(which):
    srv, admin, replica = _started(SERVERS[which], "--shutdown-timeout", "1")
    try:
        admin.send_raw(b"SHUTDOWN\r\n")
        assert srv.proc.wait(30) == 0
        log = srv.log()
        assert "Waiting for replicas before shutting down." in log
        assert "0 of 1 replicas are in sync when shutting down." in log
        assert "Lagging replica" in log
    finally:
        replica.close()
        srv.stop()


@pytest.mark.parametrize("which", SERVERS)
def test_shutdown_abort_cancels_the_wait(which):
    srv, admin, replica = _started(SERVERS[which], "--shutdown-timeout", "600")
    try:
        caller = RawClient(srv.port)
        caller.send_raw(b"SHUTDOWN\r\n")
        wait_until(lambda: _info(admin, "shutdown_in_milliseconds"))
        writer = RawClient(srv.port)
        writer.send_raw(b"SET k2 v\r\n")
        assert admin.call("SHUTDOWN", "ABORT") == b"+OK\r\n"
        assert caller.read_reply() == FAILED
        assert writer.read_reply() == b"+OK\r\n"  # writes resume
        assert _info(admin, "shutdown_in_milliseconds") is None
        assert admin.call("SHUTDOWN", "ABORT") == b"-ERR No shutdown in progress.\r\n"
        assert "Shutdown manually aborted." in srv.log()
        assert srv.proc.poll() is None
    finally:
        replica.close()
        srv.stop()


@pytest.mark.parametrize("which", SERVERS)
def test_shutdown_now_and_timeout_zero_do_not_wait(which):
    for args, cmd in (((), b"SHUTDOWN NOW\r\n"), (("--shutdown-timeout", "0"), b"SHUTDOWN\r\n")):
        srv, admin, replica = _started(SERVERS[which], *args)
        try:
            admin.send_raw(cmd)
            assert srv.proc.wait(15) == 0
            assert "Waiting for replicas" not in srv.log()
            assert "0 of 1 replicas are in sync when shutting down." in srv.log()
        finally:
            replica.close()
            srv.stop()


@pytest.mark.parametrize("which", SERVERS)
def test_sigterm_waits_too(which):
    srv, admin, replica = _started(SERVERS[which], "--shutdown-timeout", "600")
    try:
        srv.proc.send_signal(signal.SIGTERM)
        wait_until(lambda: _info(admin, "shutdown_in_milliseconds"))
        assert admin.call("SHUTDOWN", "ABORT") == b"+OK\r\n"
        assert srv.proc.poll() is None
        assert admin.call("PING") == b"+PONG\r\n"
    finally:
        replica.close()
        srv.stop()
