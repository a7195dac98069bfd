"""The stream itself (t_stream.c's stream): nodes in a rax, metadata, groups, IDMP state.

Speed notes: XADD appends to the tail node, whose header fields (counts, master fields,
element count) are cached on the Stream so an append never re-parses the node; the cache
is dropped whenever anything else touches the tail node.  Closed nodes are stored as
immutable ``bytes`` of exact size (Redis's lpShrinkToFit), so decoding slices them into
``bytes`` directly; only the tail (and nodes touched by XDEL/XTRIM) are ``bytearray``.
Reads seek the first node through the rax and, inside a node, walk from whichever end is
closer; recently read nodes are kept decoded in a small global LRU (:mod:`.cache`), so
repeated reads and consumers at the tail cost a bisect and a slice.

Returned ``[f1, v1, ...]`` lists may be shared with that cache: treat them as read-only.
"""

from __future__ import annotations

import heapq
import sys
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator

from ..listpack import (
    _HDR,
    _NUMSTART,
    _SMALL_INT_ELEM,
    _STR6_BL,
    _STR6_HDR,
    LP_HDR_NUMELE_UNKNOWN,
    LP_HDR_SIZE,
    element,
    int_element,
    length,
    replace_int,
)
from ..rax import Rax
from .cache import (
    _NC,
    _nc_drop,
    _nc_extend,
    _nc_get,
    _nc_move,
    _nc_served,
)
from .fastread import EntryEncoder, _fwd_node_enc, _rev_node_enc
from .groups import (
    NACK,
    REF_ACKED,
    REF_DEL,
    SCG_INVALID_ENTRIES_READ,
    AutoClaimResult,
    ClaimResult,
    Consumer,
    ConsumerGroup,
)
from .idmp import IdmpState
from .ids import ID_MAX, MASK64, format_sid
from .node import (
    _E_FLAGS_NONE,
    _E_FLAGS_SAME,
    FLAG_DELETED,
    STREAM_LISTPACK_MAX_SIZE,
    GCStats,
    _build_node,
    _compact_entries,
    _find_live,
    _fwd_node,
    _int_len,
    _master,
    _node_edge_id,
    _rev_node,
    _set_counts,
    _to_int64,
    _walk,
    node_counts,
)

# Node compaction's memory (see "Node compaction" in node.py): a node compacts inside its own
# buffer until its compacted size is at most this many bytes, then moves once into an exact
# ``bytes``. Each move into a new, smaller block is a block in another pymalloc size class,
# and a run of random XDELs leaves those pools part-used: rewriting a 1.5 KB node at every
# halving (800, 440, 260, 170 bytes) grew the process by 1.3 MB over bench/streams8.py's
# deletions in-process, against 0.7 MB with this rule (and a glibc block shrunk in place,
# which a later move then frees whole, is reused by the full-size nodes added afterwards).
# Measured thresholds: 512 moved at the 440-byte stage (no gain); 128 kept most nodes in
# their big blocks, whose holes full-size nodes cannot use (refill grew 2.2 MB more).
_GC_MOVE_BYTES = 256

# _t_res when the tail is not to be sized ahead (no node before it, or done already), and
# the room given above the previous node's size (nodes of one stream differ by a little).
_NO_RESERVE = 1 << 62
_RESERVE_SLACK = 128

# A new node's first bytes: the header (its sizes written later), master count 1, deleted 0.
_NEW_NODE = b"\x00\x00\x00\x00\x00\x00\x01\x01\x00\x01"


class StreamIDError(ValueError):
    """The ID is not greater than the stream's last ID (Redis's EDOM case of XADD)."""


class StreamSizeError(ValueError):
    """The entry cannot be stored (Redis's ERANGE case: "Elements are too large")."""


def default_trim_limit(node_max_entries: int) -> int:
    """LIMIT used by ``~`` trims when none is given: 100 nodes' worth, clamped as Redis does."""
    limit = 100 * node_max_entries
    if limit <= 0:
        limit = 10000
    if limit > 1000000:
        limit = 1000000
    return limit


# --------------------------------------------------------------------------------------------
# Stream
# --------------------------------------------------------------------------------------------

_SIZEOF_INT128 = sys.getsizeof(ID_MAX)
_SIZEOF_NACK = sys.getsizeof(NACK(0))
_SIZEOF_LIST_EMPTY = sys.getsizeof([])
_SIZEOF_GHOST = sys.getsizeof(1 << 40)  # a packed ghost value (its key is the rax's)
_MASK32 = (1 << 32) - 1


def _probe() -> None:
    """Only its type matters: see _COMPILED."""


# Whether this module runs compiled (what ``cython.compiled`` says, without importing
# Cython): the few places where the fastest form differs between the modes test it.
_COMPILED = type(_probe).__name__ != "function"


# _reserve's padding, read through a view: a ``bytes(k)`` per call was a short-lived
# 600-800 byte block (glibc's, past pymalloc's 512) allocated beside the growing tail and
# freed once it had moved, a hole between nodes each time. It covers the default node size
# (stream-node-max-bytes 4096) and its slack; larger configured nodes pad with a temporary.
_ZEROS = memoryview(bytes(8192))

# Where a sealing node waits while the tail's block is freed, so that its exact-size copy
# can take that block (glibc's best fit: the tail's room is the node's size plus a little).
# Copied while the tail is alive, the node landed beyond it, and the freed tail was then a
# hole the next tail regrew into in steps, in which the connection's short-lived request
# and reply lists took pieces: 1.45 MB of free chunks after the memory/entry row's 1M XADDs
# (16.6 B/entry of resident growth), 0.68 MB (15.8 B/entry) this way. Its length never
# changes (a same-length slice assignment is a copy), so the view over it is always valid.
# Nodes longer than it (stream-node-max-bytes raised past 8 KB) are copied from the tail.
_STAGE = bytearray(8192)
_STAGE_VIEW = memoryview(_STAGE)


def _reserve(lp: bytearray, cap: int) -> None:
    """Give the tail node's buffer ``cap`` bytes of room at once, its length unchanged.

    Grown entry by entry, the buffer is reallocated some ten times past 512 bytes, and
    each move leaves a free chunk of an odd size behind; sealing frees the last one. Sized
    once from the node before it, the tail takes one block of about the same size node
    after node, so the block a seal frees is the one the next tail takes. The buffer is
    grown to ``cap`` (a resize past 1.125x its room allocates exactly that) and cut back,
    which keeps the room as long as the length is at least half of it (CPython's
    bytearray resize), hence the call at half the expected size. That is pure mode's
    way; compiled, add() gives a new tail its room as soon as it is made (stream.pxd's
    _c_room) and appends keep it (_c_grow), so the tail does not move at all."""
    n = len(lp)
    if cap > n:
        k = cap - n
        lp += _ZEROS[:k] if k <= 8192 else bytes(k)
        del lp[n:]


def _append_same(lp: bytearray, fv: list, nfv: int, nf: int, dms: int, dseq: int) -> int:
    """Compiled only: a SAMEFIELDS entry appended in one write, its size known first (a
    pre-sized write through a C pointer, where the general path appends about ten pieces);
    the listpack's new total size, or 0 when the entry is not the common kind (deltas and
    field count in the one-element small-int range, every value a plain 1..63-byte
    ``bytes`` that does not start like a number), which the general path then writes.
    ``lp`` ends with its EOF byte, which the entry's flags overwrite; the count in the
    header is the caller's. ``dms``/``dseq`` are the ID's deltas from the master ID."""
    if not (-4096 <= dms <= 4095 and -4096 <= dseq <= 4095 and nf < 4000):
        return 0
    e1 = _SMALL_INT_ELEM[dms + 4096]
    e2 = _SMALL_INT_ELEM[dseq + 4096]
    e3 = _SMALL_INT_ELEM[nf + 4099]
    need = len(_E_FLAGS_SAME) + len(e1) + len(e2) + len(e3)
    for i in range(1, nfv, 2):
        x = fv[i]
        if type(x) is not bytes:
            return 0
        v = x
        n = len(v)
        if not 0 < n < 64 or _NUMSTART[v[0]]:
            return 0
        need += n + 2
    start = len(lp) - 1  # the EOF byte
    # need + 1 bytes from start: the entry, then EOF. Resized in place (stream.pxd), with
    # the same over-allocation as ``lp += bytes(need)``, which made a zeroed bytes through
    # a call of the type and then copied it: half of this function's instructions.
    _c_grow(lp, start + 1 + need)  # noqa: F821 (stream.pxd: this function is compiled only)
    dst = lp
    p = start
    for src in (_E_FLAGS_SAME, e1, e2):
        n = len(src)
        sp = src
        for k in range(n):
            dst[p + k] = sp[k]
        p += n
    for i in range(1, nfv, 2):
        v = fv[i]
        n = len(v)
        sp = v
        dst[p] = 0x80 | n
        p += 1
        for k in range(n):
            dst[p + k] = sp[k]
        p += n
        dst[p] = n + 1
        p += 1
    n = len(e3)
    sp = e3
    for k in range(n):
        dst[p + k] = sp[k]
    p += n
    dst[p] = 0xFF
    return p + 1


