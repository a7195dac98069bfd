"""The Active-Active engine in-process: several Servers, their effect records carried by
hand in chosen orders (what the links do over the network), so every rule of
docs/active-active.md that the engine owns is checked deterministically and fast."""

from __future__ import annotations

import pytest
from rill.protocol.effects import decode_effect, decode_records, encode_effect
from rill.server.commands import load_all
from rill.server.config import Config
from rill.server.server import Server
from rill.storage.list import ListValue
from rill.storage.stream.active import ActiveStream

load_all()


class Region:
    """One in-process instance and a client of it."""

    def __init__(self, region: int, **config: str) -> None:
        c = Config()
        c.set("active-active-id", str(region), startup=True)
        for name, value in config.items():
            c.set(name.replace("_", "-"), value, startup=True)
        self.server = Server(c)
        self.engine = self.server.active_active
        self.client = self.server.new_client()
        self.shipped: dict[int, int] = {}  # peer region -> own records carried so far

    def __call__(self, *args):
        argv = [a if isinstance(a, bytes) else str(a).encode() for a in args]
        c = self.client
        self.server.execute(c, argv)
        out = b"".join(bytes(x) for x in c.out)
        c.out.clear()
        return out

    def wires(self, since: int = 0) -> list[bytes]:
        """The backlog's compact records after ``since``, as a link sends them."""
        return [wire for _seq, wire in self.engine.backlog.records_from(since + 1)]

    def records(self, since: int = 0) -> list[list[bytes]]:
        """The same records as one APPLY's argv each in the argv format (easier to read,
        and still accepted)."""
        return [encode_effect(e) for wire in self.wires(since) for e in decode_records(wire)]

    def send(self, other: Region) -> None:
        """Carry every record ``other`` has not had yet (a link's partial resync): one
        APPLY with all of them, as a link batches them."""
        done = self.shipped.get(other.engine.region, 0)
        wires = self.wires(done)
        if wires:
            other(b"ACTIVEACTIVE", b"APPLY", b"".join(wires))
        self.shipped[other.engine.region] = self.engine.seq


def sync(*regions: Region) -> None:
    for _ in range(2):
        for a in regions:
            for b in regions:
                if a is not b:
                    a.send(b)


def xrange(r: Region, key: str = "s") -> bytes:
    return r("XRANGE", key, "-", "+")


def ids(r: Region, key: str = "s") -> list[bytes]:
    s = r.server.keyspace[0].data.get(key.encode())
    return [] if s is None else [b"%d-%d" % (sid >> 64, sid & (2**64 - 1)) for sid, _ in s.range()]


@pytest.fixture
def two():
    return Region(1), Region(2)


@pytest.fixture
def three():
    return Region(1), Region(2), Region(3)


def test_concurrent_appends_converge_in_either_order(two):
    a, b = two
    a("XADD", "s", "*", "text", "hello")
    b("XADD", "s", "*", "text", "goodbye")
    assert len(ids(a)) == len(ids(b)) == 1
    sync(a, b)
    assert xrange(a) == xrange(b)
    assert sorted(int(i.split(b"-")[1]) & 255 for i in ids(a)) == [1, 2]


def test_an_effect_waits_for_its_causes(three):
    a, b, c = three
    b("XADD", "s", "*", "f", "1")
    b.send(c)
    c("XDEL", "s", ids(c)[0].decode())  # made after seeing b's entry
    c.send(a)  # reaches a before b's entry does
    assert a.engine.pending_count() == 1 and ids(a) == []
    b.send(a)
    assert a.engine.pending_count() == 0
    assert ids(a) == [] and a.server.keyspace[0].data.get(b"s") is None


def test_applying_twice_changes_nothing(two):
    a, b = two
    a("XADD", "s", "*", "f", "v")
    (record,) = a.records()
    assert b(*record) == b":1\r\n"
    assert b(*record) == b":1\r\n"
    assert len(ids(b)) == 1 and b.engine.applied_effects == 1


def test_delete_is_observed_remove(two):
    """Seed 004: DEL at region 1 while region 2 adds; the unseen entry survives."""
    a, b = two
    a("XADD", "s", "*", "text", "hello")
    sync(a, b)
    a("DEL", "s")
    b("XADD", "s", "*", "text", "goodbye")
    sync(a, b)
    assert xrange(a) == xrange(b)
    (only,) = ids(a)
    assert int(only.split(b"-")[1]) & 255 == 2


