"""Full sync between Active-Active instances: the sender's whole state as one payload, and
the receiver's merge of it (docs/active-active.md, "Backlog and resync").

The payload is an RDB image (persistence/rdb.py): every Active-Active stream as its
``rill-aast`` module value (sub-streams verbatim, groups, cursors, acknowledged prefixes,
group clocks) with its TTL, the engine's state in the AUX field ``aa-state`` (clock,
sequence, tombstones, TTL registers) and the sender's region in ``aa-origin``. It is
checksummed like any RDB, and :func:`dump_state` only reads memory, so a forked child can
make it while the parent serves clients.

The merge brings in what the sender applied and the receiver has not, and nothing the
receiver already did is undone. Per key and per sub-stream ``r`` (an append-only log of
region ``r``'s entries, applied at both in ``r``'s order):

- the receiver has *seen* an entry when it has applied at least as many of ``r``'s effects
  as the sender, or when the entry is at or below the receiver's sub-stream last ID;
  the sender's entries the receiver has not seen are added, those it has seen and lacks were
  deleted here and stay deleted;
- the receiver's entries the sender has seen (same rule, the other way) and lacks were deleted
  there, and go;
- a group the receiver lacks is created when the receiver has not seen its creation (its
  creating clock is not below the receiver's clock) and no delete here that did not see
  it exists (a tombstone: delete-wins); a group only the receiver has goes when the sender
  saw its creation, or a delete there did not see it; groups both have take the larger
  acknowledged prefix per sub-stream;
- the TTL register keeps the values neither side saw superseded (PERSIST beats any TTL,
  else the longest wins);
- strings, hashes, sets and sorted sets: each element's cell merges (storage/cells.py,
  ``Cell.merge``): a dot one side holds and the other lacks though its clock covers it was
  removed there, and each side's removal marks for cells that went (``Keyed.removed``)
  take what those removals saw; the keys are rendered again from the merged cells;
- HyperLogLogs: a side's registers count unless a delete (a tombstone, either side's) is
  one that side had not applied (delete-wins); those that count merge by maximum (hll.py);
- lists: an element one side holds and the other lacks though its clock covers the insert
  was removed there (storage/activelist.py, ``ListState.merge``);
- clocks merge by maximum, tombstones by union;
- a stream deleted whole (or emptied) keeps no sub-stream last IDs, so the deletions one side
  made that the other has not applied are re-applied as the trims they are: the sender's ride
  in the payload (AUX ``aa-deletions``, from its backlog), the receiver's come from its own
  backlog (and are kept in the MERGE record, so replaying the AOF merges the same way).

Limitation: a deletion no backlog holds any more (or one by a third region) cannot be
re-applied; an entry it had removed that the other side was behind on survives the merge.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

from rill.persistence import rdb
from rill.protocol.effects import MAX_REGION, compact_from_wire, decode_records, encode_vc
from rill.storage.list import ListValue
from rill.storage.stream import ID_MAX, MASK64, Stream
from rill.storage.stream.active import ActiveStream

from .backlog import DELETION_OPS
from .keyed import kind_of
from .plain import rewrite

if TYPE_CHECKING:
    from ..server import Server

ORIGIN_AUX = b"aa-origin"
DELETIONS_AUX = b"aa-deletions"  # the sender's deletions its backlog holds (see merge_state)
PERSIST = -1  # the TTL register's PERSIST value (engine.PERSIST)

Op = list[bytes]


def _fmt(sid: int) -> bytes:
    return b"%d-%d" % (sid >> 64, sid & MASK64)


def dump_state(server: Server) -> bytes:
    """The whole Active-Active state of ``server`` as a payload for :func:`merge_state`.

    Reads memory only (no event loop, no files), so it runs in a forked child."""
    engine = server.active_active
    options = rdb.SaveOptions(
        compression=False,
        extra_aux=[(ORIGIN_AUX, b"%d" % engine.region), (rdb.AA_STATE_AUX, engine.export_state()),
                   (DELETIONS_AUX, _deletions_blob(_backlog_deletions(engine)))],
    )
    buf = io.BytesIO()
    rdb.save_file(buf, _active_dbs(server), options)
    return buf.getvalue()


# The ``aa-backlog`` AUX value's layout version. Version 1 (files from before versions) has
# no header: its records back to back, each its sequence, time and wire bytes. Later ones
# start with a zero byte (a version 1 value never does: its first length is a sequence, at
# least 1) and the version byte.
BACKLOG_VERSION = 2


def backlog_blob(engine: Any) -> bytes:
    """The engine's backlog of own records as an RDB AUX value (``aa-backlog``), kept in
    files so that a restart from an RDB, or from an AOF whose base was rewritten, still
    resumes its peers partially and still re-applies its deletions in a full sync.

    Version 2: ``00 02``, the number of records held then per record its sequence, time and
    wire bytes, then the number of released deletion records kept aside (backlog.py) and
    per record its sequence and wire bytes (lengths and strings as RDB encodes them)."""
    backlog = engine.backlog
    held = backlog.records_from(backlog.first_seq) or []
    out = bytearray(b"\x00%c" % BACKLOG_VERSION)
    out += rdb.encode_len(len(held))
    for seq, wire in held:
        out += rdb.encode_len(seq) + rdb.encode_len(backlog.ts_of(seq) or 0) + rdb.encode_string(wire)
    aside = backlog.released_deletions()
    out += rdb.encode_len(len(aside))
    for seq, wire in aside:
        out += rdb.encode_len(seq) + rdb.encode_string(wire)
    return bytes(out)


def restore_backlog(engine: Any, blob: bytes) -> None:
    """Refill the engine's backlog from :func:`backlog_blob` (after its state was imported):
    the records up to its sequence, in order, and the deletions kept aside. A malformed
    value, or one of a version this build does not know, is ValueError."""
    r = rdb.RdbReader(blob)
    backlog = engine.backlog
    try:
        if blob[:1] != b"\x00":  # version 1: records only, to the end
            while r.pos < r.end:
                _restore_record(engine, r.length(), r.length(), r.string())
            return
        r.byte()
        version = r.byte()
        if version != BACKLOG_VERSION:
            raise ValueError(f"unknown Active-Active backlog version {version} (this build reads 1 and {BACKLOG_VERSION})")
        for _ in range(r.length()):
            _restore_record(engine, r.length(), r.length(), r.string())
        aside = [(r.length(), r.string()) for _ in range(r.length())]
        if r.pos != r.end:
            raise ValueError("corrupt Active-Active backlog: trailing bytes")
        for seq, wire in aside:
            if seq <= engine.seq:
                backlog.keep_aside(seq, compact_from_wire(wire))
    except rdb.RdbError as e:
        raise ValueError(f"corrupt Active-Active backlog: {e}") from None


def _restore_record(engine: Any, seq: int, ts: int, wire: bytes) -> None:
    backlog = engine.backlog
    if seq <= engine.seq and (not len(backlog) or seq == backlog.last_seq + 1):
        # A record in the argv format (an RDB from before the compact one) is
        # converted: the links send compact records only.
        backlog.append(seq, compact_from_wire(wire), ts)


def _active_dbs(server: Server) -> Any:
    for db in server.keyspace.dbs:
        data = {k: v for k, v in db.data.items() if isinstance(v, ActiveStream)}
        expires = {k: db.expires[k] for k in data if k in db.expires}
        yield db.id, data, expires


class _Sender:
    """What the payload says about its sender: region, clock, tombstones, TTL registers."""

    def __init__(self, server: Server, aux: dict[bytes, bytes]) -> None:
        try:
            self.region = int(aux[ORIGIN_AUX])
            blob = aux[rdb.AA_STATE_AUX]
        except (KeyError, ValueError):
            raise ValueError("not an Active-Active state payload") from None
        engine = server.active_active
        # The engine's own decoder reads its state, in a scratch engine of the sender's region.
        scratch = type(engine)(server, self.region, 1)
        scratch.import_state(blob)
        self.vc: dict[int, int] = scratch.vc
        self.tombstones: dict[tuple[int, bytes], list[tuple[int, int, bytes | None]]] = scratch.tombstones
        self.ttl: dict[tuple[int, bytes], list[tuple[int, int, int]]] = scratch.ttl
        self.cells = scratch.keyed.keys  # strings, hashes, sets and sorted sets (keyed.py)
        self.cell_removals = scratch.keyed.removed  # what removals took of cells that went
        self.lists = scratch.lists.keys  # lists (lists.py)
        self.hlls = scratch.hlls.values  # HyperLogLogs (hll.py)
        self.hll_dense = scratch.hlls.dense


def merge_state(server: Server, payload: bytes, own_deletions: bytes | None = None) -> None:
    """Merge a peer's :func:`dump_state` payload into ``server`` (see the module docstring).

    Raises ValueError, changing nothing, when the payload does not parse. Keys that change
    are signalled (blocked readers, WATCH) and mirrored to plain replicas as DEL + RESTORE
    of their merged view; the AOF gets the MERGE record, which its loader merges again
    (``own_deletions``: the deletions this instance re-applied, from that record)."""
    engine = server.active_active
    dbs = server.keyspace.dbs
    try:
        loaded = rdb.load(payload, len(dbs), keep_expired=True)
        theirs_deleted = _read_deletions(loaded.aux.get(DELETIONS_AUX, b""))
        if own_deletions is None:
            own_deletions = _deletions_blob(_backlog_deletions(engine))
        mine_deleted = _read_deletions(own_deletions)
    except rdb.RdbError as e:
        raise ValueError(f"corrupt Active-Active state payload: {e}") from None
    sender = _Sender(server, loaded.aux)
    mine = engine.held_clock()
    changed: list[tuple[int, bytes]] = []
    for db in dbs:
        theirs = loaded.dbs.get(db.id) or {}
        keys = [k for k, v in db.data.items() if isinstance(v, ActiveStream)]
        # The sender's streams at keys that hold another kind here (or nothing) too.
        keys += [k for k in theirs if not isinstance(db.data.get(k), ActiveStream)]
        for key in keys:
            a = theirs.get(key)
            if _merge_key(server, db, key, a if isinstance(a, ActiveStream) else None, mine, sender):
                changed.append((db.id, key))
        changed.extend((db.id, key) for key in engine.lists.merge(db, sender.lists, mine, sender.vc))
        changed.extend((db.id, key) for key in engine.keyed.merge(db, sender.cells, mine, sender.vc,
                                                                           sender.cell_removals))
        changed.extend((db.id, key) for key in engine.hlls.merge(db, sender.hlls, sender.hll_dense, sender.tombstones, mine, sender.vc)
                       if (db.id, key) not in changed)
        _merge_ttls(engine, db, theirs, mine, sender)
    # Deletions by effects one side made and the other has not applied: what the other had
    # seen of a stream it deleted whole is known only from them (see the module docstring).
    deletions = [(db, op) for seq, db, op in theirs_deleted if seq > mine.get(sender.region, 0)]
    deletions += [(db, op) for seq, db, op in mine_deleted if seq > sender.vc.get(engine.region, 0)]
    for db_id, op in deletions:
        if db_id < len(dbs) and _delete_again(engine, dbs[db_id], op) and (db_id, op[1]) not in changed:
            changed.append((db_id, op[1]))
    _merge_engine(engine, sender)
    _after_merge(server, changed, payload, sender, own_deletions)


def _backlog_deletions(engine: Any) -> list[tuple[int, int, Op]]:
    """``(seq, db, op)`` of the deletions (XDEL, XTRIM, DEL) in this instance's own effects
    that its backlog still holds (those of records released once every peer had them
    included: backlog.py keeps them aside)."""
    out: list[tuple[int, int, Op]] = []
    for seq, wire in engine.backlog.deletion_records():  # most effects delete nothing: not decoded
        try:
            effects = decode_records(wire)
        except ValueError:
            continue
        out.extend((seq, db, op) for e in effects for db, op in e.ops if op[0] in DELETION_OPS)
    return out


def _deletions_blob(items: list[tuple[int, int, Op]]) -> bytes:
    """``(seq, db, op)`` items as RDB lengths and strings: seq, db, argc, args."""
    out = bytearray()
    for seq, db, op in items:
        out += rdb.encode_len(seq) + rdb.encode_len(db) + rdb.encode_len(len(op))
        for arg in op:
            out += rdb.encode_string(arg)
    return bytes(out)


def _read_deletions(blob: bytes) -> list[tuple[int, int, Op]]:
    r = rdb.RdbReader(blob)
    out: list[tuple[int, int, Op]] = []
    while r.pos < r.end:
        seq, db, argc = r.length(), r.length(), r.length()
        op = [r.string() for _ in range(argc)]
        if len(op) < 2 or op[0] not in DELETION_OPS:
            raise rdb.RdbError("malformed Active-Active deletion", r.pos)
        out.append((seq, db, op))
    return out


def _delete_again(engine: Any, db: Any, op: Op) -> bool:
    """Apply a deletion op's entry removals to the merged stream (a DEL's as the trim it
    does: its group removals are the tombstones' business); True if the key changed."""
    s = db.data.get(op[1])
    if not isinstance(s, ActiveStream):
        return False
    length = s.length
    name = b"XTRIM" if op[0] == b"DEL" else op[0]
    s.apply([name, *op[2:]])
    if s.is_gone():
        db.delete(op[1])
        engine.hlls.show(db, op[1])  # what a hidden other kind holds shows again
        return True
    return s.length != length


