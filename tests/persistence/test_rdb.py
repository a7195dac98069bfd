"""The RDB codec: primitives, whole-file round trips, old encodings, and refusal of bad files."""

from __future__ import annotations

import io
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rill.persistence import rdb
from rill.persistence.crc64 import crc64
from rill.storage import listpack
from rill.storage.list import ListValue, set_packed_threshold
from rill.storage.stream import Stream, make_id

FAR_FUTURE = 4102444800000  # 2100-01-01 in ms
NOW = 1700000000000


# -- helpers ----------------------------------------------------------------------------
def save(dbs: dict[int, tuple[dict, dict]], **options) -> bytes:
    buf = io.BytesIO()
    rdb.save_file(buf, [(i, d, e) for i, (d, e) in sorted(dbs.items())], rdb.SaveOptions(**options))
    return buf.getvalue()


def with_crc(body: bytes) -> bytes:
    """An RDB image ending with EOF, given everything before the checksum."""
    return body + struct.pack("<Q", crc64(body))


def header(version: int = 10) -> bytes:
    return b"REDIS%04d" % version


def stream_state(s: Stream) -> tuple:
    groups = []
    for g in s.groups():
        pel = [(sid, n.delivery_time, n.delivery_count, n.consumer.name if n.consumer else None)
               for sid, n in g.pel.items()]
        consumers = [(c.name, c.seen_time, list(c.pel.keys())) for c in g.consumers_sorted()]
        groups.append((g.name, g.last_id, g.entries_read, pel, consumers))
    return (
        s.length, s.last_id, s.first_id, s.max_deleted_entry_id, s.entries_added,
        list(s.nodes()), s.range(), groups,
    )


def value_state(v):
    if isinstance(v, (bytes, bytearray)):
        return ("string", bytes(v))
    if isinstance(v, ListValue):
        return ("list", list(v))
    if isinstance(v, Stream):
        return ("stream", stream_state(v))
    raise AssertionError(type(v))


def make_stream(n: int, deletes: list[int] = (), groups: int = 1, wide: bool = False) -> Stream:
    s = Stream()
    ids = []
    for i in range(n):
        sid = make_id(NOW + i // 3, i % 3)
        fields = [b"f", b"%d" % i, b"name", b"x" * (i % 7)]
        if wide and i % 5 == 0:
            fields = [b"other", b"-%d" % i]
        s.add(fields, sid)
        ids.append(sid)
    for d in deletes:
        if d < len(ids):
            s.delete(ids[d])
    for gi in range(groups):
        last = ids[min(len(ids) - 1, 10 + gi)] if ids else 0
        g = s.create_group(b"group%d" % gi, last, 11 + gi if ids else -1)
        alice = g.create_consumer(b"alice", NOW + 5)
        g.create_consumer(b"bob", NOW + 6)
        for sid in ids[: min(len(ids), 8)]:
            g.deliver(sid, alice, NOW + 7)
    return s


# -- primitives -------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [0, 1, 63, 64, 16383, 16384, 2**32 - 1, 2**32, 2**64 - 1])
def test_length_round_trip(n):
    enc = rdb.encode_len(n)
    r = rdb.RdbReader(enc)
    assert r.length() == n and r.pos == len(enc)
    assert len(enc) == (1 if n < 64 else 2 if n < 16384 else 5 if n < 2**32 else 9)


@pytest.mark.parametrize(
    "s, encoded",
    [
        (b"0", b"\xc0\x00"),
        (b"-1", b"\xc0\xff"),
        (b"127", b"\xc0\x7f"),
        (b"128", b"\xc1\x80\x00"),
        (b"-32768", b"\xc1\x00\x80"),
        (b"32768", b"\xc2\x00\x80\x00\x00"),
        (b"2147483647", b"\xc2\xff\xff\xff\x7f"),
        (b"2147483648", b"\x0a2147483648"),  # beyond int32: a plain string
        (b"007", b"\x03007"),
        (b"-0", b"\x02-0"),
        (b"+1", b"\x02+1"),
        (b"", b"\x00"),
    ],
)
def test_string_forms(s, encoded):
    assert rdb.encode_string(s) == encoded
    assert rdb.RdbReader(encoded).string() == s


@pytest.mark.requires(modules=["lzf"])
def test_lzf_strings_only_when_they_shrink_by_four():
    long = b"abcabcabcabcabcabcabcabcabcabc"
    enc = rdb.encode_string(long, compress=True)
    assert enc[0] == 0xC3
    assert rdb.RdbReader(enc).string() == long
    short = b"abcabcabcabcabcabcab"  # 20 bytes: never compressed
    assert rdb.encode_string(short, compress=True) == b"\x14" + short
    incompressible = bytes(range(40))
    assert rdb.encode_string(incompressible, compress=True)[0] == 40


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.booleans())
def test_any_string_round_trips(s, compress):
    enc = rdb.encode_string(s, compress)
    r = rdb.RdbReader(enc)
    assert r.string() == s and r.pos == len(enc)


