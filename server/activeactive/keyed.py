"""Active-Active strings, hashes, sets and sorted sets: the ops a local write makes, and a
peer's ops applied (docs/active-active.md, "Strings, hashes, sets and sorted sets").

The keyspace holds the ordinary Redis values, so reads and handlers are unchanged; beside
them :class:`Keyed` keeps each key's merge state: per kind (``string``, ``hash``, ``set``,
``zset``), per element (the string itself is element ``b""``), a :class:`~rill.storage.cells.Cell`
(or its compact form, a ``Reg``, while the element has one assign and no increments).

- **Local writes.** After a handler ran, :meth:`Keyed.collect` compares the key's value
  with the state's rendering, for the elements the command names (or all of them) and makes
  the ops: ``CSET`` (an assign), ``CINC`` (an increment, for the counter commands, with the
  origin's total before it: see ``Cell.incr``), ``CREM``
  (an element removed), ``CDEL`` (the key removed or replaced by another type). Each op is
  applied to the state as it is made, with the dot of the effect being made.
- **Peers' ops.** :meth:`Keyed.apply` applies the op to the state and renders the elements
  it touched into the keyspace.
- **Types.** A key may hold live state of several kinds at once (a SET here and an HSET
  there, concurrently). The key shows the first kind with live state in ``PRECEDENCE``,
  after any stream (a stream has precedence over all); the others stay, hidden, until a
  write that saw them removes them. Every instance decides the same way.
"""

from __future__ import annotations

import time
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from rill.protocol.reply import Double, ReplyError
from rill.storage.cells import (
    AnyCell,
    Cell,
    Number,
    Observed,
    Reg,
    inflate,
    num_bytes,
    num_in,
    reg,
    settle,
)
from rill.storage.hash import HashValue
from rill.storage.hll import is_hll_value
from rill.storage.set import SetValue
from rill.storage.zset import SortedSet

from ..commands.args import string2ll
from ..commands.strings import format_long_double_human, parse_long_double, round_long_double
from ..commands.zsets import get_double

if TYPE_CHECKING:
    from .engine import ActiveActive

Op = list[bytes]
Kinds = dict[bytes, dict[bytes, AnyCell]]
# Removal marks kept aside for a cell that went: (seen clock, origin -> (seq, total)).
Removal = tuple[dict[int, int], dict[int, tuple[int, Number]]]
Event = tuple[str, bytes]  # (notify-keyspace-events class letter, event name)

STRING, HASH, SET, ZSET = b"string", b"hash", b"set", b"zset"
_KIND_NAMES = {k.decode(): k for k in (STRING, HASH, SET, ZSET)}  # the states' spelling
# Which kind a key shows when several have live state (a stream shows before any).
PRECEDENCE = (HASH, ZSET, SET, STRING)

# Elements a command names, by its argv: the rest of the value is left alone, so only
# these are compared. Commands not listed are compared whole.
_HINTS = {
    "hset": lambda a: a[2::2], "hmset": lambda a: a[2::2], "hsetnx": lambda a: a[2:3],
    "hdel": lambda a: a[2:], "hincrby": lambda a: a[2:3], "hincrbyfloat": lambda a: a[2:3],
    "sadd": lambda a: a[2:], "srem": lambda a: a[2:], "smove": lambda a: a[3:4],
    "zincrby": lambda a: a[3:4], "zrem": lambda a: a[2:],
    "zadd": lambda a: _zadd_members(a),
}


def _zadd_members(argv: list[bytes]) -> list[bytes]:
    i = 2
    while i < len(argv) and argv[i].lower() in (b"nx", b"xx", b"gt", b"lt", b"ch", b"incr"):
        i += 1
    return argv[i + 1::2]


def _int_arg(raw: bytes) -> int:
    n = string2ll(raw)
    if n is None:
        raise ValueError
    return n


def _ld_arg(raw: bytes) -> Fraction:
    v = parse_long_double(raw)
    if not isinstance(v, Fraction):
        raise ValueError  # inf or unparsable: the command refused it
    return v


def _score_delta(raw: bytes) -> Fraction:
    """A sorted-set increment as an exact number. An infinite one has none (ValueError):
    the write is then an assign of the score it left, as a refused argument's is, where
    Fraction(inf) raised OverflowError out of the command."""
    d = get_double(raw)
    if d != d or d in (float("inf"), float("-inf")):
        raise ValueError
    return Fraction(d)


# Increments a counter command makes: element -> delta, from its argv. INCR's and DECR's
# are the same every time, so one dict each serves them all (read only, as _NO_DELTAS).
_PLUS_ONE: dict[bytes, Number] = {b"": 1}
_MINUS_ONE: dict[bytes, Number] = {b"": -1}
_COUNTERS = {
    "incr": lambda a: _PLUS_ONE,
    "decr": lambda a: _MINUS_ONE,
    "incrby": lambda a: {b"": _int_arg(a[2])},
    "decrby": lambda a: {b"": -_int_arg(a[2])},
    "incrbyfloat": lambda a: {b"": _ld_arg(a[2])},
    "hincrby": lambda a: {a[2]: _int_arg(a[3])},
    "hincrbyfloat": lambda a: {a[2]: _ld_arg(a[3])},
    "zincrby": lambda a: {a[3]: _score_delta(a[2])},
    "zadd": lambda a: _zadd_incr(a),
}


def _zadd_incr(argv: list[bytes]) -> dict[bytes, Number]:
    opts = set()
    i = 2
    while i < len(argv) and argv[i].lower() in (b"nx", b"xx", b"gt", b"lt", b"ch", b"incr"):
        opts.add(argv[i].lower())
        i += 1
    if b"incr" not in opts or i + 1 >= len(argv):
        return {}
    return {argv[i + 1]: _score_delta(argv[i])}


# The kind of value the hinted and counter commands write (on another, they are refused).
_COMMAND_KIND = {
    **dict.fromkeys(("hset", "hmset", "hsetnx", "hdel", "hincrby", "hincrbyfloat"), HASH),
    **dict.fromkeys(("sadd", "srem", "smove"), SET),
    **dict.fromkeys(("zincrby", "zrem", "zadd"), ZSET),
    **dict.fromkeys(("incr", "decr", "incrby", "decrby", "incrbyfloat"), STRING),
}


