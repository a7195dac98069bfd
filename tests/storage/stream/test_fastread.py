"""The reply-ready read path (``Stream.range_segments(enc=RESP_ENTRIES)``: listpack node ->
RESP in one pass, the pieces from protocol's encoder) against the general decoder
(``Stream.range`` -> tuples), encoded here by an independent reference RESP encoder.

Random streams cover what changes the listpack shapes the fast path reads: entries with the
master fields (SAMEFIELDS) and with other fields, tombstones, 7/13/16/24/32/64-bit integer
values and ID deltas (negative ones too), integers past int64 and non-canonical integers
stored as strings, 6/12/32-bit strings, IDs at the ends of the uint64 range (deltas that
wrap), and node limits from one entry per node up to unlimited; queries cover both
directions, COUNT boundaries, and ranges cutting nodes anywhere.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rill.protocol.stream_entries import RESP_ENTRIES
from rill.storage.stream import ID_MAX, MASK64, Stream, clear_node_cache, make_id, split_id

from tests.support import examples

INT64_MAX = (1 << 63) - 1


pytestmark = pytest.mark.usefixtures("stream_limits")


def ref_entry(sid: int, fv: list[bytes]) -> bytes:
    """``\\r\\n*2 [id, *2n [f, v, ...]]`` written out plainly."""
    ms, seq = split_id(sid)
    idb = b"%d-%d" % (ms, seq)
    out = [b"\r\n*2\r\n$%d\r\n%s\r\n*%d" % (len(idb), idb, len(fv))]
    out += [b"\r\n$%d\r\n%s" % (len(x), x) for x in fv]
    return b"".join(out)


def resp_read(s: Stream, start: int, end: int, count: int, rev: bool) -> tuple[int, bytes]:
    """Entries and bytes the resp path gives for a range of nodes none of which is cached."""
    clear_node_cache()
    n = 0
    parts = []
    for ents, lo, hi, cached in s.range_segments(start, end, count, rev, enc=RESP_ENTRIES):
        assert not cached and lo == 0
        n += hi
        parts += ents
    return n, b"".join(parts)


def check(s: Stream, start: int, end: int, count: int, rev: bool) -> None:
    clear_node_cache()
    ref = s.range(start, end, count, rev, admit=False)
    n, got = resp_read(s, start, end, count, rev)
    assert n == len(ref)
    assert got == b"".join(ref_entry(sid, fv) for sid, fv in ref)


EDGE_INTS = [
    0, 1, 127, 128, -1, -128, 4095, 4096, -4096, -4097, 32767, 32768, -32768, -32769,
    8388607, 8388608, -8388608, -8388609, 2147483647, 2147483648, -2147483648, -2147483649,
    INT64_MAX, -INT64_MAX - 1,
]
VALUE = st.one_of(
    st.sampled_from(EDGE_INTS).map(lambda i: b"%d" % i),
    st.integers(-(1 << 65), 1 << 65).map(lambda i: b"%d" % i),  # past int64: strings
    st.sampled_from([b"", b"01", b"-0", b"+1", b" 1", b"1.5", b"%d", b"\r\n", b"\xff\x00"]),
    st.binary(max_size=70),
    st.sampled_from([63, 64, 127, 128, 4095, 4096, 5000]).map(lambda n: b"y" * n),
)
FIELD = st.sampled_from([b"f1", b"f2", b"g", b"12", b"-7", b"", b"z" * 64])
MS_STEP = st.one_of(
    st.just(0), st.integers(1, 127), st.integers(128, 4095), st.integers(4096, 1 << 20),
    st.integers(1 << 20, 1 << 40), st.integers(1 << 62, 1 << 64),
)
SEQ = st.one_of(st.integers(0, 5), st.integers(0, 9000), st.integers(0, MASK64),
                st.integers(MASK64 - 200, MASK64))
MS_BASE = st.sampled_from([0, 5, 4000, 1_700_000_000_000, (1 << 63) - 50, MASK64 - 5000, MASK64 - 100])
LIMITS = st.sampled_from([(4096, 100), (200, 5), (0, 0), (60, 0), (4096, 3), (1, 1)])


@st.composite
def streams(draw):
    """A stream built from random IDs, fields and values, with random deletions."""
    Stream.node_max_bytes, Stream.node_max_entries = draw(LIMITS)
    s = Stream()
    ms, seq = draw(MS_BASE), draw(SEQ)
    master = draw(st.lists(FIELD, min_size=1, max_size=4))
    ids = []
    for _ in range(draw(st.integers(0, 60))):
        if ids:
            step = draw(MS_STEP)
            if step == 0:
                if seq >= MASK64 - 3:
                    break
                seq += draw(st.integers(1, 3))
            else:
                ms += step
                seq = draw(SEQ)
            if ms > MASK64:
                break
        fields = master if draw(st.integers(0, 3)) else draw(st.lists(FIELD, min_size=1, max_size=4))
        fv = [x for f in fields for x in (f, draw(VALUE))]
        if not ms and not seq:
            seq = 1  # 0-0 is not a valid entry ID
        sid = make_id(ms, seq)
        s.add(fv, sid)
        ids.append(sid)
    for sid in ids:
        if draw(st.integers(0, 4)) == 0:
            s.delete(sid)
    return s, ids


def bound(draw, ids: list[int]) -> int:
    if not ids or draw(st.integers(0, 5)) == 0:
        return draw(st.sampled_from([0, ID_MAX, 1 << 64]))
    sid = draw(st.sampled_from(ids))
    return min(ID_MAX, max(0, sid + draw(st.integers(-1, 1))))


@settings(max_examples=examples(400, ci=150), deadline=None)
@given(st.data())
def test_resp_path_matches_the_general_decoder(data):
    s, ids = data.draw(streams())
    for _ in range(4):
        start, end = bound(data.draw, ids), bound(data.draw, ids)
        count = data.draw(st.sampled_from([0, 1, 2, 3, 7, 100, len(ids), max(0, len(ids) - 1)]))
        check(s, start, end, count, data.draw(st.booleans()))
    check(s, 0, ID_MAX, 0, False)
    check(s, 0, ID_MAX, 0, True)


@settings(max_examples=100, deadline=None)
@given(st.integers(120, 130), st.sampled_from([b"7", b"300", b"v", b"-5000"]))
def test_many_fields_take_the_general_entry_path(nf, value):
    """125+ master fields: the lp-count of a SAMEFIELDS entry is wider than one byte."""
    s = Stream()
    fv = [x for i in range(nf) for x in (b"f%d" % i, value)]
    for i in range(1, 4):
        s.add(list(fv), make_id(i, 0))
    s.add([b"other", value], make_id(5, 0))
    for rev in (False, True):
        check(s, 0, ID_MAX, 0, rev)
        check(s, make_id(2, 0), make_id(3, 0), 1, rev)


def test_node_of_tombstones_only_and_empty_ranges():
    s = Stream()
    Stream.node_max_entries = 2
    for i in range(1, 7):
        s.add([b"f", b"%d" % i], make_id(i, 0))
    s.delete(make_id(3, 0))
    s.delete(make_id(4, 0))
    for rev in (False, True):
        for a, b in [(0, ID_MAX), (make_id(3, 0), make_id(4, 0)), (make_id(9, 0), ID_MAX), (5, 4)]:
            check(s, a, b, 0, rev)
    assert resp_read(s, make_id(3, 0), make_id(4, 0), 0, False) == (0, b"")


@pytest.mark.parametrize("count", [0, 1, 2, 3, 10])
def test_reverse_read_through_a_node_with_nothing_in_range(count):
    """The node holding ``end`` (by master ID) has no live entry <= end: the reverse read
    must go on to the node before it."""
    Stream.node_max_entries = 2
    s = Stream()
    for i in range(1, 7):
        s.add([b"f", b"%d" % i], make_id(i, 0))
    s.delete(make_id(3, 0))  # node (3, 4) keeps master ID 3 with only 4 live
    for end in (make_id(3, 0), make_id(3, 5)):
        for start in (0, make_id(2, 0), make_id(3, 0)):
            check(s, start, end, count, True)
    n, _ = resp_read(s, 0, make_id(3, 0), count, True)
    assert n == (min(count, 2) if count else 2)


def test_cached_nodes_still_come_back_decoded():
    """An encoder changes only uncached segments: cached ones keep their shared list."""
    s = Stream()
    for i in range(1, 11):
        s.add([b"f", b"v%d" % i], make_id(i, 0))
    clear_node_cache()
    s.range_segments(0, ID_MAX, enc=RESP_ENTRIES)  # first touch: not cached yet
    (ents, lo, hi, cached), = s.range_segments(0, ID_MAX, enc=RESP_ENTRIES)
    assert cached and (lo, hi) == (0, 10) and ents[0] == (make_id(1, 0), [b"f", b"v1"])


@pytest.mark.parametrize(
    "ids",
    [
        [(5, 0), (MASK64 - 10, 0), (MASK64 - 10, 7)],  # ms delta wraps to a negative 13-bit int
        [(5, 0), (MASK64 - 100_000, 3)],  # ... to a negative 24-bit int
        [(0, MASK64 - 2), (1, 0), (2, 5)],  # seq delta wraps to a small positive int
        [(3, 0), (4, MASK64 - 100), (5, 1)],  # seq delta: a negative 13-bit int
        [(MASK64 - 3, MASK64 - 1), (MASK64 - 3, MASK64), (MASK64, 0), (MASK64, MASK64)],
    ],
)
def test_id_deltas_that_wrap_around_uint64(ids):
    Stream.node_max_entries = 0
    s = Stream()
    for ms, seq in ids:
        s.add([b"f", b"%d" % seq], make_id(ms, seq))
    assert len(list(s.nodes())) == 1
    for rev in (False, True):
        check(s, 0, ID_MAX, 0, rev)
        check(s, make_id(*ids[1]), ID_MAX, 1, rev)


def _cached_nodes(s: Stream) -> int:
    return sum(1 for ents, lo, hi, cached in s.range_segments(0, ID_MAX, enc=RESP_ENTRIES) if cached)


def test_rescanning_a_stream_bigger_than_the_cache_window_does_not_fill_the_cache():
    """A second touch admits a node only within the recent-touch window, so repeated full
    scans of a big stream stay on the one-pass path; a small hot set is still cached."""
    from rill.storage.stream import cache as st_mod

    Stream.node_max_entries = 2
    big = Stream()
    nodes = st_mod._NC_SEEN_MAX + 10
    for i in range(1, 2 * nodes + 1):
        big.add([b"f", b"%d" % i], make_id(i, 0))
    for _ in range(3):
        assert _cached_nodes(big) == 0
    check(big, 0, ID_MAX, 0, False)
    small = Stream()
    for i in range(1, 7):
        small.add([b"f", b"%d" % i], make_id(i, 0))
    small.range_segments(0, ID_MAX, enc=RESP_ENTRIES)
    assert _cached_nodes(small) == 3
    assert _cached_nodes(small) == 3


def test_nodes_with_more_entries_than_the_cache_takes_are_never_decoded_into_it():
    from rill.storage.stream import cache as st_mod

    Stream.node_max_entries, Stream.node_max_bytes = 0, 0
    s = Stream()
    for i in range(1, st_mod._NC_MAX_ENTRIES + 2):
        s.add([b"f", b"1"], make_id(i, 0))
    for _ in range(3):
        assert _cached_nodes(s) == 0
    assert not st_mod._NC


def test_paging_through_a_node_does_not_admit_it_but_rereading_does():
    """A forward read resuming after what the previous touch served is a continuation
    (COUNT paging), not a re-read; reading from an earlier start again is."""
    s = Stream()
    for i in range(1, 101):
        s.add([b"f", b"%d" % i], make_id(i, 0))
    clear_node_cache()
    got = []
    start = 0
    while True:
        segs = s.range_segments(start, ID_MAX, 7, enc=RESP_ENTRIES)
        if not segs:
            break
        assert all(not cached for *_, cached in segs)
        got.append(b"".join(p for ents, *_ in segs for p in ents))
        start = make_id(7 * len(got) + 1, 0)
    ref = s.range(0, ID_MAX, admit=False)
    assert b"".join(got) == b"".join(ref_entry(sid, fv) for sid, fv in ref)
    from rill.storage.stream import cache as st_mod

    assert not st_mod._NC  # not even by the final, empty page
    (ents, lo, hi, cached), = s.range_segments(make_id(50, 0), ID_MAX, 7, enc=RESP_ENTRIES)
    assert cached and ents[lo][0] == make_id(50, 0) and hi - lo == 7


def page_read(s: Stream, start: int, count: int) -> tuple[list[int], bytes]:
    """A forward page as XREADGROUP reads it (resp path, IDs collected), cached segments
    encoded by the reference encoder."""
    sids: list[int] = []
    parts = []
    for ents, lo, hi, cached in s.range_segments(start, ID_MAX, count, enc=RESP_ENTRIES, sids=sids):
        if cached:
            parts += [ref_entry(sid, fv) for sid, fv in ents[lo:hi]]
        else:
            parts += ents
    return sids, b"".join(parts)


@settings(max_examples=examples(300, ci=100), deadline=None)
@given(st.data())
def test_pages_resume_where_the_last_one_stopped_across_changes(data):
    """Consecutive pages (each from the ID after the last one served) take the recorded
    resume points; appends, deletions, trims and node closes between pages must never
    make a page differ from the general decoder's."""
    s, ids = data.draw(streams())
    ids = [sid for sid in ids if s.lookup(sid) is not None]
    cursor = 0
    for _ in range(data.draw(st.integers(1, 25))):
        op = data.draw(st.integers(0, 9))
        if op == 0 and s.last_id < ID_MAX - 10:
            sid = s.last_id + data.draw(st.sampled_from([1, 2, 1 << 64, 300 << 64]))
            fv = [x for f in data.draw(st.lists(FIELD, min_size=1, max_size=3))
                  for x in (f, data.draw(VALUE))]
            s.add(fv, min(sid, ID_MAX))
            ids.append(min(sid, ID_MAX))
        elif op == 1 and ids:
            s.delete(ids.pop(data.draw(st.integers(0, len(ids) - 1))))
        elif op == 2 and ids:
            s.trim_maxlen(data.draw(st.integers(0, len(ids))))
            ids = [sid for sid in ids if s.lookup(sid) is not None]
        else:
            count = data.draw(st.sampled_from([1, 2, 3, 10, 100]))
            ref = s.range(cursor, ID_MAX, count, admit=False)
            sids, got = page_read(s, cursor, count)
            assert sids == [sid for sid, _fv in ref]
            assert got == b"".join(ref_entry(sid, fv) for sid, fv in ref)
            if sids:
                cursor = sids[-1] + 1