@pytest.mark.parametrize("first", ["delete", "create"])
def test_delete_wins_over_a_concurrent_group(two, first):
    a, b = two
    a("XGROUP", "CREATE", "x", "group1", "0", "MKSTREAM")
    sync(a, b)
    a("DEL", "x")
    b("XGROUP", "CREATE", "x", "group2", "0")
    if first == "delete":
        a.send(b)
        b.send(a)
    else:
        b.send(a)
        a.send(b)
    assert a("EXISTS", "x") == b("EXISTS", "x") == b":0\r\n"


def test_destroy_wins_over_a_concurrent_create_of_the_same_name(three):
    a, b, c = three
    a("XGROUP", "CREATE", "x", "group1", "0", "MKSTREAM")
    a.send(b)  # region 3 has not seen it (seed 004: XINFO GROUPS x -> [] there)
    a("XGROUP", "DESTROY", "x", "group1")
    c("XGROUP", "CREATE", "x", "group1", "0")
    sync(a, b, c)
    assert a("EXISTS", "x") == b("EXISTS", "x") == c("EXISTS", "x") == b":0\r\n"


def test_tombstones_go_once_every_instance_saw_the_delete(three):
    a, b, c = three
    a("XADD", "s", "*", "f", "v")
    a("DEL", "s")
    assert a.engine.tombstone_count() == 1
    sync(a, b, c)
    # Each instance learns the others' clocks from their effects or heartbeats.
    for x in (a, b, c):
        for y in (a, b, c):
            if x is not y:
                y.engine.heard(x.engine.region, dict(x.engine.vc))
    for x in (a, b, c):
        x.engine.collect_tombstones()
        assert x.engine.tombstone_count() == 0


def test_tombstones_stay_while_an_instance_has_not_seen_the_delete(three):
    a, b, c = three
    a("XADD", "s", "*", "f", "v")
    a("DEL", "s")
    a.send(b)
    b.engine.heard(1, dict(a.engine.vc))
    a.engine.heard(2, dict(b.engine.vc))
    a.engine.heard(3, dict(c.engine.vc))
    a.engine.collect_tombstones()
    assert a.engine.tombstone_count() == 1


def test_longest_ttl_wins_and_persist_beats_every_ttl(two):
    a, b = two
    a("XADD", "s", "*", "f", "v")
    sync(a, b)
    a("PEXPIREAT", "s", "4000000000000")
    b("PEXPIREAT", "s", "4000000005000")
    sync(a, b)
    assert a("PEXPIRETIME", "s") == b("PEXPIRETIME", "s") == b":4000000005000\r\n"
    a("PERSIST", "s")
    b("PEXPIREAT", "s", "4000000009000")
    sync(a, b)
    assert a("PEXPIRETIME", "s") == b("PEXPIRETIME", "s") == b":-1\r\n"
    b("PEXPIREAT", "s", "4000000001000")  # after seeing the PERSIST: a TTL again
    sync(a, b)
    assert a("PEXPIRETIME", "s") == b("PEXPIRETIME", "s") == b":4000000001000\r\n"


def test_commands_without_a_sound_meaning_are_refused_before_they_run(two):
    a, _b = two
    assert a("COPY", "a", "b") == b"-ERR Active-Active: COPY is not supported\r\n"
    assert a("SWAPDB", "0", "1") == b"-ERR Active-Active: SWAPDB is not supported\r\n"
    assert a.engine.seq == 0


def test_a_key_from_before_the_mode_was_on_is_refused(two):
    a, _b = two
    a.server.keyspace[0].set(b"k", b"v")  # loaded from a dataset without merge state
    refusal = b"-ERR Active-Active: this key was written before Active-Active was on and cannot merge\r\n"
    assert a("SET", "k", "w") == refusal
    assert a("DEL", "k") == refusal
    assert a("GET", "k") == b"$1\r\nv\r\n"
    a.server.keyspace[0].set(b"l", ListValue([b"v"]))
    assert a("RPUSH", "l", "w") == refusal
    assert a("EXPIRE", "l", "100") == refusal
    assert a("EXISTS", "l") == b":1\r\n"


