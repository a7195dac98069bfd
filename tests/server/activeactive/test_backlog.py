"""The backlog of own effect records that partial resyncs read."""

import pytest
from rill.server.activeactive import backlog as backlog_module
from rill.server.activeactive.backlog import Backlog, record_size


def rec(seq: int) -> bytes:
    return b"*7\r\n$12\r\nACTIVEACTIVE\r\n$5\r\nAPPLY\r\n$1\r\n1\r\n$3\r\n%03d\r\n" % seq  # one size for all


def test_records_from_a_held_sequence():
    b = Backlog(1 << 20)
    for seq in range(1, 6):
        b.append(seq, rec(seq), seq * 10)
    assert b.first_seq == 1 and b.last_seq == 5 and len(b) == 5
    assert [s for s, _ in b.records_from(3)] == [3, 4, 5]
    assert b.records_from(6) == []
    assert b.ts_of(4) == 40 and b.ts_of(9) is None
    assert b.bytes_after(3) == 2 * record_size(rec(4))
    assert b.bytes_after(5) == 0


def test_oldest_records_go_past_the_limit():
    size = record_size(rec(1))
    b = Backlog(3 * size)
    for seq in range(1, 11):
        b.append(seq, rec(seq), 0)
    assert b.first_seq == 8 and b.last_seq == 10
    assert b.nbytes <= 3 * size
    assert b.records_from(7) is None  # dropped: the peer needs a full sync
    assert [s for s, _ in b.records_from(8)] == [8, 9, 10]
    b.resize(size)
    assert b.first_seq == 10 and len(b) == 1


def test_newest_record_stays_even_when_alone_over_the_limit():
    b = Backlog(1)
    b.append(1, rec(1), 0)
    b.append(2, rec(2), 0)
    assert b.first_seq == b.last_seq == 2


def test_gaps_are_refused():
    b = Backlog(1000)
    b.append(4, rec(4), 0)  # an empty backlog starts anywhere (after a restart)
    with pytest.raises(ValueError):
        b.append(6, rec(6), 0)


def test_records_and_bytes_from_any_place_read_from_either_end_alike():
    """records_from and bytes_after walk from the nearer end (a link wants the newest few);
    every starting place gives the same records, in order, after the oldest were dropped."""
    b = Backlog(20 * record_size(rec(1)))
    for seq in range(1, 46):
        b.append(seq, rec(seq), seq)
    assert (b.first_seq, b.last_seq) == (26, 45)
    for seq in range(26, 47):
        assert b.records_from(seq) == [(s, rec(s)) for s in range(seq, 46)], seq
        assert b.bytes_after(seq - 1) == (45 - seq + 1) * record_size(rec(1)), seq
    assert b.records_from(25) is None


def deleting(seq: int) -> bytes:
    """A record whose op is an XDEL (what a full sync's merge reads back)."""
    return b"*11\r\n$12\r\nACTIVEACTIVE\r\n$5\r\nAPPLY\r\n$1\r\n1\r\n$3\r\n%03d\r\n$1\r\n0\r\n$0\r\n\r\n$1\r\n1\r\n" \
        b"$1\r\n0\r\n$1\r\n4\r\n$4\r\nXDEL\r\n$1\r\ns\r\n" % seq


def test_release_drops_what_every_peer_has_but_keeps_deletions_aside():
    b = Backlog(1 << 20)
    for seq in range(1, 7):
        b.append(seq, deleting(seq) if seq in (2, 5) else rec(seq), seq)
    assert b.release(0) == 0
    assert b.release(4) == 4
    assert (b.first_seq, b.last_seq, len(b)) == (5, 6, 2)
    assert b.records_from(4) is None  # a peer behind the release needs a full sync
    assert [s for s, _ in b.records_from(5)] == [5, 6]
    # The released deletion stays for full syncs, counted in nbytes; records_from never sees it.
    assert b.deletion_records() == [(2, deleting(2)), (5, deleting(5))]
    assert b.nbytes == len(deleting(2)) + len(deleting(5)) + len(rec(6))
    assert b.release(6) == 2
    assert (len(b), b.first_seq, b.last_seq) == (0, 7, 6)
    assert b.records_from(7) == [] and b.records_from(6) is None
    assert b.deletion_records() == [(2, deleting(2)), (5, deleting(5))]
    b.append(7, rec(7), 7)  # the sequence goes on after an emptied backlog
    assert [s for s, _ in b.records_from(7)] == [7]


