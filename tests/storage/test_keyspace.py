"""storage.keyspace: lookups and expiry, SCAN's guarantees, sampling, KEYS."""

from __future__ import annotations

import time

from hypothesis import example, given, settings
from hypothesis import strategies as st
from rill.storage.hash import HashValue
from rill.storage.keyspace import Keyspace, ScanLog, now_ms
from rill.storage.set import SetValue
from rill.storage.zset import SortedSet


def make_db():
    ks = Keyspace(2)
    expired: list[bytes] = []
    ks.on_expired = lambda db, key, value: expired.append(key)
    return ks, ks[0], expired


def test_lookup_expires_lazily_and_counts():
    ks, db, expired = make_db()
    db.set(b"a", b"1")
    db.set(b"b", b"2")
    db.set_expire(b"b", now_ms() - 1)
    assert db.lookup_read(b"a") == b"1"
    assert db.lookup_read(b"b") is None
    assert db.lookup_read(b"c") is None
    assert (ks.hits, ks.misses, ks.expired_keys) == (1, 2, 1)
    assert expired == [b"b"]
    assert b"b" not in db.data and b"b" not in db.expires


def test_expiry_boundary_is_strictly_after():
    # Redis: a key is expired when now > when (an expire equal to now still lives)
    _, db, _ = make_db()
    db.set(b"k", b"v")
    db.set_expire(b"k", now_ms() + 60_000)
    assert not db.is_expired(b"k")
    db.set_expire(b"k", now_ms() - 5)
    assert db.is_expired(b"k")


def test_expire_not_allowed_keeps_keys():
    ks, db, expired = make_db()
    ks.expire_allowed = False
    db.set(b"k", b"v")
    db.set_expire(b"k", 1)
    assert db.lookup(b"k") == b"v"
    assert db.active_expire() == 0
    assert expired == []


def test_expire_paused_hides_keys_without_deleting_them():
    ks, db, expired = make_db()
    ks.expire_paused = True
    for i in range(3):
        db.set(b"k%d" % i, b"v")
        db.set_expire(b"k%d" % i, 1)
    assert db.lookup(b"k0") is None and db.peek(b"k1") is None
    assert db.active_expire() == 0
    assert db.random_key() is None  # every key is expired: none to give, none deleted
    assert (expired, ks.expired_keys, len(db.data)) == ([], 0, 3)
    db.set(b"live", b"v")
    assert db.random_key() == b"live"
    ks.expire_paused = False
    assert db.lookup(b"k0") is None and db.active_expire() == 2
    assert sorted(expired) == [b"k0", b"k1", b"k2"] and ks.expired_keys == 3


def test_set_drops_or_keeps_ttl():
    _, db, _ = make_db()
    db.set(b"k", b"v")
    db.set_expire(b"k", now_ms() + 10_000)
    db.set(b"k", b"w", keep_ttl=True)
    assert b"k" in db.expires
    db.set(b"k", b"x")
    assert b"k" not in db.expires
    assert db.persist(b"k") is False


def test_keys_star_includes_the_empty_key_and_skips_expired():
    _, db, _ = make_db()
    for k in (b"", b"a", b"ab", b"b"):
        db.set(k, b"v")
    db.set(b"gone", b"v")
    db.set_expire(b"gone", now_ms() - 10)
    assert sorted(db.keys(b"*")) == [b"", b"a", b"ab", b"b"]
    assert sorted(db.keys(b"a*")) == [b"a", b"ab"]
    assert sorted(db.keys(b"**")) == [b"a", b"ab", b"b"]
    assert db.keys(b"") == [b""]
    assert b"gone" in db.data  # KEYS filters, it does not delete