def test_a_transaction_travels_as_one_effect(two):
    a, b = two
    a("MULTI")
    a("XADD", "s", "*", "n", "1")
    a("XADD", "t", "*", "n", "2")
    a("XGROUP", "CREATE", "s", "g", "0")
    a("EXEC")
    assert a.engine.seq == 1
    e = decode_effect(a.records()[0])
    assert [op[0] for _db, op in e.ops] == [b"XADD", b"XADD", b"GCREATE"]
    sync(a, b)
    assert xrange(b, "s") == xrange(a, "s") and xrange(b, "t") == xrange(a, "t")


def test_an_xadd_to_a_stream_here_is_one_op_written_from_its_argv(two):
    """The usual XADD (``*``, a stream that is here) is encoded as it runs, not journaled:
    its record holds exactly the op the journal would have made, with the ID it replied."""
    a, b = two
    a("XADD", "s", "*", "f", "1")
    reply = a("XADD", "s", "*", "f", "2", "g", "x" * 300)
    sid = reply.split(b"\r\n")[1]
    [e] = decode_records(a.wires(1)[0])
    assert e.ops == [(0, [b"XADD", b"s", b"1", sid, b"f", b"2", b"g", b"x" * 300])]
    assert a.server.keyspace[0].data[b"s"].journal == []
    sync(a, b)
    assert xrange(b) == xrange(a) and len(ids(b)) == 2


def test_ops_keep_their_order_when_an_effect_mixes_encoded_and_listed_ops(two):
    """In a transaction an XADD encoded as it ran comes first only while nothing came
    before it: after a DEL the next XADD is listed behind it, in the order they ran."""
    a, b = two
    a("XADD", "s", "*", "f", "0")
    a("XADD", "t", "*", "f", "0")
    sync(a, b)
    a("MULTI")
    a("XADD", "s", "*", "f", "1")
    a("DEL", "s")
    a("XADD", "s", "*", "f", "2")
    a("XADD", "t", "*", "f", "3")
    a("EXEC")
    [e] = decode_records(a.wires(2)[0])
    assert [(op[0], op[1]) for _db, op in e.ops] == [(b"XADD", b"s"), (b"DEL", b"s"), (b"XADD", b"s"), (b"XADD", b"t")]
    sync(a, b)
    assert xrange(b) == xrange(a) and len(ids(b)) == 1
    assert xrange(b, "t") == xrange(a, "t") and len(ids(b, "t")) == 2


def test_an_xadd_that_fails_after_adding_still_ships_its_entry(two, monkeypatch):
    """An entry added by an XADD that then raised (a keyspace event's subscriber failed)
    is in the stream, so its op goes with the effect as a journaled one would."""
    from rill.server import notify

    a, b = two
    a("XADD", "s", "*", "f", "1")
    engine = a.engine
    cmd = a.server.table.lookup([b"XADD"])

    def failing(*_args):
        raise RuntimeError("subscriber failed")

    monkeypatch.setattr(notify, "notifier", failing)
    with pytest.raises(RuntimeError):
        engine.run(a.client, cmd, [b"XADD", b"s", b"*", b"f", b"2"])
    monkeypatch.setattr(notify, "notifier", None)
    engine.seal([], False)
    [e] = decode_records(a.wires(1)[0])
    assert [op[:3] + op[4:] for _db, op in e.ops] == [[b"XADD", b"s", b"1", b"f", b"2"]]
    sync(a, b)
    assert xrange(b) == xrange(a) and len(ids(b)) == 2


def test_a_script_travels_as_one_effect(two):
    a, b = two
    a("EVAL", "redis.call('XADD', KEYS[1], '*', 'a', '1'); redis.call('XADD', KEYS[1], '*', 'b', '2')", "1", "s")
    assert a.engine.seq == 1
    sync(a, b)
    assert xrange(b) == xrange(a) and len(ids(b)) == 2


def test_rename_moves_what_it_saw_and_drops_groups(two):
    a, b = two
    a("XADD", "s", "*", "f", "1")
    a("XGROUP", "CREATE", "s", "g", "0")
    sync(a, b)
    a("RENAME", "s", "t")
    b("XADD", "s", "*", "f", "2")  # concurrent: stays in s
    sync(a, b)
    for r in (a, b):
        assert len(ids(r, "t")) == 1 and len(ids(r, "s")) == 1
        assert r("XINFO", "GROUPS", "t") == b"*0\r\n"


