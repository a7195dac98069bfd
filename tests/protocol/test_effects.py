"""Active-Active effect records: the argv a link sends and the AOF keeps."""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rill.persistence.aof import encode_command
from rill.protocol.effects import (
    Effect,
    decode_effect,
    decode_vc,
    encode_effect,
    encode_record,
    encode_vc,
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


@given(regions, st.integers(1, 2**50), st.integers(0, 2**45), clocks, ops)
def test_record_bytes_are_the_argv_encoded(origin, seq, ts, vc, unit):
    """encode_record builds what a link writes directly: the multibulk of encode_effect."""
    e = Effect(origin, seq, ts, vc, [(db, list(op)) for db, op in unit])
    assert encode_record(origin, seq, ts, encode_vc(vc), e.ops) == encode_command(encode_effect(e))


def test_record_bytes_past_the_small_tables():
    """Long arguments, a large db number and many ops take the general encoding, alike."""
    unit = [(300, [b"XADD", b"k" * 300, b"1", b"1-1", b"f", b"v" * 70000])] + [(0, [b"DEL", b"x"])] * 300
    e = Effect(7, 9, 5, {1: 2}, unit)
    assert encode_record(7, 9, 5, b"1:2", unit) == encode_command(encode_effect(e))


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
