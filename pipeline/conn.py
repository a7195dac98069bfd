"""A thin redis-py connection for the pipeline: raw replies, pipelining, no reply callbacks.

redis-py's XRANGE callback turns every entry into a dict in Python; the data source
wants the parser's nested lists (hiredis, when installed) and builds Arrow columns
from them directly.  Works against rill and any Redis >= 7.0.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis

Arg = bytes | str | int | float


class Conn:
    """One connection from a URL (``redis://host:port/db``, ``rediss://``, ``unix://``)."""

    def __init__(self, url: str, timeout: float | None = 60.0) -> None:
        self.pool = redis.ConnectionPool.from_url(url, socket_timeout=timeout, socket_connect_timeout=10, protocol=2)
        self.conn = self.pool.get_connection()

    def close(self) -> None:
        try:
            self.pool.release(self.conn)
        finally:
            self.pool.disconnect()

    def __enter__(self) -> Conn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, *args: Arg) -> Any:
        """One command; an error reply raises redis.ResponseError."""
        self.conn.send_command(*args)
        return self.conn.read_response()

    def pipeline(self, commands: Sequence[Sequence[Arg]]) -> list[Any]:
        """Send every command, then read every reply; error replies come back as exceptions (not raised)."""
        if not commands:
            return []
        self.conn.send_packed_command(self.conn.pack_commands(commands))
        out: list[Any] = []
        for _ in commands:
            try:
                out.append(self.conn.read_response())
            except redis.ResponseError as e:
                out.append(e)
        return out