def _merge_key(server: Server, db: Any, key: bytes, a: ActiveStream | None,
               mine: dict[int, int], sender: _Sender) -> bool:
    """Merge the sender's copy ``a`` of ``key`` (None: it has none) into the receiver's;
    True if the receiver's copy changed."""
    engine = server.active_active
    b = db.data.get(key)
    if b is not None and not isinstance(b, ActiveStream):
        if kind_of(b) is None and not engine.hlls.has(db.id, key) and type(b) is not ListValue:
            return False
        b = None  # a list, HLL, string, hash, set or sorted set: a stream shows before them
    theirs = sender.vc
    ops: list[Op] = []
    a_subs = dict(a.sub_streams()) if a is not None else {}
    b_subs = dict(b.sub_streams()) if b is not None else {}
    raise_last: dict[int, int] = {}
    for r in sorted(set(a_subs) | set(b_subs)):
        asub, bsub = a_subs.get(r), b_subs.get(r)
        a_last = asub.last_id if asub is not None else 0
        b_last = bsub.last_id if bsub is not None else 0
        rb = b"%d" % r
        lost = r == engine.region and engine.recovering is not None
        if lost and asub is not None:
            # Our own entries we lost in a restart: the sender's copies are all there is of
            # them, below what we wrote since (which the sender may not have yet).
            for sid, fv in asub.iter_range():
                if bsub is None or not bsub.exists(sid):
                    ops.append([b"XADD", rb, _fmt(sid), *fv])
        elif asub is not None and _progress(r, mine) < _progress(r, theirs):
            # Entries above the receiver's last ID in r are the ones it has not seen.
            for sid, fv in asub.iter_range(b_last + 1, ID_MAX):
                ops.append([b"XADD", rb, _fmt(sid), *fv])
        if bsub is not None and bsub.length:
            bound = a_last if lost else ID_MAX if _progress(r, theirs) >= _progress(r, mine) else a_last
            gone = _missing(bsub, asub, bound)
            if gone:
                args: list[bytes] = []
                for sid in gone:
                    args += [rb, _fmt(sid)]
                ops.append([b"XDEL", *args])
        if a_last > b_last:
            raise_last[r] = a_last
    group_ops = _group_ops(engine, db.id, key, a, b, mine, sender)
    if not ops and not group_ops and not raise_last and (a is None or b is None or _same_meta(a, b)):
        return False
    if b is None:
        if not any(op[0] in (b"XADD", b"GCREATE") for op in ops + group_ops):
            return False
        b = ActiveStream(engine.region)
        # The key's TTL is the key's, not its kind's: a stream showing over another kind
        # keeps it (as applying the XADD does), else _merge_ttls, finding the register
        # unchanged, leaves the key without it.
        db.set(key, b, keep_ttl=key in db.data)
        engine._settle_ttl(db, key)
    for op in ops:
        b.apply(op)
    for r, last in raise_last.items():
        sub = b._sub(r)  # the sub-stream remembers what the sender had seen of r
        if last > sub.last_id:
            sub.last_id = last
    if a is not None:
        b.apply([b"SETID", _fmt(a.last_id), b"%d" % a.entries_added, _fmt(a.max_deleted_entry_id)])
    for op, clock in group_ops:
        b.apply(op)
        if clock is not None:
            b.set_group_clock(op[1], clock)
    b.drain()  # nothing here is a local write: no op may leave as this instance's
    if b.is_gone():
        db.delete(key)
        engine.hlls.show(db, key)  # what a hidden other kind holds shows again
    return True