def test_flushall_deletes_what_this_instance_saw(two):
    a, b = two
    a("XADD", "s", "*", "f", "1")
    a("SELECT", "3")
    a("XADD", "t", "*", "f", "1")
    a("SELECT", "0")
    sync(a, b)
    a("FLUSHALL")
    b("XADD", "u", "*", "f", "1")
    sync(a, b)
    for r in (a, b):
        assert r("KEYS", "*") == b"*1\r\n$1\r\nu\r\n"


def test_the_aof_keeps_the_commands_and_the_record_as_one_unit(two):
    a, _b = two
    seen = []
    a.server.propagation.attach("aof", seen.append)
    a("XADD", "s", "5-0", "f", "v") if ActiveStream.id_mode != "strict" else a("XADD", "s", "*", "f", "v")
    (unit,) = seen
    assert unit[0][1] == [b"MULTI"] and unit[-1][1] == [b"EXEC"]
    assert unit[1][1][0] == b"XADD"
    assert unit[2][1][:2] == [b"ACTIVEACTIVE", b"APPLY"]


def test_a_peers_effect_reaches_the_aof_as_its_record_and_replicas_as_commands(two):
    a, b = two
    aof, repl = [], []
    b.server.propagation.attach("aof", aof.append)
    b.server.propagation.attach("replication", repl.append)
    a("XADD", "s", "*", "f", "v")
    a.send(b)
    assert aof == [[(0, [b"ACTIVEACTIVE", b"APPLY", a.wires()[0]])]]
    ((_db, cmd),) = repl[0]
    assert cmd[:2] == [b"XADD", b"s"] and cmd[3:] == [b"f", b"v"]


def test_a_plain_copy_follows_through_the_mirroring_commands(two):
    """What replicas get keeps an ordinary server equal, even when a peer's entry lands
    before the last ID (the key is rewritten whole)."""
    a, b = two
    load_all()
    plain = Server()
    pc = plain.new_client()
    b.server.propagation.attach("replication", lambda ops: [plain.execute(pc, argv) for _db, argv in ops])
    b("XADD", "s", "*", "f", "late")
    a("XADD", "s", "1-1", "f", "early") if ActiveStream.id_mode != "strict" else a("XADD", "s", "1", "f", "early")
    a.send(b)
    pc.out.clear()
    plain.execute(pc, [b"XRANGE", b"s", b"-", b"+"])
    assert b"".join(bytes(x) for x in pc.out) == xrange(b)


def test_engine_state_survives_export_and_import(two):
    a, b = two
    a("XADD", "s", "*", "f", "v")
    a("PEXPIREAT", "s", "4000000000000")
    a("XADD", "t", "*", "f", "v")
    a("DEL", "t")
    sync(a, b)
    blob = a.engine.export_state()
    again = Region(1)
    again.engine.import_state(blob)
    e1, e2 = a.engine, again.engine
    assert (e2.seq, e2.vc, e2.tombstones, e2.ttl) == (e1.seq, e1.vc, e1.tombstones, e1.ttl)
    with pytest.raises(ValueError):
        Region(2).engine.import_state(blob)


def test_hello_from_a_peer_holding_effects_we_lost_jumps_our_sequence(two):
    a, _b = two
    region, vc, full = a.engine.hello(2, {1: 5, 2: 3})
    assert region == 1 and full is True
    assert a.engine.seq == 5 and vc[1] == 5
    a("XADD", "s", "*", "f", "v")
    assert a.engine.seq == 6  # never reuses 1..5


def test_a_stream_from_before_the_mode_was_on_is_not_written(two):
    from rill.storage.stream import Stream

    a, _b = two
    old = Stream()
    old.add([b"f", b"v"], 1 << 64)
    a.server.keyspace[0].set(b"old", old)
    assert a("XADD", "old", "*", "f", "v").startswith(b"-ERR Active-Active: this stream was written before")
    assert a("XLEN", "old") == b":1\r\n"


def test_info_has_an_active_active_section_only_while_the_mode_is_on(two):
    a, _b = two
    a("XADD", "s", "*", "f", "v")
    info = a("INFO", "active_active")
    assert b"# Active_Active\r\nactive_active_id:1\r\n" in info
    assert b"active_active_seq:1\r\n" in info and b"active_active_vc:1:1\r\n" in info
    plain = Server()
    pc = plain.new_client()
    plain.execute(pc, [b"INFO", b"everything"])
    assert b"Active_Active" not in b"".join(bytes(x) for x in pc.out)


