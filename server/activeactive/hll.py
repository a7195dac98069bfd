"""Active-Active HyperLogLogs: registers merge by maximum, a delete wins over a concurrent
add (docs/active-active.md, "HyperLogLog").

An HLL is a string holding a valid HLL (``is_hll_value``: the ``HYLL`` header and a payload
whose registers decode). :class:`Hlls` keeps, per (db, key), the HLL's *canonical* string:
its registers rendered as PFMERGE renders them into an empty key (sparse, registers set in
index order, promoted to dense as Redis promotes; dense when any write made it dense) with
the cached cardinality valid. Every instance renders the same registers to the same bytes,
whatever order its PFADDs came in, so keys converge byte for byte and PFCOUNT never finds a
stale cache (it writes nothing).

- **Ops.** ``HLLMERGE key regs [dense]``: raise the registers to ``regs`` (16384 bytes, one
  register each, or 3-byte entries: 2-byte big-endian index, value; 16384 is not a multiple
  of 3, so the length tells them apart), creating the key if needed; ``dense``: the key is
  dense from now on. ``HLLDEL key``: the HLL goes, and leaves a tombstone (the engine's, as a
  stream's DEL does) so that an ``HLLMERGE`` made without seeing it is dropped everywhere.
- **Local writes.** PFADD, PFMERGE and PFDEBUG raise registers: ``HLLMERGE`` of the ones that
  rose. Any other write that leaves an HLL at the key (SET, RENAME, SETRANGE ...) replaces
  it: ``HLLDEL`` then ``HLLMERGE`` of every register. A write that leaves no HLL where one
  was (DEL, SET of a non-HLL string, expiry) is ``HLLDEL``.
- **Types.** A stream shows before an HLL, an HLL before strings, hashes, sets and sorted
  sets (keyed.py, which treats an HLL value like a stream: it never renders over it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rill.storage import hll as fmt
from rill.storage.hll import is_hll_value
from rill.storage.stream import Stream

from .plain import rewrite

if TYPE_CHECKING:
    from rill.protocol.effects import Effect

    from .engine import ActiveActive

Op = list[bytes]

HLLMERGE, HLLDEL = b"HLLMERGE", b"HLLDEL"
OPS = frozenset({HLLMERGE, HLLDEL})
DENSE_FLAG = b"dense"
# Commands that only raise registers: their ops carry the registers that rose.
_RAISING = frozenset({"pfadd", "pfmerge", "pfcount", "pfdebug"})
_CHANGED = bytes([0] + [1] * 255)  # a byte of a XOR: 1 where the registers differ
_ZEROS = bytes(fmt.REGISTERS)


def render(raw: bytes, dense: bool, max_bytes: int) -> bytes:
    """The canonical string of registers ``raw``: dense, or sparse as PFMERGE into an empty
    key writes them (dense if they do not fit); the cached cardinality valid."""
    value = None if dense else fmt.sparse_of(raw, max_bytes)
    if value is None:
        value = bytearray(b"HYLL\x00" + bytes(fmt.HEADER - 5)) + fmt.raw_to_dense(raw)
    fmt.store_count(value, fmt.estimate(raw))
    return bytes(value)


def regs_arg(old: bytes, new: bytes) -> bytes:
    """HLLMERGE's registers: those of ``new`` that differ from ``old``, as 3-byte entries,
    or all of ``new`` when that is shorter."""
    diff = (int.from_bytes(old, "little") ^ int.from_bytes(new, "little")).to_bytes(fmt.REGISTERS, "little")
    changed = fmt.REGISTERS - diff.count(0)
    if 3 * changed >= fmt.REGISTERS:
        return new
    out = bytearray()
    find = diff.translate(_CHANGED).find
    i = find(1)
    while i >= 0:
        out += bytes((i >> 8, i & 0xFF, new[i]))
        i = find(1, i + 1)
    return bytes(out)


def _dense_changes(old: bytes, now: bytes | bytearray, raw: bytes) -> bytes:
    """HLLMERGE's registers for a dense HLL raised in place from ``old`` to ``now`` (whose
    registers are ``raw``): those covering the payload bytes that changed."""
    diff = (int.from_bytes(old, "little") ^ int.from_bytes(now, "little")).to_bytes(len(old), "little")
    find = diff.translate(_CHANGED).find
    regs = set()
    b = find(1, fmt.HEADER)
    while b >= 0:
        bit = (b - fmt.HEADER) * 8
        regs.add(bit // 6)
        regs.add(min((bit + 7) // 6, fmt.REGISTERS - 1))
        b = find(1, b + 1)
    if 3 * len(regs) >= fmt.REGISTERS:
        return raw
    out = bytearray()
    for i in sorted(regs):
        v = raw[i]
        if v != fmt._dense_get(old, i):
            out += bytes((i >> 8, i & 0xFF, v))
    return bytes(out)


def raise_by(raw: bytes, arg: bytes) -> bytes:
    """``raw`` with each register raised to what HLLMERGE's ``arg`` holds for it."""
    if len(arg) == fmt.REGISTERS:
        return fmt.raw_max(raw, arg)
    if len(arg) % 3:
        raise ValueError("malformed HLLMERGE registers")
    out = bytearray(raw)
    for i in range(0, len(arg), 3):
        index = arg[i] << 8 | arg[i + 1]
        if arg[i + 2] > out[index]:
            out[index] = arg[i + 2]
    return bytes(out)