def test_consecutive_pages_never_walk_the_node(monkeypatch):
    """Each page after the first starts where the previous one stopped, also after the
    tail node grew, instead of seeking its start entry by entry."""
    from rill.storage.stream import fastread as st_mod

    Stream.node_max_entries = 0
    s = Stream()
    for i in range(1, 61):
        s.add([b"f", b"%d" % i], make_id(i, 0))
    first, _ = page_read(s, 0, 10)

    def no_walk(*args):
        raise AssertionError("seeked the start entry by walking the node")

    monkeypatch.setattr(st_mod, "_seek_start", no_walk)
    got = list(first)
    while len(got) < 60:
        sids, _ = page_read(s, got[-1] + 1, 10)
        got += sids
    s.add([b"f", b"61"], make_id(61, 0))  # the tail grows in place
    sids, _ = page_read(s, got[-1] + 1, 10)
    assert got + sids == [make_id(i, 0) for i in range(1, 62)]


def test_pages_of_an_open_tail_node_reuse_its_layout_until_it_grows(monkeypatch):
    """The tail node (a bytearray) keeps its parsed layout between pages as a closed node
    does; an append, which grows it, makes the next page parse it again."""
    from rill.storage.stream import fastread as st_mod

    Stream.node_max_entries = 0
    s = Stream()
    for i in range(1, 61):
        s.add([b"f", b"%d" % i], make_id(i, 0))
    got, _ = page_read(s, 0, 10)
    master_fast = st_mod._master_fast
    parsed = []

    def counted(lp):
        parsed.append(len(lp))
        return master_fast(lp)

    monkeypatch.setattr(st_mod, "_master_fast", counted)
    while len(got) < 30:
        sids, _ = page_read(s, got[-1] + 1, 10)
        got += sids
    s.add([b"f", b"61"], make_id(61, 0))  # the tail grows in place
    while len(got) < 61:
        sids, _ = page_read(s, got[-1] + 1, 10)
        got += sids
    assert got == [make_id(i, 0) for i in range(1, 62)]
    if not st_mod.__file__.endswith(".py"):
        return  # compiled, _master_fast is a C call the patch does not reach
    assert len(parsed) == 1  # once, after the append


def test_resume_notes_hold_no_node_larger_than_the_cache_admits():
    """A note keeps its node alive after the node leaves its stream: big nodes get none."""
    from rill.storage.stream import cache as st_mod

    Stream.node_max_bytes, Stream.node_max_entries = 0, 0
    s = Stream()
    for i in range(1, 41):
        s.add([b"f", b"y" * 2000], make_id(i, 0))
    ((_key, lp),) = list(s.raw_nodes())  # the node object itself (nodes() hands out copies)
    assert len(lp) > st_mod._NC_MAX_NODE_BYTES
    sids, _ = page_read(s, 0, 10)
    assert len(sids) == 10 and id(lp) not in st_mod._RESUME
    sids, _ = page_read(s, sids[-1] + 1, 10)  # still correct, by walking the node
    assert sids == [make_id(i, 0) for i in range(11, 21)]
