"""plain_ops: after each kind of peer op applied to an Active-Active stream, the commands it
gives bring a plain replica's copy (an in-process rill with no Active-Active) to the key's
merged view, the cheap command where one exists and DEL + RESTORE otherwise."""

from __future__ import annotations

from rill.server.activeactive.plain import plain_ops, rebuild_group
from rill.server.commands import load_all
from rill.server.server import Server
from rill.storage.stream import Stream, make_id
from rill.storage.stream.active import ActiveStream

K = b"x"


def fmt(sid: int) -> bytes:
    return b"%d-%d" % (sid >> 64, sid & ((1 << 64) - 1))


class Pair:
    """An Active-Active key in a database (applied to as the engine applies a peer's op)
    and a plain replica that follows it through plain_ops only."""

    def __init__(self) -> None:
        load_all()
        self.master = Server().keyspace[0]
        self.replica = Server()
        self.client = self.replica.new_client()
        self.client.id = -1  # the master's link: commands obeyed as they come

    def apply(self, op: list[bytes]) -> list[list[bytes]]:
        db = self.master
        before = db.data.get(K)
        last = before.last_id if isinstance(before, Stream) else None
        name = op[0]
        if name == b"EXPIRE":
            at = int(op[2])
            if at < 0:
                db.persist(K)
            else:
                db.set_expire(K, at)
        else:
            if before is None:
                db.set(K, ActiveStream(1))
            db.data[K].apply([name, *op[2:]])
            if db.data[K].is_gone():
                db.delete(K)
        cmds = plain_ops(db, K, last, op)
        for argv in cmds:
            self.client.out.clear()
            self.replica.execute(self.client, argv)
            assert not b"".join(self.client.out).startswith(b"-"), (argv, self.client.out)
        self.check()
        return cmds

    def check(self) -> None:
        mine = self.master.data.get(K)
        theirs = self.replica.keyspace[0].data.get(K)
        if mine is None:
            assert theirs is None
            return
        plain = mine.to_plain()
        assert theirs.range() == plain.range()
        assert (theirs.last_id, theirs.entries_added, theirs.max_deleted_entry_id) == (
            plain.last_id, plain.entries_added, plain.max_deleted_entry_id)
        groups = [(g.name, g.last_id, g.entries_read,
                   [(sid, n.consumer.name, n.delivery_count) for sid, n in g.pel.items()])
                  for g in theirs.groups()]
        assert groups == [(g.name, g.last_id, g.entries_read,
                           [(sid, n.consumer.name, n.delivery_count) for sid, n in g.pel.items()])
                          for g in plain.groups()]
        assert self.replica.keyspace[0].expires.get(K) == self.master.expires.get(K)


def xadd(region: int, ms: int, value: bytes = b"v") -> list[bytes]:
    return [b"XADD", K, b"%d" % region, fmt(make_id(ms, region)), b"f", value]


def test_each_op_mirrored():
    p = Pair()
    assert p.apply(xadd(2, 100)) == [[b"XADD", K, b"100-2", b"f", b"v"]]
    assert p.apply(xadd(1, 200))[0][0] == b"XADD"
    # An entry landing before the last ID: the key is rewritten whole.
    assert [c[0] for c in p.apply(xadd(3, 150))] == [b"DEL", b"RESTORE"]
    for ms in range(300, 310):
        p.apply(xadd(2, ms))
    assert p.apply([b"XDEL", K, b"2", b"301-2"]) == [[b"XDEL", K, b"301-2"]]
    assert p.apply([b"GCREATE", K, b"g", b"0-0", b"0"]) == [
        [b"XGROUP", b"DESTROY", K, b"g"], [b"XGROUP", b"CREATE", K, b"g", b"0-0", b"ENTRIESREAD", b"0"]]
    # The same name created concurrently elsewhere: the replica is not refused (BUSYGROUP).
    p.apply([b"GCREATE", K, b"g", b"0-0", b"0"])
    # Local deliveries reach the replica by ordinary replication; here, by a rebuild.
    s = p.master.data[K]
    g = s.get_group(b"g")
    c, _ = g.get_or_create_consumer(b"alice", 5)
    s.read_group(g, c, count=6, now_ms=1000)
    for argv in rebuild_group(K, g):
        p.replica.execute(p.client, argv)
    p.check()
    # A peer's acknowledged prefix drops pending entries and moves the group: rebuilt.
    cmds = p.apply([b"XACK", K, b"g", b"2", b"303-2"])
    assert [c[:2] for c in cmds[:2]] == [[b"XGROUP", b"DESTROY"], [b"XGROUP", b"CREATE"]]
    assert p.apply([b"SETID", K, b"900-0", b"50", b"0-0"])[0][0] == b"XSETID"
    assert p.apply([b"EXPIRE", K, b"99999999999999"]) == [[b"PEXPIREAT", K, b"99999999999999"]]
    assert p.apply([b"EXPIRE", K, b"-1"]) == [[b"PERSIST", K]]
    # A trim of region 2 that older entries of regions 1 and 3 survive: rewritten; one that
    # leaves nothing at or below its bound: the same trim by ID.
    assert [c[0] for c in p.apply([b"XTRIM", K, b"2", b"304-2"])] == [b"DEL", b"RESTORE"]
    p.apply([b"XDEL", K, b"1", b"200-1", b"3", b"150-3"])
    assert p.apply([b"XTRIM", K, b"2", b"305-2"]) == [[b"XTRIM", K, b"MINID", b"=", b"305-3"]]
    p.apply([b"EXPIRE", K, b"99999999999999"])
    assert [c[0] for c in p.apply(xadd(1, 50))] == [b"DEL", b"RESTORE"]  # TTL kept (ABSTTL)
    assert p.apply([b"GDESTROY", K, b"g"]) == [[b"XGROUP", b"DESTROY", K, b"g"]]
    # A DEL that concurrent entries survive, then one that takes everything.
    assert [c[0] for c in p.apply([b"DEL", K, b"1", b"200-1", b"2", b"305-2"])] == [b"DEL", b"RESTORE"]
    assert p.apply([b"DEL", K, b"1", b"200-1", b"2", b"309-2", b"3", b"150-3"]) == [[b"DEL", K]]


def test_group_made_with_the_key_and_duplicates():
    p = Pair()
    assert p.apply([b"GCREATE", K, b"g", b"0-0", b"-1"]) == [
        [b"XGROUP", b"CREATE", K, b"g", b"0-0", b"MKSTREAM", b"ENTRIESREAD", b"-1"]]
    p.apply([b"XADD", K, b"2", b"10-1", b"f", b"two"])
    # The same ID from another region (semi-strict/liberal): the plain view keeps the
    # lowest region's entry, so the key is rewritten.
    assert [c[0] for c in p.apply([b"XADD", K, b"1", b"10-1", b"f", b"one"])] == [b"DEL", b"RESTORE"]
    # Deleting one of two duplicates leaves the other: rewritten, not XDEL.
    assert [c[0] for c in p.apply([b"XDEL", K, b"1", b"10-1"])] == [b"DEL", b"RESTORE"]
    assert p.replica.keyspace[0].data[K].range() == [(make_id(10, 1), [b"f", b"two"])]
