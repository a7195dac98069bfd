"""MIGRATE's connections to other servers.

MIGRATE talks to its target synchronously, as Redis does: the command holds the
server until the target has answered or the timeout has passed. Connections are
plain blocking sockets with deadlines (no event loop is involved), cached per
``host:port`` so a run of MIGRATEs to one target connects once; a connection
idle for more than ten seconds is closed by the cron (INFO's
``migrate_cached_sockets`` counts the open ones).
"""

from __future__ import annotations

import random
import socket
import time
from typing import Any

CACHE_ITEMS = 64  # at most this many targets; a new one evicts one at random
CACHE_TTL = 10  # seconds a cached connection may stay idle
CHUNK = 64 * 1024  # the request goes out in writes of at most this size


class Link:
    """One cached connection: its socket, the target db it last SELECTed, when last used."""

    __slots__ = ("sock", "refused", "last_dbid", "last_use", "_buf")

    def __init__(self, sock: socket.socket | None, refused: OSError | None = None) -> None:
        self.sock = sock
        self.refused = refused  # the connection attempt failed: the first write says so
        self.last_dbid = -1
        self.last_use = time.time()
        self._buf = b""

    def send(self, data: bytes, timeout: float) -> None:
        """Write ``data``; each chunk must go within ``timeout`` seconds (else TimeoutError)."""
        if self.sock is None:
            raise self.refused or ConnectionError("not connected")
        view = memoryview(data)
        for start in range(0, len(data), CHUNK):
            self.sock.settimeout(timeout)
            self.sock.sendall(view[start : start + CHUNK])

    def read_line(self, timeout: float) -> bytes:
        """The next reply line without its CRLF, within ``timeout`` seconds.

        Raises TimeoutError when the target is too slow and ConnectionError when
        it closed the connection.
        """
        deadline = time.monotonic() + timeout
        while True:
            end = self._buf.find(b"\n")
            if end >= 0:
                line, self._buf = self._buf[:end], self._buf[end + 1 :]
                return line[:-1] if line.endswith(b"\r") else line
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("timed out reading from the target")
            self.sock.settimeout(left)
            data = self.sock.recv(16384)
            if not data:
                raise ConnectionError("the target closed the connection")
            self._buf += data

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass


class LinkCache:
    """The open MIGRATE connections, by ``host:port``."""

    def __init__(self) -> None:
        self.links: dict[bytes, Link] = {}

    def __len__(self) -> int:
        return len(self.links)

    def get(self, host: bytes, port: bytes, timeout: float) -> Link | None:
        """The cached connection to ``host:port``, or a new one; None if connecting timed
        out or the address is unusable.

        A refused or unreachable target still gives a Link, whose first write fails:
        Redis does not wait for the handshake's outcome, only for the socket to turn
        writable, so it reports those as write errors ("IOERR ... writing").
        """
        name = host + b":" + port
        link = self.links.get(name)
        if link is not None:
            link.last_use = time.time()
            return link
        if len(self.links) >= CACHE_ITEMS:
            self.links.pop(random.choice(list(self.links))).close()
        try:
            sock = socket.create_connection((host.decode(errors="replace"), int(port)), timeout=timeout)
        except (TimeoutError, socket.gaierror, ValueError, OverflowError, UnicodeError):
            return None
        except OSError as e:
            link = self.links[name] = Link(None, e)
            return link
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        link = self.links[name] = Link(sock)
        return link

    def close(self, host: bytes, port: bytes) -> None:
        link = self.links.pop(host + b":" + port, None)
        if link is not None:
            link.close()

    def close_idle(self) -> None:
        """Close the connections idle for longer than CACHE_TTL (run from the cron)."""
        if not self.links:
            return
        now = time.time()
        for name, link in list(self.links.items()):
            if now - link.last_use > CACHE_TTL:
                del self.links[name]
                link.close()


def links_of(server: Any) -> LinkCache:
    """The server's one LinkCache, made (and given to the cron) on first use."""
    cache = getattr(server, "migrate_links", None)
    if cache is None:
        cache = server.migrate_links = LinkCache()
        server.cron_hooks.append(cache.close_idle)
    return cache