def _progress(r: int, clock: dict[int, int]) -> int:
    """How much of sub-stream ``r`` an instance whose applied clock is ``clock`` has seen:
    a region's own sub-stream, by its count of that region's effects; one a RENAME moved
    (a key above MAX_REGION, naming the moving effect: ``seq << 24 | region << 16 | ...``,
    see ActiveStream.rekey), 1 once that effect is applied, else 0, since it gets no
    entries after the move. By the moved entries' own regions instead, a side that had
    deleted them at the old key but not seen the RENAME would delete the moved copies too,
    which applying every effect never does."""
    if r <= MAX_REGION:
        return clock.get(r, 0)
    return 1 if clock.get((r >> 16) & 0xFF, 0) >= r >> 24 else 0


def _missing(bsub: Stream, asub: Stream | None, bound: int) -> list[int]:
    """IDs of ``bsub``'s entries up to ``bound`` that ``asub`` lacks. Nodes both hold byte for
    byte (most of them, between instances in step) are skipped; the entries of the others
    are compared."""
    if asub is None:
        return [sid for sid, _fv in bsub.iter_range(0, bound)]
    theirs = dict(asub.raw_nodes())
    nodes = list(bsub.raw_nodes())
    out: list[int] = []
    for i, (master, lp) in enumerate(nodes):
        if master > bound:
            break
        if theirs.get(master) == lp:
            continue
        end = min(nodes[i + 1][0] - 1 if i + 1 < len(nodes) else ID_MAX, bound)
        have = {sid for sid, _fv in asub.iter_range(master, end)}
        out += [sid for sid, _fv in bsub.iter_range(master, end) if sid not in have]
    return out


