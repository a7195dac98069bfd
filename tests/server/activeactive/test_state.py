"""Full sync by state merge (server/activeactive/state.py): instances that missed each other's
effects exchange dump_state payloads, merge_state them, and end equal to each other and to
instances that got every effect one by one; deletions on either side stay deleted, entries
neither side saw go nowhere, groups follow delete-wins, clocks merge by maximum."""

from __future__ import annotations

import pytest
from rill.protocol.effects import decode_apply
from rill.server.activeactive import enable
from rill.server.activeactive.state import dump_state, merge_state
from rill.server.commands import load_all
from rill.server.server import Server
from rill.storage.stream import make_id
from rill.storage.stream.active import ActiveStream

K = b"x"


class Inst:
    """One region's in-process server with its engine; writes are made on the stream
    directly and sealed into effects as Server.call would."""

    def __init__(self, region: int) -> None:
        load_all()
        self.server = s = Server()
        self.engine = enable(s, region)
        self.region = region
        self.db = s.keyspace[0]
        self.sent: list = []

    def stream(self, key: bytes = K) -> ActiveStream:
        v = self.db.data.get(key)
        if v is None:
            v = ActiveStream(self.region)
            self.db.set(key, v)
        return v

    def write(self, fn, key: bytes = K):
        s = self.stream(key)
        fn(s)
        self.engine.unit.extend((0, [op[0], key, *op[1:]]) for op in s.drain())
        self._seal()

    def delete(self, key: bytes = K) -> None:
        s = self.db.data[key]
        s.drain()
        self.engine.unit.append((0, [b"DEL", key, *s.observed()]))
        self.db.delete(key)
        self._seal()

    def expire(self, at: int, key: bytes = K) -> None:
        if at < 0:
            self.db.persist(key)
        else:
            self.db.set_expire(key, at)
        self.engine.unit.append((0, [b"EXPIRE", key, b"%d" % at]))
        self._seal()

    def _seal(self) -> None:
        record = self.engine.seal([])
        if record is not None:
            self.sent.extend(decode_apply(record))

    def xadd(self, ms: int) -> None:
        self.write(lambda s: s.add([b"f", b"%d" % ms], make_id(ms, self.region)))

    def deliver(self, other: Inst, upto: int | None = None) -> None:
        """Hand this instance's own effects (the first ``upto``) to ``other``."""
        for e in self.sent[:upto]:
            other.engine.receive(e)

    def view(self) -> tuple:
        out = {}
        for key, s in sorted(self.db.data.items()):
            out[key] = (
                s.range(),
                sorted(g.name for g in s.groups()),
                self.db.expires.get(key),
            )
        return out


def pair(regions=(1, 2)) -> list[Inst]:
    return [Inst(r) for r in regions]


def full_sync(src: Inst, dst: Inst) -> None:
    merge_state(dst.server, dump_state(src.server))


def script(a: Inst, b: Inst, connected: bool) -> None:
    """Concurrent writes; with ``connected`` every effect is delivered as it is made."""
    for ms in range(1, 6):
        a.xadd(ms)
    a.deliver(b)  # both see A's first five entries
    mark = len(a.sent)
    b.write(lambda s: s.delete(make_id(2, 1)))  # B deletes A's entry 2
    for ms in (6, 7, 8):
        b.xadd(ms)
    a.write(lambda s: s.delete(make_id(4, 1)))  # A deletes its entry 4
    for ms in (9, 10):
        a.xadd(ms)
    a.write(lambda s: s.create_group(b"g", 0, 0))
    b.write(lambda s: s.create_group(b"h", 0, 0))
    if connected:
        for e in a.sent[mark:]:
            b.engine.receive(e)
        b.deliver(a)