def test_random_key():
    _, db, expired = make_db()
    assert db.random_key() is None
    for i in range(200):
        db.set(b"k%d" % i, b"v")
    seen = {db.random_key() for _ in range(300)}
    assert len(seen) > 50 and seen <= set(db.data)
    # every key expired: RANDOMKEY deletes them all on its way and answers nil
    for k in list(db.data):
        db.set_expire(k, now_ms() - 1)
    assert db.random_key() is None
    assert len(expired) == 200 and not db.data


def test_random_key_survives_stale_scan_log():
    _, db, _ = make_db()
    for i in range(2000):
        db.set(b"k%d" % i, b"v")
    for i in range(1930):
        db.delete(b"k%d" % i)
    assert {db.random_key() for _ in range(100)} <= set(db.data)


def test_active_expire_removes_expired_keys():
    ks, db, expired = make_db()
    for i in range(1000):
        db.set(b"k%d" % i, b"v")
        if i % 2 == 0:
            db.set_expire(b"k%d" % i, now_ms() - 1)
    db.set_expire(b"k1", now_ms() + 60_000)
    for _ in range(200):
        if db.active_expire() == 0 and len(db.expires) == 1:
            break
    assert len(db) == 500 and list(db.expires) == [b"k1"]
    assert len(expired) == 500


def test_active_expire_copes_with_expires_set_directly():
    _, db, _ = make_db()
    db.set(b"a", b"v")
    db.expires[b"a"] = now_ms() - 1  # bypassing set_expire (e.g. a loader)
    assert db.active_expire() == 1
    assert not db.data


def test_flush_and_swap():
    ks, db, _ = make_db()
    db.set(b"a", b"1")
    db.set_expire(b"a", now_ms() + 10_000)
    ks.swap(0, 1)
    assert not ks[0].data and ks[1].data == {b"a": b"1"} and b"a" in ks[1].expires
    assert ks[1].scan(0, 10) == (0, [b"a"])
    ks[1].flush()
    assert ks[1].scan(0, 10) == (0, [])


def full_scan(db, count: int = 10) -> list[bytes]:
    out: list[bytes] = []
    cursor = 0
    while True:
        cursor, keys = db.scan(cursor, count)
        out.extend(keys)
        if cursor == 0:
            return out


def test_scan_returns_every_key_once_without_changes():
    _, db, _ = make_db()
    keys = {b"key:%d" % i for i in range(5000)}
    for k in keys:
        db.set(k, b"v")
    got = full_scan(db, 7)
    assert sorted(got) == sorted(keys)


def test_scan_count_bounds_work_per_call():
    _, db, _ = make_db()
    for i in range(3000):
        db.set(b"k%d" % i, b"v")
    cursor, got = db.scan(0, 5)  # an open iteration keeps the log through the deletes
    for i in range(5, 2995):
        db.delete(b"k%d" % i)
    while cursor:
        cursor, keys = db.scan(cursor, 5)
        assert len(keys) <= 5
        got.extend(keys)
    assert sorted(got) == sorted({b"k%d" % i for i in range(5)} | set(db.data))


def test_writes_without_a_scan_keep_no_log():
    _, db, _ = make_db()
    for i in range(3000):
        db.set(b"k%d" % i, b"v")
        db.delete(b"k%d" % (i - 1))
    assert db.scan_log is None
    assert db.scan(0, 10_000) == (0, [b"k2999"])
    assert db.scan_log is None  # a walk done in one call leaves nothing behind


def test_log_lives_while_any_iteration_is_open():
    _, db, _ = make_db()
    for i in range(100):
        db.set(b"k%d" % i, b"v")
    a, _ = db.scan(0, 10)
    b, _ = db.scan(0, 10)
    assert db.scan_log is not None and db.scan_log.open == 2
    while a:
        a, _ = db.scan(a, 10)
    assert db.scan_log is not None  # b is still walking
    while b:
        b, _ = db.scan(b, 10)
    assert db.scan_log is None


