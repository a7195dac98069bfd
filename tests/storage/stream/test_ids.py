"""Stream IDs: the int form and its conversions, next/auto-sequence IDs, the IDs XADD rejects."""

from __future__ import annotations

import pytest
from rill.storage import stream as S
from rill.storage.stream import (
    ID_MAX,
    MASK64,
    Stream,
    StreamIDError,
    StreamSizeError,
    format_id,
    format_sid,
    make_id,
)
from rill.storage.stream import stream as stream_module

from tests.storage.stream.support import (
    I,
)

# ------------------------------------------------------------------------------------------
# IDs
# ------------------------------------------------------------------------------------------


def test_id_helpers():
    sid = make_id(1526919030474, 55)
    assert S.split_id(sid) == (1526919030474, 55)
    assert format_id(1526919030474, 55) == b"1526919030474-55" == format_sid(sid)
    assert format_sid(ID_MAX) == b"18446744073709551615-18446744073709551615"
    assert S.encode_key(I(1, 2)) == (1).to_bytes(8, "big") + (2).to_bytes(8, "big")
    assert S.decode_key(S.encode_key(sid)) == sid
    assert S.incr_id(I(5, MASK64)) == I(6, 0)
    assert S.incr_id(ID_MAX) is None
    assert S.decr_id(I(6, 0)) == I(5, MASK64)
    assert S.decr_id(0) is None
    assert S.default_trim_limit(100) == 10000
    assert S.default_trim_limit(0) == 10000
    assert S.default_trim_limit(20000) == 1000000


def test_next_id_never_goes_backwards():
    s = Stream()
    assert s.next_id(1000) == I(1000, 0)
    s.add([b"f", b"v"], None, now_ms=1000)
    assert s.last_id == I(1000, 0)
    assert s.next_id(999) == I(1000, 1)  # clock went back: same ms, seq+1
    assert s.next_id(1000) == I(1000, 1)
    assert s.next_id(1001) == I(1001, 0)
    s.add([b"f", b"v"], I(1000, MASK64))
    assert s.next_id(5) == I(1001, 0)  # sequence overflow moves to the next ms
    s.last_id = ID_MAX
    assert s.next_id(5) == 0  # wraps like streamIncrID; add() then refuses it
    with pytest.raises(StreamIDError):
        s.add([b"f", b"v"], None, now_ms=5)


def test_auto_seq_id():
    s = Stream()
    assert s.auto_seq_id(0) == I(0, 1)  # "0-*" on an empty stream gives 0-1, as Redis does
    s.add([b"f", b"v"], I(5, 3))
    assert s.auto_seq_id(5) == I(5, 4)
    assert s.auto_seq_id(6) == I(6, 0)
    assert s.auto_seq_id(4) == I(4, 0)  # smaller than last_id: add() will refuse it
    with pytest.raises(StreamIDError):
        s.add([b"f", b"v"], s.auto_seq_id(4))
    s.add([b"f", b"v"], I(5, MASK64))
    assert s.auto_seq_id(5) is None  # Redis: "Elements are too large to be stored"


def test_add_rejects_bad_ids_and_shapes():
    s = Stream()
    with pytest.raises(StreamIDError):
        s.add([b"f", b"v"], 0)  # 0-0 is never valid
    s.add([b"f", b"v"], I(1, 1))
    with pytest.raises(StreamIDError):
        s.add([b"f", b"v"], I(1, 1))
    with pytest.raises(ValueError):
        s.add([b"f"], I(2, 0))
    assert s.length == 1 and s.entries_added == 1


def test_add_too_large(monkeypatch):
    monkeypatch.setattr(stream_module, "STREAM_LISTPACK_MAX_SIZE", 10)
    s = Stream()
    with pytest.raises(StreamSizeError):
        s.add([b"field", b"value!"], I(1))
    s.add([b"field", b"valu"], I(1))
