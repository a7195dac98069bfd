"""The Active-Active stream (docs/active-active.md, seed 004): one append-only sub-stream
per region, merged by ID on read, and the CRDT ops that make every region converge.

Each region appends only to its own sub-stream (an ordinary :class:`~.stream.Stream`:
rax + listpack nodes); any region may delete from any. Reads merge the sub-streams by
``(id, region)``, so duplicate IDs (possible in the semi-strict and liberal modes) are all
kept and come back in region order. When only one sub-stream holds entries -- the
single-writer case -- reads go straight to it, fast encoder included.

Metadata (``length``, ``last_id``, ``first_id``, ``entries_added``,
``max_deleted_entry_id``) stays current as plain attributes after every change, so the
base class's group code (claims, lag, XINFO, XPENDING) works unchanged on the merged view.

Local mutations record ops (without the key; the engine inserts it) in ``journal``;
:meth:`drain` hands them over, plus an ``XACK`` op for each group whose acknowledged
prefix grew. :meth:`apply` runs a remote op and records nothing. The ops:

- ``XADD region id f v ...``: append to sub-stream ``region``.
- ``XDEL region id [region id ...]``: delete those entries.
- ``XTRIM region bound [...]``: delete sub-stream ``region``'s entries with ID <= bound.
  A local trim never names a bound above the sub-stream's last ID, so an entry added
  concurrently elsewhere survives (observed-remove).
- ``DEL region bound [...]``: XTRIM to those bounds, and every group goes (delete-wins).
- ``GCREATE group id entries-read`` / ``GDESTROY group``.
- ``XACK group region bound [...]``: the group's acknowledged prefix per sub-stream.
- ``SETID id entries-added max-deleted-id``: each value becomes the larger of the two.

Trimming with ``~`` on a stream whose entries sit in one sub-stream trims whole nodes as
Redis does; with several sub-streams holding entries it trims exactly (LIMIT still caps
the count): the merged view has no nodes of its own to trim whole.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from typing import ClassVar

from .fastread import EntryEncoder
from .groups import REF_ACKED, REF_DEL, SCG_INVALID_ENTRIES_READ, Consumer, ConsumerGroup
from .ids import ID_MAX, MASK64
from .stream import Stream, StreamIDError, StreamSizeError

ID_MODES = ("strict", "semi-strict", "liberal")

STRICT_FULL_ID = "Active-Active strict XADD ID mode accepts only '*' or a milliseconds-only ID"
SETID_TOO_SMALL = "The ID specified in XSETID is smaller than the target stream top item"


def _fmt(sid: int) -> bytes:
    return b"%d-%d" % (sid >> 64, sid & MASK64)


def _probe() -> None:
    """Only its type matters: see _COMPILED."""


# Whether this module runs compiled (as protocol/parser.py tells it): a peer's op reads
# its numbers in place then (active.pxd), where the interpreter's int() is faster.
_COMPILED = type(_probe).__name__ != "function"


def _dec(p: bytes, start: int, end: int) -> int:
    """The plain decimal ``p[start:end]`` (1 to 18 digits, so no C overflow) as a number,
    else -1 (the caller then asks int(), which agrees wherever this answers)."""
    if end <= start or end - start > 18:
        return -1
    v = 0
    while start < end:
        c = p[start]
        if c < 48 or c > 57:
            return -1
        v = v * 10 + (c - 48)
        start += 1
    return v


def _num(b: bytes) -> int:
    """``int(b)`` for a number in a peer's op (a sub-stream's region)."""
    if _COMPILED and type(b) is bytes:
        v = _dec(b, 0, len(b))
        if v >= 0:
            return v
    return int(b)


def _pid(b: bytes) -> int:
    """``b"ms-seq"`` (an op's ID) as an int; ValueError when malformed. Compiled, an ID
    of plain decimals is read in place: partition and two int() calls took 3.1k
    instructions of every entry a peer's XADD inserts."""
    if _COMPILED and type(b) is bytes:
        p = b
        n = len(b)
        i = 0
        while i < n and p[i] != 45:  # '-'
            i += 1
        if i < n:
            a = _dec(p, 0, i)
            z = _dec(p, i + 1, n)
            if a >= 0 and z >= 0:
                hi = a
                return hi << 64 | z
    ms, dash, seq = b.partition(b"-")
    if not dash:
        raise ValueError(f"bad stream ID in op: {b!r}")
    return int(ms) << 64 | int(seq)


# The stream whose adds the engine records itself while it runs an own XADD (engine.py's
# _xadd_own writes the op from the command's argv and reply): _add_own journals nothing
# for it. A module variable, set and cleared around the handler by ``own_add``, where the
# stream's ``journal`` slot was set to None and back: compiled, a C store and a pointer
# test in place of two slot writes and two slot reads (each a generic attribute lookup
# through the class's bases). Whole-writer callgrind, XADD with two peers: see
# docs/hot-core.md (active.py's row).
_own_add = None


def own_add(s: object) -> None:
    """Make ``s`` the stream whose adds journal nothing (None: no stream)."""
    global _own_add
    _own_add = s


def _add_own(s: ActiveStream, fv: list[bytes], sid: int | None, now_ms: int) -> int:
    """ActiveStream.add, once per local XADD at an Active-Active writer: a module function
    so that active.pxd can type it while the class stays an ordinary one. Compiled, the
    stream's core fields are C reads and writes (``core``), the sub-stream's append is a
    C call, and ``XADD *``'s next ID is worked out on the halves of the last ID that the
    previous add kept with it (stream.pxd's ``_l_id``, ``_l_ms``, ``_l_seq``) as C
    integers, as Stream.add does: no 128-bit shift, mask or compare. The journal's ID is
    written from the halves as digits (fastread's ``_id_bytes``). In-process callgrind,
    ActiveStream.add alone: see docs/hot-core.md (active.py's row)."""
    core = s
    last = core.last_id
    region = s.region
    halves = False  # the new ID's halves are in nms and ns (compiled, XADD *)
    nms = ns = 0
    if _COMPILED and sid is None and last is core._l_id and _fits_u64(now_ms):  # noqa: F821 (active.pxd)
        # next_id(now_ms) on the halves: the region's sequence form (n * 256 + region) in
        # the last ID's ms, or ms_now-region once the clock passed it. Above _SEQ_ROOM the
        # rare overflow cases are next_id's (below). Either way the ID is above the last.
        lms = core._l_ms
        ls = core._l_seq
        r = region
        nm = now_ms
        halves = True
        if nm > lms:
            hi = now_ms
            sid = hi << 64 | region
            nms = nm
            ns = r
        elif ls < r:
            sid = last + (r - ls)  # the same ms: the last ID plus the sequence's step
            nms = lms
            ns = r
        elif ls <= _SEQ_ROOM:
            ns = ((ls - r) // 256 + 1) * 256 + r
            sid = last + (ns - ls)
            nms = lms
        else:
            halves = False
            sid = s.next_id(now_ms)
            if sid <= last:
                raise StreamIDError(
                    "The ID specified in XADD is equal or smaller than the target stream top item"
                )
    else:
        if sid is None:
            # next_id(now_ms), inlined (its rare overflow cases left to it).
            lm = last >> 64
            r = region
            if now_ms > lm:
                sid = now_ms << 64 | r
            else:
                ls = last & MASK64
                if ls < r:
                    sid = lm << 64 | r
                elif ls <= _SEQ_ROOM:
                    sid = lm << 64 | (((ls - r) // 256 + 1) * 256 + r)
                else:
                    sid = s.next_id(now_ms)
        if sid <= last:
            raise StreamIDError(
                "The ID specified in XADD is equal or smaller than the target stream top item"
            )
    subs = s.subs
    sub = subs.get(region)
    if sub is None:
        sub = s._sub(region)
    if halves and sub._l_id is sub.last_id and (nms > sub._l_ms or (nms == sub._l_ms and ns > sub._l_seq)):
        # Above the sub-stream's last ID (its halves, as its last add kept them): appended
        # with the halves as they are (stream.py's _append), not split from the 128-bit ID
        # again and compared as one by add().
        sub._append(fv, sid, nms, ns)
    else:
        sub.add(fv, sid)
    core.length += 1
    core.entries_added += 1
    core.last_id = sid
    if _COMPILED and sub._l_id is sid:
        # The ID's halves as the sub-stream's add kept them, kept for the merged view too
        # (stream.pxd's _l_id): XADD's reply then formats them as C integers, and the next
        # add starts from them.
        core._l_id = sid
        core._l_ms = sub._l_ms
        core._l_seq = sub._l_seq
    if core.length == 1:
        core.first_id = sid
    if s is _own_add:
        return sid  # the caller records the op itself (the engine's XADD from its argv)
    journal = s.journal
    if _COMPILED:
        idb = _id_bytes(sid >> 64, sid & MASK64)  # noqa: F821 (see _COMPILED)
    else:
        idb = b"%d-%d" % (sid >> 64, sid & MASK64)
    op = [b"XADD", s._rb, idb]
    op += fv
    journal.append(op)
    return sid


def _insert_op(s: ActiveStream, op: list[bytes]) -> None:
    """ActiveStream.insert_op, once per entry a peer sends: the usual case, an entry above
    its sub-stream's last ID, appended with the cores' fields as C reads and writes (what
    _insert does for it); anything else (no such sub-stream yet, or an entry RENAME moved
    below its sub-stream's last ID) goes to _insert."""
    r = _num(op[2])
    sid = _pid(op[3])
    fv = op[4:]
    sub = s.subs.get(r)
    if sub is None or sid <= sub.last_id:
        s._insert(r, sid, fv)
        return
    core = s
    sub.add(fv, sid)
    core.entries_added += 1
    if not core.length or sid < core.first_id:
        core.first_id = sid
    core.length += 1
    if sid > core.last_id:
        core.last_id = sid


# The largest sequence half whose next one in a region's form (n * 256 + region) is
# worked out without leaving 64 bits; above it, next_id decides (the next ms, or none).
_SEQ_ROOM = MASK64 - 512


def _tagged(it: Iterable[tuple[int, list[bytes]]], r: int) -> Iterator[tuple[int, int, list[bytes]]]:
    for sid, fv in it:
        yield sid, r, fv


def _key(e: tuple[int, int, list[bytes]]) -> tuple[int, int]:
    return e[0], e[1]


def _trim_to(sub: Stream, bound: int) -> int:
    """Remove ``sub``'s entries with ID <= ``bound`` exactly; how many went."""
    if bound >= ID_MAX:
        return sub.trim_maxlen(0)
    return sub.trim_minid(bound + 1)


class _GroupState:
    """A group's local delivery state: the cursor per sub-stream (the last ID delivered
    from it; ``base`` for a sub-stream not in ``cur``), the acknowledged prefix per
    sub-stream already announced or learnt (same shape), the group last_id the cursors
    were last synced with (a change made elsewhere, XGROUP SETID, resets them), and the
    fingerprint of the last prefix computation.

    The RDB encoding (persistence/rdb.py) and the full-sync merge (server/activeactive/
    state.py) save and rebuild ``base``, ``cur``, ``abase``, ``acked`` and ``seen`` through
    ``ActiveStream._gs`` and this constructor: keep those names and the signature."""

    __slots__ = ("base", "cur", "abase", "acked", "seen", "fp", "ver")

    def __init__(self, base: int, cur: dict[int, int], seen: int) -> None:
        self.base = base
        self.cur = cur
        self.abase = base
        self.acked = dict(cur)
        self.seen = seen
        self.fp: tuple | None = None
        self.ver = 0

    def cursor(self, r: int) -> int:
        return self.cur.get(r, self.base)

    def acked_to(self, r: int) -> int:
        return self.acked.get(r, self.abase)

    def copy(self) -> _GroupState:
        st = _GroupState(self.base, dict(self.cur), self.seen)
        st.abase = self.abase
        st.acked = dict(self.acked)
        return st


class ActiveStream(Stream):
    """A stream of an Active-Active database: sub-streams per region merged by ID.

    ``region`` is this instance's region (local XADDs go to ``subs[region]``); ``id_mode``
    the server's ``active-active-xadd-id-mode`` (class-wide, like the node limits).
    ``group_vc`` holds, per group, the clock of the effect that created it (the engine's,
    through :meth:`set_group_clock`), for delete-wins decisions.
    """

    id_mode: ClassVar[str] = "strict"
    cursor_reads: ClassVar[bool] = True

    __slots__ = ("region", "subs", "_order", "_rb", "journal", "_gs", "group_vc")

    def __init__(self, region: int) -> None:
        super().__init__()
        if not 1 <= region <= 255:
            raise ValueError("region must be 1..255")
        self.region = region
        self._rb = b"%d" % region
        self.subs: dict[int, Stream] = {}
        # (region, sub) in region order: the merge's tie order.
        self._order: list[tuple[int, Stream]] = []
        # The ops of local mutations (add() journals none while the engine records an
        # own XADD's op itself: see own_add).
        self.journal: list[list[bytes]] = []
        self._gs: dict[bytes, _GroupState] = {}
        self.group_vc: dict[bytes, dict[int, int]] = {}

    def __repr__(self) -> str:
        return (
            f"ActiveStream(region={self.region}, length={self.length}, "
            f"subs={[r for r, _s in self._order]}, last_id={_fmt(self.last_id).decode()})"
        )

    # ---------------------------------------------------------------- sub-streams, metadata

    def _sub(self, r: int) -> Stream:
        sub = self.subs.get(r)
        if sub is None:
            sub = self.subs[r] = Stream()
            self._order = sorted(self.subs.items())
        return sub

    def sub_streams(self) -> list[tuple[int, Stream]]:
        """``(region, sub-stream)`` pairs in region order (persistence, accounting)."""
        return list(self._order)

    def _live(self) -> list[tuple[int, Stream]]:
        return [(r, s) for r, s in self._order if s.length]

    def _span(self, start: int, end: int) -> list[tuple[int, Stream]]:
        """The sub-streams that may hold entries in [start, end]: a read that finds one
        (a tail read where one region wrote lately) goes straight to it."""
        return [
            (r, s) for r, s in self._order if s.length and s.first_id <= end and s.last_id >= start
        ]

    def _sync_meta(self) -> None:
        """Recompute the merged metadata from the sub-streams (after deletes and remote ops).
        last_id and max_deleted_entry_id never go back."""
        n = 0
        first = 0
        last = self.last_id
        mdel = self.max_deleted_entry_id
        for _r, sub in self._order:
            if sub.length:
                n += sub.length
                f = sub.first_id
                if not first or f < first:
                    first = f
            if sub.last_id > last:
                last = sub.last_id
            if sub.max_deleted_entry_id > mdel:
                mdel = sub.max_deleted_entry_id
        self.length = n
        self.first_id = first
        self.last_id = last
        self.max_deleted_entry_id = mdel

    # ---------------------------------------------------------------------------- IDs

    def _seq_after(self, seq: int) -> int:
        """The smallest ``n * 256 + region`` above ``seq`` (may exceed 64 bits)."""
        r = self.region
        if seq < r:
            return r
        return ((seq - r) // 256 + 1) * 256 + r

    def next_id(self, ms_now: int) -> int:
        """``XADD *``: ``ms_now-region`` when the clock passed the last ID's ms, else the
        next sequence of this region's form in the last ID's ms (the next ms when that
        overflows); 0 when the IDs are exhausted, which :meth:`add` rejects."""
        last = self.last_id
        lm = last >> 64
        if ms_now > lm:
            return ms_now << 64 | self.region
        seq = self._seq_after(last & MASK64)
        if seq <= MASK64:
            return lm << 64 | seq
        if lm < MASK64:
            return (lm + 1) << 64 | self.region
        return 0

    def auto_seq_id(self, ms: int) -> int | None:
        """``XADD ms-*`` (and a milliseconds-only ID outside the liberal mode): the region's
        sequence form, above the last ID when ``ms`` is its ms; None on overflow."""
        last = self.last_id
        if ms == last >> 64:
            seq = self._seq_after(last & MASK64)
            return ms << 64 | seq if seq <= MASK64 else None
        return ms << 64 | self.region

    def explicit_id(self, sid: int, ms_only: bool = False) -> int:
        """The ID an XADD with a user's ID uses, by ``id_mode``. A full ``ms-seq`` is
        refused in strict mode (StreamIDError with the doc's text), kept as given otherwise;
        a milliseconds-only ID gets sequence 0 in liberal mode, else the region's sequence
        (StreamSizeError when that overflows)."""
        if ms_only:
            if self.id_mode == "liberal":
                return sid
            auto = self.auto_seq_id(sid >> 64)
            if auto is None:
                raise StreamSizeError("Elements are too large to be stored")
            return auto
        if self.id_mode == "strict":
            raise StreamIDError(STRICT_FULL_ID)
        return sid

    # ---------------------------------------------------------------------------- append

    def add(self, fields_values: list[bytes], sid: int | None = None, now_ms: int = 0) -> int:
        """Append to this region's sub-stream (see :meth:`Stream.add`); journals ``XADD``.
        The body is the module function ``_add_own``, which active.pxd types."""
        return _add_own(self, fields_values if type(fields_values) is list else list(fields_values), sid, now_ms)

    def _insert(self, r: int, sid: int, fv: list[bytes]) -> None:
        """A remote XADD into sub-stream ``r``: appended, or (an entry moved by RENAME,
        below the sub-stream's last ID) the sub-stream is rebuilt with it in place. An
        entry already there is left alone."""
        sub = self.subs.get(r)
        if sub is None:
            sub = self._sub(r)
        if sid > sub.last_id:
            # Appended (the usual case): the merged metadata follows without a walk of
            # every sub-stream (what _sync_meta would find).
            sub.add(fv, sid)
            self.entries_added += 1
            if not self.length or sid < self.first_id:
                self.first_id = sid
            self.length += 1
            if sid > self.last_id:
                self.last_id = sid
            return
        if sub.exists(sid):
            return
        else:
            ents = list(sub.iter_range())
            ents.append((sid, fv))
            ents.sort(key=lambda e: e[0])
            new = Stream()
            for esid, efv in ents:
                new.add(efv, esid)
            new.last_id = sub.last_id
            new.entries_added = sub.entries_added + 1
            new.max_deleted_entry_id = sub.max_deleted_entry_id
            new.idmp = sub.idmp
            self.subs[r] = new
            self._order = sorted(self.subs.items())
        self.entries_added += 1
        self._sync_meta()

    # ---------------------------------------------------------------------------- reading

    def iter_range(
        self, start: int = 0, end: int = ID_MAX, rev: bool = False, tombstones: bool = False
    ) -> Iterator[tuple[int, list[bytes]]]:
        """Merged :meth:`Stream.iter_range` (tombstones are a node detail, left out here
        unless only one sub-stream holds entries)."""
        live = self._span(start, end)
        if len(live) <= 1:
            if live:
                yield from live[0][1].iter_range(start, end, rev, tombstones)
            return
        its = [_tagged(sub.iter_range(start, end, rev), r) for r, sub in live]
        for sid, _r, fv in heapq.merge(*its, key=_key, reverse=rev):
            yield sid, fv

    def range(
        self, start: int = 0, end: int = ID_MAX, count: int = 0, rev: bool = False,
        admit: bool = True,
    ) -> list[tuple[int, list[bytes]]]:
        """Merged :meth:`Stream.range`: ascending by (ID, region), or its reverse."""
        live = self._span(start, end)
        if len(live) <= 1:
            return live[0][1].range(start, end, count, rev, admit) if live else []
        parts = [_tagged(sub.range(start, end, count, rev, admit), r) for r, sub in live]
        merged = heapq.merge(*parts, key=_key, reverse=rev)
        out: list[tuple[int, list[bytes]]] = []
        for sid, _r, fv in merged:
            out.append((sid, fv))
            if count and len(out) >= count:
                break
        return out

    def range_segments(
        self, start: int = 0, end: int = ID_MAX, count: int = 0, rev: bool = False,
        enc: EntryEncoder | None = None, sids: list[int] | None = None,
    ) -> list[tuple[list, int, int, bool]]:
        """Merged :meth:`Stream.range_segments`: the sub-stream's own segments when one
        holds entries, else one fresh segment of the merged entries (encoded with ``enc``
        when given)."""
        live = self._span(start, end)
        if len(live) <= 1:
            return live[0][1].range_segments(start, end, count, rev, enc, sids) if live else []
        if rev and sids is not None:
            raise ValueError("sids are collected by forward reads only")
        ents = self.range(start, end, count, rev)
        if not ents:
            return []
        if sids is not None:
            sids += [e[0] for e in ents]
        if enc is None:
            return [(ents, 0, len(ents), False)]
        pieces: list[bytes] = []
        app = pieces.append
        heads = enc.id_heads
        fields_values = enc.fields_values
        for sid, fv in ents:
            idb = b"%d-%d" % (sid >> 64, sid & MASK64)
            app(heads[len(idb)])
            app(idb)
            app(fields_values(fv))
        return [(pieces, 0, len(ents), False)]

    def lookup(self, sid: int) -> list[bytes] | None:
        """Fields and values of live entry ``sid`` (the lowest region's, for a duplicate)."""
        for _r, sub in self._order:
            if sub.length:
                fv = sub.lookup(sid)
                if fv is not None:
                    return fv
        return None

    def exists(self, sid: int) -> bool:
        for _r, sub in self._order:
            if sub.length and sub.exists(sid):
                return True
        return False

    def edge_id(self, first: bool = True, skip_tombstones: bool = True) -> int:
        """Merged :meth:`Stream.edge_id`: ID_MAX / 0 when there is none."""
        best = ID_MAX if first else 0
        for _r, sub in self._order:
            sid = sub.edge_id(first, skip_tombstones)
            if first:
                if sid < best:
                    best = sid
            elif sid > best:
                best = sid
        return best

    def node_count(self) -> int:
        return sum(sub.node_count() for _r, sub in self._order)

    def rax_node_count(self) -> int:
        return sum(sub.rax_node_count() for _r, sub in self._order)

    def nodes(self) -> Iterator[tuple[int, bytes]]:
        """The merged view's nodes, as one ordinary stream holds them (:meth:`to_plain`)."""
        return self.to_plain().nodes()

    def raw_nodes(self) -> Iterator[tuple[int, bytes | bytearray]]:
        return self.to_plain().raw_nodes()

    def load_node(self, master_id: int, lp: bytes | bytearray) -> None:
        raise TypeError("an ActiveStream loads its nodes into its sub-streams (subs[region])")

    def gc(self) -> None:
        for _r, sub in self._order:
            sub.gc()

    # ---------------------------------------------------------------------------- deletion

    def _journal_pairs(self, name: bytes, pairs: list[bytes]) -> None:
        """Append region/ID pairs to the last op when it is the same kind (one XDEL or
        XTRIM per command), else start one."""
        j = self.journal
        if j and j[-1][0] == name:
            j[-1].extend(pairs)
        else:
            j.append([name, *pairs])

    def delete(self, sid: int, track_max: bool = True) -> bool:
        """XDEL one ID: the entry goes from every sub-stream holding it (duplicates too);
        journals ``XDEL``."""
        pairs: list[bytes] = []
        for r, sub in self._order:
            if sub.length and sub.delete(sid, track_max):
                pairs += [b"%d" % r, _fmt(sid)]
        if not pairs:
            return False
        self._journal_pairs(b"XDEL", pairs)
        self._sync_meta()
        return True

    def _pending_live(self) -> list[int]:
        """IDs pending in some group whose entries exist (for DELREF trims)."""
        groups = self._cgroups
        if not groups:
            return []
        ids = {sid for g in groups.values() for sid in g.pel.keys()}
        return [sid for sid in ids if self.exists(sid)]

    def trim_maxlen(
        self, maxlen: int, approx: bool = False, limit: int = 0, policy: int = 0
    ) -> int:
        if policy == REF_ACKED:
            return self._trim_acked(True, maxlen, 0, limit)[0]
        if self.length <= maxlen:
            return 0
        return self._trim_merged(True, maxlen, 0, approx, limit, policy == REF_DEL)

    def trim_minid(
        self, minid: int, approx: bool = False, limit: int = 0, policy: int = 0
    ) -> int:
        if policy == REF_ACKED:
            return self._trim_acked(False, 0, minid, limit)[0]
        return self._trim_merged(False, 0, minid, approx, limit, policy == REF_DEL)

    def _trim_merged(
        self, by_len: bool, maxlen: int, minid: int, approx: bool, limit: int, delref: bool
    ) -> int:
        """Trim the merged view from its head; journal one ``XTRIM`` bound per sub-stream
        touched (never above its last ID). One sub-stream with entries trims as a plain
        stream (``~`` by whole nodes); several trim exactly, LIMIT capping the count."""
        pend = self._pending_live() if delref else []
        live = self._live()
        if not live:
            return 0
        bounds: list[tuple[int, Stream, int]] = []
        if len(live) == 1:
            r, sub = live[0]
            if by_len:
                removed = sub.trim_maxlen(maxlen, approx, limit)
            else:
                removed = sub.trim_minid(minid, approx, limit)
            if removed:
                bound = sub.first_id - 1 if sub.length else sub.last_id
                self._journal_pairs(b"XTRIM", [b"%d" % r, _fmt(bound)])
        else:
            cap = limit if approx and limit else 0
            if by_len or cap:
                # The first k merged entries are among each sub-stream's first k.
                k = self.length - maxlen if by_len else cap
                if cap and cap < k:
                    k = cap
                hi = ID_MAX if by_len else minid - 1
                last: dict[int, int] = {}
                its = [_tagged(sub.range(0, hi, k, admit=False), r) for r, sub in live]
                taken = 0
                for sid, r, _fv in heapq.merge(*its, key=_key):
                    if taken >= k:
                        break
                    last[r] = sid
                    taken += 1
                for r, sub in live:
                    if r in last:
                        bounds.append((r, sub, last[r]))
            else:
                for r, sub in live:
                    bounds.append((r, sub, min(minid - 1, sub.last_id) if minid else -1))
            removed = 0
            pairs: list[bytes] = []
            for r, sub, bound in bounds:
                if bound < 0:
                    continue
                n = _trim_to(sub, bound)
                if n:
                    removed += n
                    pairs += [b"%d" % r, _fmt(bound)]
            if pairs:
                self._journal_pairs(b"XTRIM", pairs)
        if removed:
            self._sync_meta()
            for sid in pend:
                if not self.exists(sid):
                    self.drop_refs(sid)
        return removed

    def observed(self) -> list[bytes]:
        """``[region, bound, ...]``: each sub-stream's last ID, what a DEL here saw."""
        out: list[bytes] = []
        for r, sub in self._order:
            out += [b"%d" % r, _fmt(sub.last_id)]
        return out

    # ---------------------------------------------------------------------------- groups

    def _init_state(self, g: ConsumerGroup) -> None:
        """Cursors of a new group: at its start ID; a group started at the stream's top
        (``$``) starts each sub-stream at that sub-stream's last ID instead, and a region
        not seen yet at its beginning, so entries written concurrently elsewhere and
        arriving later are still delivered."""
        x = g.last_id
        if x and x == self.last_id:
            st = _GroupState(0, {r: sub.last_id for r, sub in self._order}, x)
        else:
            st = _GroupState(x, {}, x)
        self._gs[g.name] = st

    def _state(self, g: ConsumerGroup) -> _GroupState:
        """The group's delivery state, its cursors reset when its last_id was moved by
        something other than this class (XGROUP SETID, XCLAIM LASTID)."""
        st = self._gs.get(g.name)
        if st is None:
            self._init_state(g)
            return self._gs[g.name]
        if st.seen != g.last_id:
            st.base = g.last_id
            st.cur = {}
            st.seen = g.last_id
            st.ver += 1
        return st

    def create_group(
        self, name: bytes, last_id: int, entries_read: int = SCG_INVALID_ENTRIES_READ
    ) -> ConsumerGroup | None:
        """:meth:`Stream.create_group`; journals ``GCREATE``."""
        g = super().create_group(name, last_id, entries_read)
        if g is not None:
            self._init_state(g)
            self.journal.append([b"GCREATE", name, _fmt(last_id), b"%d" % entries_read])
        return g

    def destroy_group(self, name: bytes) -> bool:
        """:meth:`Stream.destroy_group`; journals ``GDESTROY``."""
        if not super().destroy_group(name):
            return False
        self._gs.pop(name, None)
        self.group_vc.pop(name, None)
        self.journal.append([b"GDESTROY", name])
        return True

    def set_group_clock(self, name: bytes, vc: dict[int, int]) -> None:
        """The engine records the clock of the effect that created group ``name``."""
        self.group_vc[name] = dict(vc)

    def drop_groups(self) -> None:
        """RENAME: the stream keeps its entries and loses its groups (not journaled)."""
        self._cgroups = None
        self._gs.clear()
        self.group_vc.clear()

    def rekey(self, base: int) -> None:
        """RENAME: the sub-streams move under new keys ``base << 8 | i`` (i: their order),
        each still append-only. Entries moved in must not join a region's own sub-stream,
        whose IDs a peer's concurrent delete bounds by what it saw of that region: a moved
        entry below such a bound would go at some regions and stay at others. Groups go
        first (their cursors name the old keys)."""
        if len(self._order) > 256:
            raise ValueError("too many sub-streams to move")
        self.drop_groups()
        self.subs = {base << 8 | i: sub for i, (_r, sub) in enumerate(self._order)}
        self._order = sorted(self.subs.items())

    def undelivered(self, group: ConsumerGroup) -> bool:
        """Whether XREADGROUP ``>`` has something: a sub-stream holds a live entry after
        the group's cursor there."""
        st = self._state(group)
        for r, sub in self._order:
            if sub.length and sub.last_valid_id() > st.cursor(r):
                return True
        return False

    def read_group(
        self,
        group: ConsumerGroup,
        consumer: Consumer | None,
        count: int = 0,
        now_ms: int = 0,
        noack: bool = False,
        accept=None,
    ) -> list[tuple[int, list[bytes]]]:
        """XREADGROUP ``>``: from each sub-stream the entries after the group's cursor
        there, merged by ID, at most ``count``; an entry that arrived late (below IDs
        already delivered) comes next, never skipped."""
        st = self._state(group)
        parts = []
        for r, sub in self._order:
            cur = st.cursor(r)
            if sub.length and cur < ID_MAX and sub.last_id > cur:
                ents = sub.range(cur + 1, ID_MAX, count)
                if ents:
                    parts.append((r, ents))
        if not parts:
            return []
        out: list[tuple[int, list[bytes]]]
        regions: list[int]
        if len(parts) == 1 and accept is None:
            # One sub-stream has news (a single writer): its entries as read.
            r, out = parts[0]
            regions = [r] * len(out)
        else:
            out = []
            regions = []
            for sid, r, fv in heapq.merge(*[_tagged(e, r) for r, e in parts], key=_key):
                if accept is not None and not accept(sid, fv):
                    break
                out.append((sid, fv))
                regions.append(r)
                if count and len(out) >= count:
                    break
        if out:
            self._delivered(group, st, out, regions, consumer, now_ms, noack)
        return out

    def _delivered(
        self, group: ConsumerGroup, st: _GroupState, out: list[tuple[int, list[bytes]]],
        regions: list[int], consumer: Consumer | None, now_ms: int, noack: bool,
    ) -> None:
        """Move the cursors past what was read and do the base class's bookkeeping
        (last_id, entries_read, PELs); late entries also count as read."""
        cur = st.cur
        for (sid, _fv), r in zip(out, regions, strict=True):
            if sid > cur.get(r, st.base):
                cur[r] = sid
        st.ver += 1
        old = group.last_id
        # A duplicate ID (two regions' entries) is one PEL entry; each counts as read.
        sids = list(dict.fromkeys(sid for sid, _fv in out))
        extra = len(out) - len(sids) + sum(1 for sid in sids if sid <= old)
        super().record_group_read(group, consumer, sids, now_ms, noack)
        if extra and group.entries_read != SCG_INVALID_ENTRIES_READ:
            group.entries_read = min(group.entries_read + extra, self.entries_added)
        st.seen = group.last_id

    def record_group_read(
        self, group: ConsumerGroup, consumer: Consumer | None, sids: list[int], now_ms: int,
        noack: bool = False,
    ) -> None:
        """:meth:`Stream.record_group_read` for IDs read elsewhere: each moves the cursor
        of the sub-stream(s) holding it."""
        st = self._state(group)
        out: list[tuple[int, list[bytes]]] = []
        regions: list[int] = []
        for sid in sids:
            for r, sub in self._order:
                if sub.length and sub.exists(sid):
                    out.append((sid, []))
                    regions.append(r)
        if out:
            self._delivered(group, st, out, regions, consumer, now_ms, noack)

    def _prefix_ops(self, out: list[list[bytes]]) -> None:
        """Per group: the acknowledged prefix in each sub-stream (the last entry up to its
        cursor and below the group's first pending ID); an ``XACK`` op for those that grew."""
        groups = self._cgroups
        if not groups:
            return
        for name, g in groups.items():
            st = self._state(g)
            minp = g.pel.first_key()
            fp = (minp, st.ver)
            if fp == st.fp:
                continue
            st.fp = fp
            below = minp - 1 if minp is not None else ID_MAX
            args: list[bytes] = []
            for r, sub in self._order:
                lim = min(st.cursor(r), below)
                # Nothing live at or below lim: no prefix (and a reverse read from there
                # would walk the whole sub-stream to find that out).
                if lim <= st.acked_to(r) or not sub.length or lim < sub.first_id:
                    continue
                hit = sub.range(0, lim, 1, rev=True, admit=False)
                if hit and hit[0][0] > st.acked_to(r):
                    st.acked[r] = hit[0][0]
                    args += [b"%d" % r, _fmt(hit[0][0])]
            if args:
                out.append([b"XACK", name, *args])

    def drain(self) -> list[list[bytes]]:
        """The ops recorded since the last call (keyless), then an ``XACK`` op per group
        whose acknowledged prefix grew (seed 004's t1-t11); clears the journal."""
        out = self.journal
        self.journal = []
        if self._cgroups:
            self._prefix_ops(out)
        return out

    def _remote_ack(self, name: bytes, args: list[bytes]) -> None:
        g = self.get_group(name)
        if g is None:
            return
        st = self._state(g)
        for i in range(0, len(args), 2):
            r = int(args[i])
            bound = _pid(args[i + 1])
            if bound > st.cursor(r):
                st.cur[r] = bound
            if bound > st.acked_to(r):
                st.acked[r] = bound
            sub = self.subs.get(r)
            drop = []
            for sid, _nack in g.pel.items():
                if sid > bound:
                    break
                if sub is not None and sub.exists(sid) or not self.exists(sid):
                    drop.append(sid)
            if drop:
                g.ack_many(drop)
            if bound > g.last_id:
                g.entries_read = self.estimate_distance(bound)
                g.last_id = bound
        st.ver += 1
        st.seen = g.last_id

    # ---------------------------------------------------------------------------- XSETID

    def set_id(self, last_id: int, entries_added: int = -1, max_deleted: int = 0) -> None:
        """XSETID: an ID below the last one is refused (StreamIDError); each value becomes
        the larger of the old and the new, so concurrent XSETIDs commute; journals
        ``SETID``."""
        if last_id < self.last_id:
            raise StreamIDError(SETID_TOO_SMALL)
        self._merge_setid(last_id, entries_added, max_deleted)
        self.journal.append([
            b"SETID", _fmt(self.last_id), b"%d" % self.entries_added,
            _fmt(self.max_deleted_entry_id),
        ])

    def _merge_setid(self, last_id: int, entries_added: int, max_deleted: int) -> None:
        if last_id > self.last_id:
            self.last_id = last_id
        if entries_added > self.entries_added:
            self.entries_added = entries_added
        if max_deleted > self.max_deleted_entry_id:
            self.max_deleted_entry_id = max_deleted

    # ---------------------------------------------------------------------------- remote ops

    def insert_op(self, op: list[bytes]) -> None:
        """A remote ``XADD`` op with its key, ``[XADD, key, region, id, f, v, ...]``, whose
        shape the caller checked (an even length of at least 6): :meth:`apply`'s usual
        case, without the copy of the op that drops the key. The body is the module
        function ``_insert_op``, which active.pxd types."""
        _insert_op(self, op)

    def apply(self, op: list[bytes]) -> None:
        """Run a remote op (keyless, see the module docstring); records nothing. Raises
        ValueError on an unknown or malformed op."""
        name = op[0]
        n = len(op)
        if name == b"XADD" and n >= 5 and n & 1:
            self._insert(int(op[1]), _pid(op[2]), op[3:] if type(op) is list else list(op[3:]))
            return
        name = name.upper()
        args = op[1:]
        if name == b"XADD":
            if len(args) < 4 or len(args) & 1:
                raise ValueError("XADD op needs region, id and field/value pairs")
            self._insert(int(args[0]), _pid(args[1]), list(args[2:]))
        elif name == b"XDEL":
            for i in range(0, len(args) - 1, 2):
                sub = self.subs.get(int(args[i]))
                if sub is not None:
                    sub.delete(_pid(args[i + 1]))
            self._sync_meta()
        elif name == b"XTRIM" or name == b"DEL":
            for i in range(0, len(args) - 1, 2):
                sub = self.subs.get(int(args[i]))
                if sub is not None:
                    _trim_to(sub, _pid(args[i + 1]))
            self._sync_meta()
            if name == b"DEL":
                self.drop_groups()
        elif name == b"GCREATE":
            gname = args[0]
            if self.get_group(gname) is None:
                g = Stream.create_group(self, gname, _pid(args[1]), int(args[2]))
                if g is not None:
                    self._init_state(g)
        elif name == b"GDESTROY":
            if Stream.destroy_group(self, args[0]):
                self._gs.pop(args[0], None)
                self.group_vc.pop(args[0], None)
        elif name == b"XACK":
            self._remote_ack(args[0], list(args[1:]))
        elif name == b"SETID":
            self._merge_setid(_pid(args[0]), int(args[1]), _pid(args[2]))
        else:
            raise ValueError(f"unknown stream op {name!r}")

    def is_gone(self) -> bool:
        """No live entries and no groups: the key must go (at every instance alike)."""
        return not self.length and not self._cgroups

    # ---------------------------------------------------------------------------- views, copies

    def to_plain(self) -> Stream:
        """The merged view as one ordinary Stream (a duplicate ID keeps its lowest region's
        entry), with the metadata, groups and IDMP state copied: what a plain replica,
        a plain RDB or EXPORT sees."""
        live = self._live()
        if len(live) == 1:
            p = live[0][1].copy()  # one writer: its nodes as they are
        else:
            p = Stream()
            prev = -1
            for sid, fv in self.iter_range():
                if sid != prev:
                    p.add(fv, sid)
                    prev = sid
        p.last_id = self.last_id
        p.entries_added = self.entries_added
        p.max_deleted_entry_id = self.max_deleted_entry_id
        if self._cgroups:
            p._cgroups = {name: g.copy() for name, g in self._cgroups.items()}
        if self.idmp is not None:
            p.idmp = self.idmp.copy()
        return p

    def copy(self) -> ActiveStream:
        """Deep copy: sub-streams, metadata, groups with their cursors, group clocks (not
        the journal)."""
        s = type(self)(self.region)
        s.subs = {r: sub.copy() for r, sub in self._order}
        s._order = sorted(s.subs.items())
        s.length = self.length
        s.last_id = self.last_id
        s.first_id = self.first_id
        s.max_deleted_entry_id = self.max_deleted_entry_id
        s.entries_added = self.entries_added
        if self._cgroups:
            s._cgroups = {name: g.copy() for name, g in self._cgroups.items()}
        s._gs = {name: st.copy() for name, st in self._gs.items()}
        s.group_vc = {name: dict(vc) for name, vc in self.group_vc.items()}
        if self.idmp is not None:
            s.idmp = self.idmp.copy()
        return s

    def memory_usage(self, samples: int = 5) -> int:
        """MEMORY USAGE: the groups (the base class's estimate of this object) plus each
        sub-stream's."""
        return super().memory_usage(samples) + sum(
            sub.memory_usage(samples) for _r, sub in self._order
        )
