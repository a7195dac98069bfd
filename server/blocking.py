"""Blocking, shared by lists, sorted sets and streams, in one place as Redis's blocked.c.

A blocked client's path:

1. its handler cannot answer yet and returns a ``Block`` (server/outcomes.py);
   the dispatcher hands it to ``Blocking.block``, which parks the client here,
   once per distinct key, in FIFO order, and arms a timer for its deadline;
2. writes signal keys as ready (the dispatcher signals every key argument of a
   write command that has waiters, except for the stream commands, which call
   ``signal`` themselves where Redis does: XADD, XGROUP DESTROY, XGROUP CREATE
   MKSTREAM making the key; FLUSHDB/FLUSHALL/SWAPDB call ``signal_db``; MOVE
   and COPY ... DB call ``signal`` for the destination database; an expired key
   is signalled by the keyspace's expiry hook);
3. after each top-level command (after EXEC for a transaction) the dispatcher
   calls ``Blocking.serve_ready``, which serves the ready keys in the order they
   were signalled (below);
4. a wait ends in one of four ways, all through ``unpark``: served (its command,
   retried, answered), timed out (``timeout_reply``), ``unblock`` (CLIENT
   UNBLOCK, WAIT's acknowledgements, a failed SHUTDOWN) or the client gone.

Serving:

- the waiters of a ready key are visited in the order they blocked, and each
  one that can be served by what the key now holds is *retried*: its command
  runs again with the argv it blocked with, while ``Blocking.serving`` names the
  key being served (list and sorted-set pops take from that key only, as Redis
  serves a waiter from the key that became ready);
- ``Block.wake`` says which value type can serve a waiter (b"list", b"zset",
  b"stream"); a waiter is retried only while the key holds that type, so a key
  that was deleted, or turned into a string, leaves BLPOP waiters blocked;
  ``Block.on_gone`` waiters (XREADGROUP) are retried whatever the key holds, so
  a deleted key, a type change or a destroyed group reaches them as the error
  the command itself produces; ``wake=None`` retries on every signal;
- a retry that would block again leaves the waiter where it was in every queue,
  with its original deadline (a wake-up that finds nothing never resets it);
- a retry that answers unparks the client: its queues, its timer and the
  blocked-clients count are cleaned in one place, so no waiter is answered
  twice (timeout, CLIENT UNBLOCK, disconnect and service all go through
  ``unpark``).

Writing a blocking handler (lists do this in commands/lists.py):

- parse and validate everything first (errors never block), then try to answer;
  if nothing can be returned, return ``Block(keys, parse_timeout(arg), argv,
  timeout_reply, wake=..., on_gone=...)``. Inside EXEC the dispatcher turns the
  Block into ``timeout_reply``; return another value yourself when Redis's
  in-MULTI answer differs (BLMOVE: a null bulk, not a null array);
- a retry runs the same handler with ``c.server.blocking.serving`` set to the
  ready key: serve from that key only (Redis replies to a served XREAD or BLPOP
  with the ready key's data alone), return a Block again to keep waiting (its
  timeout is ignored and its argv, if given, replaces the stored one), and on
  XREADGROUP produce Redis's served-waiter errors ("UNBLOCKED the stream key no
  longer exists", "NOGROUP the consumer group this client was blocked on no
  longer exists");
- XREAD resolves ``$`` when it blocks and passes the resolved argv in the Block;
- propagation goes through ``server.rewrite_propagation``/``also_propagate`` in
  both the immediate and the served path (a served command is propagated after
  the write that woke it).
"""

from __future__ import annotations

import logging
import math
import time
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any

from rill.protocol.numbers import string2ll
from rill.protocol.reply import ReplyError

from .commands.table import MOVABLE_KEYS, SKIP_SLOWLOG, WRITE, Command
from .latency import record, unrecord
from .outcomes import NO_REPLY, Block

if TYPE_CHECKING:
    from .client import Client
    from .server import Server

log = logging.getLogger("rill")

# CLIENT UNBLOCK <id> ERROR (TIMEOUT answers with the waiter's ``timeout_reply``).
UNBLOCKED_ERR = ReplyError("UNBLOCKED client unblocked via CLIENT UNBLOCK")

_LLONG_MAX = 2**63 - 1