def test_records_said_not_to_delete_are_not_kept_aside():
    """append's may_delete=False (the engine's word for an effect with no XDEL, XTRIM or
    DEL op) is taken: such records go at release without their bytes being read, while a
    record appended as usual (may delete) in the same run is still kept aside."""
    b = Backlog(1 << 20)
    b.append(1, deleting(1), 1, False)  # bytes that look like a deletion, said not to be one
    b.append(2, rec(2), 2, False)
    assert b.release(2) == 2
    assert b.deletion_records() == [] and b.nbytes == 0
    b.append(3, deleting(3), 3, False)
    b.append(4, deleting(4), 4)
    b.append(5, rec(5), 5, False)
    assert b.release(5) == 3
    # (The run holding a record that may delete is read whole: record 3 may go aside too.)
    kept = b.deletion_records()
    assert (4, deleting(4)) in kept and (5, rec(5)) not in kept
    # The emptied chunk starts over: records said not to delete are again not read.
    b.append(6, deleting(6), 6, False)
    assert b.release(6) == 1
    assert b.deletion_records() == kept


def test_past_the_limit_the_deletions_kept_aside_go_first():
    size = record_size(rec(1))
    b = Backlog(2 * size + len(deleting(1)))
    b.append(1, deleting(1), 0)
    b.release(1)
    b.append(2, rec(2), 0)
    b.append(3, rec(3), 0)
    assert b.deletion_records() == [(1, deleting(1))]
    b.append(4, rec(4), 0)
    assert b.deletion_records() == [] and (b.first_seq, b.last_seq) == (2, 4)


def test_records_across_chunks_read_release_and_drop_alike(monkeypatch):
    """Records go into chunks of mapped memory (here 3 records each); every read gives
    the same records whichever chunks they sit in, and a chunk emptied is unmapped."""
    monkeypatch.setattr(backlog_module, "CHUNK", 3 * (record_size(rec(1)) + 16))  # with their ends and times
    b = Backlog(1 << 20)
    for seq in range(1, 11):
        b.append(seq, deleting(seq) if seq == 4 else rec(seq), seq * 10)
    assert len(b._chunks) == 4  # [1 2 3] [4 5] [6 7 8] [9 10]: the longer record 4 leaves room for one more
    for seq in range(1, 12):
        want = [(s, deleting(s) if s == 4 else rec(s)) for s in range(seq, 11)]
        assert b.records_from(seq) == want, seq
        pieces = b.wires_from(seq)
        assert b"".join(w for _, w in pieces) == b"".join(w for _, w in want), seq
        # Each piece ends with the last record of its chunk.
        assert [last for last, _ in pieces] == [s for s in (3, 5, 8, 10) if s >= seq], seq
        assert b.bytes_after(seq - 1) == sum(len(w) for _, w in want), seq
        if want:
            assert b.ts_of(seq) == seq * 10
    assert b.release(5) == 5
    assert (b.first_seq, len(b), len(b._chunks)) == (6, 5, 2)
    assert b.records_from(5) is None and b.wires_from(5) is None
    assert [s for s, _ in b.records_from(6)] == list(range(6, 11))
    assert b.deletion_records() == [(4, deleting(4))]
    assert b.nbytes == len(deleting(4)) + 5 * record_size(rec(1))
    b.resize(2 * record_size(rec(1)))  # the deletion aside goes first, then the oldest records
    assert b.deletion_records() == [] and (b.first_seq, b.last_seq) == (9, 10)
    assert b.records_from(9) == [(9, rec(9)), (10, rec(10))]
    assert b.release(10) == 2 and len(b._chunks) == 0 and b.nbytes == 0
    b.append(11, rec(11), 0)
    assert b.wires_from(11) == [(11, rec(11))]


def test_an_emptied_backlog_answers_every_question():
    b = Backlog(1 << 20)
    for seq in range(1, 4):
        b.append(seq, rec(seq), seq)
    b.release(3)
    for seq in range(0, 6):
        assert b.bytes_after(seq) == 0
        assert b.ts_of(seq) is None and not b.holds(seq)
    assert b.records_from(4) == [] and b.wires_from(4) == []
    assert b.records_from(3) is None and b.wires_from(3) is None


@pytest.mark.parametrize("limit", [1, len(rec(1)), 3 * len(rec(1)) + 5, 1 << 20])
def test_wires_from_cuts_runs_at_record_ends_within_the_limit(limit):
    """A link sends each piece as one APPLY: pieces end at record ends, hold at most
    ``limit`` bytes (or one larger record), never span chunks, and together are every
    record from the asked sequence on, in order."""
    b = Backlog(1 << 30)
    big = b"x" * (backlog_module.CHUNK + 10)  # a chunk of its own
    for seq in range(1, 40):
        b.append(seq, big if seq == 20 else rec(seq), seq)
    for start in (1, 7, 20, 21, 39):
        pieces = b.wires_from(start, limit)
        assert b"".join(p for _last, p in pieces) == b"".join(w for _s, w in b.records_from(start))
        first = start
        for last, piece in pieces:
            assert piece == b"".join(w for s, w in b.records_from(first) if s <= last)
            assert len(piece) <= limit or last == first
            first = last + 1
        assert first == 40
