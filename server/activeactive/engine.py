"""The Active-Active engine: a write becomes an effect, and peers' effects are applied.

docs/active-active.md states the rules; this is where they run.

- **Making effects.** While the engine is on, ``Server.call`` runs every write command
  through :meth:`ActiveActive.run`: writes to types without merge rules are refused, the
  keys the command names are snapshotted, the handler runs, and the CRDT ops it made are
  collected into ``unit`` (the streams' own journals, plus key-level ops found by comparing
  the snapshot: a key deleted, replaced, renamed, its TTL changed). ``Server.propagate``
  then calls :meth:`seal` (the ``active_active`` feed), which stamps the unit as the next
  effect and puts its record in the backlog for the links.
- **Applying effects.** :meth:`receive` takes a peer's effect, keeps it until everything its
  origin had seen is applied here (causal delivery), then applies its ops to the keyspace,
  wakes blocked clients, fires keyspace events, and hands the record to the AOF and the
  ordinary commands that mirror it (plain.py) to replicas.
- **Bookkeeping.** The applied clock ``vc``, the peers' reported clocks (``known``, for
  tombstone collection), tombstones of deletes, and each key's TTL register.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rill.protocol.effects import (
    APPLY_PREFIX,
    Effect,
    clear_section,
    decode_vc,
    encode_clock,
    encode_compact,
    encode_effect_compact,
    encode_record,
    encode_vc,
    put_op,
)
from rill.protocol.reply import ReplyError
from rill.storage.list import ListValue
from rill.storage.stream import Stream, format_sid
from rill.storage.stream.active import ActiveStream, _insert_op, own_add

from .. import notify as events
from ..commands.table import WRITE
from ..commands.values import type_name
from ..fastpath import WriteEngine
from ..outcomes import ReplicasOnly
from .backlog import DELETION_OPS, Backlog
from .hll import OPS as _HLL_OPS
from .hll import Hlls, is_hll_value
from .hll import plain_ops as hll_plain_ops
from .keyed import HASH, SET, STRING, ZSET, Keyed, Packed, kind_of, now_ms
from .lists import OPS as _LIST_OPS
from .lists import Lists
from .plain import keyed_plain_ops, list_plain_ops, plain_ops

if TYPE_CHECKING:
    from ..client import Client
    from ..commands.table import Command
    from ..server import Server

Op = list[bytes]
Unit = list[tuple[int, Op]]

# Generic key commands that work on streams, with the merge rules of the doc.
_KEY_COMMANDS = frozenset({
    "del", "unlink", "expire", "pexpire", "expireat", "pexpireat", "persist",
    "rename", "renamenx", "flushall", "flushdb",
})
# Commands with no sound meaning across instances yet.
_UNSUPPORTED = frozenset({"copy", "move", "swapdb", "restore", "restore-asking", "migrate"})
# Categories whose writes merge through keyed.py (strings, hashes, sets, sorted sets),
# hll.py (HyperLogLogs) and lists.py (lists).
_KEYED_CATEGORIES = frozenset({
    "@string", "@bitmap", "@hash", "@set", "@sortedset", "@geo", "@hyperloglog", "@list",
})

def _probe() -> None:
    """Only its type matters: see _COMPILED."""


# Whether this module runs compiled. Compiled, the keyed fast path (_run_fast,
# _keyed_made) reads a key's value through keyspace.pxd's ``_c_data_get``, a name that
# exists only in the compiled module; ``_COMPILED`` guards it. It is a dict lookup in C
# where ``db.data.get(key)`` on the untyped dict made and called a bound method; and an
# own XADD's handler is called through its C entry (engine.pxd's _c_handler).
_COMPILED = type(_probe).__name__ != "function"

# _xadd_own's answer when it ran nothing (the generic _run_one then does).
_NOT_TAKEN = object()


# How run() treats a write command (see ActiveActive._kind).
_STREAM, _KEYS, _FLUSH, _SORT, _KEYED = "stream", "keys", "flush", "sort", "keyed"



class _Fast:
    """run()'s fast path for a common write naming one key at argv[1] (``_run_fast``):
    ``kind`` is the keyed.py kind it writes, ``LIST`` for a list push, None for DEL."""

    __slots__ = ("kind",)

    def __init__(self, kind: bytes | None) -> None:
        self.kind = kind


_LIST = b"list"
_FAST = {
    "set": STRING, "incr": STRING, "incrby": STRING, "decr": STRING, "decrby": STRING,
    "incrbyfloat": STRING, "hset": HASH, "sadd": SET, "zadd": ZSET, "lpush": _LIST,
    "rpush": _LIST, "del": None,
}

# The integer counters whose op _keyed_made writes (INCRBYFLOAT's sum
# is rendered and rewritten: collect_known's).
_INT_COUNTERS = frozenset({"incr", "decr", "incrby", "decrby"})
_NO_TAIL: list[bytes] = []  # put_op's tail for an op that is all head (never written to)
# The one-element assigns whose op _keyed_made writes (keyed.assigned_one): where the element is
# in the argv, which is that long (HSET key field value, SADD key member, ZADD key score
# member: no options, one element).
_ONE_ELEMENT = {"hset": 2, "sadd": 2, "zadd": 3}

# The aa-state document's version (export_state): 2 added "cell_removals" (keyed.py
# ``Keyed.removed``); a version 1 document loads with none.
AA_STATE_VERSION = 2

# The TTL register's value for PERSIST.
PERSIST = -1

# Ops that leave bookkeeping behind at their origin (see ActiveActive._bookkeep).
_BOOKKEPT = frozenset({b"DEL", b"GDESTROY", b"EXPIRE", b"GCREATE", b"CDEL", b"HLLDEL", b"LDEL"})
# The ops of strings, hashes, sets and sorted sets (keyed.py).
_CELL_OPS = frozenset({b"CSET", b"CINC", b"CREM", b"CDEL"})


_PLAIN_STREAM = ReplyError(
    "ERR Active-Active: this stream was written before Active-Active was on and cannot merge"
)


_PLAIN_KEY = ReplyError(
    "ERR Active-Active: this key was written before Active-Active was on and cannot merge"
)


def type_refusal(type_name: str) -> ReplyError:
    return ReplyError(f"ERR Active-Active: writes to {type_name} keys are not supported yet")


class ActiveActive(WriteEngine):
    """One instance's Active-Active state; ``server.active_active`` while the mode is on.
    A WriteEngine (fastpath.py), so the dispatcher's loop hands it each write through a
    C method call (``run_write``)."""

    def __init__(self, server: Server, region: int, backlog_size: int) -> None:
        self.server = server
        self.region = region
        self.seq = 0  # own effects made
        self.vc: dict[int, int] = {region: 0}  # effects applied, per origin
        # Each peer's clock as it last reported it, in its link's order (tombstones).
        self.known: dict[int, dict[int, int]] = {}
        self.backlog = Backlog(backlog_size)
        # Effects received before their causes: origin -> {seq: effect}.
        self.pending: dict[int, dict[int, Effect]] = {}
        self._deferred_known: dict[int, dict[int, int]] = {}
        # (db, key) -> [(origin, seq, group or None)]: deletes a late group creation loses to.
        self.tombstones: dict[tuple[int, bytes], list[tuple[int, int, bytes | None]]] = {}
        # (db, key) -> [(at_ms or PERSIST, origin, seq)]: concurrent TTLs not yet superseded.
        self.ttl: dict[tuple[int, bytes], list[tuple[int, int, int]]] = {}
        self.unit: Unit = []  # ops of the unit being made
        # Ops of the unit being made that their writer encoded itself (protocol/effects.py's
        # put_op: an XADD's from its argv and reply), ``pre_n`` of them, all made while
        # ``unit`` was empty, so they come first in the effect. None is bookkept (a DEL,
        # EXPIRE, group op goes through ``unit``).
        self.pre = bytearray()
        self.pre_n = 0
        # XADD's command (the table's), once _kind met it: _run_one's own-entry case.
        self._xadd: Any = None
        self.on_sealed: list[Callable[[int], None]] = []
        # While True, seal() does not call on_sealed: a listener that has arranged to
        # handle every effect sealed from now on (the links: one flush per event-loop
        # turn) turns it on, and off again once that runs. A C flag test per write
        # instead of a Python call per write into an interpreted module.
        self.quiet_seals = False
        self.links: Any = None  # PeerLinks (links.py), set by the server
        # Peers that found this instance short of its own effects ask for their state.
        self.want_full_sync: set[int] = set()
        # Our own applied count as the data holds it, while lost own effects come back.
        self.recovering: int | None = None
        self.replaying = False  # loading the AOF: a handler's ops are already recorded
        self.applied_effects = 0
        self._kinds: dict[Command, object] = {}
        self.keyed = Keyed(self)  # strings, hashes, sets and sorted sets
        self.reply_override: Any = None  # what run() replies instead of the handler (keyed.py)
        self.hlls = Hlls(self)  # HyperLogLogs
        self.lists = Lists(self)
        self._moves = 0  # RENAMEs in the unit being made (ActiveStream.rekey)
        # The clock's compact encoding (peers' entries: our own is implied by the
        # sequence), while no peer's effect changed it: most effects are stamped with
        # the same one.
        self._clock_parts: bytes | None = None
        # Whether run() takes _run_fast for the writes it covers: always, but for the
        # test that judges it against the generic path (test_fast_path.py turns it off
        # on one instance; _run_fast is a C method there, which no test can replace).
        self.fast_writes = True

    # ------------------------------------------------------------------ making effects

    def _kind(self, cmd: Command) -> object:
        """How the engine treats a write command: a refusal, or which keys it snapshots."""
        name = cmd.fullname.split("|")[0]
        if name in _UNSUPPORTED:
            return ReplyError(f"ERR Active-Active: {name.upper()} is not supported")
        if name in _FAST:
            return _Fast(_FAST[name])
        cats = cmd.categories
        if name == "xadd":
            self._xadd = cmd
        if "@stream" in cats:
            # Most stream commands name one key at a fixed place: run() takes it from
            # there (the index, an int) rather than walking the key specs.
            one = cmd.single_key()
            return _STREAM if one is None else one
        if name in ("flushall", "flushdb"):
            return _FLUSH
        if name in _KEY_COMMANDS:
            return _KEYS
        if name == "sort":
            return _SORT
        if any(cat in _KEYED_CATEGORIES for cat in cats):
            return _KEYED
        # What is left (scripts, functions, pub/sub, server commands) writes no data of
        # its own: a script's commands come through here one by one.
        return _KEYS

    def run(self, client: Client, cmd: Command, argv: list[bytes]) -> Any:
        """Run a write command's handler, collecting the ops it makes into the unit.
        Writes the merge rules do not cover are refused before they run."""
        return self.run_write(client, cmd, argv)

    def run_write(self, client: Client, cmd: Command, argv: list[bytes]) -> Any:
        """run(), as the dispatcher's loop calls it (fastpath.py's WriteEngine): compiled,
        a C method, so that call and the one from run() are C calls."""
        kind = self._kinds.get(cmd)
        if kind is None:
            kind = self._kinds[cmd] = self._kind(cmd)
        if type(kind) is int:
            if kind < len(argv):
                return self._run_one(client, cmd, argv, argv[kind])
            kind = _STREAM
        elif type(kind) is _Fast:
            if self.fast_writes:
                return self._run_fast(client, cmd, argv, kind.kind)
            kind = _KEYS
        elif type(kind) is ReplyError:
            raise kind
        return self._run_generic(client, cmd, argv, kind)

    def _run_generic(self, client: Client, cmd: Command, argv: list[bytes], kind: object) -> Any:
        """run() for every write: snapshot what the command names, run it, collect."""
        snap = self._snapshot(client, cmd, argv, kind)
        dirty = self.server.dirty
        try:
            reply = cmd.handler(client, argv)
        finally:
            ops = self._collect(snap, cmd.fullname, argv)
            if ops and not self.replaying:
                self.unit.extend(ops)
                self._sealed_now(dirty)
        if self.reply_override is not None:
            # A float increment stored its exactly summed value (keyed.collect): the reply
            # is that value, as GET reads it, not the command's own sum.
            reply, self.reply_override = self.reply_override, None
        return reply

    def _run_one(self, client: Client, cmd: Command, argv: list[bytes], key: bytes) -> Any:
        """run() for a stream command that names one key (most of them): the snapshot
        and the collection of _snapshot and _collect for that key alone (a RENAME
        needs two keys, so none happens here). Compiled, it is a C method with the
        Database typed (engine.pxd), and the TTL lookups run only in a database that
        holds TTLs: per XADD these calls were most of what the engine added."""
        db = client.db
        expires = db.expires
        # Compiled, a C dict read (keyspace.pxd's _c_data_get), not a get() method call
        # on an untyped object (whole-writer callgrind, XADD with two peers: ~0.27k an XADD).
        before = _c_data_get(db.data, key) if _COMPILED else db.data.get(key)  # noqa: F821
        ttl_before = None
        if before is not None:
            if type(before) is not ActiveStream and isinstance(before, Stream):
                raise _PLAIN_STREAM  # from before the mode was on: it has no regions
            if expires:
                ttl_before = expires.get(key)
                if ttl_before is not None and db.is_expired(key):
                    before = None  # gone already: its lookup's expiry makes the DEL
            if (cmd is self._xadd and type(before) is ActiveStream and not self.unit
                    and not self.replaying and type(argv) is list and len(argv) & 1 and argv[2] == b"*"):
                reply = self._xadd_own(client, cmd, argv, key, before, ttl_before)
                if reply is not _NOT_TAKEN:
                    return reply
        try:
            return cmd.handler(client, argv)
        finally:
            now = db.data.get(key)  # read again: these stay right if a handler swaps them
            expires = db.expires
            ops: Unit = []
            db_id = db.id
            if now is not before and isinstance(before, ActiveStream):
                for op in before.drain():
                    ops.append((db_id, [op[0], key, *op[1:]]))
                ops.append((db_id, [b"DEL", key, *before.observed()]))
                self.ttl.pop((db_id, key), None)  # a local DEL saw every TTL
            if type(now) is ActiveStream:
                for op in now.drain():
                    op.insert(1, key)  # drained ops are ours: the key goes in place
                    ops.append((db_id, op))
                if now.is_gone():
                    # No entries and no groups: the key goes here as it does where the ops land.
                    db.delete(key)
                    if self.hlls.values:
                        self.hlls.show(db, key)  # a hidden HLL shows again, as it does there
                else:
                    expected = ttl_before if now is before else self._created_ttl(db, key)
                    ttl_now = expires.get(key) if expires else None
                    if ttl_now != expected:
                        at = PERSIST if ttl_now is None else ttl_now
                        ops.append((db_id, [b"EXPIRE", key, b"%d" % at]))
            if ops and not self.replaying:
                self.unit.extend(ops)

    def _xadd_own(self, client: Client, cmd: Command, argv: list[bytes], key: bytes, s: ActiveStream,
                  ttl_before: int | None) -> Any:
        """_run_one for the most common write, ``XADD key * f v ...`` to a stream that is
        here, while the effect being made has no list ops: its op is written straight into
        the effect's section (``pre``) from what the command already has, its argv and the
        ID it replies, and seal only adds the header. The stream journals nothing meanwhile
        (active.py's ``own_add``: ActiveStream.add makes no op list). Returns ``_NOT_TAKEN``, having
        run nothing, when the stream's journal holds ops already (they must go first)."""
        if s.journal:
            return _NOT_TAKEN
        last = s.last_id
        db = client.db
        own_add(s)
        try:
            # Compiled, through the handler's C entry while it has one (engine.pxd's
            # _c_handler, as fastpath's loop calls it), not as a Python object.
            reply = _c_handler(cmd, client, argv) if _COMPILED else cmd.handler(client, argv)  # noqa: F821
        except BaseException:
            own_add(None)
            if s.last_id != last:
                # Added, then failed (a keyspace event's subscriber, say): the entry is
                # here, so its op goes with the effect, as a journaled one would.
                self._put_xadd(db.id, key, s, format_sid(s.last_id), argv)
            raise
        own_add(None)
        self._put_xadd(db.id, key, s, reply if type(reply) is bytes else format_sid(s.last_id), argv)
        expires = db.expires
        if expires:
            ttl_now = expires.get(key)
            if ttl_now != ttl_before:
                self.unit.append((db.id, [b"EXPIRE", key, b"%d" % (PERSIST if ttl_now is None else ttl_now)]))
        if s._cgroups:
            # An added entry moves no group's acknowledged prefix; the stream is drained
            # all the same, so that whatever it reports goes with this effect.
            for op in s.drain():
                op.insert(1, key)
                self.unit.append((db.id, op))
        return reply

    def _put_xadd(self, db_id: int, key: bytes, s: ActiveStream, sid: bytes, argv: list[bytes]) -> None:
        """The op of an own XADD, ``XADD key region id f v ...``, into the effect's section
        (the fields and values from argv[3:], as they came)."""
        put_op(self.pre, db_id, (b"XADD", key, s._rb, sid), argv, 3)
        self.pre_n += 1

    def _run_fast(self, client: Client, cmd: Command, argv: list[bytes], kind: bytes | None) -> Any:
        """run() for the common writes of one key (``_FAST``) while that key holds nothing
        or one kind of state that the command writes: the snapshot is the key alone and
        the ops are made knowing what the command does (keyed.collect_known; a list push
        is read off the lengths), instead of walking the key specs and working out which
        collector applies. Anything else takes the generic path, which is also the judge
        (tests/server/activeactive/test_fast_path.py compares the two, turning
        ``fast_writes`` off on one instance)."""
        db = _c_db_of(client) if _COMPILED else client.db  # noqa: F821 (engine.pxd)
        key = argv[1]
        where = (db.id, key)
        before = _c_data_get(db.data, key) if _COMPILED else db.data.get(key)  # noqa: F821
        if (self.replaying or (kind is None and len(argv) != 2) or where in self.hlls.values
                or (kind is not _LIST and where in self.lists.keys)):
            return self._run_generic(client, cmd, argv, _KEYS)
        keyed = self.keyed.keys
        ttl_before = None
        if before is None:
            # (A list's key sent any other kind to the generic path above already.)
            if where in keyed or (kind is _LIST and where in self.lists.keys):
                return self._run_generic(client, cmd, argv, _KEYS)
        else:
            if kind is _LIST:
                if type(before) is not ListValue or where not in self.lists.keys or where in keyed:
                    return self._run_generic(client, cmd, argv, _KEYS)
            else:
                held = kind_of(before)
                if held is None or (kind is not None and held is not kind):
                    return self._run_generic(client, cmd, argv, _KEYS)
                kinds = keyed.get(where)
                if kinds is None or (type(kinds) is not Packed and len(kinds) != 1):
                    return self._run_generic(client, cmd, argv, _KEYS)
            ttl_before = db.expires.get(key)
            if ttl_before is not None and db.is_expired(key):
                return self._run_generic(client, cmd, argv, _KEYS)
        dirty = self.server.dirty
        try:
            # Compiled, through the handler's C entry while it has one (engine.pxd's
            # _c_handler), not as a Python object with its arguments checked and unpacked.
            reply = _c_handler(cmd, client, argv) if _COMPILED else cmd.handler(client, argv)  # noqa: F821
        finally:
            if (ttl_before is None and kind is not None and kind is not _LIST
                    and self._keyed_made(db, key, where, before, kind, cmd.fullname, argv)):
                self._sealed_now(dirty)
            else:
                ops = self._collect_fast(db, key, before, ttl_before, cmd.fullname, argv, kind)
                if ops is None:
                    ops = self._collect([(db, key, before, ttl_before)], cmd.fullname, argv)
                if ops:
                    self.unit.extend(ops)
                    self._sealed_now(dirty)
        if self.reply_override is not None:
            reply, self.reply_override = self.reply_override, None
        return reply

    def _keyed_made(self, db: Any, key: bytes, where: tuple[int, bytes], before: Any, kind: bytes, name: str,
                    argv: list[bytes]) -> bool:
        """The op of the commonest string writes, made and written straight into the
        unit's op section (``pre``): a plain ``SET key value`` (no options) over nothing
        or over a string whose state is one assign this instance had seen, and an
        integer INCR, DECR, INCRBY or DECRBY that created its key or incremented a
        counter (keyed.counted); an HSET of one field, SADD or ZADD of one member
        (keyed.assigned_one). The same op and state keyed.collect_known makes (a
        ``CSET``; a ``CINC``), with
        none of its lists, the ``(db, op)`` pair, or seal's walk and second encoding. The
        key has no TTL before or after, and none registered while it was away (that is
        _collect_ttl's). False, with nothing done, for anything else: _collect_fast
        decides then."""
        elem = None
        counter = False
        if kind is STRING:
            if name == "set":
                if len(argv) != 3:
                    return False
            elif name in _INT_COUNTERS:
                counter = True
            else:
                return False
            now = _c_data_get(db.data, key) if _COMPILED else db.data.get(key)  # noqa: F821
            if type(now) is not bytes or now is before or kind_of(now) is not STRING:
                return False  # a refused INCR leaves the key as it was
        else:
            at = _ONE_ELEMENT.get(name, 0)
            if not at or len(argv) != at + 1:
                return False
            elem = argv[at]
            now = _c_data_get(db.data, key) if _COMPILED else db.data.get(key)  # noqa: F821
            if now is None or kind_of(now) is not kind:
                return False
        expires = db.expires
        if expires and key in expires:
            return False
        db_id = db.id
        if self.ttl and where in self.ttl:
            return False
        keyed = self.keyed
        keys = keyed.keys
        held = keys.get(where)
        origin = self.region
        seq = self.seq + 1
        if elem is not None:
            op = keyed.assigned_one(where, key, kind, elem, now, before, origin, seq)
            if op is None:
                return False
        elif counter:
            if before is not None:
                # An existing counter's increment: keyed.counted makes its op, or None.
                if held is None or now == before:
                    return False  # INCRBY 0 changed nothing: collect_known makes no op
                op = keyed.counted(db, key, held, now, before, origin, seq)
                if op is None:
                    return False
            else:
                if held is not None:
                    return False
                # Created by this increment: its value is the increment (the op's delta,
                # as num_bytes writes it), and the origin's total before it is 0.
                # Compiled, its digits are read in C (strings.pxd's _c_incremented by 0:
                # INCR wrote them, so they are canonical) where int() parsed them.
                delta = _c_incremented(now, 0) if _COMPILED else None  # noqa: F821
                keyed.created_counter(where, int(now) if delta is None else delta, now_ms(), origin, seq)
                op = (b"CINC", key, STRING, b"", now, b"0")
        else:
            if held is not None:
                if type(held) is not Packed or len(held) != 6 or held[0] != STRING:
                    return False
                o = held[2]
                if o != origin and self.vc.get(o, 0) < held[3]:
                    return False  # an assign this effect has not seen: both stay (collect)
            ts = now_ms()
            stamp = keyed._stamp_of(ts)
            keys[where] = Packed((STRING, ts, origin, seq, b"", now))
            op = (b"CSET", key, STRING, b"", stamp, now)
        if self.unit:
            self.unit.append((db_id, list(op)))  # ops in unit already: this one follows them
        else:
            put_op(self.pre, db_id, op, _NO_TAIL, 0)
            self.pre_n += 1
        return True

    def _sealed_now(self, dirty: int) -> None:
        """A write made ops but changed no value (``server.dirty`` still ``dirty``): SADD
        of a member that is there, HSET of a field to its own value, re-assert it. Redis
        counts no change, so nothing sealed the unit: its ops stayed in the state under a
        dot no effect carried, and rode with the next write's effect (or with none: the
        regions diverged, full-sync random runs). Counting it as a change seals it now,
        and replicas and the AOF get the (idempotent) command."""
        server = self.server
        if server.dirty == dirty:
            server.dirty += 1

    def _collect_fast(self, db: Any, key: bytes, before: Any, ttl_before: int | None, name: str,
                      argv: list[bytes], kind: bytes | None) -> Unit | None:
        """_collect for _run_fast's cases; None when the command did something else (it
        was refused, or left another kind): _collect then decides."""
        now = db.data.get(key)
        db_id = db.id
        if kind is None:  # DEL
            if now is not None:
                return None
            if before is None:
                return []
            made = self.keyed.collect(db, key, name, argv, before)
            if any(op[0] == b"CDEL" for op in made):
                self.ttl.pop((db_id, key), None)  # a local delete saw every TTL
            return [(db_id, op) for op in made]
        if kind is _LIST:
            if type(now) is not ListValue:
                return None
            made = self.lists.collect(db, key, name, argv)
        else:
            if now is None or kind_of(now) is not kind:
                return None
            made = self.keyed.collect_known(db, key, name, argv, kind, now)
            if made is None:
                return None
        ops = [(db_id, op) for op in made]
        self._collect_ttl(ops, db, key, before, ttl_before)
        return ops

    def _snapshot(self, client: Client, cmd: Command, argv: list[bytes], kind: object) -> list[tuple]:
        """(db, key, value, ttl) of what the command may change; refuses a key whose
        value cannot merge."""
        if kind is _FLUSH:
            dbs = self.server.keyspace if cmd.fullname == "flushall" else [client.db]
            return [
                (db, key, value, db.expires.get(key))
                for db in dbs
                for key, value in db.data.items()
                if isinstance(value, ActiveStream) or kind_of(value) is not None
                or self.hlls.has(db.id, key) or type(value) is ListValue
            ]
        db = client.db
        data = db.data
        expires = db.expires
        snap = []
        named = set()
        for pos, _spec in cmd.keys(argv):
            key = argv[pos]
            if key in named:
                continue  # named twice (RPOPLPUSH L L): its changes are collected once
            named.add(key)
            value = data.get(key)
            ttl = None
            if value is not None:
                if type(value) is not ActiveStream:
                    if kind_of(value) is not None:
                        if not self.keyed.has(db.id, key):
                            raise _PLAIN_KEY  # from before the mode was on: no merge state
                    elif type(value) is ListValue:
                        if not self.lists.has(db.id, key):
                            raise _PLAIN_KEY
                    elif self.hlls.has(db.id, key):
                        pass  # an HyperLogLog (hll.py)
                    elif is_hll_value(value):
                        raise _PLAIN_KEY
                    else:
                        if kind is not _STREAM:
                            raise type_refusal(type_name(value).decode())
                        if isinstance(value, Stream):
                            raise _PLAIN_STREAM  # from before the mode was on: it has no regions
                ttl = expires.get(key)
                if ttl is not None and db.is_expired(key):
                    value = None  # gone already: its lookup's expiry makes the DEL
            snap.append((db, key, value, ttl))
        return snap

    def _collect(self, snap: list[tuple], name: str, argv: list[bytes]) -> Unit:
        """The ops that turn the snapshot into what the keys hold now."""
        ops: Unit = []
        was_at = {id(before): (db.id, key) for db, key, before, _ttl in snap if before is not None}
        for db, key, before, ttl_before in snap:
            now = db.data.get(key)
            if isinstance(before, ActiveStream) and now is not before:
                ops.extend((db.id, [op[0], key, *op[1:]]) for op in before.drain())
                ops.append((db.id, [b"DEL", key, *before.observed()]))
                self.ttl.pop((db.id, key), None)  # a local DEL saw every TTL
            if not isinstance(now, ActiveStream):
                if self.replaying:
                    continue
                if self.hlls.values and self.hlls.has(db.id, key) or (
                        now is not None and kind_of(now) is None and is_hll_value(now)):
                    self._collect_hll(ops, db, key, before, ttl_before, name, argv)
                else:
                    start = len(ops)
                    if type(now) is ListValue or self.lists.has(db.id, key):
                        self._collect_list(ops, db, key, before, ttl_before, name, argv)
                    if kind_of(now) is not None or self.keyed.has(db.id, key):
                        self._collect_keyed(ops, db, key, before, ttl_before, name, argv)
                    if len(ops) - start > 1:
                        _ttl_after_deletes(ops, start, db, key)
                continue
            moved = False
            if now is not before and was_at.get(id(now), (db.id, key)) != (db.id, key):
                # RENAME: the entries this instance saw move; groups stay behind. A plain
                # replica's RENAME keeps them: they go there first, under the old name.
                old_db, old_key = was_at[id(now)]
                for g in now.groups():
                    self.server.also_propagate(old_db, ReplicasOnly([b"XGROUP", b"DESTROY", old_key, g.name]))
                now.drain()
                if not self.replaying:
                    self._collect_replaced(ops, db, key, before, name, argv, now)
                # The moved entries get sub-streams of their own, named after this effect
                # (its sequence, our region, which move in it): see ActiveStream.rekey.
                now.rekey(((self.seq + 1) << 8 | self.region) << 8 | self._moves)
                self._moves += 1
                ops.extend((db.id, op) for op in _entries_as_ops(key, now))
                moved = True
            else:
                ops.extend((db.id, [op[0], key, *op[1:]]) for op in now.drain())
            if now.is_gone():
                # No entries and no groups: the key goes here as it does where the ops land.
                db.delete(key)
                self.hlls.show(db, key)  # what a hidden other kind holds shows again
                continue
            if now is before:
                expected = ttl_before
            elif moved:
                # Where the moved entries land, the key keeps the TTL its register resolves
                # to: the TTL the RENAME dropped (the target's) must go there too.
                expected = self._registered_ttl(db.id, key)
            else:
                expected = self._created_ttl(db, key)
            ttl_now = db.expires.get(key)
            if ttl_now != expected:
                at = PERSIST if ttl_now is None else ttl_now
                ops.append((db.id, [b"EXPIRE", key, b"%d" % at]))
        return ops

    def _collect_replaced(self, ops: Unit, db: Any, key: bytes, before: Any, name: str,
                          argv: list[bytes], now: ActiveStream) -> None:
        """RENAME moved a stream onto ``key``: what the key held of other kinds (shown, or
        hidden under a stream) goes, observed-remove, as in Redis the target is deleted.
        Without these ops it stayed in the state here and at the peers, and showed again
        when the stream emptied (here it then showed nothing: the regions diverged)."""
        where = (db.id, key)
        made: list[Op] = []
        if self.keyed.has(*where):
            made += self.keyed.collect(db, key, name, argv, before)
        if self.lists.has(*where):
            made += self.lists.collect(db, key, name, argv)
        if self.hlls.has(*where):
            made += self.hlls.collect(db, key, name, now, argv)
        if made:
            self.ttl.pop(where, None)  # a local delete saw every TTL
            ops.extend((db.id, op) for op in made)

    def _collect_keyed(self, ops: Unit, db: Any, key: bytes, before: Any, ttl_before: int | None,
                       name: str, argv: list[bytes]) -> None:
        """_collect for a string, hash, set or sorted set (keyed.py), and its TTL."""
        made = self.keyed.collect(db, key, name, argv, before)
        ops.extend((db.id, op) for op in made)
        deleted = any(op[0] == b"CDEL" for op in made)
        if deleted:
            self.ttl.pop((db.id, key), None)  # a local delete saw every TTL
        if key not in db.data or kind_of(db.data[key]) is None:
            return
        # Replaced (SET KEEPTTL over a key of another kind): the CDEL takes the TTL where
        # it lands, so a TTL the key kept here is the new value's, as when it is created.
        self._collect_ttl(ops, db, key, None if deleted else before, ttl_before)

    def _collect_list(self, ops: Unit, db: Any, key: bytes, before: Any, ttl_before: int | None,
                      name: str, argv: list[bytes]) -> None:
        """_collect for a list (lists.py), and its TTL."""
        made = self.lists.collect(db, key, name, argv)
        ops.extend((db.id, op) for op in made)
        if any(op[0] == b"LDEL" for op in made):
            self.ttl.pop((db.id, key), None)  # a local delete saw every TTL
        if type(db.data.get(key)) is ListValue:
            self._collect_ttl(ops, db, key, before, ttl_before)

    def _collect_hll(self, ops: Unit, db: Any, key: bytes, before: Any, ttl_before: int | None,
                     name: str, argv: list[bytes]) -> None:
        """_collect for a key that holds or held an HyperLogLog (hll.py): the HLL's ops, the
        ops of the strings, hashes, sets and sorted sets it replaced or hides, its TTL."""
        now = db.data.get(key)
        hll_now = now is not None and kind_of(now) is None and type(now) is not ListValue
        if not hll_now or kind_of(before) is not None:
            # Not an HLL now, or one replacing a string, hash, set or sorted set.
            if kind_of(now) is not None or self.keyed.has(db.id, key):
                made = self.keyed.collect(db, key, name, argv, before)
                ops.extend((db.id, op) for op in made)
                if any(op[0] == b"CDEL" for op in made):
                    self.ttl.pop((db.id, key), None)
        if type(now) is ListValue or (now is not before and self.lists.has(db.id, key)):
            # A list now (RENAME over an HLL), or one it hides that the command replaced
            # (one that left the HLL as it was, a no-op LMOVE, keeps it: its LDEL took
            # the TTL everywhere, where nothing else changed).
            made = self.lists.collect(db, key, name, argv)
            ops.extend((db.id, op) for op in made)
            if any(op[0] == b"LDEL" for op in made):
                self.ttl.pop((db.id, key), None)
        made = self.hlls.collect(db, key, name, now, argv)
        ops.extend((db.id, op) for op in made)
        if key not in db.data:
            return
        if any(op[0] == b"HLLDEL" for op in made):
            # Replaced: the delete took the TTLs everywhere; the key's own TTL goes again.
            self.ttl.pop((db.id, key), None)
            ttl_now = db.expires.get(key)
            if ttl_now is not None:
                ops.append((db.id, [b"EXPIRE", key, b"%d" % ttl_now]))
            return
        self._collect_ttl(ops, db, key, before, ttl_before)

    def _collect_ttl(self, ops: Unit, db: Any, key: bytes, before: Any, ttl_before: int | None) -> None:
        """An EXPIRE op when a string, hash, set, sorted set or HLL's TTL changed."""
        expires = db.expires
        # No TTL anywhere in the database (the usual case): no lookup.
        ttl_now = expires.get(key) if expires else None
        if before is not None:
            expected = ttl_before
        elif ttl_now is None:
            # Created without a TTL: one registered while the key was away holds, as it
            # does where the creation lands (none was, for most new keys: nothing to do).
            if not self.ttl or (db.id, key) not in self.ttl:
                return
            expected = ttl_now = self._created_ttl(db, key)
        else:
            expected = None  # created with one (SETEX, SET ... EX): it is the key's
        if ttl_now != expected:
            ops.append((db.id, [b"EXPIRE", key, b"%d" % (PERSIST if ttl_now is None else ttl_now)]))

    def _registered_ttl(self, db_id: int, key: bytes) -> int | None:
        """What the key's TTL register resolves to (None: PERSIST, or no register)."""
        values = [v for v, _o, _s in self.ttl.get((db_id, key), ())]
        return None if not values or PERSIST in values else max(values)

    def _created_ttl(self, db: Any, key: bytes) -> int | None:
        """A stream this instance just created: a TTL registered for the key while it was
        away (a peer's EXPIRE) holds on it, as it does where its first entry lands, so it
        is set here without an op. Returns the key's TTL now."""
        if (db.id, key) in self.ttl:
            self._settle_ttl(db, key)
        return db.expires.get(key)

    def key_expired(self, db_id: int, key: bytes, value: Any) -> None:
        """The keyspace dropped ``key`` because its TTL passed (or maxmemory evicted it):
        delete it everywhere as DEL would (only what this instance saw)."""
        if self.replaying:
            return
        if isinstance(value, ActiveStream):
            self.unit.append((db_id, [b"DEL", key, *value.observed()]))
        op = self.keyed.expired(db_id, key)
        if op is not None:
            self.unit.append((db_id, op))
        op = self.hlls.expired(db_id, key)
        if op is not None:
            self.unit.append((db_id, op))
        op = self.lists.expired(db_id, key)
        if op is not None:
            self.unit.append((db_id, op))

    def seal(self, _ops: Unit, record: bool = True) -> list[bytes] | None:
        """The ``active_active`` feed: stamp the collected ops as this instance's next
        effect and hand it to the backlog (and so to the links); returns the record's
        argv (the AOF keeps it; the propagation path asks for it only while the AOF is
        on, ``record``), or None when the unit made no ops."""
        unit = self.unit
        pre_n = self.pre_n
        if not unit and not pre_n:
            return None
        if unit:
            self.unit = []
        self._moves = 0
        region = self.region
        seq = self.seq = self.seq + 1
        ts = now_ms()
        clock = self._clock_parts
        if clock is None:
            clock = self._clock_parts = encode_clock(self.vc, region)
        # Whether the record may delete (the backlog keeps those aside when released):
        # only the unit's ops can, ``pre`` holds none (XADD, CSET, CINC).
        deleting = False
        bookkept = False
        for _db, op in unit:
            name = op[0]
            if name in _BOOKKEPT:
                bookkept = True
            if name in DELETION_OPS:
                deleting = True
        if bookkept:
            self._bookkeep(Effect(region, seq, ts, dict(self.vc), unit))
        self.vc[region] = seq
        # The compact record, made once: what the backlog holds, the links send (many
        # to an APPLY) and the AOF keeps. Ops their writers encoded (``pre``) come first,
        # then the unit's, in one section.
        if pre_n:
            pre = self.pre
            for db_id, op in unit:
                put_op(pre, db_id, (), op, 0)
            wire = encode_record(region, seq, ts, clock, pre_n + len(unit), pre)
            clear_section(pre)
            self.pre_n = 0
        else:
            wire = encode_compact(region, seq, ts, clock, unit)
        self.backlog.append(seq, wire, ts, deleting)
        if not self.quiet_seals:
            for callback in self.on_sealed:
                callback(seq)
        return [*APPLY_PREFIX, wire] if record else None

    def has_unit(self) -> bool:
        """Whether the effect being made has ops (seal makes one of them)."""
        return bool(self.unit) or self.pre_n > 0

    def drop_unit(self) -> None:
        """Forget the effect being made (an AOF load's end: its handlers' ops were recorded)."""
        self.unit = []
        clear_section(self.pre)
        self.pre_n = 0

    def _bookkeep(self, e: Effect) -> None:
        """What an own effect leaves besides data: tombstones, TTL registers, group clocks."""
        dot_clock = dict(e.vc)
        dot_clock[e.origin] = e.seq
        for db_id, op in e.ops:
            name, key = op[0], op[1]
            if name == b"DEL":
                self._tombstone(db_id, key, e, None)
                self.ttl.pop((db_id, key), None)
            elif name == b"CDEL" or name == b"LDEL":
                self.ttl.pop((db_id, key), None)
            elif name == b"HLLDEL":
                self._tombstone(db_id, key, e, None)
                self.ttl.pop((db_id, key), None)
            elif name == b"GDESTROY":
                self._tombstone(db_id, key, e, op[2])
            elif name == b"EXPIRE":
                self.ttl[(db_id, key)] = [(int(op[2]), e.origin, e.seq)]
            elif name == b"GCREATE":
                s = self.server.keyspace[db_id].data.get(key)
                if isinstance(s, ActiveStream):
                    s.set_group_clock(op[2], dot_clock)

    def _tombstone(self, db_id: int, key: bytes, e: Effect, group: bytes | None) -> None:
        self.tombstones.setdefault((db_id, key), []).append((e.origin, e.seq, group))

    # ------------------------------------------------------------------ applying effects

    def applied(self, region: int) -> int:
        return self.vc.get(region, 0)

    def receive(self, e: Effect) -> int:
        """A peer's effect: apply it now if its causes are here, else keep it until they
        are. Returns how many of ``e.origin``'s effects are applied (the acknowledgement)."""
        origin = e.origin
        if origin == self.region:
            return self.seq  # our own, echoed back (a peer's full sync): already here
        vc = self.vc
        if not self.pending and vc.get(origin, 0) == e.seq - 1 and _causes_here(vc, e.vc, origin):
            # The usual case, a link's next effect with its causes here and nothing
            # waiting: what _drain_pending would do, without the queue.
            self._apply(e)
            if self._deferred_known:
                later = self._deferred_known.pop(origin, None)
                if later is not None:
                    self._heard_in_order(origin, later)
            return e.seq
        if e.seq > vc.get(origin, 0):
            self.pending.setdefault(origin, {})[e.seq] = e
            self._drain_pending()
        return self.applied(origin)

    def receive_all(self, effects: list[Effect]) -> int:
        """:meth:`receive` for each of an APPLY's effects, in order; returns the last one's
        acknowledgement. One call per batch from the command, the loop compiled here.

        The usual effect (next in line, causes here, nothing waiting, no clock deferred)
        is applied with its bookkeeping left to one pass at the end (_settle): the
        peers' clocks, the counters and the keys' WATCH and blocking signals are the
        same after the batch whichever way, since the APPLY is one command to clients,
        and that bookkeeping was a quarter of a peer's instructions per effect."""
        vc = self.vc
        region = self.region
        touched: dict[tuple[int, bytes], None] = {}
        last: dict[int, Effect] = {}
        nops = count = 0
        for e in effects:
            origin = e.origin
            if (origin != region and not self.pending and not self._deferred_known
                    and vc.get(origin, 0) == e.seq - 1 and _causes_here(vc, e.vc, origin)):
                self._apply(e, touched)
                last[origin] = e
                nops += len(e.ops)
                count += 1
            else:
                self.receive(e)
        if last:
            self._settle(last, touched, nops, count)
        return self.applied(effects[-1].origin)

    def _ready(self, e: Effect) -> bool:
        vc = self.vc
        if vc.get(e.origin, 0) != e.seq - 1:
            return False
        return _causes_here(vc, e.vc, e.origin)

    def _drain_pending(self) -> None:
        progress = True
        while progress:
            progress = False
            for origin in list(self.pending):
                waiting = self.pending[origin]
                while True:
                    nxt = self.applied(origin) + 1
                    for stale in [s for s in waiting if s < nxt]:
                        del waiting[stale]
                    e = waiting.get(nxt)
                    if e is None or not self._ready(e):
                        break
                    del waiting[nxt]
                    self._apply(e)
                    progress = True
                if not waiting:
                    del self.pending[origin]
                    later = self._deferred_known.pop(origin, None)
                    if later is not None:
                        self._heard_in_order(origin, later)

    def pending_count(self) -> int:
        return sum(len(w) for w in self.pending.values())

    def _apply(self, e: Effect, touched: dict[tuple[int, bytes], None] | None = None) -> None:
        """Apply a peer's effect whose causes are all applied. With ``touched`` (receive_all's
        batch) the bookkeeping after the data is left to _settle: the keys go into it."""
        server = self.server
        feeds = server.propagation
        # Replicas (and the tests' observer) get ordinary commands mirroring the change.
        mirror = feeds.replication is not None or feeds.observer is not None
        plain: Unit = []
        keyspace = server.keyspace.dbs
        ops = e.ops
        for db_id, op in ops:
            db = keyspace[db_id]
            key = op[1]
            if mirror:
                before = db.data.get(key)
                if op[0] in _CELL_OPS:
                    self._apply_op(db, e, op)
                    plain.extend((db_id, p) for p in keyed_plain_ops(db, key, kind_of(before), op))
                    continue
                if op[0] in _HLL_OPS:
                    self._apply_op(db, e, op)
                    plain.extend((db_id, p) for p in hll_plain_ops(db, key, before))
                    continue
                if op[0] in _LIST_OPS:
                    self._apply_op(db, e, op)
                    plain.extend((db_id, p) for p in list_plain_ops(db, key, before, op))
                    continue
                last = before.last_id if isinstance(before, Stream) else None
                self._apply_op(db, e, op)
                plain.extend((db_id, p) for p in plain_ops(db, key, last, op))
            else:
                self._apply_op(db, e, op)
        if self.keyed.created:
            self.keyed.pack_created()
        self.vc[e.origin] = e.seq
        self._clock_parts = None
        if touched is not None:
            for db_id, op in ops:
                touched[(db_id, op[1])] = None
        else:
            self._settle({e.origin: e}, dict.fromkeys([(db_id, op[1]) for db_id, op in ops]), len(ops), 1)
        if not self.replaying:
            if feeds.aof is not None:
                server.propagate_applied([*APPLY_PREFIX, e.raw if e.raw is not None else encode_effect_compact(e)],
                                         plain)
            elif plain:
                server.propagate_applied(None, plain)

    def _settle(self, last: dict[int, Effect], touched: dict[tuple[int, bytes], None], nops: int,
                count: int) -> None:
        """What applied effects leave besides their data: each origin's clock as its newest
        effect here carries it (an origin's clocks only grow, so the newest covers the
        ones before), the counters, and WATCH and the blocked clients told of each key
        changed, once, in the order first changed. ``nops`` ops in ``count`` effects."""
        known = self.known
        for origin, e in last.items():
            # _know(origin, e's clock with its own dot), without building that clock.
            mine = known.get(origin)
            if mine is None:
                mine = known[origin] = {}
            for r, n in e.vc.items():
                if n > mine.get(r, 0):
                    mine[r] = n
            if e.seq > mine.get(origin, 0):
                mine[origin] = e.seq
        server = self.server
        server.dirty += nops
        self.applied_effects += count
        keyspace = server.keyspace.dbs
        blocking = server.blocking
        if blocking.waiters:
            signal = blocking.signal
            for db_id, key in touched:
                keyspace[db_id].modified(key)
                signal(db_id, key)
        else:
            # Nobody blocked, so no key can serve anyone: spare the (interpreted) signal
            # call per key, the one Python-level call left on a peer's applied op.
            for db_id, key in touched:
                keyspace[db_id].modified(key)

    def _apply_op(self, db: Any, e: Effect, op: Op) -> None:
        name, key = op[0], op[1]
        if name == b"XADD" and len(op) >= 6 and not len(op) & 1:
            s = db.data.get(key)
            if type(s) is ActiveStream:
                # The usual op, an entry for a stream that is here: what the general path
                # below comes to, without its dispatch (ActiveStream.insert_op's body,
                # called directly: compiled, a C call; engine.pxd cimports it).
                _insert_op(s, op)
                if events.notifier is not None:
                    events.notifier(db.id, "t", b"xadd", key)
                return
        if name in _CELL_OPS:
            fired = self.keyed.apply(db, e.origin, e.seq, e.vc, op)
            if name == b"CDEL":
                self._ttl_deleted(db, key, e)
            for cls, event in fired:
                _notify(self.server, db.id, event, key, cls)
            return
        if name in _LIST_OPS:
            # The effect's clock with its own dot: only a delete reads it (what it saw), so a
            # push, the usual op, does not copy the clock.
            seen = None
            if name == b"LDEL":
                seen = dict(e.vc)
                seen[e.origin] = e.seq
            event = self.lists.apply(db, seen, e.origin, op)
            if name == b"LDEL":
                self._ttl_deleted(db, key, e)
            if event is not None:
                _notify(self.server, db.id, event, key, "l" if event != b"del" else "g")
            return
        if name in _HLL_OPS:
            event = self.hlls.apply(db, e, op)
            if name == b"HLLDEL":
                self._tombstone(db.id, key, e, None)
                self._ttl_deleted(db, key, e)
            if event is not None:
                _notify(self.server, db.id, event, key)
            return
        s = db.data.get(key)
        if s is not None and not isinstance(s, ActiveStream):
            if kind_of(s) is None and not self.hlls.has(db.id, key) and type(s) is not ListValue:
                return  # cannot happen while every write is checked; never an apply-time error
            s = None  # a string, hash, set or sorted set: a stream shows before them
        if name == b"EXPIRE":
            at = int(op[2])
            self._apply_ttl(db, key, e, at)
            if key in db.data:
                _notify(self.server, db.id, b"persist" if at == PERSIST else b"expire", key, "g")
            return
        if name == b"GCREATE" and self._deleted_concurrently(db.id, key, e, op[2]):
            return
        if s is None:
            if name == b"DEL":
                # Nothing of the stream is here, but a key delete still wins over a
                # concurrent HyperLogLog add, as it does where the stream was.
                self._tombstone(db.id, key, e, None)
                self.hlls.dropped(db, key)
                # The TTLs it saw go too, whatever the key holds now (a string a concurrent
                # SET wrote over the stream keeps none of them, as at the deleter).
                self._ttl_deleted(db, key, e)
            if name not in (b"XADD", b"GCREATE"):
                return
            s = self.server.new_stream()
            db.set(key, s, keep_ttl=key in db.data)
            self._settle_ttl(db, key)  # a TTL set while it was away holds again
        s.apply([name, *op[2:]])
        if name == b"XADD":
            if events.notifier is not None:
                events.notifier(db.id, "t", b"xadd", key)
            return  # an entry is there now: the stream stays
        if name == b"DEL":
            self._tombstone(db.id, key, e, None)
            self.hlls.dropped(db, key)  # a hidden HLL: delete-wins (hll.py)
            self._ttl_deleted(db, key, e)
            _notify(self.server, db.id, b"del", key, "g")
        elif name == b"GDESTROY":
            self._tombstone(db.id, key, e, op[2])
            _notify(self.server, db.id, b"xgroup-destroy", key)
        elif name == b"GCREATE":
            clock = dict(e.vc)
            clock[e.origin] = e.seq
            s.set_group_clock(op[2], clock)
            _notify(self.server, db.id, b"xgroup-create", key)
        elif name in (b"XDEL", b"XTRIM"):
            _notify(self.server, db.id, name.lower(), key)
        if s.is_gone():
            db.delete(key)
            self.hlls.show(db, key)  # what a hidden other kind holds shows again

    def _deleted_concurrently(self, db_id: int, key: bytes, e: Effect, group: bytes) -> bool:
        """Delete-wins: a group creation loses to a delete of its stream or group that it
        had not seen."""
        for origin, seq, g in self.tombstones.get((db_id, key), ()):
            if (g is None or g == group) and e.vc.get(origin, 0) < seq and not (
                origin == e.origin and seq < e.seq
            ):
                return True
        return False

    def _unseen_ttls(self, db_id: int, key: bytes, e: Effect) -> list[tuple[int, int, int]]:
        """The key's TTL register without the values effect ``e`` had seen."""
        return [
            (v, o, s) for v, o, s in self.ttl.get((db_id, key), ())
            if e.vc.get(o, 0) < s and not (o == e.origin and s <= e.seq)
        ]

    def _apply_ttl(self, db: Any, key: bytes, e: Effect, value: int) -> None:
        """The TTL register: drop the values this effect saw, add its own; PERSIST beats
        every TTL left, else the longest wins."""
        reg = self._unseen_ttls(db.id, key, e)
        reg.append((value, e.origin, e.seq))
        self.ttl[(db.id, key)] = reg
        self._settle_ttl(db, key)

    def _ttl_deleted(self, db: Any, key: bytes, e: Effect) -> None:
        """A DEL takes the TTLs it saw with the entries; one set concurrently stays, on
        whatever of the stream survives."""
        reg = self._unseen_ttls(db.id, key, e)
        if reg:
            self.ttl[(db.id, key)] = reg
        else:
            self.ttl.pop((db.id, key), None)
        if key in db.data:
            if reg:
                self._settle_ttl(db, key)
            else:
                db.persist(key)

    def _settle_ttl(self, db: Any, key: bytes) -> None:
        """Give the key the TTL its register resolves to (none registered: leave it)."""
        reg = self.ttl.get((db.id, key))
        if not reg or key not in db.data:
            return
        values = [v for v, _o, _s in reg]
        if PERSIST in values:
            db.persist(key)
        else:
            db.set_expire(key, max(values))

    # ------------------------------------------------------------------ peers' clocks

    def hello(self, peer: int, peer_vc: dict[int, int]) -> tuple[int, dict[int, int], bool]:
        """A peer's link opens. Returns this instance's region, its applied clock (where
        the peer resumes), and whether the peer must send its whole state: it holds own
        effects of ours we lost (we restarted from an older snapshot). Our sequence then
        jumps past them so that none is ever reused; the full sync brings them back."""
        self._heard(peer, peer_vc)
        theirs = peer_vc.get(self.region, 0)
        full = theirs > self.seq
        if full:
            if self.recovering is None:
                self.recovering = self.seq
            self.seq = theirs
            self.vc[self.region] = theirs
            self.backlog = Backlog(self.backlog.limit)
            self.want_full_sync.add(peer)
        elif peer in self.want_full_sync:
            full = True
        return self.region, dict(self.vc), full

    def merged(self, peer: int) -> None:
        """A full sync from ``peer`` was merged (state.py): its effects are all here."""
        self.want_full_sync.discard(peer)
        if not self.want_full_sync:
            self.recovering = None

    def held_clock(self) -> dict[int, int]:
        """The applied clock as this instance's data holds it: while own effects we lost
        are still on their way back (:meth:`hello`), our own entry is what we really hold,
        not the sequence we jumped to, so a merge brings those effects back."""
        vc = dict(self.vc)
        if self.recovering is not None:
            vc[self.region] = self.recovering
        return vc

    def heard(self, peer: int, peer_vc: dict[int, int]) -> int:
        """A peer's heartbeat: its clock, in its link's order. Returns its acknowledgement."""
        self._heard(peer, peer_vc)
        return self.applied(peer)

    def _heard(self, peer: int, peer_vc: dict[int, int]) -> None:
        if self.pending.get(peer):
            self._deferred_known[peer] = peer_vc  # after the effects still waiting
        else:
            self._heard_in_order(peer, peer_vc)

    def _heard_in_order(self, peer: int, peer_vc: dict[int, int]) -> None:
        """A peer's clock from a heartbeat or handshake counts for tombstones only when
        every effect it made is here: effects it holds back (a paused link, a resync to
        come) were made before that clock and may still need the tombstones it covers."""
        if peer_vc.get(peer, 0) <= self.applied(peer):
            self._know(peer, peer_vc)

    def _know(self, peer: int, clock: dict[int, int]) -> None:
        mine = self.known.setdefault(peer, {})
        for r, n in clock.items():
            if n > mine.get(r, 0):
                mine[r] = n

    def members(self) -> set[int]:
        """Every region this instance knows of, itself included."""
        regions = {self.region, *self.vc, *self.known}
        if self.links is not None:
            regions.update(r for r in self.links.peer_regions() if r)
        return regions

    def collect_tombstones(self) -> int:
        """Drop tombstones every instance has seen (cron). Returns how many went. None
        goes while a configured peer has not said who it is: it may not have seen them."""
        if self.links is not None and 0 in self.links.peer_regions():
            return 0
        others = self.members() - {self.region}
        known = self.known
        dropped = 0
        for where in list(self.tombstones):
            stones = self.tombstones[where]
            keep = [
                t for t in stones
                if not all(known.get(r, {}).get(t[0], 0) >= t[1] for r in others if r != t[0])
                or self.vc.get(t[0], 0) < t[1]
            ]
            dropped += len(stones) - len(keep)
            if keep:
                self.tombstones[where] = keep
            else:
                del self.tombstones[where]
        return dropped + self.keyed.collect_removals(known, others, self.vc)

    def tombstone_count(self) -> int:
        return sum(len(t) for t in self.tombstones.values()) + sum(len(r) for r in self.keyed.removed.values())

    # ------------------------------------------------------------------ restarts

    def replay(self, e: Effect) -> None:
        """An effect record read back from the AOF. Our own effects' data came back through
        the commands recorded beside them: only the bookkeeping and the backlog are
        redone. A peer's effect is applied again (its data is only in the record)."""
        if e.origin == self.region:
            if e.seq <= self.seq:
                return
            # The commands beside the record restored the values; the merge state of
            # strings, hashes, sets and sorted sets comes from the record's ops.
            for db_id, op in e.ops:
                if op[0] in _CELL_OPS:
                    self.keyed.apply(self.server.keyspace[db_id], e.origin, e.seq, e.vc, op)
                elif op[0] in _HLL_OPS:
                    self.hlls.apply(self.server.keyspace[db_id], e, op, own=True)
                elif op[0] in _LIST_OPS:
                    seen = dict(e.vc)
                    seen[e.origin] = e.seq
                    self.lists.replay_own(self.server.keyspace[db_id], seen, e.origin, op)
            if self.keyed.created:
                self.keyed.pack_created()
            self.seq = e.seq
            self.vc[self.region] = e.seq
            self._bookkeep(e)
            self.backlog.append(e.seq, e.raw if e.raw is not None else encode_effect_compact(e), e.ts)
            return
        was, self.replaying = self.replaying, True
        try:
            self.receive(e)
        finally:
            self.replaying = was

    def export_state(self) -> bytes:
        """The engine's state for the RDB's ``aa-state`` AUX field: sequence, clocks,
        tombstones and TTL registers (the backlog is not kept: the AOF refills it)."""
        doc = {
            "version": AA_STATE_VERSION,
            "region": self.region,
            "seq": self.seq,
            "vc": _pairs(self.vc),
            "known": {str(r): _pairs(c) for r, c in self.known.items()},
            "tombstones": [
                [db, key.hex(), [[o, s, None if g is None else g.hex()] for o, s, g in stones]]
                for (db, key), stones in self.tombstones.items()
            ],
            "ttl": [[db, key.hex(), [list(t) for t in reg]] for (db, key), reg in self.ttl.items()],
            "cells": self.keyed.export(),
            "cell_removals": self.keyed.export_removals(),
            "hll": self.hlls.export(),
            "lists": self.lists.export(),
        }
        return json.dumps(doc, separators=(",", ":")).encode()

    def import_state(self, blob: bytes) -> None:
        """Restore what :meth:`export_state` saved (loading an RDB). ValueError when the
        blob is malformed or belongs to another region."""
        try:
            doc = json.loads(blob)
            if int(doc.get("version", 1)) > AA_STATE_VERSION:
                raise ValueError(f"Active-Active state version {doc['version']} is newer than this rill reads")
            if doc["region"] != self.region:
                raise ValueError(
                    f"the dataset belongs to Active-Active region {doc['region']}, not {self.region}"
                )
            self.seq = int(doc["seq"])
            self.vc = {int(r): int(n) for r, n in doc["vc"]}
            self.vc[self.region] = self.seq
            self._clock_parts = None
            self.known = {int(p): {int(r): int(n) for r, n in c} for p, c in doc["known"].items()}
            self.tombstones = {
                (int(db), bytes.fromhex(key)): [
                    (int(o), int(s), None if g is None else bytes.fromhex(g)) for o, s, g in stones
                ]
                for db, key, stones in doc["tombstones"]
            }
            self.ttl = {
                (int(db), bytes.fromhex(key)): [(int(v), int(o), int(s)) for v, o, s in reg]
                for db, key, reg in doc["ttl"]
            }
            self.keyed.load(doc.get("cells", []))
            self.keyed.load_removals(doc.get("cell_removals", []))
            self.hlls.load(doc.get("hll", []))
            self.lists.load(doc.get("lists", []))
        except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as exc:
            raise ValueError("malformed Active-Active state") from exc
        self.backlog = Backlog(self.backlog.limit)

    # ------------------------------------------------------------------ reporting

    def info_fields(self) -> list[tuple[str, Any]]:
        """INFO active_active's own lines (the links add one line per peer)."""
        return [
            ("active_active_id", self.region),
            ("active_active_xadd_id_mode", ActiveStream.id_mode),
            ("active_active_seq", self.seq),
            ("active_active_vc", encode_vc(self.vc).decode()),
            ("active_active_pending", self.pending_count()),
            ("active_active_tombstones", self.tombstone_count()),
            ("active_active_backlog_bytes", self.backlog.nbytes),
            ("active_active_applied_effects", self.applied_effects),
        ]


def _causes_here(vc: dict[int, int], seen: dict[int, int], origin: int) -> bool:
    """Whether every effect of another origin that an effect of ``origin`` had seen
    (its clock ``seen``) is applied here (``vc``): a loop, not all() over a generator,
    which cost a generator object per received effect."""
    for r, n in seen.items():
        if r != origin and vc.get(r, 0) < n:
            return False
    return True


def _ttl_after_deletes(ops: Unit, start: int, db: Any, key: bytes) -> None:
    """A list replacing a string, hash, set or sorted set (or one of those a list): one
    collector's EXPIRE came before the other's delete, which takes the TTLs it saw where it
    lands. The key's TTL now goes after every delete, as a created key's would."""
    made = ops[start:]
    if not any(op[0] in (b"CDEL", b"LDEL") for _db, op in made):
        return
    made = [(d, op) for d, op in made if op[0] != b"EXPIRE"]
    at = db.expires.get(key) if key in db.data else None
    if at is not None:
        made.append((db.id, [b"EXPIRE", key, b"%d" % at]))
    ops[start:] = made


def _entries_as_ops(key: bytes, s: ActiveStream) -> list[Op]:
    """XADD ops that recreate ``s``'s entries, each in its own sub-stream."""
    ops: list[Op] = []
    for region, sub in sorted(s.subs.items()):
        r = b"%d" % region
        for sid, fv in sub.iter_range():
            ops.append([b"XADD", key, r, format_sid(sid), *fv])
    return ops


def _pairs(vc: dict[int, int]) -> list[list[int]]:
    return [[r, n] for r, n in sorted(vc.items())]


def _notify(server: Server, db_id: int, event: bytes, key: bytes, cls: str = "t") -> None:
    """A keyspace event of class ``cls`` (a notify-keyspace-events letter; streams' 't'
    unless said)."""
    if events.notifier is not None:
        events.notifier(db_id, cls, event, key)


def parse_vc(raw: bytes) -> dict[int, int]:
    """A vector clock argument; the ReplyError a link sees when it is malformed."""
    try:
        return decode_vc(raw)
    except ValueError:
        raise ReplyError("ERR invalid Active-Active vector clock") from None


__all__ = ["PERSIST", "WRITE", "ActiveActive", "Stream", "parse_vc", "type_refusal"]