def parse_timeout(arg: bytes, unit_ms: bool = False) -> float:
    """A blocking command's timeout, in seconds (0 = forever), as Redis 7.0 reads it.

    Seconds are a long double rounded *up* to whole milliseconds (so 0.0001 is
    1 ms and -0.0001 is 0, forever); XREAD's BLOCK is an integer of milliseconds.
    """
    if unit_ms:
        ms = string2ll(arg)
        if ms is None:
            raise ReplyError("ERR timeout is not an integer or out of range")
    else:
        v = _strtold(arg)
        if v is None:
            raise ReplyError("ERR timeout is not a float or out of range")
        scaled = v * 1000.0
        # C's (long long) of an out-of-range double is LLONG_MIN on x86-64.
        ms = math.ceil(scaled) if math.isfinite(scaled) and abs(scaled) < 2**63 else -(2**63)
    if ms < 0:
        raise ReplyError("ERR timeout is negative")
    if ms == 0:
        return 0.0
    if ms > _LLONG_MAX - int(time.time() * 1000):
        # The absolute deadline overflows in Redis and lies in the past: it expires at once.
        return 1e-6
    return ms / 1000.0


def _strtold(s: bytes) -> float | None:
    """strtold as string2ld uses it: the whole string, no spaces, no NaN, hex allowed."""
    if not s or len(s) >= 5 * 1024 or s[:1].isspace() or s[-1:].isspace() or b"_" in s:
        return None
    try:
        v = float(s)
    except ValueError:
        body = s.lstrip(b"+-")
        if len(s) - len(body) > 1 or body[:2].lower() != b"0x":
            return None
        try:
            v = float.fromhex(s.decode())
        except (ValueError, UnicodeDecodeError):
            return None
    if math.isnan(v):
        return None
    return v


class Wait:
    """A parked client: where it waits, until when, and what to retry."""

    __slots__ = (
        "client", "db", "keys", "deadline", "argv", "original", "cmd", "timeout_reply", "timer",
        "started", "wake", "on_gone", "duration",
    )

    def __init__(self, client: Client, block: Block, cmd: Any, argv: list[bytes]) -> None:
        self.client = client
        self.db = client.db
        self.keys = list(dict.fromkeys(block.keys))
        self.started = time.monotonic()
        self.deadline = self.started + block.timeout if block.timeout > 0 else 0.0
        self.argv = block.argv or argv
        self.original = argv  # as the client sent it, for the SLOWLOG entry when it ends
        self.cmd = cmd
        self.timeout_reply = block.timeout_reply
        self.timer: Any = None
        self.wake = block.wake
        self.on_gone = block.on_gone
        # ns of the command's first run: its latency sample and SLOWLOG entry, made once
        # it is served, add the serving run to it.
        self.duration = 0


class BlockingRegistry:
    """(db, key) -> FIFO of waiting clients, plus the keys signalled ready.

    Each queue is an insertion-ordered dict used as an ordered set, so a waiter
    leaves any queue in O(1) and a waiter that stays keeps its place.
    """

    def __init__(self) -> None:
        self.waiters: dict[tuple[int, bytes], dict[Wait, None]] = {}
        # Emptied in place, never replaced: the dispatcher holds it for a whole batch.
        self.ready: dict[tuple[int, bytes], None] = {}
        self.blocked_clients = 0
        # Waiters retried even when their key is gone (wake None or on_gone), per queue.
        self.eager: dict[tuple[int, bytes], int] = {}
        # The key a retried command is being served from (None outside a retry).
        self.serving: bytes | None = None
        # Set while a script runs past busy-reply-threshold (Redis's yielding long
        # command): the commands other clients may run then (HELLO, CLIENT, ...) do not
        # serve waiters, whose keys the script is still writing; the script's own
        # command serves them once it ends.
        self.held = False

    def park(self, wait: Wait) -> None:
        """Queue ``wait`` last on each of its keys; its client is blocked from now on."""
        db_id = wait.db.id
        eager = wait.wake is None or wait.on_gone
        for key in wait.keys:
            slot = (db_id, key)
            q = self.waiters.get(slot)
            if q is None:
                self.waiters[slot] = q = {}
            q[wait] = None
            if eager:
                self.eager[slot] = self.eager.get(slot, 0) + 1
        wait.client.blocked = wait
        self.blocked_clients += 1

    def unpark(self, wait: Wait) -> None:
        """Remove ``wait`` from every queue it sits in (served, timed out, gone)."""
        if wait.client.blocked is not wait:
            return
        db_id = wait.db.id
        eager = wait.wake is None or wait.on_gone
        for key in wait.keys:
            slot = (db_id, key)
            q = self.waiters.get(slot)
            if q is not None and q.pop(wait, 0) is None:
                if not q:
                    del self.waiters[slot]
                if eager:
                    left = self.eager[slot] - 1
                    if left:
                        self.eager[slot] = left
                    else:
                        del self.eager[slot]
        wait.client.blocked = None
        self.blocked_clients -= 1
        if wait.timer is not None:
            wait.timer.cancel()
            wait.timer = None

    def signal(self, db_id: int, key: bytes) -> None:
        """``key`` may now serve someone: serve its waiters after the current command."""
        if (db_id, key) in self.waiters:
            self.ready[(db_id, key)] = None

    def signal_command(self, db_id: int, cmd: Command, argv: list[bytes]) -> None:
        """Signal every key argument of a write command that someone waits on.

        Stream commands are left out: they signal their keys themselves where
        Redis's t_stream.c does (XADD, XGROUP DESTROY, a key XGROUP CREATE
        MKSTREAM makes), since their other writes (XDEL, XACK, XSETID, a served
        XREADGROUP, ...) wake nobody in Redis.
        """
        if "@stream" in cmd.categories:
            return
        waiters = self.waiters
        if cmd.flags & MOVABLE_KEYS or cmd.first_key <= 0:
            positions: Any = cmd.key_positions(argv)
        else:
            last = cmd.last_key
            if last < 0:
                last += len(argv)
            positions = range(cmd.first_key, min(last, len(argv) - 1) + 1, cmd.key_step or 1)
        for pos in positions:
            slot = (db_id, argv[pos])
            if slot in waiters:
                self.ready[slot] = None

    def signal_db(self, db_id: int) -> None:
        """Every waited-on key of a database changed at once (FLUSHDB, SWAPDB)."""
        for slot in self.waiters:
            if slot[0] == db_id:
                self.ready[slot] = None

    def take_ready(self) -> list[tuple[int, bytes]]:
        """The keys signalled since the last call, in the order first signalled."""
        ready = list(self.ready)
        self.ready.clear()
        return ready