def test_full_syncs_both_ways_reach_what_every_effect_reaches():
    a, b = pair()
    script(a, b, connected=False)
    full_sync(a, b)
    full_sync(b, a)
    ref_a, ref_b = pair()
    script(ref_a, ref_b, connected=True)
    assert a.view() == b.view() == ref_a.view() == ref_b.view()
    ids = [sid >> 64 for sid, _fv in a.db.data[K].range()]
    assert ids == [1, 3, 5, 6, 7, 8, 9, 10]
    assert a.engine.vc == b.engine.vc == {1: len(a.sent), 2: len(b.sent)}
    # Merging the same state again changes nothing: the merge is idempotent.
    full_sync(a, b)
    assert b.view() == a.view()


@pytest.mark.parametrize("first", ["deleter", "writer"])
def test_a_stream_deleted_whole_stays_deleted_across_full_syncs(first):
    """Region 1 deletes a stream whose entries from region 2 it had seen, while region 2 adds
    more: after full syncs both ways (in either order) only region 2's new entry is left,
    as when the effects are delivered, though neither side's stream remembers what region
    1 had seen (the deletion ops ride in the payload and the receiver's backlog)."""
    a, b = pair()
    b.xadd(1)
    b.xadd(2)
    b.deliver(a)
    a.delete()
    b.xadd(3)
    if first == "deleter":
        full_sync(a, b)
        full_sync(b, a)
    else:
        full_sync(b, a)
        full_sync(a, b)
    assert [sid >> 64 for sid, _ in a.db.data[K].range()] == [3]
    assert a.view() == b.view()


def test_merge_after_partial_delivery_keeps_seen_deletions():
    a, b = pair()
    for ms in range(1, 4):
        a.xadd(ms)
    a.deliver(b)
    a.write(lambda s: s.delete(make_id(1, 1)))
    a.xadd(4)
    a.deliver(b, upto=4)  # B saw A's XDEL but not entry 4
    b.write(lambda s: s.delete(make_id(2, 1)))
    full_sync(a, b)
    assert [sid >> 64 for sid, _ in b.db.data[K].range()] == [3, 4]


def test_group_delete_wins_across_a_full_sync():
    a, b = pair()
    a.xadd(1)
    a.write(lambda s: s.create_group(b"g1", 0, 0))
    a.deliver(b)
    # A deletes the stream; B concurrently creates another group on it.
    a.delete()
    b.write(lambda s: s.create_group(b"g2", 0, 0))
    full_sync(a, b)
    full_sync(b, a)
    assert a.view() == b.view() == {}


def test_destroyed_group_is_not_brought_back():
    a, b = pair()
    a.xadd(1)
    a.write(lambda s: s.create_group(b"g", 0, 0))
    a.deliver(b)
    b.write(lambda s: s.destroy_group(b"g"))
    full_sync(a, b)  # A still has g: B destroyed it after seeing it
    assert b.view()[K][1] == []
    full_sync(b, a)  # and A learns the destroy
    assert a.view() == b.view()


def test_ttl_registers_merge():
    a, b = pair()
    a.xadd(1)
    a.deliver(b)
    a.expire(10_000_000_000_000)
    b.expire(20_000_000_000_000)
    full_sync(a, b)
    full_sync(b, a)
    assert a.db.expires[K] == b.db.expires[K] == 20_000_000_000_000  # the longest wins
    a.expire(-1)  # PERSIST after seeing both
    full_sync(a, b)
    assert K not in b.db.expires


def test_payload_is_checked():
    a, b = pair()
    a.xadd(1)
    payload = dump_state(a.server)
    with pytest.raises(ValueError):
        merge_state(b.server, payload[:-3] + b"\x00\x00\x00")
    assert b.view() == {}