def test_own_effects_lost_in_a_restart_come_back_with_the_peers_full_sync(two):
    """Region 2 restarts from nothing after region 1 applied its XADD: region 1's HELLO
    makes it jump its sequence and ask for a full sync, and that merge brings the entry
    back (it is ours, lost; not something we deleted)."""
    from rill.server.activeactive.state import dump_state, merge_state

    a, b = two
    b("XADD", "s", "*", "f", "lost")
    b.send(a)
    again = Region(2)  # restarted with no persistence
    _region, _vc, full = again.engine.hello(1, dict(a.engine.vc))
    assert full is True and again.engine.seq == 1
    again("XADD", "s", "*", "f", "after")  # a write before the merge arrives: seq 2
    merge_state(again.server, dump_state(a.server))
    again.engine.merged(1)
    assert again.engine.recovering is None
    fields = [fv for _sid, fv in again.server.keyspace[0].data[b"s"].range()]
    assert fields == [[b"f", b"lost"], [b"f", b"after"]]
    again.shipped[1] = 1  # region 1 has effect 1 already (it is where it came from)
    again.send(a)
    assert xrange(a) == xrange(again)


def test_tombstones_stay_while_a_configured_peer_is_unknown(two):
    a, b = two

    class Links:
        def peer_regions(self):
            return [2, 0]  # a third peer configured but never heard from

    a("XADD", "s", "*", "f", "v")
    a("DEL", "s")
    a.send(b)
    a.engine.heard(2, dict(b.engine.vc))
    a.engine.links = Links()
    assert a.engine.collect_tombstones() == 0 and a.engine.tombstone_count() == 1
    a.engine.links = None
    assert a.engine.collect_tombstones() == 1


def test_a_heartbeat_ahead_of_the_peers_unsent_effects_keeps_the_tombstones(three):
    """Region 3 creates a group while its link to region 1 is paused, then sees region 2's
    DEL; its heartbeats to region 1 go on. The tombstone must outlive them until the
    group creation arrives, which then loses to the DEL (delete-wins)."""
    a, b, c = three

    class Links:  # region 1's configured peers, as its links report them
        def peer_regions(self):
            return [2, 3]

    a.engine.links = Links()
    b("XGROUP", "CREATE", "x", "g0", "0", "MKSTREAM")
    sync(a, b, c)
    b("DEL", "x")
    c("XGROUP", "CREATE", "x", "g1", "0", "MKSTREAM")  # concurrent; not sent to a yet
    b.send(a)
    b.send(c)
    a.engine.heard(3, dict(c.engine.vc))  # c's heartbeat: it has seen the DEL
    a.engine.heard(2, dict(b.engine.vc))
    a.engine.collect_tombstones()
    assert a.engine.tombstone_count() == 1
    sync(a, b, c)
    assert a("EXISTS", "x") == b("EXISTS", "x") == c("EXISTS", "x") == b":0\r\n"


@pytest.mark.parametrize("how", ["del", "trim"])
def test_a_ttl_meets_a_delete_and_a_concurrent_write(two, how):
    a, b = two
    a("XADD", "s", "*", "f", "1")
    a("PEXPIREAT", "s", "4000000000000")
    sync(a, b)
    if how == "del":
        a("DEL", "s")  # takes the TTL it saw
    else:
        a("XTRIM", "s", "MAXLEN", "0")  # empties it: the key goes, its TTL stays registered
    b("XADD", "s", "*", "f", "2")
    sync(a, b)
    want = b":-1\r\n" if how == "del" else b":4000000000000\r\n"
    assert a("PEXPIRETIME", "s") == b("PEXPIRETIME", "s") == want
    assert xrange(a) == xrange(b)


def test_an_expire_concurrent_with_a_delete_holds_on_what_survives(two):
    a, b = two
    a("XADD", "s", "*", "f", "1")
    sync(a, b)
    a("DEL", "s")
    b("PEXPIREAT", "s", "4000000000000")
    b("XADD", "s", "*", "f", "2")
    sync(a, b)
    assert a("PEXPIRETIME", "s") == b("PEXPIRETIME", "s") == b":4000000000000\r\n"
    assert xrange(a) == xrange(b)