def test_an_abandoned_iteration_does_not_keep_the_log():
    """A client that breaks out of its SCAN loop never finishes its iteration; after a
    long stretch of writes without a page the log goes, and writes stop paying for it.
    Resuming that iteration after all still returns every key (some a second time)."""
    _, db, _ = make_db()
    stable = {b"s%d" % i for i in range(100)}
    for k in stable:
        db.set(k, b"v")
    cursor, returned = db.scan(0, 10)
    assert db.scan_log is not None and cursor
    for i in range(ScanLog.IDLE_MIN):  # two writes each
        db.set(b"tmp:%d" % i, b"v")
        db.delete(b"tmp:%d" % i)
    assert db.scan_log is None
    while cursor:
        cursor, keys = db.scan(cursor, 10)
        returned += keys
    assert set(returned) == stable
    assert db.scan_log is None


def test_churned_keys_are_returned_once_and_the_log_stays_flat():
    """Issue 20, finding 4: 200k rounds of SET k<i%3>; DEL k<(i+1)%3> left 350 "keys" to
    SCAN in a database of 2. Here 20k rounds run while an iteration is open."""
    _, db, _ = make_db()
    stable = {b"s%d" % i for i in range(100)}
    for k in stable:
        db.set(k, b"v")
    returned: list[bytes] = []
    cursor, keys = db.scan(0, 4)  # 25 pages: open for the whole churn
    returned += keys
    for i in range(20_000):
        db.set(b"k%d" % (i % 3), b"v")
        db.delete(b"k%d" % ((i + 1) % 3))
        if i % 1000 == 999:
            cursor, keys = db.scan(cursor, 4)
            returned += keys
        assert len(db.scan_log) <= len(stable) + 3  # a key back in its own slot
    while cursor:
        cursor, keys = db.scan(cursor, 4)
        returned += keys
    assert len(returned) == len(set(returned))
    assert stable <= set(returned)
    everything = full_scan(db, 10_000_000)
    assert sorted(everything) == sorted(db.data) and len(db.data) == 102


def test_distinct_key_churn_keeps_the_log_bounded():
    _, db, _ = make_db()
    stable = {b"s%d" % i for i in range(500)}
    for k in stable:
        db.set(k, b"v")
    returned: list[bytes] = []
    cursor, keys = db.scan(0, 1)
    returned += keys
    bound = 2 * len(stable) + 2 * ScanLog.COMPACT_MIN + 2
    for i in range(20_000):
        db.set(b"tmp:%d" % i, b"v")
        db.delete(b"tmp:%d" % i)
        assert len(db.scan_log) <= bound
        assert len(db.scan_log.dead) <= bound
        if i % 50 == 0 and cursor:
            cursor, keys = db.scan(cursor, 1)
            returned += keys
    while cursor:
        cursor, keys = db.scan(cursor, 1)
        returned += keys
    assert sorted(returned) == sorted(stable)


def test_an_iteration_ends_while_keys_keep_coming():
    """New keys go behind every open cursor, so an iteration visits only the slots that
    were there when it began: COUNT 1 over 200 keys ends within 200 calls even though
    each call is followed by 20 new keys and 20 deletions."""
    _, db, _ = make_db()
    stable = {b"s%d" % i for i in range(200)}
    for k in stable:
        db.set(k, b"v")
    returned: list[bytes] = []
    cursor, keys = db.scan(0, 1)
    returned += keys
    calls, n = 1, 0
    while cursor:
        for _ in range(20):
            db.set(b"new%d" % n, b"v")
            if n >= 20:
                db.delete(b"new%d" % (n - 20))
            n += 1
        cursor, keys = db.scan(cursor, 1)
        returned += keys
        calls += 1
    assert calls <= 201
    assert sorted(returned) == sorted(stable)


def test_a_cursor_outliving_its_log_restarts_without_missing_keys():
    _, db, _ = make_db()
    for i in range(300):
        db.set(b"k%d" % i, b"v")
    returned: list[bytes] = []
    cursor, keys = db.scan(0, 50)
    returned += keys
    db.reindex()  # a loader replaced the data: the log is gone
    while cursor:
        cursor, keys = db.scan(cursor, 50)
        returned += keys
    assert set(returned) == set(db.data)
    assert max(returned.count(k) for k in returned) <= 2