def _same_meta(a: ActiveStream, b: ActiveStream) -> bool:
    return (a.last_id <= b.last_id and a.entries_added <= b.entries_added
            and a.max_deleted_entry_id <= b.max_deleted_entry_id)


def _seen(clock: dict[int, int], vc: dict[int, int]) -> bool:
    """Whether an instance whose applied clock is ``vc`` applied the effect ``clock`` stamps
    (a group's creating clock, its dot included): causal delivery makes that ``clock <= vc``."""
    return all(vc.get(r, 0) >= n for r, n in clock.items())


def _deleted_against(stones: list[tuple[int, int, bytes | None]], group: bytes, clock: dict[int, int]) -> bool:
    """Delete-wins: a delete of the stream or of ``group`` that the creation ``clock`` had
    not seen."""
    return any((g is None or g == group) and clock.get(o, 0) < s for o, s, g in stones)


def _group_ops(engine: Any, db_id: int, key: bytes, a: ActiveStream | None, b: ActiveStream | None,
               mine: dict[int, int], sender: _Sender) -> list[tuple[Op, dict[int, int] | None]]:
    """The group ops that merge the sender's groups of ``key`` into the receiver's, each
    with the creating clock to record (GCREATE) or None."""
    out: list[tuple[Op, dict[int, int] | None]] = []
    a_groups = {g.name: g for g in a.groups()} if a is not None else {}
    b_groups = {g.name: g for g in b.groups()} if b is not None else {}
    if not a_groups and not b_groups:
        return out
    here = engine.tombstones.get((db_id, key), ())
    there = sender.tombstones.get((db_id, key), ())
    for name in sorted(set(a_groups) | set(b_groups)):
        if name in a_groups and name not in b_groups:
            clock = a.group_vc.get(name)
            if clock is None or _seen(clock, mine) or _deleted_against(here, name, clock):
                continue  # destroyed here after seeing it, or a delete here wins
            st = a._gs.get(name)
            start = st.abase if st is not None else a_groups[name].last_id
            out.append(([b"GCREATE", name, _fmt(start), b"-1"], clock))
            out.extend((op, None) for op in _ack_ops(a, None, name))
        elif name in b_groups and name not in a_groups:
            clock = b.group_vc.get(name)
            if clock is not None and (_seen(clock, sender.vc) or _deleted_against(there, name, clock)):
                out.append(([b"GDESTROY", name], None))
        else:
            out.extend((op, None) for op in _ack_ops(a, b, name))
    return out