def test_full_sync_between_real_instances():
    """A backlog too small for what a paused link missed: the sender forks, its state goes
    as MERGE, and both regions end equal, with what each deleted still deleted."""
    from tests.server.activeactive.cluster import Cluster, group_names, ids

    with Cluster(2, "--active-active-backlog-size", "16384", appendonly=True) as c:
        a, b = c[0], c[1]
        for i in range(20):
            a.call("XADD", "s", "*", "n", str(i))
        a.call("XGROUP", "CREATE", "s", "g", "0")
        c.sync()
        c.pause_all()
        first = ids(a.call("XRANGE", "s", "-", "+"))
        a.call("XDEL", "s", first[0])
        b.call("XDEL", "s", first[1])
        for i in range(400):  # far more than 16 KB of records
            a.call("XADD", "s", "*", "n", str(i), "pad", "x" * 64)
        b.call("XADD", "s", "*", "from", "two")
        b.call("XGROUP", "CREATE", "s", "h", "$")
        a.call("XGROUP", "DESTROY", "s", "g")
        c.sync()
        assert [p["sync"] for p in a.status()] == [b"full"]
        xa, xb = a.call("XRANGE", "s", "-", "+"), b.call("XRANGE", "s", "-", "+")
        assert xa == xb
        assert len(xa) == 20 - 2 + 400 + 1
        assert group_names(a, "s") == group_names(b, "s") == ["h"]
        assert a.info()["active_active_vc"] == b.info()["active_active_vc"]
        # The merge is in region 2's AOF: a restart rebuilds the same state.
        c.kill(1)
        c.restart(1)
        assert b.call("XRANGE", "s", "-", "+") == xa
        assert group_names(b, "s") == ["h"]


def restarted_from_rdb(inst: Inst) -> Inst:
    """``inst`` as it comes back from its RDB: a new instance of its region given its
    streams, its engine state (``aa-state``) and its backlog (``aa-backlog``)."""
    from rill.server.activeactive.state import backlog_blob, restore_backlog

    back = Inst(inst.region)
    for key, value in inst.db.data.items():
        back.db.set(key, value)
    back.engine.import_state(inst.engine.export_state())
    restore_backlog(back.engine, backlog_blob(inst.engine))
    back.sent = list(inst.sent)
    return back


def test_deletions_kept_aside_survive_a_restart_from_rdb_and_reach_a_full_sync():
    """Region 1 deletes a stream whole; region 2 had acknowledged it (the record is released,
    kept aside) but comes back without it, with an entry region 1 never saw. Region 1,
    restarted from its RDB, still re-applies the deletion in the full sync: only the new
    entry is left."""
    a, b = pair()
    b.xadd(1)
    b.xadd(2)
    b.deliver(a)
    a.delete()
    a.engine.backlog.release(a.engine.seq)  # every peer had it: kept aside only
    assert len(a.engine.backlog) == 0 and a.engine.backlog.released_deletions()
    a = restarted_from_rdb(a)
    assert [seq for seq, _ in a.engine.backlog.deletion_records()] == [a.engine.seq]
    b.xadd(3)  # (b never got the DEL)
    full_sync(a, b)
    assert [sid >> 64 for sid, _ in b.db.data[K].range()] == [3]


def test_an_aa_backlog_of_version_1_still_loads():
    """The value written before versions: records back to back, no header, nothing aside."""
    from rill.persistence import rdb
    from rill.server.activeactive.state import restore_backlog

    a = Inst(1)
    for ms in range(1, 4):
        a.xadd(ms)
    old = b"".join(rdb.encode_len(seq) + rdb.encode_len(7) + rdb.encode_string(w)
                   for seq, w in a.engine.backlog.records_from(1))
    back = Inst(1)
    back.engine.import_state(a.engine.export_state())
    restore_backlog(back.engine, old)
    assert back.engine.backlog.records_from(1) == a.engine.backlog.records_from(1)
    assert back.engine.backlog.released_deletions() == []


def test_an_aa_backlog_of_an_unknown_version_is_refused():
    from rill.server.activeactive.state import BACKLOG_VERSION, backlog_blob, restore_backlog

    a = Inst(1)
    a.xadd(1)
    blob = backlog_blob(a.engine)
    assert blob[:2] == b"\x00%c" % BACKLOG_VERSION
    with pytest.raises(ValueError, match="unknown Active-Active backlog version 9"):
        restore_backlog(Inst(1).engine, b"\x00\x09" + blob[2:])
    with pytest.raises(ValueError, match="corrupt Active-Active backlog"):
        restore_backlog(Inst(1).engine, blob[:-1])