def test_writes_around_the_log_are_repaired():
    _, db, _ = make_db()
    for i in range(100):
        db.set(b"k%d" % i, b"v")
    db.scan(0, 10)  # left open: the log stays
    db.data[b"direct"] = b"v"  # bypassing set(): the log never heard of it
    assert sorted(full_scan(db, 7)) == sorted(db.data)
    del db.data[b"k99"]  # nor of this
    db.set(b"k99", b"v")
    assert sorted(full_scan(db, 7)) == sorted(db.data)
    assert len(db.scan_log) == len(db.data)


def test_reindex_after_direct_fill():
    _, db, _ = make_db()
    db.data[b"direct"] = b"v"
    db.reindex()
    assert full_scan(db) == [b"direct"]


# -- the guarantee, for every owner of a scan log ------------------------------------
class _Db:
    def __init__(self) -> None:
        self.db = Keyspace(1)[0]

    def add(self, k: bytes) -> None:
        self.db.set(k, b"v")

    def remove(self, k: bytes) -> None:
        self.db.delete(k)

    def bulk(self) -> None:  # expiry's path
        for k in list(self.db.data)[:3]:
            self.db.set_expire(k, now_ms() - 10)
            self.db.lookup(k)

    def page(self, cursor: int, count: int):
        return self.db.scan(cursor, count)

    def live(self) -> set[bytes]:
        return set(self.db.data)

    def log(self):
        return self.db.scan_log


class _Set(_Db):
    def __init__(self) -> None:
        self.s = SetValue()
        self.s.intset = False

    def add(self, k: bytes) -> None:
        self.s.add_member(k)

    def remove(self, k: bytes) -> None:
        if k in self.s:
            self.s.discard_member(k)

    def bulk(self) -> None:  # SPOP with a count
        self.s.discard_members(list(self.s)[:3])

    def page(self, cursor: int, count: int):
        return self.s.scan_page(cursor, count)

    def live(self) -> set[bytes]:
        return set(self.s)

    def log(self):
        return self.s.scan_log


class _Hash(_Db):
    def __init__(self) -> None:
        self.h = HashValue()
        self.h.listpack = False

    def add(self, k: bytes) -> None:
        self.h.put(k, b"v")

    def remove(self, k: bytes) -> None:
        self.h.delete_field(k)

    def bulk(self) -> None:
        for k in list(self.h)[:3]:
            self.h.delete_field(k)

    def page(self, cursor: int, count: int):
        return self.h.scan_page(cursor, count)

    def live(self) -> set[bytes]:
        return set(self.h)

    def log(self):
        return self.h.scan_log


class _Zset(_Db):
    def __init__(self) -> None:
        self.z = SortedSet(listpack=False)
        self.n = 0

    def add(self, k: bytes) -> None:
        self.n += 1
        self.z.add(k, float(self.n % 7))

    def remove(self, k: bytes) -> None:
        self.z.remove(k)

    def bulk(self) -> None:  # ZPOPMIN, ZPOPMAX with a count, ZREMRANGEBYRANK
        if self.z:
            self.z.pop_end(False)
        self.z.pop(1, True)
        self.z.remove_rank_range(0, 1)

    def page(self, cursor: int, count: int):
        return self.z.scan(cursor, count)

    def live(self) -> set[bytes]:
        return set(self.z.dict)

    def log(self):
        return self.z._scan


OWNERS = {"db": _Db, "set": _Set, "hash": _Hash, "zset": _Zset}

