"""Every table of seed 004 ("streams in an Active-Active database"), played literally on
real instances, plus the rules docs/active-active.md adds where the seed is silent.

Each table's concurrent steps come after ``pause_all()`` (nothing travels between the
regions), each "— Sync —" row is ``sync()`` (RESUME + ACTIVEACTIVE WAIT everywhere), and
the replies are asserted as the seed gives them. Generated IDs carry their region in the
sequence part (``ms-(n*256+region)``, docs/active-active.md), so the seed's
``1589929244828-1`` / ``1589929246795-2`` are checked for their region and order, and the
explicit-ID tables for their exact IDs (``110-1``, ``115-2``, ``100-1``).

Where the seed's table leaves out a setup step a real server needs (a stream must exist
before ``XGROUP CREATE`` without MKSTREAM), the test adds it before the table and says so.
"""

from __future__ import annotations

import time

import pytest

from tests.server.activeactive.cluster import (
    group_names,
    id_parts,
    ids,
    pairs,
    region_of,
    xread_ids,
)

STRICT_FULL_ID = "ERR Active-Active strict XADD ID mode accepts only '*' or a milliseconds-only ID"
XSETID_SMALLER = "ERR The ID specified in XSETID is smaller than the target stream top item"
NO_SUCH_KEY = "ERR no such key"


@pytest.fixture
def cluster(pooled_cluster):
    """Clusters shared across this module's tests, each handed over clean (conftest's
    ClusterPool): the tests change keys and CONFIG only."""
    return pooled_cluster


def now_ms() -> int:
    return int(time.time() * 1000)


# -- streams and Active-Active ------------------------------------------------------------


def test_concurrent_xadd_from_two_regions_merges_by_id(cluster):
    c = cluster(2)
    r1, r2 = c
    c.pause_all()
    # T1
    id1 = r1.call("XADD", "messages", "*", "text", "hello").decode()
    id2 = r2.call("XADD", "messages", "*", "text", "goodbye").decode()
    # T2: each region sees only its own entry; the sequence part is the region.
    assert r1.call("XRANGE", "messages", "-", "+") == [[id1.encode(), [b"text", b"hello"]]]
    assert r2.call("XRANGE", "messages", "-", "+") == [[id2.encode(), [b"text", b"goodbye"]]]
    assert id1.endswith("-1") and id2.endswith("-2")  # the first entry of its millisecond
    assert region_of(id1) == 1 and region_of(id2) == 2
    assert abs(id_parts(id1)[0] - now_ms()) < 60_000
    # T3
    c.sync()
    # T4: the same stream at both, no duplicate IDs, merged by ID.
    want = [[id1.encode(), [b"text", b"hello"]], [id2.encode(), [b"text", b"goodbye"]]]
    assert id_parts(id1) < id_parts(id2)
    assert r1.call("XRANGE", "messages", "-", "+") == want
    assert r2.call("XRANGE", "messages", "-", "+") == want
    assert r1.call("XLEN", "messages") == r2.call("XLEN", "messages") == 2


def test_del_is_observed_remove_a_concurrent_xadd_survives(cluster):
    c = cluster(2)
    r1, r2 = c
    # T1
    id1 = r1.call("XADD", "messages", "*", "text", "hello").decode()
    # T2
    c.sync()
    # T3
    assert ids(r1.call("XRANGE", "messages", "-", "+")) == [id1]
    assert ids(r2.call("XRANGE", "messages", "-", "+")) == [id1]
    assert region_of(id1) == 1
    # T4
    c.pause_all()
    assert r1.call("DEL", "messages") == 1
    id2 = r2.call("XADD", "messages", "*", "text", "goodbye").decode()
    assert region_of(id2) == 2
    # T5
    c.sync()
    # T6: the entry region 1 had not seen when it deleted is there at both.
    want = [[id2.encode(), [b"text", b"goodbye"]]]
    assert r1.call("XRANGE", "messages", "-", "+") == want
    assert r2.call("XRANGE", "messages", "-", "+") == want