def value_kind(value: Any) -> bytes | None:
    """The type name of a stored value (None for no value), for matching ``Block.wake``."""
    if value is None:
        return None
    t = type(value)
    if t is bytes or t is bytearray:
        return b"string"
    return value.type_name


class Blocking(BlockingRegistry):
    """The server's blocking, as Redis's blocked.c: the registry, and what is done with it.

    - ``block``: park a client on a handler's ``Block`` and arm its timeout;
    - ``serve_ready``: after a command, serve the waiters of the keys signalled ready
      (handleClientsBlockedOnKeys), retrying each one's command;
    - ``unblock``: end a wait with a reply (its timeout, CLIENT UNBLOCK, WAIT's acks,
      a failed SHUTDOWN);
    - the statistics of a wait (updateStatsOnUnblock): its command's latency sample and
      SLOWLOG entry are made when it is served, from both runs.
    """

    def __init__(self, server: Server) -> None:
        super().__init__()
        self.server = server

    # -- parking -----------------------------------------------------------------------------
    def block(self, client: Client, cmd: Command, argv: list[bytes], block: Block) -> None:
        """Park ``client``, which ran ``argv`` and got ``block``; a deadline arms a timer."""
        wait = Wait(client, block, cmd, argv)
        self.park(wait)
        loop = self.server.loop
        if wait.deadline and loop is not None:
            wait.timer = loop.call_at(loop.time() + (wait.deadline - time.monotonic()), self._timed_out, wait)

    def _timed_out(self, wait: Wait) -> None:
        wait.timer = None
        if wait.client.blocked is wait:
            self.unblock(wait.client, wait.timeout_reply)

    def unblock(self, client: Client, reply: Any, sample: bool = False) -> None:
        """End a client's wait with ``reply`` and resume it.

        Timeouts pass the waiter's ``timeout_reply``; CLIENT UNBLOCK passes that
        too for TIMEOUT and ``UNBLOCKED_ERR`` for ERROR, and ``sample``: as in
        Redis, a wait CLIENT UNBLOCK ends leaves a latency sample, one that times
        out does not. A callable reply is called for the value once the wait is over.
        """
        wait = client.blocked
        if wait is None:
            return
        if sample:
            self._count_served(wait, 0)
        self.unpark(wait)
        if callable(reply):
            reply = reply()  # a reply worked out when the wait ends (WAIT's count of acks)
        if isinstance(reply, ReplyError):
            self.server.cmdstats.of(wait.cmd).failed_calls += 1
            self.server.count_error(reply)
        client.reply(reply)
        client.on_output(client)

    def in_timeout_table(self) -> int:
        """INFO's clients_in_timeout_table: blocked clients with a deadline (WAIT's too,
        which wait on no key)."""
        return sum(
            1 for cl in self.server.clients.values() if cl.blocked is not None and cl.blocked.deadline
        )

    # -- serving -----------------------------------------------------------------------------
    def serve_ready(self) -> None:
        """Serve waiters of keys signalled ready, in FIFO order, until none is left.

        Redis's handleClientsBlockedOnKeys: each ready key's waiters are visited
        oldest first and retried while the key holds what can serve them; keys
        signalled meanwhile (the push side of BLMOVE) are served in a later round.
        """
        if self.held:
            return
        server = self.server
        dbs = server.keyspace.dbs
        while self.ready:
            for db_id, key in self.take_ready():
                queue = self.waiters.get((db_id, key))
                if not queue:
                    continue
                db = dbs[db_id]
                eager = (db_id, key) in self.eager
                for wait in list(queue):
                    if wait.client.blocked is not wait:
                        continue
                    wake = wait.wake
                    if wake is not None and not wait.on_gone:
                        value = db.lookup(key)
                        if server._also:
                            server._flush_also()  # the DEL of a key that expired just now
                        if value is None:
                            if not eager:
                                break  # nobody left here can be served by a missing key
                            continue
                        if value_kind(value) != wake:
                            continue
                    self._retry(wait, key)

    def _retry(self, wait: Wait, key: bytes) -> bool:
        """Run a waiter's command again (serving ``key``); whether it was answered.

        A retry that would block again changes nothing: the waiter keeps its
        place in every queue and its deadline.
        """
        server = self.server
        client = wait.client
        saved_db = client.db
        client.db = wait.db
        dirty = server.dirty
        client.cur_cmd = wait.cmd
        self.serving = key
        # The served client's own invalidations follow its reply, as its command's would.
        tracker = server.tracking if server._tracking_active else None
        held = tracker.hold(client) if tracker is not None else None
        start = perf_counter_ns()
        try:
            engine = server._active_active
            if engine is not None and wait.cmd.flags & WRITE:
                # A pop served now is a write like any other: Active-Active makes its ops.
                reply = engine.run(client, wait.cmd, wait.argv)
            else:
                reply = wait.cmd.handler(client, wait.argv)
        except ReplyError as err:
            reply = err
        except Exception:  # a bug must not leave the waiter stuck or break the writer's command
            log.exception("serving blocked client id=%d", client.id)
            reply = ReplyError("ERR internal error while serving a blocked client")
        finally:
            self.serving = None
        serve_ns = perf_counter_ns() - start
        if type(reply) is Block:
            if reply.argv:
                wait.argv = reply.argv
            server._rewritten = None
            if server._also:
                server._flush_also()
            client.db = saved_db
            if tracker is not None:
                tracker.release(client, held)
            return False
        self.unpark(wait)
        if isinstance(reply, ReplyError):
            server.cmdstats.of(wait.cmd).failed_calls += 1
            server.count_error(reply)
        if reply is not NO_REPLY:
            client.reply(reply)
        self._count_served(wait, serve_ns)
        server.latency_event("command-unblocking", serve_ns)
        if server.dirty != dirty or server._also:
            server._after_write(client, wait.cmd, wait.argv, server.dirty != dirty)
        client.db = saved_db
        if tracker is not None:
            tracker.release(client, held)
        client.on_output(client)
        return True

    # -- statistics (updateStatsOnUnblock) ---------------------------------------------------
    def sample_when_served(self, wait: Wait, duration: int, recorded: bool) -> None:
        """A command that blocked: its latency sample waits until it is served,
        as Redis records it then (updateStatsOnUnblock); the call stays counted."""
        wait.duration = duration
        if recorded:
            st = self.server.cmdstats.of(wait.cmd)
            unrecord(st, duration)
            st.untracked += 1

    def _count_served(self, wait: Wait, serve_ns: int) -> None:
        """updateStatsOnUnblock, for a wait that was served (or ended by CLIENT UNBLOCK):
        the serving run's time, the latency sample of both runs, and the SLOWLOG entry,
        as the client sent the command. A timed-out wait leaves none, as in Redis 7.0."""
        server = self.server
        cmd = wait.cmd
        st = server.cmdstats.of(cmd)
        st.nsec += serve_ns
        total = wait.duration + serve_ns
        if server.latency_tracking:
            record(st, total)
            st.untracked -= 1  # counted when it blocked; the sample counts it from now
        if total >= server.slowlog_threshold_ns >= 0 and not cmd.flags & SKIP_SLOWLOG:
            server.slowlog_add(wait.client, wait.original, total // 1000)
