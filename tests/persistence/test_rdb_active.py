"""Active-Active streams in RDB files: rill's ``rill-aast`` module value (type 7) round-trips
every sub-stream verbatim with the group and causality metadata, redis-check-rdb accepts the
file, and the plain view (replicas, DUMP) is an ordinary type-19 stream."""

from __future__ import annotations

import io
import subprocess

import pytest
from rill.persistence import rdb
from rill.storage.stream import Stream, make_id
from rill.storage.stream.active import ActiveStream


def fmt(sid: int) -> bytes:
    return b"%d-%d" % (sid >> 64, sid & ((1 << 64) - 1))


def sample(region: int = 1) -> ActiveStream:
    """Three regions' entries (this region's added here, the others applied as remote ops),
    deletions in each, two groups: one read from, acknowledged in part, with a released
    entry, and one untouched."""
    s = ActiveStream(region)
    for i in range(1, 151):
        for r in (1, 2, 3):
            sid = make_id(1000 + i * 3 + r, r)
            fv = [b"f", b"%d" % i, b"region", b"%d" % r]
            if r == region:
                s.add(fv, sid)
            else:
                s.apply([b"XADD", b"%d" % r, fmt(sid), *fv])
    s.delete(make_id(1000 + 5 * 3 + region, region))
    other = 3 if region != 3 else 2
    s.apply([b"XDEL", b"%d" % other, fmt(make_id(1000 + 7 * 3 + other, other))])
    g = s.create_group(b"g1", 0, 0)
    c, _ = g.get_or_create_consumer(b"alice", 77)
    s.read_group(g, c, count=9, now_ms=500)
    g.ack_many([sid for sid, _fv in s.range(0, make_id(1012, 3))])
    g.release(make_id(1013, 1), 2)
    s.create_group(b"g0", s.last_id, -1)
    s.drain()
    s.set_group_clock(b"g1", {1: 4, 2: 7})
    s.set_group_clock(b"g0", {3: 1})
    return s


def save(data: dict, expires: dict | None = None, **options) -> bytes:
    buf = io.BytesIO()
    rdb.save_file(buf, [(0, data, expires or {})], rdb.SaveOptions(**options))
    return buf.getvalue()


def stream_state(s: Stream) -> tuple:
    groups = []
    for g in s.groups():
        consumers = [(c.name, c.seen_time, c.active_time, list(c.pel.keys())) for c in g.consumers_sorted()]
        pel = [(sid, n.delivery_time, n.delivery_count, n.consumer.name if n.consumer else None)
               for sid, n in g.pel.items()]
        groups.append((g.name, g.last_id, g.entries_read, pel, consumers, list(g.nacked or ())))
    return (list(s.nodes()), s.length, s.last_id, s.first_id, s.max_deleted_entry_id, s.entries_added, groups)


def active_state(s: ActiveStream) -> tuple:
    states = {name: (st.base, st.cur, st.abase, st.acked, st.seen) for name, st in s._gs.items()}
    return (s.region, [(r, stream_state(sub)) for r, sub in s.sub_streams()], stream_state(s),
            s.group_vc, states)


def test_module_type_id_is_redis_encoding():
    # moduleTypeEncodeId: 9 six-bit character indexes then the 10-bit version.
    assert rdb.module_type_id(b"AAAAAAAAA", 0) == 0
    assert rdb.module_type_id(b"AAAAAAAAB", 3) == (1 << 10) | 3
    assert rdb.module_type_name(rdb.AA_STREAM_ID) == b"rill-aast"
    assert rdb.AA_STREAM_ID & 1023 == rdb.AA_STREAM_ENCVER
    with pytest.raises(ValueError):
        rdb.module_type_id(b"rill.aast", 1)


@pytest.mark.parametrize("compression", [True, False])
def test_active_stream_round_trips(compression):
    s = sample(2)
    image = save({b"x": s, b"plain": Stream()}, {b"x": 99999999999999}, compression=compression)
    assert b"\x07\x01x\x81" in image  # type 7, key, 64-bit module id
    res = rdb.load(image, deep=True)
    got = res.dbs[0][b"x"]
    assert isinstance(got, ActiveStream)
    assert active_state(got) == active_state(s)
    assert res.expires[0] == {b"x": 99999999999999}
    assert isinstance(res.dbs[0][b"plain"], Stream)


def test_plain_view_is_an_ordinary_stream():
    s = sample()
    image = save({b"x": s}, plain=True)
    assert b"\x07\x01x" not in image
    got = rdb.load(image, deep=True).dbs[0][b"x"]
    assert type(got) is Stream
    assert got.range() == s.to_plain().range()
    assert len(got.range()) == 448
    assert [g.name for g in got.groups()] == [b"g0", b"g1"]


def test_dump_payload_is_the_plain_view():
    s = sample()
    payload = rdb.dump_payload(s)
    assert payload[0] == rdb.T_STREAM_LISTPACKS_2
    assert rdb.restore_payload(payload).range() == s.to_plain().range()


def test_damaged_module_values_are_refused():
    image = save({b"x": sample()}, checksum=False)
    at = image.index(b"\x07\x01x") + 3
    # another module's id
    bad = image[:at] + rdb.encode_len(rdb.module_type_id(b"other-mod", 1)) + image[at + 9:]
    with pytest.raises(rdb.RdbError, match="no matching module type 'other-mod'"):
        rdb.load(bad)
    # an unknown encoding version of ours
    bad = image[:at] + rdb.encode_len(rdb.module_type_id(b"rill-aast", 9)) + image[at + 9:]
    with pytest.raises(rdb.RdbError, match="encoding version 9"):
        rdb.load(bad)
    # a field whose opcode is not the one expected
    bad = image[: at + 9] + b"\x05" + image[at + 10:]
    with pytest.raises(rdb.RdbError, match="opcode"):
        rdb.load(bad)
    for cut in range(at, len(image) - 10, 97):
        with pytest.raises(rdb.RdbError):
            rdb.load(image[:cut] + b"\xff" + bytes(8))


@pytest.mark.requires("redis-check-rdb")
@pytest.mark.parametrize("plain", [False, True])
def test_redis_check_rdb_accepts_active_streams(tmp_path, plain):
    path = tmp_path / "dump.rdb"
    path.write_bytes(save({b"x": sample(), b"y": sample(3), b"z": Stream()},
                          extra_aux=[(b"aa-state", b"\x00\x01state")], plain=plain))
    out = subprocess.run(["redis-check-rdb", str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "RDB looks OK" in out.stdout