# -- whole files ------------------------------------------------------------------------------
def test_header_aux_and_layout():
    data = save({0: ({b"k": b"v"}, {}), 2: ({b"n": b"12"}, {b"n": FAR_FUTURE})}, aof_base=True)
    assert data.startswith(b"REDIS0010\xfa\x09redis-ver\x067.0.15\xfa\x0aredis-bits\xc0\x40")
    res = rdb.load(data)
    assert res.aux[b"aof-base"] == b"1" and res.aux[b"redis-bits"] == b"64"
    assert res.dbs[0] == {b"k": b"v"} and res.dbs[2] == {b"n": b"12"}
    assert res.expires[2] == {b"n": FAR_FUTURE}
    assert res.end == len(data) and res.version == 10
    # SELECTDB 2, RESIZEDB 1 1, EXPIRETIME_MS, type 0, key, int-encoded value
    assert b"\xfe\x02\xfb\x01\x01\xfc" + struct.pack("<q", FAR_FUTURE) + b"\x00\x01n\xc0\x0c" in data


def test_empty_databases_are_skipped_and_checksum_can_be_off():
    data = save({0: ({}, {})}, checksum=False)
    assert b"\xfe" not in data[-20:]
    assert data.endswith(b"\xff" + b"\x00" * 8)
    assert rdb.load(data).keys_loaded == 0


def test_streams_round_trip_verbatim():
    s = make_stream(450, deletes=[0, 1, 2, 200, 449], groups=2, wide=True)
    empty = Stream()
    empty.last_id = make_id(5, 5)
    empty.entries_added = 3
    empty.max_deleted_entry_id = make_id(5, 5)
    data = save({0: ({b"s": s, b"empty": empty}, {})})
    res = rdb.load(data)
    assert stream_state(res.dbs[0][b"s"]) == stream_state(s)
    assert stream_state(res.dbs[0][b"empty"]) == stream_state(empty)
    # Type 19 has no active_time: Redis 7.0 loads it as seen_time.
    alice = res.dbs[0][b"s"].get_group(b"group0").consumers[b"alice"]
    assert alice.active_time == alice.seen_time == NOW + 5


def test_entries_read_minus_one_is_all_ones():
    s = Stream()
    s.add([b"a", b"b"], make_id(1, 1))
    s.create_group(b"g", 0, -1)
    data = save({0: ({b"s": s}, {})})
    assert b"\x01g\x00\x00\x81" + b"\xff" * 8 in data
    assert rdb.load(data).dbs[0][b"s"].get_group(b"g").entries_read == -1


def test_lists_pack_like_quicklist_and_use_plain_nodes_for_big_elements():
    small = ListValue([b"a", b"1", b"-5", b"x" * 100])
    big = ListValue([b"y" * 300 for _ in range(100)])  # several 8 KB nodes
    data = save({0: ({b"small": small, b"big": big}, {})}, compression=False)
    res = rdb.load(data)
    assert list(res.dbs[0][b"small"]) == list(small)
    assert list(res.dbs[0][b"big"]) == list(big)
    nodes = list(big.nodes(-2))
    assert len(nodes) > 1
    assert b"\x12\x03big" + rdb.encode_len(len(nodes)) + b"\x02" in data
    set_packed_threshold(100)
    try:
        data = save({0: ({b"l": ListValue([b"z" * 150, b"ab", b"z" * 150])}, {})}, compression=False)
    finally:
        set_packed_threshold(0)
    assert b"\x12\x01l\x03\x01" in data  # three nodes, the first PLAIN
    assert list(rdb.load(data).dbs[0][b"l"]) == [b"z" * 150, b"ab", b"z" * 150]