_step = st.one_of(
    st.tuples(st.just("add"), st.integers(0, 60)),
    st.tuples(st.just("del"), st.integers(0, 60)),
    st.tuples(st.just("bulk"), st.just(0)),
    st.tuples(st.just("start"), st.integers(1, 12)),
    st.tuples(st.just("step"), st.integers(0, 3)),
)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(OWNERS)), st.integers(0, 80), st.sampled_from([0, 3, 1024]),
       st.lists(_step, max_size=150))
@example("db", 10, 0, [("start", 1), ("del", 0), ("del", 1), ("add", 0), ("step", 0)])
# k0 is returned, its dead slot is compacted away, and it comes back: it must not be met again
@example("db", 4, 0, [("start", 1), ("del", 0), ("del", 1), ("del", 2), ("add", 0), ("step", 0), ("step", 0)])
@example("zset", 4, 0, [("start", 1), ("bulk", 0), ("add", 3), ("add", 1), ("step", 0), ("step", 0)])
def test_scan_guarantee_under_any_interleaving(kind, initial, compact_min, script):
    """Any interleaving of writes and pages of several iterations (some left unfinished):
    each finished iteration returned every key present all along, no key twice and none
    that was never there, in a bounded number of calls; the log never outgrows about
    twice the live keys."""
    saved = ScanLog.COMPACT_MIN
    ScanLog.COMPACT_MIN = compact_min
    try:
        owner = OWNERS[kind]()
        for i in range(initial):
            owner.add(b"k%d" % i)
        walks: list[dict] = []
        done: list[dict] = []

        def page(w: dict) -> None:
            w["cursor"], keys = owner.page(w["cursor"], w["count"])
            w["calls"] += 1
            w["returned"].extend(keys)
            if w["cursor"] == 0:
                walks.remove(w)
                done.append(w)

        def removed(gone: set[bytes]) -> None:
            for w in walks:
                w["throughout"] -= gone

        for op, n in script:
            live = owner.live()
            key = b"k%d" % n
            if op == "add":
                owner.add(key)
                for w in walks:
                    w["ever"].add(key)
            elif op == "del":
                owner.remove(key)
                removed({key})
            elif op == "bulk":
                owner.bulk()
                removed(live - owner.live())
            elif op == "start":
                w = {"cursor": 0, "count": n, "calls": 0, "returned": [], "throughout": set(live),
                     "ever": set(live), "bound": 2 * len(live) + 2 * compact_min + 2}
                walks.append(w)
                page(w)
            elif walks:
                page(walks[n % len(walks)])
            log = owner.log()
            if log is not None:
                assert len(log) <= 2 * len(owner.live()) + 2 * compact_min + 2
        for w in list(walks)[::2]:  # the others are abandoned
            while w in walks:
                page(w)
        for w in done:
            returned = w["returned"]
            assert len(returned) == len(set(returned)), "a key returned twice"
            assert w["throughout"] <= set(returned), "a key present all along was missed"
            assert set(returned) <= w["ever"], "a key that was never there"
            assert w["calls"] <= max(w["bound"], 1)
    finally:
        ScanLog.COMPACT_MIN = saved


def test_time_of_keys_on_big_db_is_reasonable():
    _, db, _ = make_db()
    for i in range(100_000):
        db.set(b"key:%d" % i, b"v")
    start = time.perf_counter()
    assert len(db.keys(b"key:1*")) == 11111
    assert time.perf_counter() - start < 1.0


# -- access stamps: OBJECT IDLETIME / FREQ ---------------------------------------------------


def _at(monkeypatch, seconds: float) -> None:
    monkeypatch.setattr(time, "monotonic", lambda: seconds)


def test_idle_time_counts_from_the_last_access_not_from_peeks(monkeypatch):
    _at(monkeypatch, 1000.0)
    ks = Keyspace(2)
    db = ks[0]
    db.set(b"k", b"v")
    db.set(b"other", b"v")
    _at(monkeypatch, 1007.4)
    ks.tick()
    assert db.idle_seconds(b"k") == 7
    db.peek(b"k")
    db.peek_read(b"k")
    assert db.idle_seconds(b"k") == 7
    db.lookup(b"k")
    assert db.idle_seconds(b"k") == 0
    assert db.idle_seconds(b"other") == 7
    db.set_idle(b"other", 1000)
    assert db.idle_seconds(b"other") == 1000


