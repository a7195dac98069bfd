"""Active-Active lists: the ops a local list write makes, and a peer's list ops applied
(docs/active-active.md, "Lists").

Each list's elements carry positions every instance orders alike (storage/activelist.py).
After a handler ran, :meth:`Lists.collect` compares the list with its state: pushes and
pops at the ends are read off the lengths (the common case, O(changed)); other writes
(LINSERT, LSET, LREM, LTRIM, SORT ... STORE) are diffed element by element. Ops:

- ``LINS key position value``: an element inserted at its position;
- ``LREM key position [position ...]``: elements removed (only those, observed-remove);
- ``LSET key position ts value``: an element's value assigned (last write wins);
- ``LDEL key``: every element whose insert the deleter saw (DEL, a replacing write).

A list shows before strings, hashes, sets and sorted sets (after a stream or an
HyperLogLog), and a peer's push wakes clients blocked on the list here.
"""

from __future__ import annotations

import time
from difflib import SequenceMatcher
from typing import TYPE_CHECKING, Any

from rill.storage.activelist import ListState, between, decode_position, encode_position
from rill.storage.list import ListValue

from .keyed import kind_of

if TYPE_CHECKING:
    from .engine import ActiveActive

Op = list[bytes]

_LEFT_PUSH = frozenset({"lpush", "lpushx"})
_RIGHT_PUSH = frozenset({"rpush", "rpushx"})
_LEFT_POP = frozenset({"lpop", "blpop"})
_RIGHT_POP = frozenset({"rpop", "brpop"})
_MOVES = frozenset({"lmove", "blmove", "rpoplpush", "brpoplpush"})
_MPOPS = frozenset({"lmpop", "blmpop"})


def _move_ends(name: str, argv: list[bytes]) -> tuple[bool, bool]:
    """(pops from the left, pushes to the left) of LMOVE and its kin."""
    if name in ("rpoplpush", "brpoplpush"):
        return False, True
    return argv[3].lower() == b"left", argv[4].lower() == b"left"


def _mpop_left(name: str, argv: list[bytes]) -> bool:
    at = 2 if name == "blmpop" else 1  # numkeys: LMPOP numkeys ..., BLMPOP timeout numkeys ...
    try:
        numkeys = int(argv[at])
        return argv[at + 1 + numkeys].lower() == b"left"
    except (ValueError, IndexError):
        return True


