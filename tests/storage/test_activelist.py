"""Active-Active list positions (storage/activelist.py): ``between`` always lands strictly
between its neighbours, and a list's elements end in the same order whatever order the
inserts and removals arrive in."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from rill.storage.activelist import ListState, between, decode_position, encode_position

POS = st.lists(st.integers(-3, 3), min_size=1, max_size=5).map(tuple)


@given(POS, POS, st.integers(1, 255), st.integers(1, 10**6), st.integers(0, 5))
def test_between_lands_strictly_between(a, b, origin, seq, idx):
    a = a + (1, 1, 0)
    b = b + (2, 1, 0)
    if a == b:
        return
    lo, hi = min(a, b), max(a, b)
    p = between(lo, hi, (origin, seq, idx))
    assert lo < p < hi
    assert between(None, lo, (origin, seq, idx)) < lo
    assert between(hi, None, (origin, seq, idx)) > hi
    assert decode_position(encode_position(p)) == p


# Three regions insert at random places of their own copy and remove random elements,
# then every region applies the others' ops: the lists must be equal.
SCRIPT = st.lists(st.tuples(st.integers(0, 2), st.booleans(), st.integers(0, 50)), max_size=30)


@settings(max_examples=200, deadline=None)
@given(SCRIPT, st.randoms(use_true_random=False))
def test_concurrent_inserts_and_removals_converge(script, rnd):
    base = ListState()
    prev = None
    for i in range(5):
        prev = between(prev, None, (9, 1, i))
        base.insert(prev, b"base%d" % i)
    copies = [ListState.from_state(base.to_state()) for _ in range(3)]
    ops: list[list[tuple]] = [[], [], []]
    for n, (region, insert, where) in enumerate(script):
        mine = copies[region]
        if insert or not mine.positions:
            i = where % (len(mine) + 1)
            left = mine.positions[i - 1] if i else None
            right = mine.positions[i] if i < len(mine) else None
            pos = between(left, right, (region + 1, n + 1, 0))
            mine.insert(pos, b"v%d" % n)
            ops[region].append(("ins", pos, b"v%d" % n))
        else:
            pos = mine.positions[where % len(mine)]
            mine.remove(pos)
            ops[region].append(("rem", pos))
    for region in range(3):
        others = [op for r in range(3) if r != region for op in ops[r]]
        # Each region's own ops keep their order; the interleaving is random.
        queues = [list(ops[r]) for r in range(3) if r != region]
        merged = []
        while any(queues):
            q = rnd.choice([q for q in queues if q])
            merged.append(q.pop(0))
        assert len(merged) == len(others)
        for op in merged:
            if op[0] == "ins":
                copies[region].insert(op[1], op[2])
            else:
                copies[region].remove(op[1])
    assert copies[0].positions == copies[1].positions == copies[2].positions
    assert copies[0].values == copies[1].values == copies[2].values