def test_stamps_follow_keys_through_delete_flush_and_swap(monkeypatch):
    _at(monkeypatch, 50.0)
    ks = Keyspace(2)
    db0, db1 = ks[0], ks[1]
    db0.set(b"a", b"1")
    db0.set_idle(b"a", 30)
    db0.delete(b"a")
    assert b"a" not in db0.access
    db0.set(b"a", b"1")
    assert db0.idle_seconds(b"a") == 0
    db0.set_idle(b"a", 30)
    ks.swap(0, 1)
    assert db1.idle_seconds(b"a") == 30 and not db0.access
    db1.flush()
    assert not db1.access


def test_lfu_counter_starts_at_five_decays_per_period_and_rarely_grows(monkeypatch):
    ks = Keyspace(1)
    ks.set_lfu(True, 10, 1)
    db = ks[0]
    minute = [1_000_000]
    monkeypatch.setattr(time, "time", lambda: minute[0] * 60.0)
    db.set(b"k", b"v")
    assert db.frequency(b"k") == 5
    db.set_frequency(b"k", 100)
    minute[0] += 3  # three decay periods of one minute
    assert db.frequency(b"k") == 97
    for _ in range(50):
        db.lookup(b"k")  # p = 1 / (92 * 10 + 1) each: almost never
    assert 97 <= db.frequency(b"k") <= 100
    ks.set_lfu(True, 0, 0)  # log factor 0: every access counts; decay off
    db.set_frequency(b"k", 10)
    for _ in range(5):
        db.lookup(b"k")
    assert db.frequency(b"k") == 15


def test_signal_all_reports_every_modified_key_and_keeps_watchers():
    """While the keyspace signals every key (client tracking), writers' usual test
    ``db.watched and key in db.watched`` passes for any key; real WATCH entries
    survive both switches."""
    ks = Keyspace(2)
    seen = []
    ks.on_modified = lambda db, key: seen.append((db.id, key))
    db = ks[0]
    db.watched[b"w"] = ["watcher"]
    db.modified(b"other")
    assert seen == []
    ks.set_signal_all(True)
    assert all(d.watched for d in ks.dbs) and b"anything" in ks[1].watched
    assert db.watched.get(b"w") == ["watcher"] and ks[1].watched.get(b"w") is None
    db.modified(b"other")
    ks[1].modified(b"x")
    assert seen == [(0, b"other"), (1, b"x")]
    ks.set_signal_all(False)
    assert type(db.watched) is dict and db.watched == {b"w": ["watcher"]}
    assert not ks[1].watched
    db.modified(b"other")
    assert len(seen) == 2


def test_avg_ttl_is_a_running_average_of_sampled_ttls():
    ks = Keyspace(1)
    db = ks[0]
    now = now_ms()
    for i in range(100):
        db.set(b"k%d" % i, b"v")
        db.set_expire(b"k%d" % i, now + 100_000)
    db.active_expire()
    first = db.avg_ttl
    assert 99_000 < first <= 100_000  # the first estimate is the sample's mean
    for i in range(100):
        db.set_expire(b"k%d" % i, now_ms() + 10_000)
    db.active_expire()
    assert first * 0.97 < db.avg_ttl < first  # then each round moves it 2% towards the new mean
    db.flush()
    assert db.avg_ttl == 0
    db.set(b"k", b"v")
    db.set_expire(b"k", now_ms() + 5_000)
    db.active_expire()
    assert 4_000 < db.avg_ttl <= 5_000
    db.persist(b"k")
    db.active_expire()
    assert db.avg_ttl == 0  # no key with a TTL left
