"""The one blocking registry, shared by lists, streams and sorted sets.

A handler that cannot answer yet returns a ``Block``; the dispatcher parks the
client here, once per key, in FIFO order. Writes signal keys as ready (the
dispatcher signals every key argument of a write command that has waiters,
and FLUSH/SWAPDB signal whole databases), and after each top-level command
the ready keys are served: every waiter of a ready key is retried in arrival
order by re-running its command with the argv it blocked with. A retry that
would block again simply stays parked -- with its original deadline -- so
deleted keys, type changes and destroyed groups reach XREADGROUP waiters as
the errors the command itself produces.
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING, Any

from rill.protocol.reply import NULL_ARRAY

if TYPE_CHECKING:
    from .client import Client


class Block:
    """Returned by a handler: park the client on ``keys`` until served or timed out.

    ``timeout`` is in seconds (0 = forever). ``argv`` is what a retry runs
    (e.g. XREAD with ``$`` already resolved to an ID); ``timeout_reply`` is what
    the client gets when time runs out.
    """

    __slots__ = ("keys", "timeout", "argv", "timeout_reply")

    def __init__(
        self,
        keys: list[bytes],
        timeout: float,
        argv: list[bytes] | None = None,
        timeout_reply: Any = NULL_ARRAY,
    ) -> None:
        self.keys = keys
        self.timeout = timeout
        self.argv = argv
        self.timeout_reply = timeout_reply


class Wait:
    """A parked client: where it waits, until when, and what to retry."""

    __slots__ = ("client", "db", "keys", "deadline", "argv", "cmd", "timeout_reply", "timer", "started")

    def __init__(self, client: Client, block: Block, cmd: Any, argv: list[bytes]) -> None:
        self.client = client
        self.db = client.db
        self.keys = list(dict.fromkeys(block.keys))
        self.started = time.monotonic()
        self.deadline = self.started + block.timeout if block.timeout > 0 else 0.0
        self.argv = block.argv or argv
        self.cmd = cmd
        self.timeout_reply = block.timeout_reply
        self.timer: Any = None


class BlockingRegistry:
    """(db, key) -> FIFO of waiting clients, plus the keys signalled ready."""

    def __init__(self) -> None:
        self.waiters: dict[tuple[int, bytes], deque[Wait]] = {}
        self.ready: dict[tuple[int, bytes], None] = {}
        self.blocked_clients = 0

    def park(self, wait: Wait) -> None:
        db_id = wait.db.id
        for key in wait.keys:
            self.waiters.setdefault((db_id, key), deque()).append(wait)
        wait.client.blocked = wait
        self.blocked_clients += 1

    def unpark(self, wait: Wait) -> None:
        """Remove ``wait`` from every queue it sits in (served, timed out, gone)."""
        db_id = wait.db.id
        for key in wait.keys:
            q = self.waiters.get((db_id, key))
            if q is not None:
                try:
                    q.remove(wait)
                except ValueError:
                    pass
                if not q:
                    del self.waiters[(db_id, key)]
        if wait.client.blocked is wait:
            wait.client.blocked = None
            self.blocked_clients -= 1
        if wait.timer is not None:
            wait.timer.cancel()
            wait.timer = None

    def signal(self, db_id: int, key: bytes) -> None:
        if (db_id, key) in self.waiters:
            self.ready[(db_id, key)] = None

    def signal_db(self, db_id: int) -> None:
        for d, key in self.waiters:
            if d == db_id:
                self.ready[(d, key)] = None

    def take_ready(self) -> list[tuple[int, bytes]]:
        ready = list(self.ready)
        self.ready.clear()
        return ready

    def waiters_for(self, db_id: int, key: bytes) -> list[Wait]:
        return list(self.waiters.get((db_id, key), ()))