def _ack_ops(a: ActiveStream, b: ActiveStream | None, name: bytes) -> list[Op]:
    """An XACK op carrying the sender's acknowledged prefix of group ``name`` in each
    sub-stream where it is ahead of the receiver's (``b`` None: a group created now)."""
    sa = a._gs.get(name)
    if sa is None:
        return []
    sb = b._gs.get(name) if b is not None else None
    args: list[bytes] = []
    for r in sorted(set(sa.acked) | {r for r, _s in a.sub_streams()}):
        bound = sa.acked_to(r)
        if bound and (sb is None or bound > sb.acked_to(r)):
            args += [b"%d" % r, _fmt(bound)]
    return [[b"XACK", name, *args]] if args else []


def _merge_ttls(engine: Any, db: Any, theirs: dict[bytes, Any], mine: dict[int, int], sender: _Sender) -> None:
    """Each key's TTL register: the values neither side saw superseded. A value only one
    side holds stays unless the other had applied it (and so replaced it since)."""
    regs = engine.ttl
    keys = {k for (d, k) in regs if d == db.id} | {k for (d, k) in sender.ttl if d == db.id}
    for key in keys:
        here = regs.get((db.id, key), [])
        there = sender.ttl.get((db.id, key), [])
        merged = [t for t in here if t in there or sender.vc.get(t[1], 0) < t[2]]
        merged += [t for t in there if t not in here and mine.get(t[1], 0) < t[2]]
        if merged == here:
            continue
        if not merged:
            # Every TTL here was superseded there by a delete (a DEL drops the register):
            # the key, recreated since, has none, as where the effects are applied one by one.
            regs.pop((db.id, key), None)
            if key in db.data:
                db.persist(key)
            continue
        regs[(db.id, key)] = merged
        if key in db.data:
            values = [v for v, _o, _s in merged]
            if PERSIST in values:
                db.persist(key)
            else:
                db.set_expire(key, max(values))


