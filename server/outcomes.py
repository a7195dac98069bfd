"""What a command handler hands back besides a reply: the closed set the dispatcher knows.

A handler ``handler(client, argv)`` returns one of:

- a reply value (rill.protocol.reply: bytes, int, lists, ``Raw`` pre-encoded bytes, ...),
  which the dispatcher encodes for the client;
- a ``ReplyError`` (returned or raised), counted in the error stats and encoded;
- ``Block``: nothing to answer yet; the client waits (server/blocking.py parks it);
- ``NO_REPLY``: the handler queued its replies itself, or there is none (SUBSCRIBE,
  CLIENT REPLY OFF's own OK, EXEC, MONITOR, ...).

and may record, for the propagation path, an effect wrapped in ``ReplicasOnly`` (through
``Server.also_propagate``) that goes to the replicas but not to the AOF.

They live here, apart from the dispatcher and the registry, so handlers import them
without importing either.
"""

from __future__ import annotations

from typing import Any

from rill.protocol.reply import NULL_ARRAY, ReplyError

# The dispatcher's refusal of a command while the dataset loads, and CONFIG SET's of a
# parameter a load depends on (Redis answers both with its shared loading error).
LOADING_ERR = ReplyError("LOADING Redis is loading the dataset in memory")
# The dispatcher's refusal of a command on a stale replica, and a script's (Redis shares it).
MASTERDOWN_ERR = ReplyError("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.")


class Block:
    """Returned by a handler: park the client on ``keys`` until served or timed out.

    ``timeout`` is in seconds (0 = forever). ``argv`` is what a retry runs
    (e.g. XREAD with ``$`` already resolved to an ID); ``timeout_reply`` is what
    the client gets when time runs out (or on CLIENT UNBLOCK ... TIMEOUT).
    ``wake`` is the value type that can serve the waiter (None: any signal
    retries it) and ``on_gone`` asks for a retry when the key is deleted or
    changes type too (XREADGROUP's errors).
    """

    __slots__ = ("keys", "timeout", "argv", "timeout_reply", "wake", "on_gone")

    def __init__(
        self,
        keys: list[bytes],
        timeout: float,
        argv: list[bytes] | None = None,
        timeout_reply: Any = NULL_ARRAY,
        wake: bytes | None = None,
        on_gone: bool = False,
    ) -> None:
        self.keys = keys
        self.timeout = timeout
        self.argv = argv
        self.timeout_reply = timeout_reply
        self.wake = wake
        self.on_gone = on_gone


class NoReply:
    """A handler's way to say it queued its replies itself (or none at all)."""


NO_REPLY = NoReply()


class ReplicasOnly(list):
    """An effect for replicas only, as Redis's PROPAGATE_REPL (PUBLISH, SPUBLISH): it
    travels the one propagation path, and the AOF leaves it out."""


class AofOnly(list):
    """An effect for the AOF only, as Redis's PROPAGATE_AOF (a script's writes after
    redis.set_repl(redis.REPL_AOF)): the replicas' feed leaves it out."""