# Writes that assign what they name even when it holds that value already: SADD of a
# member that is there re-adds it (a concurrent SREM elsewhere did not see this add).
_ASSIGNS = frozenset({"sadd", "hset", "hmset", "set", "setex", "psetex", "mset", "getset"})
_CONDITIONS = frozenset({b"nx", b"xx", b"gt", b"lt", b"incr"})
_NO_DELTAS: dict[bytes, Number] = {}  # an assign's increments: none (never written to)
_NO_SEEN: dict[int, int] = {}  # a seen clock nothing reads (never written to)


def _reasserts(name: str, argv: list[bytes]) -> bool:
    """Whether command ``name`` assigns every element it names (conditional forms, SET NX
    or ZADD XX, assign only what they changed)."""
    if name == "zadd":
        options = argv[2:len(argv) - 2]
    elif name == "set":
        options = argv[3:]
    else:
        return name in _ASSIGNS
    # A loop, not any() over a generator: a compiled cpdef function cannot hold one.
    for a in options:
        if a.lower() in _CONDITIONS:
            return False
    return True


def kind_of(value: Any) -> bytes | None:
    """The merge kind of a keyspace value; None for none (and for streams and HLLs)."""
    t = type(value)
    if t is bytes or t is bytearray:
        if len(value) > 15 and value[0] == 72 and is_hll_value(value):  # 72: "H" of "HYLL"
            return None  # an HyperLogLog: hll.py's, shown before these kinds
        return STRING
    if t is HashValue:
        return HASH
    if t is SetValue:
        return SET
    if t is SortedSet:
        return ZSET
    return None


def visible(kinds: Kinds) -> bytes | None:
    """The kind a key shows: the first in PRECEDENCE with a live element."""
    for kind in PRECEDENCE:
        cells = kinds.get(kind)
        if cells:
            return kind
    return None


# -- rendering ---------------------------------------------------------------------------

def render_bytes(cell: AnyCell) -> bytes | None:
    """A string's or hash field's value: the winning assign, plus the increments when
    there are any and the assign reads as a number (then Redis's own text for the sum)."""
    base = cell.value()
    extra = cell.counter()
    if extra is None:
        return base if type(base) is bytes or base is None else bytes(base)
    if base is None:
        start: Number = 0
    else:
        start = string2ll(bytes(base))
        if start is None:
            ld = parse_long_double(bytes(base))
            if not isinstance(ld, Fraction):
                return bytes(base)  # not a number: the increments wait for one
            start = ld
    total = start + extra
    if type(total) is int:
        return b"%d" % total
    return format_long_double_human(round_long_double(Fraction(total)))


def render_score(cell: AnyCell) -> float:
    base = cell.value()
    extra = cell.counter()
    if extra is None:
        return base
    start = Fraction(base) if base is not None and base == base and abs(base) != float("inf") else base
    if start is None:
        return float(extra)
    if isinstance(start, float):  # infinite: the increments cannot move it
        return start
    return float(start + extra)


def _element_now(value: Any, kind: bytes, elem: bytes) -> Any:
    """An element's value in the keyspace value (None: absent)."""
    if kind == STRING:
        return bytes(value)
    if kind == HASH:
        return value.get(elem)
    if kind == SET:
        return b"" if elem in value else None
    return value.dict.get(elem)


def _element_rendered(kind: bytes, cell: AnyCell | None) -> Any:
    if cell is None or not cell.live():
        return None
    if kind == ZSET:
        return render_score(cell)
    if kind == SET:
        return b""
    return render_bytes(cell)


def _new_value(kind: bytes) -> Any:
    if kind == HASH:
        return HashValue()
    if kind == SET:
        return SetValue()
    if kind == ZSET:
        return SortedSet()
    return b""


def _put(value: Any, kind: bytes, elem: bytes, v: Any) -> Any:
    """Write one rendered element into the keyspace value (None removes it). Returns the
    value (a string is replaced, not changed in place)."""
    if kind == STRING:
        return v
    if kind == HASH:
        if v is None:
            value.delete_field(elem)
        else:
            value.check_sizes((elem, v))
            value.put(elem, v)
    elif kind == SET:
        if v is None:
            if elem in value:
                value.discard_member(elem)
        else:
            value.add_member(elem)
    else:
        if v is None:
            value.remove(elem)
        else:
            value.add(elem, v)
    return value


def _empty(value: Any) -> bool:
    return len(value) == 0 if type(value) is not bytes else False


# -- the state ---------------------------------------------------------------------------

def _probe() -> None:
    """Only its type matters: see _COMPILED."""


# Whether this module runs compiled (without importing Cython), and the clock function
# it was loaded with: now_ms() reads the clock in C only while nothing replaced it.
_COMPILED = type(_probe).__name__ != "function"
_SYSTEM_TIME = time.time
_TIME_VARS = vars(time)  # read by key: a C dict lookup, where ``time.time`` is a generic getattr


def now_ms() -> int:
    """Wall-clock milliseconds: an assign's stamp here and an effect's ``ts`` (the
    engine's seal). Compiled, CLOCK_REALTIME is read in C (keyed.pxd's ``_c_now_ms``):
    the Python call to time.time, its float and the int made from it were two of the
    calls a write made per stamp. A test that replaces time.time (one clock for two
    instances) is still obeyed: the C clock is read only while time.time is the system's."""
    if _COMPILED and _TIME_VARS["time"] is _SYSTEM_TIME:
        return _c_now_ms()  # noqa: F821 (defined in keyed.pxd: see _COMPILED)
    return int(time.time() * 1000)


class Packed(tuple):
    """A key's state while one assign made every element of its one kind (a key written
    once, the most common key): ``(kind, ts, origin, seq, elem, value, elem, value, ...)``,
    a set's members without values ``(kind, ts, origin, seq, member, ...)``. One tuple per
    key where the full form (:meth:`kinds`) is a dict of kinds, a dict of elements and a
    ``Reg`` per element: most of what Active-Active added to a small hash, set or sorted
    set. Only writes to it (a second effect on the key, a peer's op, a full sync) need the
    full form, and :meth:`Keyed._kinds_at` makes it then; reads print it as the full form,
    so states compare alike whichever form a key is in."""

    __slots__ = ()

    def kinds(self) -> Kinds:
        kind = self[0]
        dot = (self[1], self[2], self[3])
        if kind == SET:
            r = Reg((dot, None))
            return {kind: dict.fromkeys(self[4:], r)}
        return {kind: {elem: Reg((dot, v)) for elem, v in zip(self[4::2], self[5::2], strict=True)}}

    def __repr__(self) -> str:
        return repr(self.kinds())


