"""storage.keyspace: lookups and expiry, SCAN's guarantees, sampling, KEYS."""

from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st
from rill.storage.keyspace import Keyspace, now_ms


def make_db():
    ks = Keyspace(2)
    expired: list[bytes] = []
    ks.on_expired = lambda db, key: expired.append(key)
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
    for i in range(2990):
        db.delete(b"k%d" % i)
    # a log full of deleted keys: each call visits at most 10*count positions
    calls = 0
    cursor = 0
    got = []
    while True:
        cursor, keys = db.scan(cursor, 5)
        calls += 1
        got.extend(keys)
        assert len(keys) <= 5
        if cursor == 0:
            break
    assert sorted(got) == sorted(db.data)


ops = st.lists(
    st.tuples(st.sampled_from(["add", "del", "scan"]), st.integers(0, 400), st.integers(1, 30)),
    max_size=200,
)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 300), ops)
def test_scan_guarantees_under_changes(initial, script):
    """Keys present for the whole iteration are returned; nothing else that never existed is."""
    _, db, _ = make_db()
    for i in range(initial):
        db.set(b"k%d" % i, b"v")
    present_all_along = set(db.data)
    ever = set(db.data)
    returned: list[bytes] = []
    cursor, keys = db.scan(0, 10)
    returned.extend(keys)
    steps = iter(script)
    while cursor != 0:
        step = next(steps, None)
        if step is None:
            step = ("scan", 0, 10)
        op, n, count = step
        key = b"k%d" % n
        if op == "add":
            db.set(key, b"v")
            ever.add(key)
        elif op == "del":
            db.delete(key)
            present_all_along.discard(key)
        else:
            cursor, keys = db.scan(cursor, count)
            returned.extend(keys)
    assert present_all_along <= set(returned)
    assert set(returned) <= ever


def test_scan_guarantees_across_compactions():
    _, db, _ = make_db()
    stable = [b"stable:%d" % i for i in range(300)]
    for k in stable:
        db.set(k, b"v")
    returned: list[bytes] = []
    cursor = 0
    churn = 0
    while True:
        cursor, keys = db.scan(cursor, 10)
        returned.extend(keys)
        if cursor == 0:
            break
        # heavy churn between calls forces the log to compact several times
        for _ in range(200):
            db.set(b"tmp:%d" % churn, b"v")
            db.delete(b"tmp:%d" % churn)
            churn += 1
    assert set(stable) <= set(returned)
    assert db.scan_order.epoch > 1


def test_reindex_after_direct_fill():
    _, db, _ = make_db()
    db.data[b"direct"] = b"v"
    db.reindex()
    assert full_scan(db) == [b"direct"]


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