def _put(db: Any, key: bytes, value: bytes) -> None:
    """The keyspace holds the state's own immutable bytes (an HLL is not copied); OBJECT
    ENCODING says raw, as for the string PFADD makes in Redis. A write copies it first
    (the PF* commands' dbUnshareStringValue)."""
    db.data[key] = value
    db.unshared[key] = b"raw"


def _is_dense(value: bytes | bytearray) -> bool:
    return value[4] == fmt.DENSE


class Hlls:
    """Every HLL's canonical string, visible or hidden under a stream (module docstring)."""

    def __init__(self, engine: ActiveActive) -> None:
        self.engine = engine
        self.values: dict[tuple[int, bytes], bytes] = {}
        # HLLs a write made dense (PFMERGE of a dense source, PFDEBUG TODENSE, SET of a dense
        # string): dense whatever their registers. The others are dense only when their
        # registers do not fit the sparse encoding, which depends on the registers alone.
        self.dense: set[tuple[int, bytes]] = set()
        # For PFADDs to one dense HLL in a row (_pfadd_dense): (where, its canonical string,
        # the registers' histogram, a lower bound of their runs). Valid while that string is
        # the canonical one (the same object).
        self._dense_cache: tuple[tuple[int, bytes], bytes, list[int], int] | None = None

    def has(self, db_id: int, key: bytes) -> bool:
        return (db_id, key) in self.values

    def _max_bytes(self) -> int:
        return self.engine.server.config.int("hll-sparse-max-bytes")

    # -- local writes ----------------------------------------------------------------

    def collect(self, db: Any, key: bytes, name: str, now: Any, argv: list[bytes] | None = None) -> list[Op]:
        """The ops that bring ``key``'s HLL to what the keyspace holds after command
        ``name`` (``argv``) ran, applied to the state as they are made; the key then holds
        the canonical string."""
        where = (db.id, key)
        old = self.values.get(where)
        if (name == "pfadd" and argv is not None and old is not None and type(now) is bytearray
                and _is_dense(old) and _is_dense(now)):
            ops = self._pfadd_dense(db, key, where, old, now, argv)
            if ops is not None:
                return ops
        if now is None or not is_hll_value(now):
            if old is None:
                return []
            del self.values[where]
            self.dense.discard(where)
            return [[HLLDEL, key]]
        if old is not None and now == old:
            return []  # nothing changed (PFCOUNT, a PFADD of nothing new)
        raw = fmt.registers(now)
        ops: list[Op] = []
        max_bytes = self._max_bytes()
        if old is not None and name in _RAISING and _is_dense(old) and _is_dense(now) and (
                where in self.dense or fmt.sparse_of(raw, max_bytes) is None):
            # A dense HLL raised in place (the usual PFADD of a big HLL): its registers are
            # the canonical payload already; only the changed bytes are compared.
            op = [HLLMERGE, key, _dense_changes(old, now, raw)]
            if not op[2]:
                _put(db, key, old)  # the same registers
                return []
            if where in self.dense:
                op.append(DENSE_FLAG)
            value = bytearray(now)
            value[4:16] = bytes(12)
            fmt.store_count(value, fmt.estimate(raw))
            value = self.values[where] = bytes(value)
            _put(db, key, value)
            if name in _RAISING:
                self.engine.server.rewrite_propagation([b"SET", key, value, b"KEEPTTL"])
            return [op]
        if old is not None and name in _RAISING:
            old_raw = fmt.registers(old)
            merged = fmt.raw_max(old_raw, raw)
            was_dense = where in self.dense
        else:
            if old is not None:
                ops.append([HLLDEL, key])
                self.dense.discard(where)
            old_raw = _ZEROS
            merged = raw
            was_dense = False
        value = render(merged, was_dense, max_bytes)
        dense = was_dense
        if not dense and _is_dense(now) and not _is_dense(value) and name != "pfadd":
            # Made dense by the write itself, not by its registers (a PFADD promotes by
            # the order it set them in, which the canonical form does not follow).
            dense = True
            value = render(merged, True, max_bytes)
        if old is not None and value == old and ops == []:
            _put(db, key, old)  # only the encoding of the same registers moved
            return []
        op = [HLLMERGE, key, regs_arg(old_raw, merged)]
        if dense:
            op.append(DENSE_FLAG)
            self.dense.add(where)
        ops.append(op)
        self.values[where] = value
        _put(db, key, value)
        if name in _RAISING:
            # The AOF and replicas get the canonical string, not a PFADD that would make
            # Redis's own (order-dependent) bytes for the same registers.
            self.engine.server.rewrite_propagation([b"SET", key, value, b"KEEPTTL"])
        return ops

    def _pfadd_dense(self, db: Any, key: bytes, where: tuple[int, bytes], old: bytes, now: bytearray,
                     argv: list[bytes]) -> list[Op] | None:
        """collect() for a PFADD to a dense HLL that stays dense: the registers it raised
        are worked out from its own elements (their hash patterns against the old
        registers), the cardinality from a histogram kept up to date, where collect()
        decoded, diffed, re-counted and re-checked the sparse size of all 16384 registers.
        The same ops, canonical string and propagation; None when a shortcut cannot say
        (the registers might fit sparse again, too many changed, or the result is not
        PFADD's own), and collect() works it out."""
        raised: dict[int, int] = {}
        for element in argv[2:]:
            index, count = fmt.pattern(element)
            cur = raised.get(index)
            if cur is None:
                cur = fmt._dense_get(old, index)
            if count > cur:
                raised[index] = count
        k = len(raised)
        if not k:
            return [] if now == old else None
        if 12 * k >= fmt.REGISTERS:
            return None  # collect() may send every register; let it decide
        cache = self._dense_cache
        if cache is None or cache[0] != where or cache[1] is not old:
            old_raw = fmt.registers(old)
            cache = (where, old, fmt.histogram(old_raw), fmt.runs(old_raw))
        _where, _old, hist, runs = cache
        runs -= 2 * k
        if where not in self.dense and fmt.HEADER + runs <= self._max_bytes():
            self._dense_cache = cache
            return None  # the registers might fit the sparse form again
        hist = hist.copy()
        value = bytearray(old)
        regs = bytearray()
        for index in sorted(raised):
            count = raised[index]
            hist[fmt._dense_get(old, index)] -= 1
            hist[count] += 1
            fmt._dense_put(value, index, count)
            regs += bytes((index >> 8, index & 0xFF, count))
        if value[fmt.HEADER:] != now[fmt.HEADER:]:
            return None  # not what PFADD made: collect() compares
        fmt.store_count(value, fmt.estimate_histogram(hist))
        value = self.values[where] = bytes(value)
        self._dense_cache = (where, value, hist, runs)
        _put(db, key, value)
        self.engine.server.rewrite_propagation([b"SET", key, value, b"KEEPTTL"])
        op = [HLLMERGE, key, bytes(regs)]
        if where in self.dense:
            op.append(DENSE_FLAG)
        return [op]

    def expired(self, db_id: int, key: bytes) -> Op | None:
        """The key's TTL passed here: its HLL goes everywhere (HLLDEL)."""
        self.dense.discard((db_id, key))
        if self.values.pop((db_id, key), None) is None:
            return None
        return [HLLDEL, key]

    # -- peers' ops ------------------------------------------------------------------

    def deleted(self, db_id: int, key: bytes, e: Effect) -> bool:
        """Delete-wins: a key delete (HLLDEL, or a stream's DEL) that effect ``e`` had not
        seen; its ops are dropped. An earlier op of ``e`` itself counts as seen."""
        for origin, seq, group in self.engine.tombstones.get((db_id, key), ()):
            if group is None and e.vc.get(origin, 0) < seq and not (origin == e.origin and seq <= e.seq):
                return True
        return False

    def apply(self, db: Any, e: Effect, op: Op, own: bool = False) -> bytes | None:
        """Apply an HLL op of effect ``e`` and show the result; the keyspace event to fire.
        ``own``: one of our effects replayed from the AOF, whose commands already made the
        key (only the state and the canonical bytes are redone)."""
        name, key = op[0], op[1]
        where = (db.id, key)
        if name == HLLDEL:
            self.dense.discard(where)
            if self.values.pop(where, None) is None:
                return None
            if not own:
                self.show(db, key)
            return b"del"
        if not own and self.deleted(db.id, key, e):
            return None
        old = self.values.get(where)
        old_raw = fmt.registers(old) if old is not None else _ZEROS
        merged = raise_by(old_raw, op[2])
        was_dense = where in self.dense
        dense = was_dense or DENSE_FLAG in op[3:]
        if old is not None and merged == old_raw and dense == was_dense:
            return None
        if dense:
            self.dense.add(where)
        value = self.values[where] = render(merged, dense, self._max_bytes())
        if own:
            if is_hll_value(db.data.get(key)):
                _put(db, key, value)
        else:
            self.show(db, key)
        return b"pfadd"

    def dropped(self, db: Any, key: bytes) -> None:
        """A stream's DEL was applied: every HLL op applied here so far was before it or
        concurrent with it (delete-wins), so a hidden HLL goes too."""
        self.dense.discard((db.id, key))
        if self.values.pop((db.id, key), None) is not None:
            self.show(db, key)

    def show(self, db: Any, key: bytes) -> None:
        """Bring the keyspace to what the key shows: a stream, else the HLL, else what
        strings, hashes, sets and sorted sets hold (keyed.py)."""
        cur = db.data.get(key)
        if isinstance(cur, Stream):
            return
        value = self.values.get((db.id, key))
        if value is None:
            if cur is not None and is_hll_value(cur):
                db.delete(key)
            self.engine.lists.render_key(db, key)  # a list shows before the kinds below
            self.engine.keyed.render_key(db, key)
            return
        if cur is not None and cur == value:
            return
        db.set(key, value, keep_ttl=True)
        db.unshared[key] = b"raw"
        if cur is None:
            self.engine._settle_ttl(db, key)  # a TTL set while it was away holds again

    # -- full sync -------------------------------------------------------------------

    def merge(self, db: Any, theirs: dict[tuple[int, bytes], bytes], their_dense: set[tuple[int, bytes]],
              their_stones: dict[tuple[int, bytes], list], mine_vc: dict[int, int],
              their_vc: dict[int, int]) -> list[bytes]:
        """Merge a peer's HLLs of ``db`` (a full sync, state.py). A side's HLL counts unless
        a delete on either side (a tombstone) is one that side had not applied: then all of
        its registers were added before or concurrently with that delete, which wins. The
        registers that count merge by maximum. Returns the keys that changed."""
        changed = []
        stones_here = self.engine.tombstones
        wanted = {k for (d, k) in self.values if d == db.id} | {k for (d, k) in theirs if d == db.id}
        for key in wanted:
            where = (db.id, key)
            stones = [(o, s) for o, s, g in (*stones_here.get(where, ()), *their_stones.get(where, ()))
                      if g is None]
            mine = self.values.get(where)
            other = theirs.get(where)
            sides = [(v, where in flags) for v, vc, flags in ((mine, mine_vc, self.dense),
                                                               (other, their_vc, their_dense))
                     if v is not None and all(vc.get(o, 0) >= s for o, s in stones)]
            dense = any(d for _v, d in sides)
            if not sides:
                merged = None
            elif len(sides) == 1:
                merged = sides[0][0]
            else:
                raw = fmt.raw_max(fmt.registers(sides[0][0]), fmt.registers(sides[1][0]))
                merged = render(raw, dense, self._max_bytes())
            if dense:
                self.dense.add(where)
            else:
                self.dense.discard(where)
            if merged == mine:
                if mine is not None:
                    self.show(db, key)  # a stream the merge removed may have hidden it
                continue
            if merged is None:
                del self.values[where]
            else:
                self.values[where] = merged
            self.show(db, key)
            changed.append(key)
        return changed

    # -- persistence -----------------------------------------------------------------

    def export(self) -> list:
        dense = self.dense
        return [[db_id, key.hex(), value.hex(), (db_id, key) in dense]
                for (db_id, key), value in self.values.items()]

    def load(self, doc: list) -> None:
        self.values = {(int(db_id), bytes.fromhex(key)): bytes.fromhex(v) for db_id, key, v, _d in doc}
        self.dense = {(int(db_id), bytes.fromhex(key)) for db_id, key, _v, d in doc if d}


def plain_ops(db: Any, key: bytes, before: Any) -> list[Op]:
    """Commands for ``db``'s plain replicas after an HLL op was applied to ``key``
    (``before``: what the key held)."""
    value = db.data.get(key)
    if value is None:
        return [[b"DEL", key]] if before is not None else []
    if value is before or isinstance(value, Stream):
        return []  # the change is hidden under a stream, or there was none
    if before is not None and is_hll_value(before) and is_hll_value(value):
        return [[b"SET", key, bytes(value), b"KEEPTTL"]]
    return rewrite(db, key, value)


__all__ = ["HLLDEL", "HLLMERGE", "OPS", "Hlls", "is_hll_value", "plain_ops", "render"]