class _StreamCore:
    """What :class:`Stream` is made of, apart from its class-wide settings.

    Compiled, this is a ``cdef class`` (stream.pxd): its attributes are typed fields the
    append path reads without a lookup. An extension type's class attributes cannot be
    set at run time and its methods cannot be patched, so the settings CONFIG SET changes
    (``Stream.node_max_bytes = n``) live on :class:`Stream`, an ordinary Python class;
    only Stream and its subclasses are ever instantiated.
    """

    # TYPE and OBJECT ENCODING both say "stream" (Redis has one stream encoding).
    type_name = b"stream"

    def encoding(self) -> bytes:
        """OBJECT ENCODING."""
        return b"stream"

    def digest_parts(self) -> Iterator[bytes]:
        """What DEBUG DIGEST-VALUE mixes, as Redis's debug.c does: per live entry its
        ID as ``ms.seq``, then each field and value (groups and metadata are left out)."""
        for sid, fv in self.iter_range():
            yield b"%d.%d" % (sid >> 64, sid & MASK64)
            yield from fv

    __slots__ = (
        "length",
        "last_id",
        "first_id",
        "max_deleted_entry_id",
        "entries_added",
        "_rax",
        "_cgroups",
        "idmp",
        # tail-node cache (valid iff _t_lp is not None)
        "_t_lp",
        "_t_key",
        "_t_ms",
        "_t_seq",
        "_t_fields",
        "_t_nf",
        "_t_count",
        "_t_deleted",
        "_t_xbytes",
        "_t_nele",
        # the tail's length at which its buffer is sized for the whole node (see _reserve)
        "_t_res",
        # node key -> bytes << 32 | entries that compactions dropped from it (see "Node
        # compaction"); one int per node, as a compacted node is small
        "_ghost",
        # last_valid_id() and the (last_id, length, max_deleted_entry_id) it was found for
        "_lv_key",
        "_lv",
    )

    def __init__(self) -> None:
        self.length = 0
        self.last_id = 0
        self.first_id = 0
        self.max_deleted_entry_id = 0
        self.entries_added = 0
        self._rax = Rax()
        self._cgroups: dict[bytes, ConsumerGroup] | None = None
        self.idmp: IdmpState | None = None
        self._t_lp: bytearray | None = None
        self._t_key = 0
        self._t_ms = 0
        self._t_seq = 0
        self._t_fields: list[bytes] = []
        self._t_nf = 0
        self._t_count = 0
        self._t_deleted = 0
        self._t_xbytes = 0
        self._t_nele = 0
        self._t_res = _NO_RESERVE
        self._ghost: dict[int, int] | None = None
        self._lv_key: tuple[int, int, int] | None = None
        self._lv = 0

    def __len__(self) -> int:
        return self.length

    def __repr__(self) -> str:
        return (
            f"Stream(length={self.length}, nodes={len(self._rax)}, "
            f"last_id={format_sid(self.last_id).decode()})"
        )

    # ---------------------------------------------------------------------------- IDs

    def next_id(self, ms_now: int) -> int:
        """The ID ``XADD *`` uses (streamNextID): ``ms_now-0`` if the clock moved past the
        last ID's ms, else last_id + 1, so IDs never go backwards with the clock.

        At the very last ID it wraps to 0-0 as Redis does; :meth:`add` then rejects it
        (callers check ``last_id == ID_MAX`` first for the "exhausted" error).
        """
        last = self.last_id
        if ms_now > last >> 64:
            return ms_now << 64
        return last + 1 if last < ID_MAX else 0

    def auto_seq_id(self, ms: int) -> int | None:
        """The ID ``XADD <ms>-*`` uses: ``ms-0``, or last_id + 1 when ``ms`` equals the last
        ID's ms; None when that sequence would overflow (Redis replies "Elements are too
        large to be stored" in that case).  The result may still be <= last_id, which
        :meth:`add` rejects."""
        last = self.last_id
        if ms == last >> 64:
            if last & MASK64 == MASK64:
                return None
            return last + 1
        return ms << 64

    def explicit_id(self, sid: int, ms_only: bool = False) -> int:
        """The ID an XADD with a user's ID (``ms-seq``, or ``ms`` when ``ms_only``) adds:
        the ID itself here; an Active-Active stream applies its ID mode."""
        return sid

    def set_id(self, last_id: int, entries_added: int = -1, max_deleted: int = 0) -> None:
        """XSETID once its arguments are checked: the last ID, and entries_added /
        max_deleted_entry_id unless -1 / 0."""
        self.last_id = last_id
        if entries_added != -1:
            self.entries_added = entries_added
        if max_deleted:
            self.max_deleted_entry_id = max_deleted

    # ---------------------------------------------------------------------------- append

    def _load_tail(self) -> bytearray | None:
        """Parse the tail node's header into the cache; return the tail listpack."""
        last = self._rax.last()
        if last is None:
            self._t_lp = None
            return None
        key, lp = last
        if type(lp) is not bytearray:
            old = lp
            lp = bytearray(lp)
            self._rax.insert(key, lp)
            _nc_move(old, lp)
        count, deleted, nf, fields, _ = _master(lp)
        self._t_lp = lp
        self._t_key = key
        self._t_ms = key >> 64
        self._t_seq = key & MASK64
        self._t_fields = fields
        self._t_nf = nf
        self._t_count = count
        self._t_deleted, self._t_xbytes = self._redis_accounting(key, deleted)
        self._t_nele = length(lp)
        self._t_res = _NO_RESERVE
        return lp

    def _redis_accounting(self, key: int, deleted: int) -> tuple[int, int]:
        """For node ``key`` holding ``deleted`` tombstones: the deleted count Redis's copy of
        the node has, and how many bytes bigger that copy is (0, 0 unless compacted)."""
        g = self._ghost.get(key) if self._ghost else None
        if g is None:
            return deleted, 0
        total = deleted + (g & _MASK32)
        return total, (g >> 32) + _int_len(total) - _int_len(deleted)

    def _touch(self, key: int) -> None:
        """Drop the tail cache if node ``key`` is the cached tail (it is being changed)."""
        if self._t_lp is not None and key == self._t_key:
            self._t_lp = None

    def add(self, fields_values: list[bytes], sid: int | None = None, now_ms: int = 0) -> int:
        """Append an entry and return its ID (streamAppendItem).

        ``fields_values`` is ``[f1, v1, f2, v2, ...]`` (bytes).  ``sid`` is the entry ID; None
        means ``XADD *`` with the caller's clock ``now_ms`` (see :meth:`next_id`; for
        ``ms-*`` use :meth:`auto_seq_id`).  Raises StreamIDError if the ID is not greater
        than ``last_id`` and StreamSizeError if the entry exceeds 1 GiB.  Node limits:
        a new node starts when ``lpBytes(tail) + payload >= node_max_bytes`` or
        ``count + deleted >= node_max_entries``, both as Redis's copy of the tail has them
        (tombstones a compaction dropped still count).

        The ID is handled as its two 64-bit halves ``ms`` and ``seq`` (typed by stream.pxd),
        which is all the node's deltas need; the one 128-bit int is the result.
        """
        fv = fields_values if type(fields_values) is list else list(fields_values)
        last = self.last_id
        if _COMPILED and sid is None and last is self._l_id and _fits_u64(now_ms):  # noqa: F821 (stream.pxd)
            # next_id(now_ms) on the last ID's halves, which the previous add kept with it
            # (see _l_id in stream.pxd): no 128-bit shift or mask. C arithmetic wraps, so
            # the sequence's +1 is 0 past 2**64 - 1 and the ms' +1 is 0 only past ID_MAX.
            ms = self._l_ms
            nm = now_ms
            if nm > ms:
                ms = nm
                seq = 0
                sid = now_ms << 64
            else:
                seq = self._l_seq + 1
                if seq == 0:
                    ms += 1
                    if ms == 0:  # last is ID_MAX: next_id wraps to 0-0, never above it
                        raise StreamIDError(
                            "The ID specified in XADD is equal or smaller than the target stream top item"
                        )
                sid = last + 1
        elif sid is None:
            # next_id(now_ms), inlined as it runs once per XADD (a subclass that changes
            # next_id overrides add as well, as ActiveStream does).
            ms = last >> 64
            if now_ms > ms:
                ms = now_ms
                seq = 0
                sid = now_ms << 64
            elif last < ID_MAX:
                sid = last + 1
                seq = sid & MASK64
                if not seq:
                    ms += 1
            else:  # last is ID_MAX: next_id wraps to 0-0, never above it
                raise StreamIDError(
                    "The ID specified in XADD is equal or smaller than the target stream top item"
                )
        elif sid <= last:
            raise StreamIDError(
                "The ID specified in XADD is equal or smaller than the target stream top item"
            )
        else:
            ms = sid >> 64
            seq = sid & MASK64
        return self._append(fv, sid, ms, seq)

    def _append(self, fv: list[bytes], sid: int, ms: int, seq: int) -> int:
        """add()'s append of the entry ``sid``, above ``last_id``, whose halves are ``ms``
        and ``seq`` (``sid >> 64`` and ``sid & MASK64``); ``fv`` a list. Compiled, a C
        method (stream.pxd): an Active-Active stream's own add (active.py's ``_add_own``)
        works out the ID on its halves and calls this on its sub-stream, where add() with
        an explicit ID would compare it with the last ID and split it again as 128-bit
        Python ints. Whole-writer callgrind, XADD with two peers: see docs/hot-core.md
        (active.py's row)."""
        if _COMPILED:
            tot = 0  # a C loop: sum(map(len, ...)) costs two builtin lookups and a map object
            for x in fv:
                tot += len(x)
        else:
            tot = sum(map(len, fv))
        if tot > STREAM_LISTPACK_MAX_SIZE:
            raise StreamSizeError("Elements are too large to be stored")
        nfv = len(fv)
        if nfv & 1:
            raise ValueError("fields_values must hold field/value pairs")
        nf = nfv >> 1

        lp = self._t_lp
        if lp is None and self._rax:
            lp = self._load_tail()
        if lp is not None:
            mb = self.node_max_bytes
            if mb <= 0 or mb > STREAM_LISTPACK_MAX_SIZE:
                mb = STREAM_LISTPACK_MAX_SIZE
            me = self.node_max_entries
            if len(lp) + self._t_xbytes + tot >= mb or (
                me > 0 and self._t_count + self._t_deleted >= me
            ):
                # Close the node: store it as exact-size immutable bytes (lpShrinkToFit),
                # in the tail's own block where it can (see _STAGE).
                n = len(lp)
                if n <= 8192:
                    _STAGE[:n] = lp
                    cached = _NC.pop(id(lp), None) if _NC else None
                    _nc_drop(lp)
                    # Every reference to the tail goes before the copy is made (a reader
                    # holding one only keeps the old block alive: no harm).
                    self._rax.insert(self._t_key, b"")
                    self._t_lp = None
                    lp = None
                    closed = bytes(_STAGE_VIEW[:n])
                    if cached is not None:
                        _NC[id(closed)] = (closed, cached[1], cached[2])
                else:
                    closed = bytes(lp)
                    if _NC:
                        _nc_move(lp, closed)
                    _nc_drop(lp)
                    lp = None
                self._rax.insert(self._t_key, closed)
                # The next node is sized from this one (see _reserve).
                self._t_res = (len(closed) + _RESERVE_SLACK) >> 1
                if self.gc_ratio > 0 and node_counts(closed)[1]:
                    self._gc_node(self._t_key, True)

        if lp is None:
            fields = fv[0::2]
            lp = bytearray(_NEW_NODE)
            lp += int_element(nf)
            for f in fields:
                lp += element(f)
            lp += b"\x00\x01\x02\x01\x00\x01\x00\x01"  # terminator, flags SAMEFIELDS, 0, 0
            same = True
            self._t_key = sid
            self._t_ms = ms
            self._t_seq = seq
            self._t_fields = [bytes(f) for f in fields]
            self._t_nf = nf
            self._t_count = 1
            self._t_deleted = 0
            self._t_xbytes = 0
            nele = nf + 4
            self._rax.insert(sid, lp)
            self._t_lp = lp
            e = lp
        else:
            if len(lp) >= self._t_res:
                _reserve(lp, (self._t_res << 1) - 1)
                self._t_res = _NO_RESERVE
            count = self._t_count + 1
            self._t_count = count
            if count <= 127:
                lp[6] = count  # LP_HDR_SIZE: the master entry's count, a 7-bit int
            else:
                replace_int(lp, LP_HDR_SIZE, count)
            if _COMPILED:
                # The fields compared in place (a slice of fv is a new list each time).
                same = nf == self._t_nf
                if same:
                    tf = self._t_fields
                    for i in range(nf):
                        if fv[i + i] != tf[i]:
                            same = False
                            break
                if same:
                    # The common entry, written in one piece (see _append_same).
                    n = _append_same(lp, fv, nfv, nf, ms - self._t_ms, seq - self._t_seq)
                    if n:
                        nele = self._t_nele + nf + 4
                        self._t_nele = nele
                        if nele >= LP_HDR_NUMELE_UNKNOWN:
                            nele = 0xFFFF
                        lp[0] = n & 255
                        lp[1] = (n >> 8) & 255
                        lp[2] = (n >> 16) & 255
                        lp[3] = n >> 24
                        lp[4] = nele & 255
                        lp[5] = nele >> 8
                        if _NC:
                            _nc_extend(lp, sid, fv)
                        self.length += 1
                        self.entries_added += 1
                        self.last_id = sid
                        self._l_id = sid
                        self._l_ms = ms
                        self._l_seq = seq
                        if self.length == 1:  # the stream was emptied by XDEL
                            self.first_id = sid
                        return sid
                # The entry is written apart and copied over the EOF byte in one piece
                # (_c_put_entry): the tail's room, given when it was made, is kept (see
                # _reserve), where ``lp +=`` would shrink a half-empty buffer to fit.
                e = bytearray(_E_FLAGS_SAME if same else _E_FLAGS_NONE)
            else:
                del lp[-1]  # EOF
                same = nf == self._t_nf and fv[0::2] == self._t_fields
                lp += _E_FLAGS_SAME if same else _E_FLAGS_NONE
                e = lp
            nele = self._t_nele
            # The deltas from the master ID, as the int64 Redis stores (_to_int64): typed,
            # the halves' difference wraps to exactly that. -4096..4095 is _SMALL_MIN..MAX.
            d = ms - self._t_ms
            if -4096 <= d <= 4095:
                e += _SMALL_INT_ELEM[d + 4096]
            else:
                e += int_element(_to_int64(d))
            d = seq - self._t_seq
            if -4096 <= d <= 4095:
                e += _SMALL_INT_ELEM[d + 4096]
            else:
                e += int_element(_to_int64(d))
        if same:
            # SAMEFIELDS entry: values only.
            for i in range(1, nfv, 2):
                v = fv[i]
                n = len(v)
                if 0 < n < 64 and not _NUMSTART[v[0]]:
                    e += _STR6_HDR[n]
                    e += v
                    e += _STR6_BL[n]
                else:
                    e += element(v)
            e += _SMALL_INT_ELEM[nf + 4099] if nf < 4000 else int_element(nf + 3)
            nele += nf + 4
        else:
            e += int_element(nf)
            for i in range(0, nfv, 2):
                e += element(fv[i])
                v = fv[i + 1]
                n = len(v)
                if 0 < n < 64 and not _NUMSTART[v[0]]:
                    e += _STR6_HDR[n]
                    e += v
                    e += _STR6_BL[n]
                else:
                    e += element(v)
            e += int_element(nf + nf + 4)
            nele += nf + nf + 5
        if e is lp:
            lp.append(0xFF)
        else:
            _c_put_entry(lp, e)  # noqa: F821 (stream.pxd: e is apart only when compiled)
        if _COMPILED and self._t_res != _NO_RESERVE:
            # A new tail, given its whole node's room at once (see _reserve).
            _c_room(lp, (self._t_res << 1) - 1)  # noqa: F821 (stream.pxd)
            self._t_res = _NO_RESERVE
        self._t_nele = nele
        if _COMPILED:
            # Six typed byte stores cost a tenth of the call below, which is cheaper in
            # the interpreter: the same header (<IH: total bytes, element count).
            n = len(lp)
            lp[0] = n & 255
            lp[1] = (n >> 8) & 255
            lp[2] = (n >> 16) & 255
            lp[3] = n >> 24
            if nele >= LP_HDR_NUMELE_UNKNOWN:
                nele = 0xFFFF
            lp[4] = nele & 255
            lp[5] = nele >> 8
        else:
            _HDR.pack_into(lp, 0, len(lp), nele if nele < LP_HDR_NUMELE_UNKNOWN else 0xFFFF)
        if _NC:
            _nc_extend(lp, sid, fv)
        self.length += 1
        self.entries_added += 1
        self.last_id = sid
        if _COMPILED:
            self._l_id = sid
            self._l_ms = ms
            self._l_seq = seq
        if self.length == 1:
            self.first_id = sid
        return sid

    # ---------------------------------------------------------------------------- reading

    def _start_nodes(self, start: int) -> Iterator[tuple[int, bytes | bytearray]]:
        """Nodes from the one that may hold ``start`` onwards (streamIteratorStart, fwd)."""
        return self._rax.iterate_floor(start)

    def _end_nodes(self, end: int) -> Iterator[tuple[int, bytes | bytearray]]:
        """Nodes from the one that may hold ``end`` backwards (streamIteratorStart, rev)."""
        rax = self._rax
        if end and rax.seek_le(end) is not None:
            return rax.iterate("<=", end, reverse=True)
        return rax.iterate("$", reverse=True)

    def _node_for(self, sid: int) -> tuple[int, bytes | bytearray] | None:
        """The node a lookup of ``sid`` scans: the last with master <= sid, else the first."""
        rax = self._rax
        hit = rax.seek_le(sid)
        return hit if hit is not None else rax.first()

    def iter_range(
        self, start: int = 0, end: int = ID_MAX, rev: bool = False, tombstones: bool = False
    ) -> Iterator[tuple[int, list[bytes]]]:
        """Yield ``(id, [f1, v1, ...])`` for entries with start <= id <= end, ascending
        (or descending with ``rev``), skipping deleted entries unless ``tombstones``.

        Decodes one node at a time, so it is fine for streaming a whole stream out (AOF
        rewrite); use :meth:`range` when a count is known.
        """
        if start > end:
            return
        if rev:
            nodes = self._end_nodes(end)
            step = _rev_node
        else:
            nodes = self._start_nodes(start)
            step = _fwd_node
        for key, lp in nodes:
            buf: list[tuple[int, list[bytes]]] = []
            done = step(key, lp, start, end, 0, tombstones, buf)
            yield from buf
            if done:
                return

    def range(
        self, start: int = 0, end: int = ID_MAX, count: int = 0, rev: bool = False,
        admit: bool = True,
    ) -> list[tuple[int, list[bytes]]]:
        """Entries with start <= id <= end as ``[(id, [f1, v1, ...]), ...]``, at most
        ``count`` (0 = all), ascending, or descending with ``rev`` (XRANGE / XREVRANGE).

        O(log nodes) to find the first node, then the entries returned plus at most about
        half a node walked to find the boundary. ``admit=False`` reads without putting
        nodes into the decoded-node cache (bookkeeping reads such as the first entry after
        a trim, which would otherwise decode the whole head node after every XADD MAXLEN).
        """
        out: list[tuple[int, list[bytes]]] = []
        if start > end:
            return out
        if rev:
            for key, lp in self._end_nodes(end):
                c = _nc_get(key, lp, admit)
                if c is None:
                    if _rev_node(key, lp, start, end, count, False, out):
                        break
                    continue
                sids = c[1]
                ents = c[2]
                j = bisect_right(sids, end) - 1
                while j >= 0:
                    if sids[j] < start:
                        return out
                    out.append(ents[j])
                    if count and len(out) >= count:
                        return out
                    j -= 1
        else:
            for key, lp in self._start_nodes(start):
                c = _nc_get(key, lp, admit)
                if c is None:
                    if _fwd_node(key, lp, start, end, count, False, out):
                        break
                    continue
                sids = c[1]
                ents = c[2]
                i = bisect_left(sids, start)
                n = len(sids)
                if count:
                    room = count - len(out)
                    if n - i > room:
                        n = i + room
                if sids and n and sids[n - 1] > end:
                    n = bisect_right(sids, end, i, n)
                    out.extend(ents[i:n])
                    return out
                out.extend(ents[i:n])
                if count and len(out) >= count:
                    return out
        return out

    def range_segments(
        self, start: int = 0, end: int = ID_MAX, count: int = 0, rev: bool = False,
        enc: EntryEncoder | None = None, sids: list[int] | None = None,
    ) -> list[tuple[list, int, int, bool]]:
        """What :meth:`range` returns, as ``(entries, lo, hi, cached)`` segments in reply
        order. A ``cached`` segment is ``entries[lo:hi]`` of a decoded-node cache list,
        ascending (read it backwards when ``rev``); that list stays the same object, only
        ever appended to, while its node is cached, so a caller may keep per-node derived
        data (encoded replies) keyed by its identity. Other segments are fresh lists
        already in reply order: of ``(id, fields_values)`` tuples, or with an encoder
        ``enc`` of the pieces it gives for ``hi`` entries (``lo`` is 0), read straight from
        the node without decoding it into tuples (see :mod:`.fastread`). A forward read also
        appends the IDs it returns, in order, to ``sids`` when given."""
        if rev and sids is not None:
            raise ValueError("sids are collected by forward reads only")
        segs: list[tuple[list, int, int, bool]] = []
        if start > end:
            return segs
        got = 0
        if rev:
            for key, lp in self._end_nodes(end):
                c = _nc_get(key, lp, True)
                if c is None:
                    if enc is not None:
                        pieces: list[bytes] = []
                        k, done = _rev_node_enc(
                            key, lp, start, end, count - got if count else 0, pieces, enc
                        )
                        if k:
                            segs.append((pieces, 0, k, False))
                            got += k
                        if done:
                            break
                        continue
                    out: list[tuple[int, list[bytes]]] = []
                    done = _rev_node(key, lp, start, end, count - got if count else 0, False, out)
                    if out:
                        segs.append((out, 0, len(out), False))
                        got += len(out)
                    if done:
                        break
                    continue
                ids = c[1]
                hi = bisect_right(ids, end)
                lo = bisect_left(ids, start, 0, hi)
                if count and hi - lo > count - got:
                    lo = hi - (count - got)
                if hi > lo:
                    segs.append((c[2], lo, hi, True))
                    got += hi - lo
                if lo > 0 or (count and got >= count):
                    break
        else:
            # The nodes are looked up one at a time (the floor, then each next one when the
            # read goes on), not walked by _start_nodes' generator: a read mostly ends in its
            # first node, and a generator left unfinished is closed when dropped (its
            # GeneratorExit and traceback). Whole server under callgrind, redis-benchmark
            # -c 50, this method per XRANGE - + COUNT 10 10.7k -> 7.5k instructions, per
            # XREADGROUP COUNT 10 of the bench's consumer loop 12.2k -> 8.3k (without
            # the node walk).
            rax = self._rax
            hit = rax.seek_le(start)
            if hit is None:
                hit = rax.first()
            while hit is not None:
                key, lp = hit
                # A cached node's hit (the repeated read's case) taken here, not through
                # _nc_get's call, which then only admits or declines.
                c = _NC.get(id(lp))
                if c is not None:
                    _NC.move_to_end(id(lp))
                else:
                    c = _nc_get(key, lp, True, start if enc is not None else -1)
                if c is None:
                    if enc is not None:
                        pieces = []
                        k, done, served = _fwd_node_enc(
                            key, lp, start, end, count - got if count else 0, pieces, enc, None,
                            sids,
                        )
                        _nc_served(lp, served)
                        if k:
                            segs.append((pieces, 0, k, False))
                            got += k
                        if done:
                            break
                        hit = rax.seek_gt(key)
                        continue
                    out = []
                    done = _fwd_node(key, lp, start, end, count - got if count else 0, False, out)
                    if out:
                        segs.append((out, 0, len(out), False))
                        got += len(out)
                        if sids is not None:
                            sids += [e[0] for e in out]
                    if done:
                        break
                    hit = rax.seek_gt(key)
                    continue
                ids = c[1]
                n = len(ids)
                lo = bisect_left(ids, start)
                hi = bisect_right(ids, end, lo, n)
                if count and hi - lo > count - got:
                    hi = lo + (count - got)
                if hi > lo:
                    segs.append((c[2], lo, hi, True))
                    got += hi - lo
                    if sids is not None:
                        sids += ids[lo:hi]
                if hi < n or (count and got >= count):
                    break
                hit = rax.seek_gt(key)
        return segs

    def first_entry(self) -> tuple[int, list[bytes]] | None:
        """The first live entry or None."""
        r = self.range(0, ID_MAX, 1, admit=False)
        return r[0] if r else None

    def last_entry(self) -> tuple[int, list[bytes]] | None:
        """The last live entry or None."""
        r = self.range(0, ID_MAX, 1, rev=True, admit=False)
        return r[0] if r else None

    def lookup(self, sid: int) -> list[bytes] | None:
        """Fields and values of live entry ``sid``, or None."""
        hit = self._node_for(sid)
        if hit is None:
            return None
        c = _nc_get(hit[0], hit[1], False)
        if c is not None:
            sids = c[1]
            i = bisect_left(sids, sid)
            return c[2][i][1] if i < len(sids) and sids[i] == sid else None
        out: list[tuple[int, list[bytes]]] = []
        _fwd_node(hit[0], hit[1], sid, sid, 1, False, out)
        return out[0][1] if out else None

    def exists(self, sid: int) -> bool:
        """Whether ``sid`` is a live entry (streamEntryExists)."""
        hit = self._node_for(sid)
        return hit is not None and _find_live(hit[0], hit[1], sid) is not None

    def edge_id(self, first: bool = True, skip_tombstones: bool = True) -> int:
        """First or last entry ID, optionally counting tombstones (streamGetEdgeID).

        When there is none: ID_MAX for ``first``, 0 for last, as Redis returns.
        """
        if skip_tombstones:
            item = self.first_entry() if first else self.last_entry()
            if item is not None:
                return item[0]
            return ID_MAX if first else 0
        nodes = self._rax.items(reverse=not first)
        for key, lp in nodes:
            sid = _node_edge_id(key, lp, first)
            if sid is not None:
                return sid
        return ID_MAX if first else 0

    def last_valid_id(self) -> int:
        """ID of the last live entry, 0 if none (streamLastValidID, used by XSETID and by
        every XREADGROUP ``>``).

        Remembered between calls: the last live entry can only change with an entry
        added (last_id moves), removed (length drops) or XSETID, so those three values
        key the answer and a consumer loop does not walk the tail node on every read.
        """
        key = (self.last_id, self.length, self.max_deleted_entry_id)
        if key != self._lv_key:
            self._lv = self.edge_id(False, True)
            self._lv_key = key
        return self._lv

    # ---------------------------------------------------------------------------- deletion

    def delete(self, sid: int, track_max: bool = True) -> bool:
        """XDEL one ID: flag the entry deleted in place; True if a live entry was deleted.

        Updates the node's master counters (freeing the node when its last live entry
        goes), ``length``, ``max_deleted_entry_id`` (unless ``track_max`` is False: trims
        leave it alone) and ``first_id``; never ``last_id``.  The node may then be
        garbage-collected (see :meth:`_gc_node`).
        """
        rax = self._rax
        hit = self._node_for(sid)
        if hit is None:
            return False
        key, lp = hit
        found = _find_live(key, lp, sid)
        if found is None:
            return False
        self._touch(key)
        _nc_drop(lp)
        count, deleted = node_counts(lp)
        if count == 1:
            rax.remove(key)
            if self._ghost:
                self._ghost.pop(key, None)
        else:
            if type(lp) is not bytearray:
                lp = bytearray(lp)
                rax.insert(key, lp)
            replace_int(lp, found[0], found[1] | FLAG_DELETED)
            _set_counts(lp, count - 1, deleted + 1)
            if self.gc_ratio > 0:
                self._gc_node(key)
        self.length -= 1
        if track_max and sid > self.max_deleted_entry_id:
            self.max_deleted_entry_id = sid
        if self.length == 0:
            self.first_id = 0
        elif sid == self.first_id:
            self.first_id = self.edge_id(True, True)
        return True

    # ---------------------------------------------------------------------------- GC

    def _gc_node(self, key: int, closing: bool = False) -> None:
        """Compact node ``key`` (see "Node compaction") once its tombstones reach
        ``gc_ratio`` of its entries, unless it is the open tail (``closing``: it is the
        last node but XADD is closing it)."""
        ratio = self.gc_ratio
        rax = self._rax
        lp = rax.get(key)
        if ratio <= 0 or lp is None:
            return
        count, deleted = node_counts(lp)
        # At most two tombstones (the edges) are kept, so fewer than three frees nothing.
        if deleted < 3 or deleted < ratio * (count + deleted):
            return
        if not closing and rax.last_key() == key:
            return
        _c, _d, nf, fields, _p = _master(lp)
        entries, kept_dead, dropped, dropped_bytes = _compact_entries(key, lp, nf)
        if not dropped:
            return
        self._touch(key)
        _nc_drop(lp)
        new = _build_node(fields, entries, count, kept_dead)
        size = len(new)
        reclaimed = len(lp) - size
        if size > _GC_MOVE_BYTES and type(lp) is bytearray:
            # Compact within the node's own buffer: no new block. The allocator keeps the
            # buffer while at least half of it is used and shrinks it in place below that.
            lp[:size] = new
            del lp[size:]
        else:
            # Small now: one exact copy in a small-object pool, so the node's old block is
            # freed whole and a new full-size node fits in it.
            rax.insert(key, new)
        ghost = self._ghost
        if ghost is None:
            ghost = self._ghost = {}
        # Adding packed (bytes, entries) pairs adds both (a node holds < 2**32 entries).
        ghost[key] = ghost.get(key, 0) + (dropped_bytes << 32 | dropped)
        GCStats.runs += 1
        GCStats.reclaimed_bytes += reclaimed

    def gc(self) -> None:
        """Compact every node past the ratio (tests and tools; deletions do it as they go)."""
        for key in list(self._rax.keys()):
            if key in self._rax:
                self._gc_node(key)

    # ------------------------------------------------------------- consumer-group references

    def entry_referenced(self, sid: int) -> bool:
        """Whether some group still needs entry ``sid``: it is pending there, or the group
        has not delivered that far yet (what ACKED deletion and trimming respect)."""
        groups = self._cgroups
        if not groups:
            return False
        for g in groups.values():
            if g.last_id < sid or sid in g.pel:
                return True
        return False

    def drop_refs(self, sid: int) -> None:
        """Remove ``sid`` from every group's PEL (DELREF)."""
        groups = self._cgroups
        if groups:
            for g in groups.values():
                g.ack(sid)

    def delete_ex(self, sid: int, policy: int) -> int:
        """XDELEX for one ID: -1 no such entry, 1 deleted, 2 kept because a group still
        references it (ACKED).  DELREF also drops dangling references of a missing entry."""
        if policy == REF_ACKED:
            if not self.exists(sid):
                return -1
            if self.entry_referenced(sid):
                return 2
            self.delete(sid)
            return 1
        deleted = self.delete(sid)
        if policy == REF_DEL:
            self.drop_refs(sid)
        return 1 if deleted else -1

    def delete_many(self, ids: Iterable[int]) -> int:
        """XDEL several IDs; return how many live entries were deleted."""
        n = 0
        for sid in ids:
            if self.delete(sid):
                n += 1
        return n

    def trim_maxlen(
        self, maxlen: int, approx: bool = False, limit: int = 0, policy: int = 0
    ) -> int:
        """XTRIM MAXLEN [~] maxlen [LIMIT limit]; returns entries removed (streamTrim).
        ``policy`` is REF_KEEP (Redis 7), REF_DEL or REF_ACKED (Redis 8.2)."""
        if policy == REF_ACKED:
            return self._trim_acked(True, maxlen, 0, limit)[0]
        return self._trim(True, maxlen, 0, approx, limit, policy == REF_DEL)

    def trim_minid(
        self, minid: int, approx: bool = False, limit: int = 0, policy: int = 0
    ) -> int:
        """XTRIM MINID [~] minid [LIMIT limit]; returns entries removed (streamTrim)."""
        if policy == REF_ACKED:
            return self._trim_acked(False, 0, minid, limit)[0]
        return self._trim(False, 0, minid, approx, limit, policy == REF_DEL)

    def _trim_acked(self, by_len: bool, maxlen: int, minid: int, limit: int) -> tuple[int, int]:
        """ACKED trimming: oldest first, remove the entries no group still references,
        stepping over those that one does, until the strategy is met or ``limit`` entries
        (0 = none) went. Entry by entry, so ``~`` changes nothing but the default limit.
        Returns ``(removed, last_removed_id)``."""
        removed = 0
        last = 0
        groups = self._cgroups
        # Entries after the least-advanced group's last_id are all referenced.
        horizon = min((g.last_id for g in groups.values()), default=ID_MAX) if groups else ID_MAX
        for sid, _fv in list(self.iter_range(0, horizon)):
            if by_len:
                if self.length <= maxlen:
                    break
            elif sid >= minid:
                break
            if limit and removed >= limit:
                break
            if self.entry_referenced(sid):
                continue
            self.delete(sid, track_max=False)
            removed += 1
            last = sid
        return removed, last

    def trim_acked_last(self, by_len: bool, maxlen: int, minid: int, limit: int) -> tuple[int, int]:
        """ACKED trim returning ``(removed, last_removed_id)`` (for exact propagation)."""
        return self._trim_acked(by_len, maxlen, minid, limit)

    def _trim(
        self, by_len: bool, maxlen: int, minid: int, approx: bool, limit: int,
        delref: bool = False,
    ) -> int:
        """Whole nodes go from the head while they can; then an exact trim flags entries
        deleted inside that one node, while ``~`` stops.  ``limit`` (0 = none) caps the
        entries removed, checked per whole node before it is touched.  ``delref`` also
        drops the removed entries from every group's PEL."""
        rax = self._rax
        removed = 0
        if delref and not any(len(g.pel) for g in (self._cgroups or {}).values()):
            delref = False
        while rax:
            if by_len and self.length <= maxlen:
                break
            key, lp = rax.first()  # type: ignore[misc]
            entries, marked = node_counts(lp)
            if limit and removed + entries > limit:
                break
            if by_len:
                remove_node = self.length - entries >= maxlen
            else:
                last = _node_edge_id(key, lp, False)
                remove_node = last is not None and last < minid
            if remove_node:
                self._touch(key)
                _nc_drop(lp)
                if self._ghost:
                    self._ghost.pop(key, None)
                if delref:
                    for e in _walk(key, lp):
                        if not e.flags & FLAG_DELETED:
                            self.drop_refs(e.sid)
                rax.pop_first()
                self.length -= entries
                removed += entries
                continue
            if approx:
                break
            self._touch(key)
            _nc_drop(lp)
            if type(lp) is not bytearray:
                lp = bytearray(lp)
                rax.insert(key, lp)
            from_lp = 0
            for e in _walk(key, lp):
                if by_len:
                    if self.length <= maxlen:
                        break
                elif e.sid >= minid:
                    break
                if not e.flags & FLAG_DELETED:
                    replace_int(lp, e.p_flags, e.flags | FLAG_DELETED)
                    from_lp += 1
                    self.length -= 1
                    if delref:
                        self.drop_refs(e.sid)
            removed += from_lp
            _set_counts(lp, entries - from_lp, marked + from_lp)
            if from_lp and self.gc_ratio > 0:
                self._gc_node(key)
            break
        if self.length == 0:
            self.first_id = 0
        elif removed:
            self.first_id = self.edge_id(True, True)
        return removed

    # ---------------------------------------------------------------------------- nodes / RDB

    def nodes(self) -> Iterator[tuple[int, bytes]]:
        """``(master_id, listpack_bytes)`` per node in order, for verbatim RDB writing
        (use :func:`encode_key` for the 16-byte key)."""
        for key, lp in self._rax.items():
            yield key, lp if type(lp) is bytes else bytes(lp)

    def raw_nodes(self) -> Iterator[tuple[int, bytes | bytearray]]:
        """``(master_id, listpack)`` per node in order, the open tail node being the live
        bytearray: for writers that copy out what they read before anything else runs."""
        return self._rax.items()

    def node_count(self) -> int:
        """Number of nodes (XINFO's radix-tree-keys)."""
        return len(self._rax)

    def load_node(self, master_id: int, lp: bytes | bytearray) -> None:
        """Insert a node verbatim (RDB loading).  The caller sets ``length``, ``last_id``,
        ``first_id``, ``max_deleted_entry_id`` and ``entries_added`` from the file and
        should check the payload with :func:`validate_node` first."""
        self._touch(master_id)
        _nc_drop(self._rax.get(master_id))
        if self._ghost:
            self._ghost.pop(master_id, None)
        self._rax.insert(master_id, bytes(lp))
        self._t_lp = None

    def rax_node_count(self) -> int:
        """The node count Redis's radix tree would have for these keys (XINFO STREAM's
        radix-tree-nodes): root, branch points, their children and the key leaves of the
        compressed radix tree over 16-byte big-endian keys.  O(nodes)."""
        keys = self._rax.key_list()
        prefixes = {(0, 0)}
        add = prefixes.add
        for a, b in zip(keys, keys[1:], strict=False):
            x = a ^ b
            lcp = (128 - x.bit_length()) >> 3
            add((lcp, a >> ((16 - lcp) << 3)))
            if lcp < 15:
                sh = (15 - lcp) << 3
                add((lcp + 1, a >> sh))
                add((lcp + 1, b >> sh))
        return len(prefixes) + len(keys)

    # ---------------------------------------------------------------------------- groups

    def create_group(
        self, name: bytes, last_id: int, entries_read: int = SCG_INVALID_ENTRIES_READ
    ) -> ConsumerGroup | None:
        """New consumer group, or None if the name is taken (streamCreateCG)."""
        groups = self._cgroups
        if groups is None:
            groups = self._cgroups = {}
        if name in groups:
            return None
        g = ConsumerGroup(name, last_id, entries_read)
        groups[name] = g
        return g

    def get_group(self, name: bytes) -> ConsumerGroup | None:
        """The named group or None."""
        groups = self._cgroups
        return groups.get(name) if groups else None

    def destroy_group(self, name: bytes) -> bool:
        """Delete a group; True if it existed."""
        groups = self._cgroups
        if not groups or name not in groups:
            return False
        del groups[name]
        return True

    def groups(self) -> list[ConsumerGroup]:
        """Groups in byte-wise name order (rax order: XINFO GROUPS, RDB)."""
        groups = self._cgroups
        if not groups:
            return []
        return [groups[k] for k in sorted(groups)]

    def group_count(self) -> int:
        """Number of consumer groups."""
        return len(self._cgroups) if self._cgroups else 0

    # ------------------------------------------------------------------ lag (Redis 7)

    def range_has_tombstones(self, start: int = 0, end: int = ID_MAX) -> bool:
        """Whether a deleted entry may lie in [start, end] (streamRangeHasTombstones).

        Only max_deleted_entry_id is known, so this is "the latest tombstone is in range
        and not before the first entry"."""
        mdel = self.max_deleted_entry_id
        if not self.length or not mdel:
            return False
        if self.first_id > mdel:
            return False
        return start <= mdel <= end

    def estimate_distance(self, sid: int) -> int:
        """Logical read counter of ``sid``: entries from the first ever entry up to it, or
        -1 when unknowable (streamEstimateDistanceFromFirstEverEntry)."""
        added = self.entries_added
        if not added:
            return 0
        last = self.last_id
        if not self.length and sid <= last:
            return added
        if sid == last:
            return added
        if sid > last:
            return SCG_INVALID_ENTRIES_READ
        mdel = self.max_deleted_entry_id
        first = self.first_id
        if not mdel or mdel < first:
            if sid < first:
                return added - self.length
            if sid == first:
                return added - self.length + 1
        return SCG_INVALID_ENTRIES_READ

    def group_lag(self, group: ConsumerGroup) -> int | None:
        """Entries not yet delivered to the group, or None when unknown (streamReplyWithCGLag)."""
        if not self.entries_added:
            return 0
        if group.entries_read != SCG_INVALID_ENTRIES_READ and not self.range_has_tombstones(
            group.last_id
        ):
            return self.entries_added - group.entries_read
        er = self.estimate_distance(group.last_id)
        if er != SCG_INVALID_ENTRIES_READ:
            return self.entries_added - er
        return None

    def _advance_group(self, group: ConsumerGroup, sid: int) -> None:
        """Move the group's last_id to a delivered ``sid`` and keep entries_read right."""
        if group.entries_read != SCG_INVALID_ENTRIES_READ and not self.range_has_tombstones(sid):
            group.entries_read += 1
        elif self.entries_added:
            group.entries_read = self.estimate_distance(sid)
        group.last_id = sid

    # ------------------------------------------------------------------ reading via groups

    def undelivered(self, group: ConsumerGroup) -> bool:
        """Whether XREADGROUP ``>`` would find entries after the group's last_id."""
        return bool(self.length) and self.last_valid_id() > group.last_id

    def read_group(
        self,
        group: ConsumerGroup,
        consumer: Consumer | None,
        count: int = 0,
        now_ms: int = 0,
        noack: bool = False,
        accept=None,
    ) -> list[tuple[int, list[bytes]]]:
        """XREADGROUP ``>``: entries after the group's last_id (at most ``count``, 0 = all).

        Each one advances last_id/entries_read; without ``noack`` each goes into the group
        and consumer PELs (streamReplyWithRange with a group).
        """
        out: list[tuple[int, list[bytes]]] = []
        if group.last_id >= ID_MAX:
            return out
        out = self.range(group.last_id + 1, ID_MAX, count)
        if accept is not None:
            for k, (sid, fv) in enumerate(out):
                if not accept(sid, fv):
                    del out[k:]
                    break
        if out:
            self.record_group_read(group, consumer, [sid for sid, _fv in out], now_ms, noack)
        return out

    def record_group_read(
        self, group: ConsumerGroup, consumer: Consumer | None, sids: list[int], now_ms: int,
        noack: bool = False,
    ) -> None:
        """What :meth:`read_group` does once it has read ``sids`` (ascending, non-empty,
        after the group's last_id): advance last_id/entries_read and, without ``noack``,
        deliver them into the PELs. For callers that read the entries in another form."""
        first = sids[0]
        if (
            first > group.last_id
            and group.entries_read != SCG_INVALID_ENTRIES_READ
            and not self.range_has_tombstones(first)
        ):
            # No tombstone at or after the first entry read, so none after any of them:
            # each would just count one more entry read.
            group.entries_read += len(sids)
            group.last_id = sids[-1]
        else:
            for sid in sids:
                if sid > group.last_id:
                    self._advance_group(group, sid)
        if not noack and consumer is not None:
            group.deliver_new(sids, consumer, now_ms)

    def claim_idle(
        self,
        group: ConsumerGroup,
        consumer: Consumer,
        min_idle: int,
        count: int,
        now_ms: int,
        accept=None,
    ) -> tuple[list[tuple[int, list[bytes], int, int]], list[int]]:
        """XREADGROUP ... CLAIM (Redis 8.4): take over pending entries idle for at least
        ``min_idle`` ms -- XNACKed ones first in release order, then longest idle first --
        at most ``count`` (0 = all). Returns ``([(id, fields, idle_ms, previous_deliveries)],
        dropped_ids)``: NACKs whose entries are gone are dropped (as XAUTOCLAIM does)."""
        pel = group.pel
        order: list[int] = []
        nacked = group.nacked
        if nacked:
            order.extend(sid for sid in nacked if sid in pel)
        rest = [
            (nack.delivery_time, sid)
            for sid, nack in pel.items()
            if now_ms - nack.delivery_time >= min_idle and not (nacked and sid in nacked)
        ]
        if count:
            rest = heapq.nsmallest(count + len(order), rest)
        else:
            rest.sort()
        order.extend(sid for _t, sid in rest)
        out: list[tuple[int, list[bytes], int, int]] = []
        dropped: list[int] = []
        for sid in order:
            if count and len(out) >= count:
                break
            nack = pel.get(sid)
            fv = self.lookup(sid)
            if fv is None:
                group.ack(sid)
                dropped.append(sid)
                continue
            if accept is not None and not accept(sid, fv):
                break
            idle = now_ms - nack.delivery_time
            prev = nack.delivery_count
            old = nack.consumer
            if old is not consumer:
                if old is not None:
                    old.pel.discard(sid)
                consumer.pel.insert(sid, nack)
                nack.consumer = consumer
            group.unrelease(sid)
            nack.delivery_time = now_ms
            nack.delivery_count = prev + 1
            consumer.active_time = now_ms
            out.append((sid, fv, idle if idle > 0 else 0, prev))
        return out, dropped

    def read_group_history(
        self,
        consumer: Consumer,
        start: int = 0,
        count: int = 0,
        now_ms: int = 0,
        end: int | None = None,
        accept=None,
    ) -> list[tuple[int, list[bytes] | None]]:
        """XREADGROUP with an explicit ID: the consumer's own pending entries from
        ``start`` (streamReplyWithRangeFromConsumerPEL).  Entries that no longer exist come
        back as ``(id, None)``; the others get delivery time = now and count + 1."""
        out: list[tuple[int, list[bytes] | None]] = []
        for sid, nack in consumer.pel.iterate(">=", start):
            if count and len(out) >= count:
                break
            if end is not None and sid > end:
                break
            fv = self.lookup(sid)
            if accept is not None and not accept(sid, fv):
                break
            if fv is not None:
                nack.delivery_time = now_ms
                nack.delivery_count += 1
            out.append((sid, fv))
        return out

    def claim(
        self,
        group: ConsumerGroup,
        consumer_name: bytes,
        ids: Iterable[int],
        now_ms: int,
        min_idle: int = 0,
        delivery_time: int | None = None,
        retrycount: int | None = None,
        force: bool = False,
        justid: bool = False,
        lastid: int = 0,
        create_consumer_upfront: bool = False,
    ) -> ClaimResult:
        """The data side of XCLAIM (options already parsed), in Redis 7.0's order.

        ``delivery_time`` is the absolute ms from IDLE/TIME (None = now; out-of-range
        values become now).  The consumer is created lazily at the first claimable entry,
        as 7.0 does (``create_consumer_upfront`` gives 7.2+ behaviour).  IDs whose entries
        are gone lose their NACK.
        """
        propagate_last_id = False
        if lastid > group.last_id:
            group.last_id = lastid
            propagate_last_id = True
        if delivery_time is None or delivery_time < 0 or delivery_time > now_ms:
            delivery_time = now_ms
        consumer: Consumer | None = None
        created = False
        if create_consumer_upfront:
            consumer, created = group.get_or_create_consumer(consumer_name, now_ms)
        claimed: list[int] = []
        events: list[tuple[int, NACK, bool]] = []
        pel = group.pel
        for sid in ids:
            nack = pel.get(sid)
            if not self.exists(sid):
                if nack is not None:
                    events.append((sid, nack, False))
                    propagate_last_id = False
                    pel.remove(sid)
                    group.unrelease(sid)
                    if nack.consumer is not None:
                        nack.consumer.pel.discard(sid)
                continue
            if force and nack is None:
                nack = NACK(now_ms, 1, None)
                pel.insert(sid, nack)
            if nack is None:
                continue
            if nack.consumer is not None and min_idle:
                if now_ms - nack.delivery_time < min_idle:
                    continue
            if consumer is None:
                consumer, created = group.get_or_create_consumer(consumer_name, now_ms)
            old = nack.consumer
            if old is not consumer and old is not None:
                old.pel.discard(sid)
            if group.nacked:
                group.unrelease(sid)
            nack.delivery_time = delivery_time
            if retrycount is not None and retrycount >= 0:
                nack.delivery_count = retrycount
            elif not justid:
                nack.delivery_count += 1
            if old is not consumer:
                consumer.pel.insert(sid, nack)
                nack.consumer = consumer
            consumer.active_time = now_ms
            claimed.append(sid)
            events.append((sid, nack, True))
            propagate_last_id = False
        return ClaimResult(claimed, events, consumer, created, propagate_last_id)

    def autoclaim(
        self,
        group: ConsumerGroup,
        consumer_name: bytes,
        min_idle: int,
        start: int,
        count: int,
        now_ms: int,
        justid: bool = False,
        create_consumer_upfront: bool = False,
    ) -> AutoClaimResult:
        """The data side of XAUTOCLAIM: scan the group PEL from ``start``, at most
        ``count * 10`` attempts, claiming idle-enough entries and dropping NACKs of deleted
        entries (both count against ``count``); returns the next cursor (0 when done)."""
        attempts = count * 10
        consumer: Consumer | None = None
        created = False
        if create_consumer_upfront:
            consumer, created = group.get_or_create_consumer(consumer_name, now_ms)
        claimed: list[int] = []
        deleted: list[int] = []
        events: list[tuple[int, NACK, bool]] = []
        pel = group.pel
        op = ">="
        pos = start
        exhausted = False
        while attempts:
            attempts -= 1
            if not count:
                break
            hit = pel.seek(op, pos)
            if hit is None:
                exhausted = True
                break
            sid, nack = hit
            op = ">"
            pos = sid
            if not self.exists(sid):
                events.append((sid, nack, False))
                pel.remove(sid)
                group.unrelease(sid)
                if nack.consumer is not None:
                    nack.consumer.pel.discard(sid)
                deleted.append(sid)
                count -= 1
                continue
            if min_idle and now_ms - nack.delivery_time < min_idle:
                continue
            if consumer is None:
                consumer, created = group.get_or_create_consumer(consumer_name, now_ms)
            old = nack.consumer
            if old is not consumer and old is not None:
                old.pel.discard(sid)
            if group.nacked:
                group.unrelease(sid)
            nack.delivery_time = now_ms
            if not justid:
                nack.delivery_count += 1
            if old is not consumer:
                consumer.pel.insert(sid, nack)
                nack.consumer = consumer
            consumer.active_time = now_ms
            claimed.append(sid)
            events.append((sid, nack, True))
            count -= 1
        next_id = 0
        if not exhausted:
            hit = pel.seek(op, pos)
            if hit is not None:
                next_id = hit[0]
        return AutoClaimResult(claimed, next_id, deleted, events, consumer, created)

    # ---------------------------------------------------------------------------- misc

    def copy(self) -> Stream:
        """Deep copy (COPY command, streamDup)."""
        s = type(self)()
        s.length = self.length
        s.last_id = self.last_id
        s.first_id = self.first_id
        s.max_deleted_entry_id = self.max_deleted_entry_id
        s.entries_added = self.entries_added
        for key, lp in self._rax.items():
            s._rax.insert(key, bytes(lp))
        if self._ghost:
            s._ghost = dict(self._ghost)
        if self._cgroups:
            s._cgroups = {name: g.copy() for name, g in self._cgroups.items()}
        if self.idmp is not None:
            s.idmp = self.idmp.copy()
        return s

    def memory_usage(self, samples: int = 5) -> int:
        """Estimated bytes used, shaped like Redis's MEMORY USAGE for streams: the first
        ``samples`` nodes (0 = all) are measured and their average extrapolated to all
        nodes but the last, which is measured; plus the index and the groups' PELs."""
        rax = self._rax
        n = len(rax)
        size = sys.getsizeof(self) + sys.getsizeof(rax)
        size += n * (_SIZEOF_INT128 + 16) + rax.block_count() * 2 * _SIZEOF_LIST_EMPTY
        if n:
            taken = 0
            lpsize = 0
            for _key, lp in rax.items():
                if samples and taken >= samples:
                    break
                lpsize += sys.getsizeof(lp)
                taken += 1
            if n <= taken:
                size += lpsize
            else:
                size += (lpsize // taken) * (n - 1)
                size += sys.getsizeof(rax.last()[1])  # type: ignore[index]
        if self._ghost:
            size += sys.getsizeof(self._ghost) + len(self._ghost) * _SIZEOF_GHOST
        if self._cgroups:
            size += sys.getsizeof(self._cgroups)
            per_pel_entry = _SIZEOF_INT128 + 16
            for g in self._cgroups.values():
                size += sys.getsizeof(g) + sys.getsizeof(g.pel) + sys.getsizeof(g.consumers)
                size += len(g.pel) * (per_pel_entry + _SIZEOF_NACK)
                for c in g.consumers.values():
                    size += sys.getsizeof(c) + sys.getsizeof(c.pel) + sys.getsizeof(c.name)
                    size += len(c.pel) * 16  # keys and NACKs are shared with the group PEL
        return size


class Stream(_StreamCore):
    """A Redis stream: listpack nodes in a Rax plus metadata and consumer groups.

    Public metadata attributes (plain ints, IDs in ``ms << 64 | seq`` form): ``length``,
    ``last_id``, ``first_id`` (first live entry, 0 when empty), ``max_deleted_entry_id``,
    ``entries_added``.  Node limits are the server-wide CONFIG values
    ``stream-node-max-bytes`` / ``stream-node-max-entries``; they are class attributes so
    one CONFIG SET (``Stream.node_max_bytes = n``) reaches every stream, like Redis's
    ``server.*`` globals.  Subclasses may override them.
    """

    __slots__ = ()

    node_max_bytes: int = 4096
    node_max_entries: int = 100
    # Whether XREADGROUP ">" must go through read_group/undelivered (per-sub-stream
    # cursors, ActiveStream) rather than a range after the group's last_id.
    cursor_reads: bool = False
    # Tombstone share of a closed node at which it is compacted (0 = never, the storage
    # default); the server sets it from CONFIG stream-node-gc-percent. Compaction is
    # invisible in replies: see "Node compaction".
    gc_ratio: float = 0.0
