"""Active-Active effect records: the argv a link sends and the AOF keeps."""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rill.persistence.aof import encode_command
from rill.protocol.effects import (
    Effect,
    clear_section,
    compact_from_wire,
    decode_apply,
    decode_effect,
    decode_records,
    decode_vc,
    encode_clock,
    encode_compact,
    encode_effect,
    encode_effect_compact,
    encode_record,
    encode_vc,
    put_op,
)

regions = st.integers(1, 255)
clocks = st.dictionaries(regions, st.integers(1, 2**40), max_size=16)
ops = st.lists(
    st.tuples(st.integers(0, 15), st.lists(st.binary(max_size=20), min_size=2, max_size=6)),
    max_size=5,
)


def test_record_layout():
    e = Effect(2, 7, 1000, {1: 3, 2: 6}, [(0, [b"XADD", b"s", b"2", b"5-2", b"f", b"v"])])
    assert encode_effect(e) == [
        b"ACTIVEACTIVE", b"APPLY", b"2", b"7", b"1000", b"1:3,2:6", b"1",
        b"0", b"6", b"XADD", b"s", b"2", b"5-2", b"f", b"v",
    ]


@given(regions, st.integers(1, 2**50), st.integers(0, 2**45), clocks, ops)
def test_round_trip(origin, seq, ts, vc, unit):
    e = Effect(origin, seq, ts, vc, [(db, list(op)) for db, op in unit])
    assert decode_effect(encode_effect(e)) == e


def _with_own_entry(e: Effect) -> Effect:
    """``e`` as a decoder gives it back: its clock holds the origin's own ``seq - 1``."""
    vc = {r: n for r, n in e.vc.items() if n and r != e.origin}
    if e.seq > 1:
        vc[e.origin] = e.seq - 1
    return Effect(e.origin, e.seq, e.ts, vc, e.ops)


@given(regions, st.integers(1, 2**50), st.integers(0, 2**45), clocks, ops)
def test_compact_round_trip(origin, seq, ts, vc, unit):
    e = Effect(origin, seq, ts, vc, [(db, list(op)) for db, op in unit])
    wire = encode_effect_compact(e)
    [back] = decode_records(wire)
    assert back == _with_own_entry(e) and back.raw == wire
    # The argv format decodes to the same effect, and converts to the same bytes.
    v1 = encode_command(encode_effect(_with_own_entry(e)))
    assert compact_from_wire(v1) == wire
    # a version-1 record cut short, or followed by anything, is refused
    for damaged in (v1[:-1], v1 + b"*1\r\n$4\r\nPING\r\n", v1 + b"x"):
        with pytest.raises(ValueError):
            compact_from_wire(damaged)


def test_compact_layout_and_size():
    """An XADD's record: 48 bytes where the argv format took 140."""
    e = Effect(2, 7, 1000, {1: 3, 2: 6}, [(0, [b"XADD", b"s", b"2", b"5-2", b"f", b"v"])])
    wire = encode_effect_compact(e)
    assert wire == (b"\x02\x02" + (7).to_bytes(8, "little") + (1000).to_bytes(8, "little") + b"\x01"
                    + b"\x01" + (3).to_bytes(8, "little") + b"\x01" + b"\x00\x06"
                    + b"\x04XADD\x01s\x012\x035-2\x01f\x01v")
    assert len(encode_command(encode_effect(e))) == 140


def test_many_records_in_one_apply():
    es = [Effect(3, n, 5, {1: n}, [(0, [b"XADD", b"k", b"3", b"%d-3" % n, b"f", b"v"])]) for n in range(1, 6)]
    blob = b"".join(encode_effect_compact(e) for e in es)
    assert decode_apply([b"ACTIVEACTIVE", b"APPLY", blob]) == [_with_own_entry(e) for e in es]
    # One record as argv: the format of AOFs written before the compact one.
    assert decode_apply(encode_effect(es[0])) == [es[0]]


def test_compact_records_past_the_small_numbers():
    """Long arguments, a large db number and many ops take 255 and a u32."""
    unit = [(300, [b"XADD", b"k" * 300, b"1", b"1-1", b"f", b"v" * 70000])] + [(0, [b"DEL", b"x"])] * 300
    e = Effect(7, 9, 5, {1: 2, 7: 8}, unit)
    [back] = decode_records(encode_effect_compact(e))
    assert back == e