# -- ID generation modes --------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["semi-strict", "liberal"])
def test_the_same_explicit_id_from_two_regions_is_kept_twice(cluster, mode):
    c = cluster(2, "--active-active-xadd-id-mode", mode)
    r1, r2 = c
    assert r1.call("CONFIG", "GET", "active-active-xadd-id-mode") == [
        b"active-active-xadd-id-mode", mode.encode()]
    c.pause_all()
    # T1
    assert r1.call("XADD", "x", "100-1", "f1", "v1") == b"100-1"
    assert r2.call("XADD", "x", "100-1", "f1", "v1") == b"100-1"
    # T2
    c.sync()
    # T3: both entries, same ID, at both regions.
    want = [[b"100-1", [b"f1", b"v1"]], [b"100-1", [b"f1", b"v1"]]]
    assert r1.call("XRANGE", "x", "-", "+") == want
    assert r2.call("XRANGE", "x", "-", "+") == want
    assert r1.call("XLEN", "x") == r2.call("XLEN", "x") == 2


def test_strict_mode_refuses_full_ids_and_puts_the_region_in_the_sequence(cluster):
    c = cluster(2)
    r1, r2 = c
    assert r1.call("CONFIG", "GET", "active-active-xadd-id-mode") == [
        b"active-active-xadd-id-mode", b"strict"]
    assert r1.error("XADD", "x", "100-1", "f1", "v1") == STRICT_FULL_ID
    assert r1.call("EXISTS", "x") == 0
    # A milliseconds-only ID gets the region in its sequence: region 1's first is 100-1.
    assert r1.call("XADD", "x", "100", "f", "1") == b"100-1"
    c.sync()
    # Region 2's next in that millisecond is the smallest n*256+2 above 100-1.
    assert r2.call("XADD", "x", "100", "f", "2") == b"100-2"
    c.sync()
    # Region 1's second in that millisecond: 1*256+1.
    assert r1.call("XADD", "x", "100", "f", "3") == b"100-257"
    c.sync()
    assert ids(r2.call("XRANGE", "x", "-", "+")) == ["100-1", "100-2", "100-257"]


def test_semi_strict_and_liberal_milliseconds_only_ids(cluster):
    c = cluster(2, "--active-active-xadd-id-mode", "semi-strict")
    r1, r2 = c
    assert r2.call("XADD", "x", "100", "f", "v") == b"100-2"  # as strict
    assert r1.call("CONFIG", "SET", "active-active-xadd-id-mode", "liberal") == b"OK"
    assert r1.call("XADD", "y", "100", "f", "v") == b"100-0"  # liberal: sequence 0


# -- XREAD may skip, XREADGROUP never does --------------------------------------------------


def _play_xread_table(c) -> None:
    """t1-t3 of the seed's XREAD table (strict mode, milliseconds-only IDs)."""
    r1, r2 = c
    c.pause_all()
    # t1
    assert r1.call("XADD", "x", "110", "f1", "v1") == b"110-1"
    assert r2.call("XADD", "x", "115", "f1", "v1") == b"115-2"
    # t2, t3
    assert r1.call("XADD", "x", "120", "f1", "v1") == b"120-1"
    assert r1.call("XADD", "x", "130", "f1", "v1") == b"130-1"


def test_xread_may_skip_an_entry_written_concurrently_elsewhere(cluster):
    c = cluster(2)
    r1, r2 = c
    _play_xread_table(c)
    # t4
    assert xread_ids(r1.call("XREAD", "COUNT", "2", "STREAMS", "x", "0"), "x") == ["110-1", "120-1"]
    # t5
    c.sync()
    # t6: reading on from 120-1 skips 115-2.
    assert xread_ids(r1.call("XREAD", "COUNT", "2", "STREAMS", "x", "120-1"), "x") == ["130-1"]
    # t7
    every = ["110-1", "115-2", "120-1", "130-1"]
    assert xread_ids(r1.call("XREAD", "STREAMS", "x", "0"), "x") == every
    assert xread_ids(r2.call("XREAD", "STREAMS", "x", "0"), "x") == every