def _pack(kinds: Kinds) -> Kinds | Packed:
    """``kinds`` as a :class:`Packed` when it can be one (one kind, every element a Reg of
    one dot), else itself."""
    if len(kinds) != 1:
        return kinds
    ((kind, cells),) = kinds.items()
    out: list[Any] = [kind, 0, 0, 0]
    dot = None
    bare = kind == SET
    for elem, cell in cells.items():
        if type(cell) is not Reg:
            return kinds
        d = cell[0]
        if dot is None:
            dot = d
        elif d != dot:
            return kinds
        out.append(elem)
        if not bare:
            out.append(cell[1])
    if dot is None:
        return kinds
    out[1], out[2], out[3] = dot
    return Packed(out)


class Keyed:
    """The merge state of every non-stream key (see the module docstring)."""

    def __init__(self, engine: ActiveActive) -> None:
        self.engine = engine
        self.keys: dict[tuple[int, bytes], Kinds | Packed] = {}
        # The effect whose events apply() is firing (its dot), the first (db, key, event)
        # it fired, and all of them once it fired a second (_once).
        self._fired_origin: int | None = None
        self._fired_seq: int | None = None
        self._fired_first: tuple[int, bytes, Event] | None = None
        self._fired: set[tuple[int, bytes, Event]] | None = None
        # What removals took of increments, for cells that went (Cell.removals): per key,
        # (kind, element) -> (the removing effect's seen clock, the marks). Only a full
        # sync reads them (merge); they go once every instance has seen that clock.
        self.removed: dict[tuple[int, bytes], dict[tuple[bytes, bytes], Removal]] = {}
        # Keys a peer's effect created while it is applied: packed once it is (pack_created).
        self.created: list[tuple[int, bytes]] = []
        # The last assign's timestamp and its text (_stamp_of).
        self._stamp_ms = -1
        self._stamp = b""

    def _keep_removal(self, where: tuple[int, bytes], kind: bytes, elem: bytes, cell: AnyCell,
                      clock: dict[int, int]) -> None:
        """``cell`` went: keep what removals took of its increments (if any), with the
        clock of the effect that made it go."""
        if type(cell) is not Cell or not cell.counters:
            return
        marks = cell.removals()
        if marks:
            _add_removal(self.removed.setdefault(where, {}), (kind, elem), (dict(clock), marks))

    def collect_removals(self, known: dict[int, dict[int, int]], others: set[int], vc: dict[int, int]) -> int:
        """Drop the removal marks every instance has seen (cron, with the tombstones):
        each one's cell then holds the removal, or went with it. Returns how many went."""
        dropped = 0
        for where in list(self.removed):
            recs = self.removed[where]
            for at in list(recs):
                clock = recs[at][0]
                if all(vc.get(r, 0) >= n and all(known.get(p, {}).get(r, 0) >= n for p in others if p != r)
                       for r, n in clock.items()):
                    del recs[at]
                    dropped += 1
            if not recs:
                del self.removed[where]
        return dropped

    def has(self, db_id: int, key: bytes) -> bool:
        return (db_id, key) in self.keys

    def _kinds_at(self, where: tuple[int, bytes]) -> Kinds | None:
        """The state of a key in its full form (a Packed one is unpacked for good: the
        caller writes to it), or None."""
        kinds = self.keys.get(where)
        if type(kinds) is Packed:
            kinds = self.keys[where] = kinds.kinds()
        return kinds

    # -- local writes ----------------------------------------------------------------

    def _stamp_of(self, ts: int) -> bytes:
        """An assign's timestamp as its op carries it. The writes of one millisecond
        share one (most of them, under load), so the last is kept: formatting it anew
        was a tenth of what a new key's ops cost."""
        if ts != self._stamp_ms:
            self._stamp = b"%d" % ts
            self._stamp_ms = ts
        return self._stamp

    def _local(self) -> tuple[int, int, dict[int, int]]:
        """The dot and seen clock of the effect being made here."""
        engine = self.engine
        seq = engine.seq + 1
        seen = dict(engine.vc)
        seen[engine.region] = seq
        return engine.region, seq, seen

    def collect(self, db: Any, key: bytes, name: str, argv: list[bytes], before: Any = None) -> list[Op]:
        """The ops that bring ``key``'s state to what its value holds now, after command
        ``name`` ran; they are applied to the state as they are made. ``before`` is the
        value the key held before (the same object when the command changed it in place
        or only read it)."""
        now = db.data.get(key)
        kind = kind_of(now)
        where = (db.id, key)
        kinds = self._kinds_at(where)
        if kinds is None and kind is None:
            return []
        if kind is None and now is not None and now is before:
            # A list or HLL shows and the command did not replace it (an SADD refused
            # with WRONGTYPE): the kinds it hides stay.
            return []
        origin, seq, seen = self._local()
        ts = now_ms()
        ops: list[Op] = []
        shown = visible(kinds) if kinds else None
        if shown != kind or (kind is not None and kinds is not None and now is not before and any(
            k != kind and cells for k, cells in kinds.items()
        ) and name not in _HINTS and name not in _COUNTERS):
            # Created, removed, or replaced by a value of another kind (or a new value
            # written over hidden kinds): what this instance saw goes, then what is there
            # now. A key only read (a STORE's source) or changed in place (SPOP) keeps them.
            if kinds:
                op = [b"CDEL", key, *_observations(kinds)]
                ops.append(op)
                self._delete(where, kinds, seen, op[2:])
                if not any(kinds.values()):
                    del self.keys[where]
                    kinds = None
            if kind is not None:
                if kinds is None:
                    kinds = self.keys[where] = {}
                self._create(ops, kinds, key, kind, now, name, argv, ts, origin, seq, seen)
            return ops
        cells = kinds[kind]
        # A command of another type (HINCRBY on a string) was refused: nothing it names
        # is this key's, and comparing the whole value finds nothing changed.
        hint = _HINTS.get(name) if _COMMAND_KIND.get(name, kind) == kind else None
        elems = hint(argv) if hint is not None else list({*cells, *_keys_of(now, kind)})
        self._compare(ops, db, key, kind, cells, now, elems, name, argv, ts, origin, seq, seen)
        if not cells:
            del kinds[kind]
            if not kinds:
                del self.keys[where]
        return ops

    def collect_known(self, db: Any, key: bytes, name: str, argv: list[bytes], kind: bytes,
                      now: Any) -> list[Op] | None:
        """collect() for the engine's fast path (engine.py ``_run_fast``): a command of
        ``kind`` that left a value of that kind at ``key``, which held nothing or only
        state of that kind before. The same ops collect() makes, without working out
        which case this is; None when the state is not that simple (collect() decides)."""
        where = (db.id, key)
        kinds = self.keys.get(where)
        deltas = _deltas(name, argv, kind) if name in _COUNTERS else None
        if type(kinds) is Packed:
            if not deltas and len(kinds) == (5 if kind is SET else 6) and kinds[0] == kind:
                made = self._reassign_packed(key, where, kinds, kind, name, argv, now)
                if made is not None:
                    return made
            kinds = self.keys[where] = kinds.kinds()
        if kinds is None and not deltas:
            # Created by an assign (the usual SET, HSET, SADD, ZADD of a new key): every
            # element a new cell of one assign, as _create makes them.
            engine = self.engine
            origin, seq = engine.region, engine.seq + 1
            ts = now_ms()
            stamp = self._stamp_of(ts)
            if kind is STRING:
                v = bytes(now)
                self.keys[where] = Packed((STRING, ts, origin, seq, b"", v))
                return [[b"CSET", key, STRING, b"", stamp, v]]
            packed: list[Any] = [kind, ts, origin, seq]
            made = []
            if kind is SET:
                for elem in now:
                    packed.append(elem)
                    made.append([b"CSET", key, SET, elem, stamp, b""])
            else:
                for elem, v in _elements(now, kind):
                    packed += (elem, v)
                    made.append([b"CSET", key, kind, elem, stamp, _value_arg(kind, v)])
            self.keys[where] = Packed(packed)
            return made
        if kinds is not None and (len(kinds) != 1 or not kinds.get(kind)):
            return None
        engine = self.engine
        origin, seq = engine.region, engine.seq + 1
        ts = now_ms()
        ops: list[Op] = []
        if kinds is None:
            # A counter its increment created: the new cells hold no dot a seen clock
            # could take, so none is made (_create reads it only for cells that were there).
            kinds = self.keys[where] = {}
            self._create(ops, kinds, key, kind, now, name, argv, ts, origin, seq, _NO_SEEN, deltas)
            return ops
        cells = kinds[kind]
        hint = _HINTS.get(name)
        elems = hint(argv) if hint is not None else list({*cells, *_keys_of(now, kind)})
        # The seen clock is made when an element that was there needs it (most writes of
        # a new field or member do not).
        self._compare(ops, db, key, kind, cells, now, elems, name, argv, ts, origin, seq, None,
                      deltas if deltas is not None else _NO_DELTAS)
        if not cells:
            del kinds[kind]
            if not kinds:
                del self.keys[where]
        return ops

    def created_counter(self, where: tuple[int, bytes], delta: int, ts: int, origin: int, seq: int) -> None:
        """The state of a string counter that an increment by ``delta`` just created (the
        engine's _keyed_made made its op): one cell, the origin's first increment, as
        _create makes it."""
        cell = Cell()
        cell.incr(delta, ts, origin, seq)
        self.keys[where] = {STRING: {b"": cell}}

    def assigned_one(self, where: tuple[int, bytes], key: bytes, kind: bytes, elem: bytes, now: Any,
                     before: Any, origin: int, seq: int) -> tuple[bytes, ...] | None:
        """The op of a write that assigned one element of a hash, set or sorted set (HSET
        of one field, SADD or ZADD of one member, no options), applied to the state:
        what collect_known makes when the key was created by it (a Packed of that one
        element), held that one element alone as a Packed of one assign this effect had
        seen, or held state of that kind alone where the element is new (a Reg). None,
        with nothing done, for anything else (collect_known decides)."""
        after = _element_now(now, kind, elem)
        if after is None:
            return None
        held = self.keys.get(where)
        stored = _stored(kind, after)
        ts = now_ms()
        if held is None:
            if before is not None:
                return None
            elems = _elements(now, kind)
            if len(elems) != 1:
                return None
        elif type(held) is Packed:
            if len(held) != (5 if kind is SET else 6) or held[0] != kind or held[4] != elem:
                return None
            o = held[2]
            if o != origin and self.engine.vc.get(o, 0) < held[3]:
                return None  # an assign this effect has not seen: both stay (collect)
        elif type(held) is dict and len(held) == 1:
            kinds = held  # typed (keyed.pxd): a C dict lookup, not a .get method call
            cells = kinds.get(kind)
            if not cells or elem in cells:
                return None  # assigned over an element that was there: _assign_op's
            cells[elem] = reg(ts, origin, seq, stored)
            return (b"CSET", key, kind, elem, self._stamp_of(ts), _value_arg(kind, after))
        else:
            return None
        self.keys[where] = Packed((kind, ts, origin, seq, elem) if stored is None
                                  else (kind, ts, origin, seq, elem, stored))
        return (b"CSET", key, kind, elem, self._stamp_of(ts), _value_arg(kind, after))

    def counted(self, db: Any, key: bytes, held: Any, now: bytes, before: Any, origin: int,
                seq: int) -> tuple[bytes, ...] | None:
        """The op of an integer increment (INCR, DECR, INCRBY, DECRBY) that changed a
        string counter whose state is that one cell, applied to it: what _compare makes
        for it (the engine's _keyed_made writes the op). The delta is what the value
        moved by (the command succeeded, so both are integers). None, with nothing
        done, when the state is anything else (collect_known decides)."""
        if type(held) is not dict or len(held) != 1:
            return None
        cells = held.get(STRING)
        if cells is None or len(cells) != 1:
            return None
        got = cells.get(b"")  # a Reg (no increments yet) is collect_known's
        if type(got) is not Cell:
            return None
        cell = got
        if not cell.live():
            return None
        delta = int(now) - int(before)
        base = cell.incr(delta, now_ms(), origin, seq)
        canonical = render_bytes(cell)
        if canonical != now:
            # What _compare does when the merged sum reads otherwise: every instance
            # shows that text, and replicas and the AOF get it.
            db.data[key] = canonical
            self.engine.server.rewrite_propagation(_canonical_write(STRING, key, b"", canonical))
            self.engine.reply_override = canonical
        return (b"CINC", key, STRING, b"", b"%d" % delta, num_bytes(base))

    def _reassign_packed(self, key: bytes, where: tuple[int, bytes], packed: Packed, kind: bytes,
                         name: str, argv: list[bytes], now: Any) -> list[Op] | None:
        """collect_known() for an assign to the one element of a key held as a
        :class:`Packed` of that kind (a SET over a string, an HSET of a one-field hash's
        field): what _compare and _assign_op make, the state staying one Packed tuple
        instead of unpacked for good. None when the command names another element or the
        element holds an assign this effect had not seen (collect_known decides)."""
        elem = packed[4]
        hint = _HINTS.get(name)
        if hint is None:
            if kind is not STRING:
                return None
        else:
            elems = hint(argv)
            if len(elems) != 1 or elems[0] != elem:
                return None
        after = _element_now(now, kind, elem)
        if after is None:
            return None
        if after == (b"" if kind is SET else packed[5]) and not (
                _reasserts(name, argv) and _COMMAND_KIND.get(name, kind) == kind):
            return []
        engine = self.engine
        origin, seq = engine.region, engine.seq + 1
        o, s = packed[2], packed[3]
        if not (s <= seq if o == origin else engine.vc.get(o, 0) >= s):
            return None
        ts = now_ms()
        stored = _stored(kind, after)
        self.keys[where] = Packed((kind, ts, origin, seq, elem) if stored is None
                                  else (kind, ts, origin, seq, elem, stored))
        return [[b"CSET", key, kind, elem, self._stamp_of(ts), _value_arg(kind, after)]]

    def _create(self, ops: list[Op], kinds: Kinds, key: bytes, kind: bytes, now: Any, name: str,
                argv: list[bytes], ts: int, origin: int, seq: int, seen: dict[int, int],
                deltas: dict[bytes, Number] | None = None) -> None:
        """The ops of a value of ``kind`` that replaced nothing this instance saw of it:
        every element assigned, or incremented from 0 (a counter its increment created).
        ``deltas``: the command's increments, when the caller worked them out already."""
        cells = kinds.setdefault(kind, {})
        if deltas is None:
            deltas = _deltas(name, argv, kind)
        for elem, v in _elements(now, kind):
            delta = deltas.get(elem)
            if delta is not None and elem not in cells:
                # A counter its increment created: 0 plus the increments.
                cell = cells[elem] = Cell()
                base = cell.incr(delta, ts, origin, seq)
                ops.append([b"CINC", key, kind, elem, num_bytes(delta), num_bytes(base)])
            else:
                ops.append(self._assign_op(cells, key, kind, elem, v, ts, origin, seq, seen))

    def _compare(self, ops: list[Op], db: Any, key: bytes, kind: bytes, cells: dict[bytes, AnyCell], now: Any,
                 elems: Any, name: str, argv: list[bytes], ts: int, origin: int, seq: int,
                 seen: dict[int, int] | None, counters: dict[bytes, Number] | None = None) -> None:
        """The ops of the elements ``elems`` of a value of ``kind`` whose state (``cells``)
        is there: each one compared with its cell. ``counters``: the command's increments
        (``_deltas``), when the caller worked them out already."""
        # A command of another kind (an SADD refused with WRONGTYPE on a string) assigns
        # nothing: re-asserting made an own dot here that no effect carried.
        reassert = _reasserts(name, argv) and _COMMAND_KIND.get(name, kind) == kind
        for elem in elems:
            cell = cells.get(elem)
            before = _element_rendered(kind, cell)
            after = _element_now(now, kind, elem)
            if after == before and (after is None or not reassert):
                continue
            if after is None:
                if seen is None:
                    seen = self._local()[2]
                op = [b"CREM", key, kind, elem, *_obs_args(cell.observed())]
                ops.append(op)
                cell = inflate(cell)
                cell.remove(seen, cell.observed())
                if cell.live():
                    cells[elem] = settle(cell)
                else:
                    del cells[elem]
                    self._keep_removal((db.id, key), kind, elem, cell, seen)
                continue
            if counters is None:
                counters = _deltas(name, argv, kind)
            delta = counters.get(elem)
            if delta is not None and cell is not None and cell.live():
                cell = cells[elem] = inflate(cell)
                base = cell.incr(delta, ts, origin, seq)
                ops.append([b"CINC", key, kind, elem, num_bytes(delta), num_bytes(base)])
                canonical = _element_rendered(kind, cell)
                if canonical != after:  # a float sum: every instance shows this text
                    now = _put(now, kind, elem, canonical)
                    if kind == STRING:
                        db.data[key] = now
                    # Replicas and the AOF get it too, not the command's own sum (a
                    # replica's ZINCRBY would add in double and drift).
                    self.engine.server.rewrite_propagation(_canonical_write(kind, key, elem, canonical))
                    self.engine.reply_override = Double(canonical) if kind == ZSET else canonical
                continue
            if delta is not None and cell is None:
                # A counter created by its increment: 0 plus the increments.
                cell = cells[elem] = Cell()
                base = cell.incr(delta, ts, origin, seq)
                ops.append([b"CINC", key, kind, elem, num_bytes(delta), num_bytes(base)])
                continue
            ops.append(self._assign_op(cells, key, kind, elem, after, ts, origin, seq, seen))

    def _assign_op(self, cells: dict[bytes, AnyCell], key: bytes, kind: bytes, elem: bytes, v: Any,
                   ts: int, origin: int, seq: int, seen: dict[int, int] | None) -> Op:
        """An assign's op, applied (``seen`` None: the effect's seen clock, made here
        when the element was there)."""
        cell = cells.get(elem)
        if cell is not None and seen is None:
            seen = self._local()[2]
        if cell is None or (type(cell) is Reg and cell.seen_by(seen)):
            # Nothing else in the element: it holds this assign alone.
            cells[elem] = reg(ts, origin, seq, _stored(kind, v))
            return [b"CSET", key, kind, elem, self._stamp_of(ts), _value_arg(kind, v)]
        cell = inflate(cell)
        observed = cell.observed()
        cell.assign(seen, observed, ts, origin, seq, _stored(kind, v))
        cells[elem] = settle(cell)
        return [b"CSET", key, kind, elem, self._stamp_of(ts), _value_arg(kind, v), *_obs_args(observed)]

    def _delete(self, where: tuple[int, bytes], kinds: Kinds, seen: dict[int, int], args: list[bytes]) -> None:
        """A CDEL: every element's assigns the deleter saw, and the increments it reports."""
        reported = _read_cdel(args)
        for kind, cells in list(kinds.items()):
            for elem in list(cells):
                cell = cells[elem]
                if type(cell) is Reg:
                    if cell.seen_by(seen):
                        del cells[elem]
                    continue
                cell.remove(seen, reported.get((kind, elem), ()))
                if not cell.live():
                    del cells[elem]
                    self._keep_removal(where, kind, elem, cell, seen)
                else:
                    cells[elem] = settle(cell)
            if not cells:
                del kinds[kind]

    def expired(self, db_id: int, key: bytes) -> Op | None:
        """The key's TTL passed here: a CDEL of what this instance saw (applied now)."""
        kinds = self._kinds_at((db_id, key))
        if not kinds:
            return None
        _origin, _seq, seen = self._local()
        op = [b"CDEL", key, *_observations(kinds)]
        self._delete((db_id, key), kinds, seen, op[2:])
        if not kinds:
            del self.keys[(db_id, key)]
        return op

    # -- peers' ops ------------------------------------------------------------------

    def apply(self, db: Any, origin: int, seq: int, vc: dict[int, int], op: Op) -> tuple[Event, ...]:
        """Apply a peer's op (``origin``/``seq`` its effect's dot, ``vc`` its clock) and
        render what changed into the keyspace. Returns the keyspace events to fire, as
        (class letter, event): what the command fires in Redis, once per effect and key
        although the effect carries an op per field or member, and ``del`` after the
        removal that emptied the key."""
        name, key = op[0], op[1]
        where = (db.id, key)
        if name == b"CSET" and len(op) == 6:
            fired = self._assign_plain(db, origin, seq, vc, op, where)
            if fired is not None:
                return fired
        elif name == b"CINC":
            fired = self._incr_plain(db, origin, seq, op, where)
            if fired is not None:
                return fired
        seen = dict(vc)
        seen[origin] = seq
        kinds = self._kinds_at(where)
        if name == b"CDEL":
            if not kinds:
                return ()
            shown = visible(kinds)
            self._delete(where, kinds, seen, op[2:])
            if not kinds:
                del self.keys[where]
            self._render(db, key, shown, None)
            return self._once(origin, seq, db.id, key, _DEL)
        kind, elem = op[2], op[3]
        if kinds is None:
            kinds = self.keys[where] = {}
            self.created.append(where)
        shown = visible(kinds)
        cells = kinds.setdefault(kind, {})
        cell = inflate(cells.get(elem))
        if name == b"CSET":
            cell.assign(seen, _read_obs(op[6:]), int(op[4]), origin, seq, _value_in(kind, op[5]))
            event = _SET_EVENT[kind]
        elif name == b"CINC":
            delta = num_in(op[4])
            cell.incr(delta, 0, origin, seq, num_in(op[5]) if len(op) > 5 else None)
            event = (_INCR_EVENT if type(delta) is int else _INCRFLOAT_EVENT)[kind]
        else:  # CREM
            cell.remove(seen, _read_obs(op[4:]))
            event = _REM_EVENT[kind]
        if cell.live():
            cells[elem] = settle(cell)
        else:
            cells.pop(elem, None)
            self._keep_removal(where, kind, elem, cell, seen)
        if not cells:
            del kinds[kind]
            if not kinds:
                del self.keys[where]
        had = key in db.data
        self._render(db, key, shown, (kind, elem))
        if had and name == b"CREM" and kind != STRING and key not in db.data:
            # Redis fires "del" after the HDEL, SREM or ZREM that removed the last element.
            return self._once(origin, seq, db.id, key, event) + self._once(origin, seq, db.id, key, _DEL)
        return self._once(origin, seq, db.id, key, event)

    def _assign_plain(self, db: Any, origin: int, seq: int, vc: dict[int, int], op: Op,
                      where: tuple[int, bytes]) -> tuple[Event, ...] | None:
        """apply() of the usual peer's op, a CSET carrying no observations onto an element
        that holds nothing or one assign the effect had seen, of the kind the key shows
        (or of a key that holds nothing at all): the element then holds this assign
        alone, as the writer's ``_assign_op`` made it, so the cell, its merge and the
        whole-key rendering are skipped. None when the op is not that simple (apply()'s
        general path decides)."""
        kind, elem, key = op[2], op[3], op[1]
        raw = op[5]
        if kind == ZSET:
            stored: Any = float(raw)
            shown: Any = stored
        elif kind == SET:
            stored = None
            shown = b""
        else:
            stored = shown = raw if type(raw) is bytes else bytes(raw)
        ts = int(op[4])
        value = db.data.get(key)
        kinds = self.keys.get(where)
        if kinds is None:
            if value is not None:
                return None  # a stream, list or HLL without this state: apply() decides
            self.keys[where] = Packed((kind, ts, origin, seq, elem) if stored is None
                                      else (kind, ts, origin, seq, elem, stored))
            self.created.append(where)  # repacked if a later op of the effect unpacks it
            db.set(key, _put(_new_value(kind), kind, elem, shown), keep_ttl=True)
            self._settle(db, key)
            return self._once(origin, seq, db.id, key, _SET_EVENT[kind])
        if value is None or kind_of(value) != kind:
            return None
        if type(kinds) is Packed:
            if kinds[0] != kind:
                return None
            if len(kinds) == (5 if stored is None else 6) and kinds[4] == elem:
                # The key's one element, and that one assign: seen by this effect?
                o, s = kinds[2], kinds[3]
                if not (s <= seq if o == origin else vc.get(o, 0) >= s):
                    return None
                self.keys[where] = Packed((kind, ts, origin, seq, elem) if stored is None
                                          else (kind, ts, origin, seq, elem, stored))
                new = _put(value, kind, elem, shown)
                if new is not value:
                    db.data[key] = new
                return self._once(origin, seq, db.id, key, _SET_EVENT[kind])
            kinds = self._kinds_at(where)
        if visible(kinds) != kind:
            return None
        cells = kinds[kind]
        cell = cells.get(elem)
        if cell is not None:
            if type(cell) is not Reg:
                return None
            o, s = cell[0][1], cell[0][2]
            if not (s <= seq if o == origin else vc.get(o, 0) >= s):
                return None
        cells[elem] = reg(ts, origin, seq, stored)
        new = _put(value, kind, elem, shown)
        if new is not value:
            db.data[key] = new
        return self._once(origin, seq, db.id, key, _SET_EVENT[kind])

    def _incr_plain(self, db: Any, origin: int, seq: int, op: Op,
                    where: tuple[int, bytes]) -> tuple[Event, ...] | None:
        """apply() of a peer's increment to a key that holds nothing at all, or to an
        element (a Cell, or none yet) of the kind the key shows: the increment goes to the
        cell, which stays live, and that one element is written into the keyspace, without
        apply()'s general bookkeeping. None when the key is not that simple (a packed key,
        another kind shown or hidden there: apply()'s general path decides)."""
        key, kind, elem = op[1], op[2], op[3]
        value = db.data.get(key)
        kinds = self.keys.get(where)
        delta = num_in(op[4])
        base = num_in(op[5]) if len(op) > 5 else None
        if kinds is None:
            if value is not None:
                return None
            cell = Cell()
            cell.incr(delta, 0, origin, seq, base)
            self.keys[where] = {kind: {elem: cell}}
            self.created.append(where)
            db.set(key, _put(_new_value(kind), kind, elem, _element_rendered(kind, cell)), keep_ttl=True)
            self._settle(db, key)
        else:
            if type(kinds) is Packed or value is None or kind_of(value) != kind or visible(kinds) != kind:
                return None
            cells = kinds[kind]
            cell = cells.get(elem)
            if cell is None:
                cell = cells[elem] = Cell()
            elif type(cell) is not Cell:
                return None
            cell.incr(delta, 0, origin, seq, base)
            new = _put(value, kind, elem, _element_rendered(kind, cell))
            if new is not value:
                db.data[key] = new
        return self._once(origin, seq, db.id, key,
                          (_INCR_EVENT if type(delta) is int else _INCRFLOAT_EVENT)[kind])

    def pack_created(self) -> None:
        """The keys the effect just applied created, each as one :class:`Packed` tuple
        when it can be one (every element one assign of that effect), as a local creation
        is: a peer's keys took the per-element form's memory otherwise. Called by the
        engine once all of the effect's ops are applied (a key's later ops in the same
        effect write to the full form)."""
        keys = self.keys
        for where in self.created:
            kinds = keys.get(where)
            if type(kinds) is dict:
                keys[where] = _pack(kinds)
        self.created = []

    def _settle(self, db: Any, key: bytes) -> None:
        """A key a peer's op created takes the TTL the register holds for it. Most keys
        have none registered: checked here against the register itself, so that the
        usual created key costs a dict test instead of a call into the engine."""
        ttl = self.engine.ttl
        if ttl and (db.id, key) in ttl:
            self.engine._settle_ttl(db, key)

    def _once(self, origin: int, seq: int, db_id: int, key: bytes, event: Event) -> tuple[Event, ...]:
        """``(event,)``, unless this effect fired it for this key already: an HSET of
        several fields (several CSET ops) fires one "hset", as it does in Redis. An
        effect's first event is kept alone; the set of them is made at its second (most
        effects carry one op, and a set and a dot tuple per effect were a tenth of
        applying one)."""
        if seq != self._fired_seq or origin != self._fired_origin:
            self._fired_seq = seq
            self._fired_origin = origin
            self._fired_first = (db_id, key, event)
            self._fired = None
            return (event,)
        mark = (db_id, key, event)
        fired = self._fired
        if fired is None:
            if mark == self._fired_first:
                return ()
            fired = self._fired = {self._fired_first}
        elif mark in fired:
            return ()
        fired.add(mark)
        return (event,)

    def _render(self, db: Any, key: bytes, shown: bytes | None, touched: tuple[bytes, bytes] | None) -> None:
        """Bring the keyspace value of ``key`` to the state: the touched element only
        when the kind shown stays the same, else the whole key."""
        value = db.data.get(key)
        if value is not None and kind_of(value) is None:
            return  # a stream: it shows before any other kind
        kinds = self._kinds_at((db.id, key))
        now = visible(kinds) if kinds else None
        if now is None:
            if value is not None:
                db.delete(key)
            return
        if touched is not None and now == shown and value is not None and touched[0] == now:
            kind, elem = touched
            cell = kinds[kind].get(elem)
            new = _put(value, kind, elem, _element_rendered(kind, cell))
            if new is not value:
                db.data[key] = new
            elif _empty(value):
                db.delete(key)
            return
        new = _new_value(now)
        for elem, cell in kinds[now].items():
            new = _put(new, now, elem, _element_rendered(now, cell))
        created = value is None
        db.set(key, new, keep_ttl=True)
        if created:
            self._settle(db, key)

    def render_key(self, db: Any, key: bytes) -> None:
        """A stream at ``key`` went: the hidden state shows (if any)."""
        if (db.id, key) in self.keys:
            self._render(db, key, None, None)

    # -- full sync -------------------------------------------------------------------

    def merge(self, db: Any, theirs: dict[tuple[int, bytes], Kinds], mine_vc: dict[int, int],
              their_vc: dict[int, int],
              their_removed: dict[tuple[int, bytes], dict[tuple[bytes, bytes], Removal]] | None = None,
              ) -> list[bytes]:
        """Merge a peer's state of ``db``'s keys (a full sync, state.py); renders each key
        that changed and returns them. ``their_removed``: the peer's removal marks (see
        ``removed``): each side's apply to the merged cells, and the receiver keeps both."""
        changed = []
        their_removed = their_removed or {}
        both_vc = dict(mine_vc)
        for r, n in their_vc.items():
            if n > both_vc.get(r, 0):
                both_vc[r] = n
        wanted = {k for (d, k) in self.keys if d == db.id} | {k for (d, k) in theirs if d == db.id}
        for key in wanted:
            where = (db.id, key)
            mine = self._kinds_at(where) or {}
            other = theirs.get(where) or {}
            if type(other) is Packed:
                other = other.kinds()
            before = _fingerprint(mine)
            my_marks = self.removed.get(where)
            their_marks = their_removed.get(where)
            merged: Kinds = {}
            for kind in {*mine, *other}:
                cells = mine.get(kind, {})
                their_cells = other.get(kind, {})
                out = {}
                for elem in {*cells, *their_cells}:
                    cell = inflate(cells.get(elem))
                    cell.merge(their_cells.get(elem) or Cell(), mine_vc, their_vc)
                    for marks in (my_marks, their_marks):
                        if marks and (kind, elem) in marks:
                            cell.take(marks[(kind, elem)][1])
                    if cell.live():
                        out[elem] = settle(cell)
                    else:
                        self._keep_removal(where, kind, elem, cell, both_vc)
                if out:
                    merged[kind] = out
            if _fingerprint(merged) == before:
                if mine:
                    self.keys[where] = _pack(mine)
                continue
            if merged:
                self.keys[where] = _pack(merged)
            else:
                self.keys.pop(where, None)
            self._render(db, key, None, None)
            changed.append(key)
        for where, recs in their_removed.items():
            if where[0] == db.id:
                mine_recs = self.removed.setdefault(where, {})
                for at, rec in recs.items():
                    _add_removal(mine_recs, at, (dict(rec[0]), dict(rec[1])))
        return changed

    # -- persistence -----------------------------------------------------------------

    def export(self) -> list:
        return [
            [db_id, key.hex(), [[kind.decode(), [[e.hex(), c.to_state(_state_out)] for e, c in cells.items()]]
                                for kind, cells in kinds.items()]]
            for (db_id, key), kinds in ((w, k.kinds() if type(k) is Packed else k) for w, k in self.keys.items())
        ]

    def export_removals(self) -> list:
        return [
            [db_id, key.hex(), [[kind.decode(), elem.hex(), _pairs(clock),
                                 [[o, seq, num_bytes(total).decode()] for o, (seq, total) in sorted(marks.items())]]
                                for (kind, elem), (clock, marks) in recs.items()]]
            for (db_id, key), recs in self.removed.items()
        ]

    def load_removals(self, doc: list) -> None:
        removed: dict[tuple[int, bytes], dict[tuple[bytes, bytes], Removal]] = {}
        for db_id, key, recs in doc:
            removed[(int(db_id), bytes.fromhex(key))] = {
                (_KIND_NAMES.get(kind, kind.encode()), bytes.fromhex(elem)): (
                    {int(r): int(n) for r, n in clock},
                    {int(o): (int(seq), num_in(total)) for o, seq, total in marks})
                for kind, elem, clock, marks in recs
            }
        self.removed = removed

    def load(self, doc: list) -> None:
        keys: dict[tuple[int, bytes], Kinds] = {}
        for db_id, key, kinds in doc:
            keys[(int(db_id), bytes.fromhex(key))] = _pack({
                _KIND_NAMES.get(kind, kind.encode()): {
                    bytes.fromhex(e): settle(Cell.from_state(s, _state_in)) for e, s in cells}
                for kind, cells in kinds
            })
        self.keys = keys