keys = st.binary(min_size=0, max_size=12)
strings = st.one_of(
    st.binary(max_size=60),
    st.integers(-(2**40), 2**40).map(lambda i: b"%d" % i),
    st.binary(max_size=30).map(bytearray),
    st.text(alphabet="ab", max_size=200).map(str.encode),
)
lists = st.lists(strings.map(bytes), min_size=1, max_size=40).map(ListValue)
streams = st.builds(make_stream, st.integers(0, 250), st.lists(st.integers(0, 250), max_size=20),
                    st.integers(0, 2), st.booleans())
values = st.one_of(strings, lists, streams)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.dictionaries(st.integers(0, 15), st.dictionaries(keys, values, max_size=6), max_size=3),
    st.booleans(),
)
def test_random_datasets_round_trip(dbs, compression):
    spec = {}
    for i, data in dbs.items():
        expires = {k: FAR_FUTURE + n for n, k in enumerate(data) if n % 2}
        spec[i] = (data, expires)
    image = save(spec, compression=compression)
    res = rdb.load(image)
    for i, (data, expires) in spec.items():
        got = res.dbs.get(i, {})
        assert {k: value_state(v) for k, v in got.items()} == {k: value_state(v) for k, v in data.items()}
        assert res.expires.get(i, {}) == expires


def test_expired_keys_are_dropped_unless_kept():
    data = save({0: ({b"old": b"1", b"new": b"2"}, {b"old": NOW - 1, b"new": FAR_FUTURE})})
    res = rdb.load(data, now_ms=NOW)
    assert list(res.dbs[0]) == [b"new"] and res.keys_expired == 1 and res.keys_loaded == 1
    kept = rdb.load(data, now_ms=NOW, keep_expired=True)
    assert set(kept.dbs[0]) == {b"old", b"new"}


def test_duplicate_keys_fail_unless_merging():
    body = header() + b"\xfe\x00" + b"\x00\x01k\x01a" + b"\x00\x01k\x01b" + b"\xff"
    with pytest.raises(rdb.RdbError, match="duplicate key"):
        rdb.load(with_crc(body))
    assert rdb.load(with_crc(body), allow_dup=True).dbs[0] == {b"k": b"b"}


def test_database_out_of_range():
    body = header() + b"\xfe\x20" + b"\x00\x01k\x01a\xff"
    with pytest.raises(rdb.RdbError, match="more than 16 databases") as e:
        rdb.load(with_crc(body))
    assert e.value.offset == 9


# -- refusing bad files ------------------------------------------------------------------------
def sample_file() -> bytes:
    return save({0: ({b"s": make_stream(30), b"l": ListValue([b"a", b"b"]), b"k": b"v" * 30},
                     {b"k": FAR_FUTURE})})


def test_every_flipped_byte_is_refused():
    data = sample_file()
    for i in range(len(data)):
        bad = bytearray(data)
        bad[i] ^= 0x5A
        with pytest.raises(rdb.RdbError):
            rdb.load(bytes(bad))


def test_every_truncation_is_refused():
    data = sample_file()
    for n in range(len(data)):
        with pytest.raises(rdb.RdbError):
            rdb.load(data[:n])


def test_checksum_error_names_the_offset():
    data = bytearray(sample_file())
    data[20] ^= 1
    data[20] ^= 1  # unchanged: loads
    rdb.load(bytes(data))
    data[-1] ^= 1
    with pytest.raises(rdb.RdbError, match=r"wrong RDB checksum.*at offset \d+") as e:
        rdb.load(bytes(data))
    assert e.value.offset == len(data) - 8


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_corruption_behind_a_valid_checksum_raises_only_rdberror(data):
    """Structure damage that the CRC cannot see (it was recomputed) is still refused cleanly."""
    image = bytearray(sample_file()[:-8])
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(9, len(image) - 2))
        image[i] = data.draw(st.integers(0, 255))
    try:
        rdb.load(with_crc(bytes(image)))
    except rdb.RdbError as e:
        assert e.offset is not None
        assert "offset" in str(e)