def test_xreadgroup_never_skips(cluster):
    """The same writes, consumed through a group at region 1: the late 115-2 is delivered."""
    c = cluster(2)
    r1, r2 = c
    _play_xread_table(c)
    assert r1.call("XGROUP", "CREATE", "x", "g", "0") == b"OK"
    got = r1.call("XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "x", ">")
    assert xread_ids(got, "x") == ["110-1", "120-1"]
    c.sync()
    got = r1.call("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "x", ">")
    assert xread_ids(got, "x") == ["115-2", "130-1"]
    assert r1.call("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "x", ">") is None
    # Its history (every consumer's PELs, merged by ID) has all four.
    got = r1.call("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "x", "0")
    assert xread_ids(got, "x") == ["110-1", "115-2", "120-1", "130-1"]


# -- consumer groups ------------------------------------------------------------------------


def test_concurrent_group_creation_keeps_both_groups(cluster):
    c = cluster(2)
    r1, r2 = c
    # (setup: XGROUP CREATE without MKSTREAM needs the stream to exist)
    r1.call("XADD", "x", "*", "f", "v")
    c.sync()
    c.pause_all()
    # t1
    assert r1.call("XGROUP", "CREATE", "x", "group1", "0") == b"OK"
    assert r2.call("XGROUP", "CREATE", "x", "group2", "0") == b"OK"
    # t2
    assert group_names(r1, "x") == ["group1"]
    assert group_names(r2, "x") == ["group2"]
    # t3
    c.sync()
    # t4
    assert group_names(r1, "x") == ["group1", "group2"]
    assert group_names(r2, "x") == ["group1", "group2"]


def test_del_wins_over_a_concurrent_group_creation(cluster):
    c = cluster(2)
    r1, r2 = c
    # (setup: the stream exists at both before t1)
    r1.call("XADD", "x", "*", "f", "v")
    c.sync()
    # t1
    assert r1.call("XGROUP", "CREATE", "x", "group1", "0") == b"OK"
    # t2
    c.sync()
    # t3
    assert group_names(r1, "x") == ["group1"]
    assert group_names(r2, "x") == ["group1"]
    # t4: the DEL deletes the observed group1 and the unobserved group2.
    c.pause_all()
    assert r1.call("DEL", "x") == 1
    assert r2.call("XGROUP", "CREATE", "x", "group2", "0") == b"OK"
    # t5
    c.sync()
    # t6
    assert r1.call("EXISTS", "x") == 0
    assert r2.call("EXISTS", "x") == 0


def test_destroy_wins_over_a_concurrent_create_in_a_third_region(cluster):
    """The three-region table. Region 3 takes no part in t2's sync. Its stream does not
    exist before t4 (a stream with no entries and no groups does not exist, so its XINFO
    at t3 is "no such key" where the seed prints []), so its XGROUP CREATE takes MKSTREAM,
    as region 1's must at t1."""
    c = cluster(3)
    r1, r2, r3 = c
    c.pause_all()
    # t1
    assert r1.call("XGROUP", "CREATE", "x", "group1", "0", "MKSTREAM") == b"OK"
    # t2: regions 1 and 2 only
    c.sync_pair(0, 1)
    # t3
    assert group_names(r1, "x") == ["group1"]
    assert group_names(r2, "x") == ["group1"]
    assert r3.error("XINFO", "GROUPS", "x") == NO_SUCH_KEY
    # t4
    c.pause_all()
    assert r1.call("XGROUP", "DESTROY", "x", "group1") == 1
    assert r3.call("XGROUP", "CREATE", "x", "group1", "0", "MKSTREAM") == b"OK"
    # t5
    c.sync()
    # t6
    for node in c:
        assert node.call("EXISTS", "x") == 0, node


def test_group_existence_replicates_consumers_and_pending_stay_local(cluster):
    c = cluster(2)
    r1, r2 = c
    c.pause_all()
    # t1-t3
    assert r1.call("XADD", "messages", "110", "text", "hello") == b"110-1"
    assert r1.call("XGROUP", "CREATE", "messages", "group1", "0") == b"OK"
    got = r1.call("XREADGROUP", "GROUP", "group1", "Alice", "STREAMS", "messages", ">")
    assert xread_ids(got, "messages") == ["110-1"]
    # t4
    c.sync()
    # t5
    for node in c:
        assert ids(node.call("XRANGE", "messages", "-", "+")) == ["110-1"]
    # t6
    for node in c:
        assert group_names(node, "messages") == ["group1"]
    # t7
    consumers = r1.call("XINFO", "CONSUMERS", "messages", "group1")
    assert [pairs(x)["name"] for x in consumers] == [b"Alice"]
    assert r2.call("XINFO", "CONSUMERS", "messages", "group1") == []
    # t8
    pending = r1.call("XPENDING", "messages", "group1", "-", "+", "1")
    assert [(p[0], p[1]) for p in pending] == [(b"110-1", b"Alice")]
    assert r2.call("XPENDING", "messages", "group1", "-", "+", "1") == []
    # Redirected to region 2, XREADGROUP reads 110-1 again: it was read, not acknowledged.
    got = r2.call("XREADGROUP", "GROUP", "group1", "Bob", "STREAMS", "messages", ">")
    assert xread_ids(got, "messages") == ["110-1"]


def test_xack_replicates_only_the_contiguous_acknowledged_prefix(cluster):
    """The t1-t11 table, seen through two more regions: region 2 redirected after t9
    re-reads what region 1 acknowledged but did not replicate, region 3 redirected after
    t11 reads nothing; and region 1's count of effects shows which XACKs made one. The
    seed's IDs are full (110-0), so the mode is liberal."""
    c = cluster(3, "--active-active-xadd-id-mode", "liberal")
    r1, r2, r3 = c
    c.pause_all()
    # t1-t3
    for ms in (110, 120, 130):
        assert r1.call("XADD", "x", f"{ms}-0", "f1", "v1") == f"{ms}-0".encode()
    # t4
    assert r1.call("XGROUP", "CREATE", "x", "group1", "0") == b"OK"
    # t5
    got = r1.call("XREADGROUP", "GROUP", "group1", "Alice", "STREAMS", "x", ">")
    assert xread_ids(got, "x") == ["110-0", "120-0", "130-0"]
    before = r1.seq()

    def all_acked() -> None:
        for p in r1.status():
            assert p["effects-acked"] == r1.seq() and p["lag-effects"] == 0, p

    # t6: 110-0 and what precedes it (nothing) are acknowledged: one XACK effect.
    assert r1.call("XACK", "x", "group1", "110-0") == 1
    assert r1.seq() == before + 1
    # t7
    c.sync()
    all_acked()
    # t8: 130-0 acknowledged, 120-0 not: no effect.
    assert r1.call("XACK", "x", "group1", "130-0") == 1
    assert r1.seq() == before + 1
    # t9
    c.sync()
    all_acked()
    # Region 2 knows 110-0 is done, not 130-0.
    got = r2.call("XREADGROUP", "GROUP", "group1", "Bob", "STREAMS", "x", ">")
    assert xread_ids(got, "x") == ["120-0", "130-0"]
    # t10: 110-0 through 130-0 are acknowledged: one XACK effect, for 130-0.
    assert r1.call("XACK", "x", "group1", "120-0") == 1
    assert r1.seq() == before + 2
    # t11
    c.sync()
    all_acked()
    # Redirected XREADGROUP traffic does not re-read 110-0, 120-0, 130-0.
    assert r3.call("XREADGROUP", "GROUP", "group1", "Carol", "STREAMS", "x", ">") is None
    # And region 2 dropped its own pending entries inside the replicated prefix.
    assert r2.call("XPENDING", "x", "group1")[0] == 0


# -- XSETID, RENAME, EXPIRE, FLUSHALL -------------------------------------------------------


def test_xsetid_below_the_last_id_fails(cluster):
    c = cluster(2)
    r1, r2 = c
    assert r1.call("XADD", "x", "100", "f", "v") == b"100-1"
    assert r1.call("XADD", "x", "200", "f", "v") == b"200-1"
    assert r1.call("XDEL", "x", "200-1") == 1
    c.sync()
    # Above the top item (100-1) but below the last ID (200-1): refused here, where plain
    # Redis would accept it.
    assert r2.error("XSETID", "x", "150") == XSETID_SMALLER
    assert r2.error("XSETID", "x", "50") == XSETID_SMALLER
    assert r2.call("XSETID", "x", "300") == b"OK"
    c.sync()
    assert pairs(r1.call("XINFO", "STREAM", "x"))["last-generated-id"] == b"300-0"
    assert r1.error("XSETID", "x", "250") == XSETID_SMALLER


def test_rename_drops_the_groups_and_moves_only_what_it_saw(cluster):
    c = cluster(2)
    r1, r2 = c
    assert r1.call("XADD", "s", "100", "f", "v") == b"100-1"
    assert r1.call("XGROUP", "CREATE", "s", "g", "0") == b"OK"
    c.sync()
    assert group_names(r2, "s") == ["g"]
    c.pause_all()
    assert r1.call("RENAME", "s", "t") == b"OK"
    assert r1.call("XINFO", "GROUPS", "t") == []
    assert r2.call("XADD", "s", "300", "f", "w") == b"300-2"
    c.sync()
    for node in c:
        assert node.call("XRANGE", "t", "-", "+") == [[b"100-1", [b"f", b"v"]]], node
        assert node.call("XINFO", "GROUPS", "t") == [], node
        assert node.call("XRANGE", "s", "-", "+") == [[b"300-2", [b"f", b"w"]]], node
        assert node.call("XINFO", "GROUPS", "s") == [], node


def test_expire_the_longest_ttl_wins_and_persist_beats_every_ttl(cluster):
    c = cluster(2)
    r1, r2 = c
    r1.call("XADD", "x", "*", "f", "v")
    c.sync()
    c.pause_all()
    assert r1.call("EXPIRE", "x", "100") == 1
    assert r2.call("EXPIRE", "x", "1000") == 1
    c.sync()
    for node in c:
        assert 990 <= node.call("TTL", "x") <= 1000, node
    assert r1.call("PEXPIRETIME", "x") == r2.call("PEXPIRETIME", "x")
    c.pause_all()
    assert r1.call("PERSIST", "x") == 1
    assert r2.call("EXPIRE", "x", "5000") == 1
    c.sync()
    for node in c:
        assert node.call("TTL", "x") == -1, node
    # An EXPIRE that saw the PERSIST sets a TTL again.
    assert r2.call("EXPIRE", "x", "300") == 1
    c.sync()
    for node in c:
        assert 290 <= node.call("TTL", "x") <= 300, node


def test_the_ttl_converges_when_a_delete_meets_concurrent_writes(cluster):
    """The TTL register against DEL and a stream that empties, each on its own key in one
    round of concurrent steps. A DEL takes the TTL it saw with it (so a stream an entry
    written concurrently elsewhere keeps alive has none); whatever the rule for a TTL the
    deleter did not see, every region must end with the same one."""
    c = cluster(2)
    r1, r2 = c
    for key in ("seen", "trimmed"):
        r1.call("XADD", key, "*", "f", "v")
        r1.call("EXPIRE", key, "1000")
    r1.call("XADD", "unseen", "*", "f", "v")
    r1.call("XADD", "unseen2", "*", "f", "v")
    c.sync()
    c.pause_all()
    # DEL saw the TTL; region 2 adds an entry concurrently.
    assert r1.call("DEL", "seen") == 1
    r2.call("XADD", "seen", "*", "f", "w")
    # The stream empties (and goes) at region 1; region 2 adds an entry concurrently.
    assert r1.call("XTRIM", "trimmed", "MAXLEN", "0") == 1
    r2.call("XADD", "trimmed", "*", "f", "w")
    # An EXPIRE the DEL did not see, at the deleting region's peer...
    assert r1.call("EXPIRE", "unseen", "1000") == 1
    assert r2.call("DEL", "unseen") == 1
    r2.call("XADD", "unseen", "*", "f", "w")
    # ... and at the deleting region itself, after its DEL.
    assert r1.call("DEL", "unseen2") == 1
    r2.call("EXPIRE", "unseen2", "1000")
    r2.call("XADD", "unseen2", "*", "f", "w")
    c.sync()
    differ = []
    for key in ("seen", "trimmed", "unseen", "unseen2"):
        at = [node.call("PEXPIRETIME", key) for node in c]
        entries = [node.call("XRANGE", key, "-", "+") for node in c]
        assert entries[0] == entries[1] and len(entries[0]) == 1, key
        if at[0] != at[1]:
            differ.append(f"{key}: PEXPIRETIME {at[0]} at region 1, {at[1]} at region 2")
    assert not differ, "\n".join(differ)
    assert r1.call("PEXPIRETIME", "seen") == -1


def test_a_key_that_expires_goes_at_every_region(cluster):
    c = cluster(2)
    r1, r2 = c
    r1.call("XADD", "x", "*", "f", "v")
    assert r1.call("PEXPIRE", "x", "300") == 1
    c.sync()
    assert r2.call("PTTL", "x") > 0
    deadline = time.monotonic() + 10
    while any(node.call("EXISTS", "x") for node in c):
        assert time.monotonic() < deadline, "the expired key is still there"
        time.sleep(0.05)
    c.sync()
    assert r1.call("EXISTS", "x") == r2.call("EXISTS", "x") == 0


def test_flushall_deletes_what_it_saw_everywhere_as_one_effect(cluster):
    c = cluster(2)
    r1, r2 = c
    assert r1.call("XADD", "a", "100", "f", "v") == b"100-1"
    assert r1.call("XADD", "b", "100", "f", "v") == b"100-1"
    c.sync()
    c.pause_all()
    before = r1.seq()
    assert r1.call("FLUSHALL") == b"OK"
    assert r1.seq() == before + 1
    assert r2.call("XADD", "a", "200", "f", "w") == b"200-2"
    assert r2.call("XADD", "c", "300", "f", "w") == b"300-2"
    c.sync()
    for node in c:
        assert node.call("XRANGE", "a", "-", "+") == [[b"200-2", [b"f", b"w"]]], node
        assert node.call("EXISTS", "b") == 0, node
        assert ids(node.call("XRANGE", "c", "-", "+")) == ["300-2"], node
        assert node.call("DBSIZE") == 2, node
    assert r2.call("FLUSHDB") == b"OK"
    c.sync()
    assert r1.call("DBSIZE") == r2.call("DBSIZE") == 0


# -- what is refused ------------------------------------------------------------------------


def test_commands_without_a_sound_meaning_are_refused(cluster):
    c = cluster(2)
    r1, r2 = c
    r1.call("XADD", "stream", "*", "f", "v")
    assert r1.error("COPY", "stream", "other") == "ERR Active-Active: COPY is not supported"
    assert r1.error("MOVE", "stream", "1") == "ERR Active-Active: MOVE is not supported"
    c.sync()
    assert r2.call("DBSIZE") == 1


# -- transactions and scripts ---------------------------------------------------------------


def test_multi_exec_travels_as_one_effect(cluster):
    c = cluster(2)
    r1, r2 = c
    c.pause_all()
    before = r1.seq()
    assert r1.call("MULTI") == b"OK"
    assert r1.call("XADD", "s", "*", "a", "1") == b"QUEUED"
    assert r1.call("XADD", "s", "*", "b", "2") == b"QUEUED"
    assert r1.call("XGROUP", "CREATE", "s", "g", "$") == b"QUEUED"
    id_a, id_b, ok = r1.call("EXEC")
    assert ok == b"OK"
    assert r1.seq() == before + 1
    c.sync()
    assert ids(r2.call("XRANGE", "s", "-", "+")) == [id_a.decode(), id_b.decode()]
    assert group_names(r2, "s") == ["g"]
    assert f"1:{r1.seq()}" in r2.info()["active_active_vc"]


def test_a_script_travels_as_its_effects(cluster):
    c = cluster(2)
    r1, r2 = c
    c.pause_all()
    before = r1.seq()
    script = ("redis.call('XADD', KEYS[1], '*', 'a', '1') "
              "redis.call('XADD', KEYS[1], '*', 'b', '2') return 'done'")
    assert r1.call("EVAL", script, "1", "s") == b"done"
    assert r1.seq() == before + 1
    sha = r1.call("SCRIPT", "LOAD", script)
    c.sync()
    assert r2.call("XRANGE", "s", "-", "+") == r1.call("XRANGE", "s", "-", "+")
    assert r2.call("XLEN", "s") == 2
    # Its effects went, not its source.
    assert r2.call("SCRIPT", "EXISTS", sha) == [0]