# Keyspace events by op and kind, with their notify-keyspace-events class, as the
# commands that make those ops fire them in Redis.
_DEL = ("g", b"del")
_SET_EVENT = {STRING: ("$", b"set"), HASH: ("h", b"hset"), SET: ("s", b"sadd"), ZSET: ("z", b"zadd")}
_INCR_EVENT = {STRING: ("$", b"incrby"), HASH: ("h", b"hincrby"), SET: ("s", b"sadd"), ZSET: ("z", b"zincr")}
_INCRFLOAT_EVENT = {**_INCR_EVENT, STRING: ("$", b"incrbyfloat"), HASH: ("h", b"hincrbyfloat")}
_REM_EVENT = {STRING: _DEL, HASH: ("h", b"hdel"), SET: ("s", b"srem"), ZSET: ("z", b"zrem")}


def _canonical_write(kind: bytes, key: bytes, elem: bytes, v: Any) -> list[bytes]:
    """The plain command that writes an element's merged value (a counter's sum)."""
    if kind == STRING:
        return [b"SET", key, v, b"KEEPTTL"]
    if kind == HASH:
        return [b"HSET", key, elem, v]
    return [b"ZADD", key, repr(v).encode(), elem]


def _add_removal(recs: dict[tuple[bytes, bytes], Removal], at: tuple[bytes, bytes], rec: Removal) -> None:
    """Fold a removal record into an element's: per origin the later mark, the clocks by
    maximum (the record goes once every instance saw all of them)."""
    have = recs.get(at)
    if have is None:
        recs[at] = rec
        return
    clock, marks = have
    for r, n in rec[0].items():
        if n > clock.get(r, 0):
            clock[r] = n
    for o, mark in rec[1].items():
        if o not in marks or mark[0] > marks[o][0]:
            marks[o] = mark