def _reference_record(origin, seq, ts, clock, unit):
    """The compact layout of protocol/effects.py's docstring, written out with struct."""
    import struct

    def small(n):
        return bytes((n,)) if n < 255 else b"\xff" + struct.pack("<I", n)

    out = [struct.pack("<BBQQB", 2, origin, seq, ts, len(clock) // 9), clock, small(len(unit))]
    for db, op in unit:
        out += [small(db), small(len(op))]
        for a in op:
            out += [small(len(a)), a]
    return b"".join(out)


@pytest.mark.parametrize("unit", [
    [],
    [(0, [b"XADD", b"k", b"1", b"1-1", b"f", b"v"])],
    [(254, [b"a" * 254, b""])],  # the largest one-byte db and length
    [(255, [b"DEL", b"k"])],  # db 255 takes a u32
    [(0, [b"a" * 255, b"k"])],  # so does a length of 255
    [(0, [b"x"] * 254)],
    [(0, [b"x"] * 255)],
    [(1, [b"DEL", b"k"])] * 254,
    [(1, [b"DEL", b"k"])] * 255,
])
@pytest.mark.parametrize("seq,ts", [(1, 0), (2**64 - 1, 2**64 - 1), (2**40 + 3, 1_700_000_000_123)])
def test_compact_record_bytes_at_the_edges_of_the_one_byte_numbers(unit, seq, ts):
    """The compiled encoder (one bytes written in place) and the general one agree byte for
    byte with the documented layout, on both sides of every one-byte limit."""
    from rill.protocol.effects import encode_clock, encode_compact

    clock = encode_clock({1: 5, 3: 2**63, 200: 1}, 3)
    assert encode_compact(3, seq, ts, clock, unit) == _reference_record(3, seq, ts, clock, unit)


@pytest.mark.parametrize("unit", [
    [],
    [(0, [b"XADD", b"k", b"1", b"1-1", b"f", b"v"])],
    [(254, [b"a" * 254, b""])],
    [(255, [b"DEL", b"k"])],
    [(0, [b"a" * 255, b"k"])],
    [(0, [b"x"] * 254)],
    [(0, [b"x"] * 255)],
    [(1, [b"DEL", b"k"])] * 254,
    [(1, [b"DEL", b"k"])] * 255,
])
@pytest.mark.parametrize("split", [0, 1, 2])
def test_a_record_made_op_by_op_is_the_unit_record(unit, split):
    """What a writer builds as it goes (put_op per op, its head and its argv's tail apart,
    then encode_record) is byte for byte the record encode_compact makes of the unit, on
    both sides of every one-byte limit; the section, cleared, serves the next record."""
    clock = encode_clock({1: 5, 3: 2**63, 200: 1}, 3)
    section = bytearray(b"left over")
    clear_section(section)
    assert section == b""
    for db, op in unit:
        head = tuple(op[:split])
        put_op(section, db, head, [b"argv0", *op[split:]], 1)
    for seq, ts in ((1, 0), (2**64 - 1, 2**64 - 1)):
        assert encode_record(3, seq, ts, clock, len(unit), section) == encode_compact(3, seq, ts, clock, unit)
        assert encode_record(3, seq, ts, clock, len(unit), bytes(section)) == encode_compact(
            3, seq, ts, clock, unit)
    clear_section(section)
    put_op(section, 0, (b"XADD", b"k"), [b"XADD", b"k", b"*", b"f", b"v"], 3)
    assert decode_records(encode_record(1, 1, 1, b"", 1, section))[0].ops == [(0, [b"XADD", b"k", b"f", b"v"])]


def test_damaged_compact_batches_refused_whole():
    es = [Effect(1, n, 5, {}, [(0, [b"XDEL", b"k", b"1", b"1-1"]), (1, [b"DEL", b"x"])]) for n in (1, 2)]
    blob = b"".join(encode_effect_compact(e) for e in es)
    for cut in range(1, len(blob)):
        if cut == len(blob) // 2:
            continue  # a whole first record
        with pytest.raises(ValueError):
            decode_records(blob[:cut])
    with pytest.raises(ValueError, match="version"):
        decode_records(b"\x03" + blob[1:])
    with pytest.raises(ValueError):
        decode_records(b"")
    with pytest.raises(ValueError):
        compact_from_wire(b"*2\r\n$3\r\nSET\r\n$1\r\nk\r\n")


def test_clock_form():
    assert encode_vc({2: 4, 1: 17, 3: 0}) == b"1:17,2:4"
    assert decode_vc(b"1:17,2:4") == {1: 17, 2: 4}
    assert decode_vc(b"") == {}


@pytest.mark.parametrize("raw", [b"1", b"0:1", b"256:1", b"1:-1", b"1:2,1:3", b"a:b", b"1:2,"])
def test_malformed_clocks_refused(raw):
    with pytest.raises(ValueError):
        decode_vc(raw)


@pytest.mark.parametrize("cut", range(2, 15))
def test_damaged_records_refused_whole(cut):
    argv = encode_effect(Effect(1, 1, 5, {}, [(0, [b"XDEL", b"k", b"1", b"1-1"]), (1, [b"DEL", b"x"])]))
    with pytest.raises(ValueError):
        decode_effect(argv[:cut])
    with pytest.raises(ValueError):
        decode_effect([*argv, b"extra"])