def test_bad_stream_structures_name_their_offset():
    s = make_stream(3)
    image = save({0: ({b"s": s}, {})}, compression=False)
    body = bytearray(image[:-8])
    key_at = body.index(b"\x10" + make_id(NOW, 0).to_bytes(16, "big"))
    lp_at = key_at + 17
    body[lp_at + 2] ^= 0xFF  # the listpack's total-bytes header no longer matches
    with pytest.raises(rdb.RdbError, match="stream listpack integrity") as e:
        rdb.load(with_crc(bytes(body)))
    assert e.value.offset == lp_at
    body = bytearray(image[:-8])
    body[key_at] = 0x0F  # a 15-byte node key
    with pytest.raises(rdb.RdbError, match="node key"):
        rdb.load(with_crc(bytes(body)))


def test_versions():
    body = header(9) + b"\x00\x01k\x01v\xff"
    assert rdb.load(with_crc(body)).dbs[0] == {b"k": b"v"}
    # Before version 5 there is no checksum after EOF.
    assert rdb.load(header(4) + b"\x00\x01k\x01v\xff").dbs[0] == {b"k": b"v"}
    for v in (0, 13):
        with pytest.raises(rdb.RdbError, match="format version"):
            rdb.load(with_crc(header(v) + b"\xff"))
    with pytest.raises(rdb.RdbError, match="signature"):
        rdb.load(b"RUBBISH00010\xff")


def test_old_expiry_idle_freq_resizedb_module_and_function_opcodes():
    body = (
        header(9) + b"\xfa\x03lua\x00"  # an old aux field
        + b"\xfb\x02\x00"
        + b"\xfd" + struct.pack("<i", 2000000000) + b"\x00\x01a\x011"  # EXPIRETIME in seconds
        + b"\xf8\x05\x00\x01b\x012"  # IDLE
        + b"\xf9\x07\x00\x01c\x013"  # FREQ
        + b"\xf5\x04code"  # a function library: its code, compiled when installed
        + b"\xf6\x01l\x03LUA\x01\x04desc\x04body"  # 7.0-rc form: name, engine, description, body
        + b"\xff"
    )
    res = rdb.load(with_crc(body))
    assert res.dbs[0] == {b"a": b"1", b"b": b"2", b"c": b"3"}
    assert res.expires[0] == {b"a": 2000000000000}
    assert res.functions == [b"code", b"#!LUA name=l\nbody"]
    with pytest.raises(rdb.RdbError, match="module"):
        rdb.load(with_crc(header() + b"\xf7\x01\xff"))
    with pytest.raises(rdb.RdbError, match="module"):
        rdb.load(with_crc(header() + b"\x07\x01k\x01\xff"))
    with pytest.raises(rdb.RdbError, match="hash field expiration"):
        rdb.load(with_crc(header(12) + b"\x19\x01k\x00\xff"))


# -- encodings of files written before 7.0 ------------------------------------------------------
def ziplist(entries: list[bytes | int]) -> bytes:
    """A ziplist as Redis <= 6.2 writes them (prevlen, encoding, data)."""
    body = bytearray()
    prev = 0
    for e in entries:
        start = len(body)
        body += bytes([prev]) if prev < 254 else b"\xfe" + struct.pack("<I", prev)
        if isinstance(e, int):
            if 0 <= e <= 12:
                body.append(0xF1 + e)
            elif -128 <= e <= 127:
                body += b"\xfe" + struct.pack("<b", e)
            elif -32768 <= e <= 32767:
                body += b"\xc0" + struct.pack("<h", e)
            elif -(2**23) <= e < 2**23:
                body += b"\xf0" + struct.pack("<i", e)[:3]
            elif -(2**31) <= e < 2**31:
                body += b"\xd0" + struct.pack("<i", e)
            else:
                body += b"\xe0" + struct.pack("<q", e)
        elif len(e) < 64:
            body += bytes([len(e)]) + e
        elif len(e) < 16384:
            body += bytes([0x40 | (len(e) >> 8), len(e) & 0xFF]) + e
        else:
            body += b"\x80" + struct.pack(">I", len(e)) + e
        prev = len(body) - start
    total = 10 + len(body) + 1
    return struct.pack("<IIH", total, 10, len(entries)) + bytes(body) + b"\xff"