def _pairs(clock: dict[int, int]) -> list[list[int]]:
    return [[r, n] for r, n in sorted(clock.items())]


def _fingerprint(kinds: Kinds) -> Any:
    return sorted((k, e, repr(c)) for k, cells in kinds.items() for e, c in cells.items())


def _elements(value: Any, kind: bytes) -> list[tuple[bytes, Any]]:
    if kind == STRING:
        return [(b"", bytes(value))]
    if kind == HASH:
        return list(value.items())
    if kind == SET:
        return [(m, b"") for m in value]
    return list(value.dict.items())


def _keys_of(value: Any, kind: bytes) -> Any:
    if kind == STRING:
        return (b"",)
    if kind == ZSET:
        return value.dict
    return value


def _deltas(name: str, argv: list[bytes], kind: bytes) -> dict[bytes, Number]:
    f = _COUNTERS.get(name)
    if f is None or _COMMAND_KIND[name] != kind:
        return {}
    try:
        return f(argv)
    except (ValueError, IndexError, ReplyError):
        return {}  # the command refused its argument: it changed nothing


def _stored(kind: bytes, v: Any) -> Any:
    if kind == STRING:
        return bytes(v)
    if kind == SET:
        return None
    return v


def _value_arg(kind: bytes, v: Any) -> bytes:
    if kind == ZSET:
        return repr(float(v)).encode()
    if kind == SET:
        return b""
    return bytes(v)