class Lists:
    """The merge state of every list (see the module docstring)."""

    def __init__(self, engine: ActiveActive) -> None:
        self.engine = engine
        self.keys: dict[tuple[int, bytes], ListState] = {}
        self._made = (0, 0)  # (seq, elements inserted in it): the index part of new dots

    def has(self, db_id: int, key: bytes) -> bool:
        return (db_id, key) in self.keys

    # -- local writes ----------------------------------------------------------------

    def _dot(self) -> tuple[int, int, int]:
        engine = self.engine
        seq = engine.seq + 1
        made_seq, n = self._made
        if made_seq != seq:
            n = 0
        self._made = (seq, n + 1)
        return engine.region, seq, n

    def collect(self, db: Any, key: bytes, name: str, argv: list[bytes]) -> list[Op]:
        """The ops that bring ``key``'s list state to what its value holds now."""
        where = (db.id, key)
        now = db.data.get(key)
        st = self.keys.get(where)
        if type(now) is not ListValue:
            if not st:
                self.keys.pop(where, None)
                return []
            # Gone, or replaced by another type: what this instance saw goes.
            del self.keys[where]
            return [[b"LDEL", key]]
        if st is None:
            st = self.keys[where] = ListState()
        ops: list[Op] = []
        old = len(st)
        grown = len(now) - old
        if name in _LEFT_PUSH and grown > 0:
            for v in reversed([now[i] for i in range(grown)]):
                ops.append(self._insert(st, key, 0, v))
        elif name in _RIGHT_PUSH and grown > 0:
            for i in range(old, len(now)):
                ops.append(self._insert(st, key, len(st), now[i]))
        elif name in _LEFT_POP and grown < 0:
            ops.append(self._remove(st, key, range(0, -grown)))
        elif name in _RIGHT_POP and grown < 0:
            ops.append(self._remove(st, key, range(old + grown, old)))
        elif name in _MPOPS and grown < 0:
            gone = range(0, -grown) if _mpop_left(name, argv) else range(old + grown, old)
            ops.append(self._remove(st, key, gone))
        elif name in _MOVES and len(argv) > 2 and (key == argv[1] or key == argv[2]):
            ops.extend(self._move(st, key, now, name, argv))
        else:
            ops.extend(self._diff(st, key, now, name))
        if not st:
            del self.keys[where]
        return [op for op in ops if op]

    def _move(self, st: ListState, key: bytes, now: ListValue, name: str, argv: list[bytes]) -> list[Op]:
        src, dst = argv[1], argv[2]
        from_left, to_left = _move_ends(name, argv)
        ops: list[Op] = []
        if len(now) == len(st) and src != dst:
            return ops
        if key == src and (src == dst or len(now) < len(st)):
            ops.append(self._remove(st, key, range(0, 1) if from_left else range(len(st) - 1, len(st))))
        if key == dst and (src == dst or len(now) > len(st)):
            v = now[0] if to_left else now[len(now) - 1]
            ops.append(self._insert(st, key, 0 if to_left else len(st), v))
        return ops

    def _diff(self, st: ListState, key: bytes, now: ListValue, name: str) -> list[Op]:
        """Any other write: the elements removed, inserted, or (LSET) assigned."""
        new = list(now)
        ops: list[Op] = []
        matcher = SequenceMatcher(None, list(st.values), new, autojunk=False)
        # Right to left, so the indexes of what is still to do stay valid.
        for tag, i1, i2, j1, j2 in reversed(matcher.get_opcodes()):
            if tag == "equal":
                continue
            if tag == "replace" and name == "lset" and i2 - i1 == j2 - j1:
                ts = int(time.time() * 1000)
                for k in range(i2 - i1):
                    pos = st.positions[i1 + k]
                    st.assign(pos, ts, self.engine.region, new[j1 + k])
                    ops.append([b"LSET", key, encode_position(pos), b"%d" % ts, new[j1 + k]])
                continue
            if i2 > i1:
                ops.append(self._remove(st, key, range(i1, i2)))
            for k in range(j1, j2):
                ops.append(self._insert(st, key, i1 + (k - j1), new[k]))
        return ops

    def _insert(self, st: ListState, key: bytes, index: int, value: bytes) -> Op:
        left = st.positions[index - 1] if index > 0 else None
        right = st.positions[index] if index < len(st) else None
        pos = between(left, right, self._dot())
        st.insert(pos, value)
        return [b"LINS", key, encode_position(pos), value]

    def _remove(self, st: ListState, key: bytes, indexes: range) -> Op:
        gone = [st.positions[i] for i in indexes]
        for pos in gone:
            st.remove(pos)
        return [b"LREM", key, *(encode_position(p) for p in gone)] if gone else []

    def expired(self, db_id: int, key: bytes) -> Op | None:
        """The key's TTL passed (or it was evicted): a CDEL of what this instance saw."""
        if self.keys.pop((db_id, key), None) is None:
            return None
        return [b"LDEL", key]

    # -- peers' ops ------------------------------------------------------------------

    def apply(self, db: Any, seen: dict[int, int] | None, origin: int, op: Op) -> bytes | None:
        """Apply a peer's list op; returns the keyspace event (None: nothing changed).
        ``seen``, the effect's clock with its own dot, is read by LDEL only (the engine
        passes None with the other ops)."""
        name, key = op[0], op[1]
        where = (db.id, key)
        st = self.keys.get(where)
        value = db.data.get(key)
        if value is not None and kind_of(value) is not None:
            # A string, hash, set or sorted set shows (the list was empty here): a list
            # shows before them, so it replaces that value once it has an element.
            value = None
        shows = type(value) is ListValue or value is None
        if name == b"LINS":
            if st is None:
                st = self.keys[where] = ListState()
            i = st.insert(decode_position(op[2]), op[3])
            if i is None:
                return None
            if shows:
                if value is None:
                    self._show(db, key, st)
                else:
                    value.insert(i, op[3])
            return b"lpush" if i == 0 else b"rpush" if i == len(st) - 1 else b"linsert"
        if st is None:
            return None
        if name == b"LREM":
            changed = False
            for raw in op[2:]:
                i = st.remove(decode_position(raw))
                if i is not None:
                    changed = True
                    if shows and value is not None:
                        del value[i]
            event = b"lrem" if changed else None
        elif name == b"LSET":
            i = st.assign(decode_position(op[2]), int(op[3]), origin, op[4])
            if i is not None and shows and value is not None:
                value[i] = op[4]
            event = b"lset" if i is not None else None
        else:  # LDEL
            gone = st.seen_by(seen)
            for i in reversed(gone):
                st.remove(st.positions[i])
                if shows and value is not None:
                    del value[i]
            event = b"del" if gone else None
        if not st:
            del self.keys[where]
            if shows and value is not None:
                db.delete(key)
                self.engine.keyed.render_key(db, key)  # a hidden other kind shows again
        return event

    def replay_own(self, db: Any, seen: dict[int, int], origin: int, op: Op) -> None:
        """An own effect's list op read back from the AOF: its commands rebuilt the value,
        so the op goes to the state alone; the value is then made the state's (it is the
        same list, in the same order)."""
        name, key = op[0], op[1]
        where = (db.id, key)
        st = self.keys.get(where)
        if name == b"LINS":
            if st is None:
                st = self.keys[where] = ListState()
            st.insert(decode_position(op[2]), op[3])
        elif st is None:
            return
        elif name == b"LREM":
            for raw in op[2:]:
                st.remove(decode_position(raw))
        elif name == b"LSET":
            st.assign(decode_position(op[2]), int(op[3]), origin, op[4])
        else:
            for i in reversed(st.seen_by(seen)):
                st.remove(st.positions[i])
        if not st:
            del self.keys[where]
        elif type(db.data.get(key)) is ListValue:
            self._show(db, key, st)

    def _show(self, db: Any, key: bytes, st: ListState) -> None:
        db.set(key, ListValue(st.values), keep_ttl=True)
        self.engine._settle_ttl(db, key)

    def render_key(self, db: Any, key: bytes) -> None:
        """What showed before the list (a stream) went: the list shows, if it has elements."""
        st = self.keys.get((db.id, key))
        if st and key not in db.data:
            self._show(db, key, st)

    # -- full sync and persistence -----------------------------------------------------

    def merge(self, db: Any, theirs: dict[tuple[int, bytes], ListState], mine_vc: dict[int, int],
              their_vc: dict[int, int]) -> list[bytes]:
        changed = []
        for key in {k for (d, k) in self.keys if d == db.id} | {k for (d, k) in theirs if d == db.id}:
            where = (db.id, key)
            st = self.keys.get(where) or ListState()
            before = repr(st)
            st.merge(theirs.get(where) or ListState(), mine_vc, their_vc)
            if repr(st) == before:
                continue
            changed.append(key)
            value = db.data.get(key)
            if st:
                self.keys[where] = st
            else:
                self.keys.pop(where, None)
            if type(value) is ListValue or value is None or kind_of(value) is not None:
                # A list shows before a string, hash, set or sorted set the key showed
                # while it had no elements here.
                if st:
                    self._show(db, key, st)
                elif value is not None:
                    db.delete(key)
                    self.engine.keyed.render_key(db, key)
        return changed

    def export(self) -> list:
        return [[d, k.hex(), st.to_state()] for (d, k), st in self.keys.items()]

    def load(self, doc: list) -> None:
        self.keys = {(int(d), bytes.fromhex(k)): ListState.from_state(st) for d, k, st in doc}


OPS = frozenset({b"LINS", b"LREM", b"LSET", b"LDEL"})

__all__ = ["OPS", "Lists"]