def test_entries_a_rename_moves_are_not_taken_by_a_concurrent_delete_of_the_target(two):
    """Region 1 moves an older entry of its own into s2 while region 2 deletes s2, having
    seen a newer entry of region 1 there. The moved entry was not seen by the delete: it
    survives at both regions, whichever arrives first."""
    a, b = two
    a("XADD", "s1", "*", "f", "old")
    a("XADD", "s2", "*", "f", "newer")
    sync(a, b)
    a("RENAME", "s1", "s2")
    b("DEL", "s2")
    sync(a, b)
    assert xrange(a, "s2") == xrange(b, "s2")
    assert [fv for _sid, fv in a.server.keyspace[0].data[b"s2"].range()] == [[b"f", b"old"]]
    assert a("EXISTS", "s1") == b("EXISTS", "s1") == b":0\r\n"


def _old_wire(argv: list[bytes]) -> bytes:
    """A record as main wrote it before the compact format: its APPLY command's RESP."""
    return b"".join([b"*%d\r\n" % len(argv)] + [b"$%d\r\n%b\r\n" % (len(a), a) for a in argv])


def test_records_of_the_argv_format_still_replay_from_an_aof(two):
    """An AOF written before the compact format holds one record per APPLY as argv: own
    records refill the backlog (now compact), a peer's are applied."""
    a, b = two
    a("XADD", "s", "*", "f", "v")
    a("XADD", "s", "*", "f", "w")
    old = a.records()  # the argv format
    assert all(len(argv) > 3 for argv in old)
    again = Region(1)
    again.server.loading = True
    for argv in old:
        again.server.persistence._replay_record(argv, "appendonly.aof")
    again.server.loading = False
    assert again.engine.seq == 2 and again.wires() == a.wires()
    for argv in old:
        b.server.persistence._replay_record(argv, "appendonly.aof")
    assert ids(b) == ids(a) and b.engine.applied(1) == 2


def test_an_rdb_backlog_of_the_argv_format_is_converted_and_a_bad_one_refused(two):
    from rill.persistence import rdb
    from rill.server.activeactive.backlog import Backlog
    from rill.server.activeactive.state import restore_backlog

    a, b = two
    a("XADD", "s", "*", "f", "v")
    a("XDEL", "s", ids(a)[0].decode())
    compact = a.wires()
    blob = b"".join(rdb.encode_len(seq) + rdb.encode_len(7) + rdb.encode_string(_old_wire(argv))
                    for seq, argv in enumerate(a.records(), 1))
    a.engine.backlog = Backlog(1 << 20)
    restore_backlog(a.engine, blob)
    assert a.wires() == compact
    a.send(b)  # what a link sends from it applies
    assert ids(b) == [] and b.engine.applied(1) == 2
    bad = rdb.encode_len(1) + rdb.encode_len(7) + rdb.encode_string(_old_wire([b"SET", b"k", b"v"]))
    a.engine.backlog = Backlog(1 << 20)
    with pytest.raises(ValueError, match="not an ACTIVEACTIVE APPLY record"):
        restore_backlog(a.engine, bad)


def test_a_full_sync_keeps_entries_a_rename_moved_that_the_sender_deleted_before_seeing_it(two):
    """b RENAMEs a stream while a, concurrently, deletes it: applying every effect leaves
    the moved entries at the new key (a's DEL saw them at the old one). A full sync must
    end the same, though a's clock covers the entries' own XADD: what a has seen of the
    moved sub-stream is whether it applied the RENAME."""
    from rill.server.activeactive.state import dump_state, merge_state

    a, b = two
    whole = Region(3)
    b("XADD", "s1", "*", "f", "v")
    sync(a, b)
    a("DEL", "s1")
    b("RENAME", "s1", "s2")
    a.send(whole)
    b.send(whole)
    assert len(ids(whole, "s2")) == 1 and ids(whole, "s1") == []
    pa, pb = dump_state(a.server), dump_state(b.server)
    merge_state(a.server, pb)
    merge_state(b.server, pa)
    for r in (a, b):
        assert xrange(r, "s2") == xrange(whole, "s2") and r("EXISTS", "s1") == b":0\r\n"
    # Once a has applied the RENAME, an entry it lacks there was deleted there.
    sync(a, b, whole)
    a("XDEL", "s2", ids(a, "s2")[0].decode())
    merge_state(b.server, dump_state(a.server))
    assert ids(b, "s2") == []