def _value_in(kind: bytes, raw: bytes) -> Any:
    if kind == ZSET:
        return float(raw)
    if kind == SET:
        return None
    return raw


def _obs_args(observed: list[Observed]) -> list[bytes]:
    out: list[bytes] = []
    for origin, seq, total in observed:
        out += [b"%d" % origin, b"%d" % seq, num_bytes(total)]
    return out


def _read_obs(args: list[bytes]) -> list[Observed]:
    return [(int(args[i]), int(args[i + 1]), num_in(args[i + 2])) for i in range(0, len(args) - 2, 3)]


def _observations(kinds: Kinds) -> list[bytes]:
    """CDEL's arguments: for each element with increments, kind, element, how many
    observations, then the observations."""
    out: list[bytes] = []
    for kind, cells in kinds.items():
        for elem, cell in cells.items():
            observed = cell.observed()
            if observed:
                out += [kind, elem, b"%d" % len(observed), *_obs_args(observed)]
    return out


def _read_cdel(args: list[bytes]) -> dict[tuple[bytes, bytes], list[Observed]]:
    out: dict[tuple[bytes, bytes], list[Observed]] = {}
    i = 0
    while i + 2 < len(args):
        kind, elem, n = args[i], args[i + 1], int(args[i + 2])
        out[(kind, elem)] = _read_obs(args[i + 3:i + 3 + 3 * n])
        i += 3 + 3 * n
    return out


def _state_out(v: Any) -> Any:
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).hex()
    return v


def _state_in(v: Any) -> Any:
    if isinstance(v, str):
        return bytes.fromhex(v)
    return v


__all__ = ["HASH", "PRECEDENCE", "SET", "STRING", "ZSET", "Keyed", "Packed", "kind_of", "visible"]
