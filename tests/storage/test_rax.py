"""Rax (blocked sorted map): seeks, iteration from seek points, inserts and deletes anywhere,
checked against a plain sorted-list model, with tiny blocks so splits and merges happen."""

from __future__ import annotations

import bisect

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from rill.storage import rax as raxmod
from rill.storage.rax import Rax


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    monkeypatch.setattr(raxmod, "_BLOCK", 4)


class Model:
    """Sorted keys plus a dict: obviously correct, O(n)."""

    def __init__(self):
        self.keys: list[int] = []
        self.vals: dict[int, object] = {}

    def seek(self, op, key):
        ks = self.keys
        if not ks:
            return None
        if op == "^":
            i = 0
        elif op == "$":
            i = len(ks) - 1
        elif op == ">=":
            i = bisect.bisect_left(ks, key)
        elif op == ">":
            i = bisect.bisect_right(ks, key)
        elif op == "<=":
            i = bisect.bisect_right(ks, key) - 1
        elif op == "<":
            i = bisect.bisect_left(ks, key) - 1
        elif op == "=":
            i = bisect.bisect_left(ks, key)
            if i < len(ks) and ks[i] != key:
                return None
        else:
            raise AssertionError(op)
        if i < 0 or i >= len(ks):
            return None
        return i


def expected_iter(model, op, key, reverse):
    i = model.seek(op, key)
    if i is None:
        return []
    ks = model.keys[i:] if not reverse else model.keys[: i + 1][::-1]
    return [(k, model.vals[k]) for k in ks]


keys_st = st.integers(0, 60)
ops_st = st.sampled_from([">=", ">", "<=", "<", "^", "$", "="])


class RaxMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        raxmod._BLOCK = 4
        self.r = Rax()
        self.m = Model()

    @rule(k=keys_st, v=st.integers())
    def insert(self, k, v):
        new = self.r.insert(k, v)
        assert new == (k not in self.m.vals)
        if new:
            bisect.insort(self.m.keys, k)
        self.m.vals[k] = v

    @rule(v=st.integers())
    def append_tail(self, v):
        k = (self.m.keys[-1] + 1) if self.m.keys else 0
        assert self.r.insert(k, v)
        self.m.keys.append(k)
        self.m.vals[k] = v

    @rule(vs=st.lists(st.integers(), max_size=11), gap=st.integers(1, 3))
    def extend_tail(self, vs, gap):
        start = (self.m.keys[-1] + gap) if self.m.keys else 0
        ks = list(range(start, start + gap * len(vs), gap))
        self.r.extend(ks, vs)
        self.m.keys.extend(ks)
        self.m.vals.update(zip(ks, vs, strict=True))
        if self.m.keys:
            with pytest.raises(ValueError):
                self.r.extend([self.m.keys[-1]], [0])

    @rule(ks=st.lists(keys_st, max_size=8, unique=True))
    def pop_many(self, ks):
        want = [self.m.vals.pop(k, "absent") for k in ks]
        for k in ks:
            if k in self.m.keys:
                self.m.keys.remove(k)
        assert self.r.pop_many(ks, "absent") == want

    @rule(data=st.data())
    def pop_many_neighbours(self, data):
        """Runs of keys that are neighbours in the map (one XACK of a delivered batch),
        cut by a duplicate, an absent key or reversed."""
        keys = self.m.keys
        if not keys:
            return
        i = data.draw(st.integers(0, len(keys) - 1))
        ks = keys[i : i + data.draw(st.integers(1, 12))]
        shape = data.draw(st.sampled_from(["run", "dup", "gap", "reversed"]))
        cut = data.draw(st.integers(0, len(ks)))
        if shape == "dup":
            ks = ks[:cut] + ks[:1] + ks[cut:]
        elif shape == "gap":
            absent = data.draw(keys_st.filter(lambda k: k not in self.m.vals))
            ks = ks[:cut] + [absent] + ks[cut:]
        elif shape == "reversed":
            ks = ks[::-1]
        want = [self.m.vals.pop(k, "absent") for k in ks]
        self.m.keys = [k for k in self.m.keys if k in self.m.vals]
        assert self.r.pop_many(ks, "absent") == want

    @rule(k=keys_st)
    def remove(self, k):
        if k in self.m.vals:
            assert self.r.remove(k) == self.m.vals.pop(k)
            self.m.keys.remove(k)
        else:
            with pytest.raises(KeyError):
                self.r.remove(k)
            assert self.r.pop(k, "d") == "d"
            assert not self.r.discard(k)

    @rule()
    def pop_first(self):
        if not self.m.keys:
            with pytest.raises(KeyError):
                self.r.pop_first()
            return
        k = self.m.keys.pop(0)
        assert self.r.pop_first() == (k, self.m.vals.pop(k))

    @rule()
    def pop_last(self):
        if not self.m.keys:
            with pytest.raises(KeyError):
                self.r.pop_last()
            return
        k = self.m.keys.pop()
        assert self.r.pop_last() == (k, self.m.vals.pop(k))

    @rule(k=keys_st, v=st.integers())
    def try_insert(self, k, v):
        ok = self.r.try_insert(k, v)
        assert ok == (k not in self.m.vals)
        if ok:
            bisect.insort(self.m.keys, k)
            self.m.vals[k] = v

    @rule(op=ops_st, k=keys_st)
    def seek(self, op, k):
        i = self.m.seek(op, k)
        got = self.r.seek(op, k)
        if i is None:
            assert got is None
        else:
            key = self.m.keys[i]
            assert got == (key, self.m.vals[key])
        named = {
            ">=": self.r.seek_ge,
            ">": self.r.seek_gt,
            "<=": self.r.seek_le,
            "<": self.r.seek_lt,
        }
        if op in named:
            assert named[op](k) == got

    @rule(op=ops_st, k=keys_st, reverse=st.booleans(), n=st.integers(0, 12))
    def iterate(self, op, k, reverse, n):
        it = self.r.iterate(op, k, reverse)
        got = [x for _, x in zip(range(n), it, strict=False)]
        assert got == expected_iter(self.m, op, k, reverse)[:n]

    @rule(k=keys_st, n=st.integers(0, 12))
    def iterate_floor(self, k, n):
        got = [x for _, x in zip(range(n), self.r.iterate_floor(k), strict=False)]
        floor = expected_iter(self.m, "<=", k, False)
        assert got == (floor or expected_iter(self.m, "^", None, False))[:n]

    @rule(k=keys_st)
    def lookups(self, k):
        assert (k in self.r) == (k in self.m.vals)
        assert self.r.get(k, "none") == self.m.vals.get(k, "none")

    @invariant()
    def consistent(self):
        r = self.r
        assert len(r) == len(self.m.keys)
        assert bool(r) == bool(self.m.keys)
        assert r.key_list() == self.m.keys
        assert list(r.items()) == [(k, self.m.vals[k]) for k in self.m.keys]
        assert list(r.items(reverse=True)) == [(k, self.m.vals[k]) for k in reversed(self.m.keys)]
        assert r.first_key() == (self.m.keys[0] if self.m.keys else None)
        assert r.last_key() == (self.m.keys[-1] if self.m.keys else None)
        # internal shape: no empty blocks, maxes right, blocks bounded
        for kb, vb, mx in zip(r._kb, r._vb, r._mx, strict=True):
            assert kb and len(kb) == len(vb) and kb[-1] == mx and len(kb) <= raxmod._BLOCK