def _merge_engine(engine: Any, sender: _Sender) -> None:
    """Clocks by maximum (the sender's clock is also what it reported), tombstones by union."""
    for r, n in sender.vc.items():
        if n > engine.vc.get(r, 0):
            engine.vc[r] = n
    if engine.vc.get(engine.region, 0) > engine.seq:
        engine.seq = engine.vc[engine.region]
    # The clock our next effects carry is cached while no peer's effect changes it: it
    # changed, and effects stamped with the old one did not say what they had seen (a DEL
    # right after a full sync left the merged elements it deleted alive at the peers).
    engine._clock_parts = None
    known = engine.known.setdefault(sender.region, {})
    for r, n in sender.vc.items():
        if n > known.get(r, 0):
            known[r] = n
    for where, stones in sender.tombstones.items():
        have = engine.tombstones.setdefault(where, [])
        for t in stones:
            if t not in have:
                have.append(t)


def _after_merge(server: Server, changed: list[tuple[int, bytes]], payload: bytes, sender: _Sender,
                 own_deletions: bytes) -> None:
    """What every change of the dataset gets: blocked readers and WATCH see the keys, the
    AOF records the merge (its loader merges it again) and plain replicas get the merged
    view of each key."""
    plain: list[tuple[int, Op]] = []
    feeds = server.propagation
    mirror = feeds.replication is not None or feeds.observer is not None  # else nobody reads them
    keyspace = server.keyspace
    for db_id, key in changed:
        db = keyspace[db_id]
        db.modified(key)
        server.blocking.signal(db_id, key)
        if not mirror:
            continue
        value = db.data.get(key)
        if value is None:
            plain.append((db_id, [b"DEL", key]))
        else:
            plain.extend((db_id, op) for op in rewrite(db, key, value))
    server.dirty += len(changed) or 1
    server.active_active._drain_pending()  # effects waiting for causes the merge brought (or made stale)
    record = [b"ACTIVEACTIVE", b"MERGE", b"%d" % sender.region, encode_vc(sender.vc), payload, own_deletions]
    server.propagate_applied(record, plain)


__all__ = ["ORIGIN_AUX", "Stream", "backlog_blob", "dump_state", "merge_state", "restore_backlog"]