def test_ziplist_list_and_quicklist_v1():
    entries = [b"hello", 0, 12, 13, -1, 300, -70000, 2**40, b"x" * 70, b"y" * 300]
    expected = [b"hello", b"0", b"12", b"13", b"-1", b"300", b"-70000", b"%d" % 2**40, b"x" * 70, b"y" * 300]
    zl = ziplist(entries)
    body = header(8) + b"\x0a\x01l" + rdb.encode_string(zl) + b"\xff"
    assert list(rdb.load(with_crc(body)).dbs[0][b"l"]) == expected
    body = header(9) + b"\x0e\x01q\x02" + rdb.encode_string(zl) + rdb.encode_string(ziplist([b"tail"])) + b"\xff"
    assert list(rdb.load(with_crc(body)).dbs[0][b"q"]) == [*expected, b"tail"]


def test_plain_list_type_and_empty_collections_are_skipped():
    body = (
        header(6) + b"\x01\x01l\x02\x01a\xc0\x05"  # LIST of 2
        + b"\x01\x01e\x00"  # empty LIST: skipped
        + b"\x12\x01f\x00"  # empty quicklist: skipped
        + b"\xff"
    )
    res = rdb.load(with_crc(body))
    assert list(res.dbs[0][b"l"]) == [b"a", b"5"] and set(res.dbs[0]) == {b"l"}
    assert res.empty_keys_skipped == 2


def test_intset_zipmap_and_pairs_decode():
    r = rdb.RdbReader(b"")
    blob = struct.pack("<II", 4, 3) + struct.pack("<3i", -5, 7, 100000)
    assert rdb._intset_values(r, blob, 0) == [b"-5", b"7", b"100000"]
    with pytest.raises(rdb.RdbError, match="intset"):
        rdb._intset_values(r, struct.pack("<II", 2, 2) + struct.pack("<2h", 5, 5), 0)
    zm = b"\x02" + b"\x01a" + b"\x02\x00xy" + b"\x02bb" + b"\x01\x02z??" + b"\xff"
    assert rdb._zipmap_pairs(r, zm, 0) == [(b"a", b"xy"), (b"bb", b"z")]
    with pytest.raises(rdb.RdbError, match="zipmap"):
        rdb._zipmap_pairs(r, zm[:-1], 0)
    with pytest.raises(rdb.RdbError, match="ziplist"):
        rdb._ziplist_values(r, ziplist([b"a"])[:-1] + b"\x00", 0)
    lp = bytes(listpack.build([b"f", b"1", b"g", b"-2"]))
    assert listpack.unpack(lp) == [b"f", b"1", b"g", b"-2"]
    assert listpack.unpack(lp[:-2] + b"\xff") is None


def test_hashes_sets_zsets_are_decoded_generically(monkeypatch):
    """Every old and new encoding reaches the type's builder as plain pairs/members."""
    built = {}
    monkeypatch.setattr(rdb, "BUILDERS", {
        b"hash": lambda pairs: built.setdefault("hash", pairs),
        b"set": lambda members: built.setdefault("set", members),
        b"zset": lambda pairs: built.setdefault("zset", pairs),
    })
    zl = ziplist([b"m1", b"1.5", b"m2", 3])
    lp_hash = bytes(listpack.build([b"a", b"1", b"b", b"2"]))
    body = (
        header(9) + b"\x04\x01h\x01\x01f\x01v"
        + b"\x0b\x01s" + rdb.encode_string(struct.pack("<II", 2, 2) + struct.pack("<2h", 1, 2))
        + b"\x0c\x01z" + rdb.encode_string(zl)
        + b"\x10\x01H" + rdb.encode_string(lp_hash)
        + b"\xff"
    )
    rdb.load(with_crc(body))
    assert built == {"hash": [(b"f", b"v")], "set": [b"1", b"2"], "zset": [(b"m1", 1.5), (b"m2", 3.0)]}
    dup = header(9) + b"\x02\x01s\x02\x01a\x01a\xff"
    with pytest.raises(rdb.RdbError, match="duplicate set member"):
        rdb.load(with_crc(dup))
    nan = header(9) + b"\x05\x01z\x01\x01m" + struct.pack("<d", float("nan")) + b"\xff"
    with pytest.raises(rdb.RdbError, match="NaN"):
        rdb.load(with_crc(nan))