RaxMachine.TestCase.settings = settings(max_examples=120, stateful_step_count=60, deadline=None)
TestRaxMachine = RaxMachine.TestCase


def test_mapping_protocol():
    r = Rax()
    r[5] = "a"
    r[1] = "b"
    assert r[5] == "a" and list(r) == [1, 5] and list(r.keys()) == [1, 5]
    assert list(r.values()) == ["b", "a"]
    del r[1]
    with pytest.raises(KeyError):
        r[1]
    assert r.first() == (5, "a") == r.last()
    r.clear()
    assert not r and r.first() is None and r.last() is None and r.seek("^") is None
    with pytest.raises(ValueError):
        r.seek("?", 1)


def test_many_keys_blocks(monkeypatch):
    monkeypatch.setattr(raxmod, "_BLOCK", 1024)
    r = Rax()
    n = 10000
    for k in range(0, 2 * n, 2):
        r.insert(k, k)
    assert r.block_count() == (n + 1023) // 1024
    for k in range(1, 2 * n, 2):  # inserts in the middle split blocks
        r.insert(k, k)
    assert r.key_list() == list(range(2 * n))
    assert r.seek_le(10**9) == (2 * n - 1, 2 * n - 1)
    for _ in range(n):
        r.pop_first()
    assert r.first() == (n, n) and len(r) == n
    assert [k for k, _ in r.iterate("<", n + 5, reverse=True)][:3] == [n + 4, n + 3, n + 2]


def test_tuple_and_bytes_keys():
    r = Rax()
    for k in [b"b", b"a", b"c"]:
        r.insert(k, k.upper())
    assert [k for k, _ in r.items()] == [b"a", b"b", b"c"]
    assert r.seek_gt(b"a") == (b"b", b"B")