def test_stream_type_15_and_21():
    s = make_stream(20, deletes=[0], groups=1)
    image = save({0: ({b"s": s}, {})}, compression=False)
    # Type 21 adds active_time after seen_time for each consumer.
    body = bytearray(image[:-8])
    t_at = body.index(b"\x13\x01s")
    body[t_at] = 21
    for name in (b"alice", b"bob"):
        at = body.index(rdb.encode_string(name), t_at) + 1 + len(name) + 8
        body[at:at] = struct.pack("<q", NOW + 99)
    res = rdb.load(with_crc(bytes(body)))
    g = res.dbs[0][b"s"].get_group(b"group0")
    assert g.consumers[b"alice"].active_time == NOW + 99
    assert g.consumers[b"alice"].seen_time == NOW + 5
    # Type 15 lacks first/max-deleted/entries-added and entries_read (they are derived).
    v15 = Stream()
    for i in range(1, 6):
        v15.add([b"k", b"v"], make_id(i, 0))
    v15.create_group(b"g", make_id(2, 0), 2)
    w = rdb.RdbWriter(None, rdb.SaveOptions(compression=False))
    out = w.out
    out += b"\x0f\x01s" + rdb.encode_len(v15.node_count())
    for master, lp in v15.nodes():
        out += b"\x10" + master.to_bytes(16, "big") + rdb.encode_string(lp)
    out += rdb.encode_len(5) + rdb.encode_len(5) + rdb.encode_len(0)  # length, last id
    out += b"\x01" + rdb.encode_string(b"g") + rdb.encode_len(5) + rdb.encode_len(0) + b"\x00\x00"
    res = rdb.load(with_crc(header(9) + bytes(out) + b"\xff"))
    got = res.dbs[0][b"s"]
    assert got.entries_added == 5 and got.first_id == make_id(1, 0) and got.max_deleted_entry_id == 0
    assert got.get_group(b"g").entries_read == 5  # the group is at the last ID


def test_stream_consumer_pel_must_reference_the_group_pel():
    s = make_stream(5, groups=1)
    image = bytearray(save({0: ({b"s": s}, {})}, compression=False)[:-8])
    # alice owns the first 5 IDs; point her first one at an ID the group PEL lacks
    at = image.index(rdb.encode_string(b"alice"))
    own_at = at + 6 + 8 + 1
    image[own_at: own_at + 16] = make_id(999, 9).to_bytes(16, "big")
    with pytest.raises(rdb.RdbError, match="not found in group global PEL") as e:
        rdb.load(with_crc(bytes(image)))
    assert e.value.offset == own_at


# -- DUMP payloads ----------------------------------------------------------------------------------
def test_dump_payload_layout_and_verification():
    p = rdb.dump_payload(b"hello")
    assert p[:7] == b"\x00\x05hello" and p[7:9] == b"\x0a\x00"
    assert struct.unpack("<Q", p[9:])[0] == crc64(p[:9])
    assert rdb.verify_payload(p) and rdb.restore_payload(p) == b"hello"
    assert not rdb.verify_payload(p[:9])
    bad = bytearray(p)
    bad[3] ^= 1
    assert not rdb.verify_payload(bytes(bad))
    assert rdb.verify_payload(bytes(bad), skip_checksum=True)
    newer = bytearray(p)
    newer[7] = 13
    assert not rdb.verify_payload(bytes(newer))


def test_dump_payload_of_every_type_round_trips():
    for v in (b"12", bytearray(b"raw"), ListValue([b"a", b"b"]), make_stream(120, [3], 2, True)):
        back = rdb.restore_payload(rdb.dump_payload(v))
        assert value_state(back) == value_state(v)


def test_restore_payload_refuses_empty_and_garbage():
    empty = b"\x12\x00"
    payload = empty + b"\x0a\x00" + struct.pack("<Q", crc64(empty + b"\x0a\x00"))
    with pytest.raises(rdb.RdbError):
        rdb.restore_payload(payload)
    junk = b"\x13\x05"
    payload = junk + b"\x0a\x00" + struct.pack("<Q", crc64(junk + b"\x0a\x00"))
    with pytest.raises(rdb.RdbError):
        rdb.restore_payload(payload)
