"""Persistence of the post-Redis-7 stream state: IDMP settings/history and XNACK's
released entries survive an RDB round trip (in the ``rill-stream-ext`` AUX field, which
redis-check-rdb accepts) and an AOF rewrite replayed by the AOF loader client."""

from __future__ import annotations

import io
import subprocess

import pytest
from rill.persistence import aof, rdb
from rill.storage.stream import IdmpState, Stream, make_id


def rich_stream() -> Stream:
    s = Stream()
    for i in range(1, 11):
        s.add([b"f", b"%d" % i], make_id(i, 0))
    st = s.idmp = IdmpState(300, 50)
    st.configured = True
    st.record(b"p1", b"a", make_id(2, 0), 1000)
    st.record(b"p1", b"b", make_id(3, 0), 1001)
    st.record(b"p2", b"a", make_id(4, 0), 1002)
    st.iids_duplicates = 5
    g = s.create_group(b"g", make_id(6, 0), 6)
    c, _ = g.get_or_create_consumer(b"c", 0)
    for i in range(1, 7):
        g.deliver(make_id(i, 0), c, 500)
    g.release(make_id(5, 0), 3)
    g.release(make_id(2, 0), 0)
    return s


def save(data: dict) -> bytes:
    buf = io.BytesIO()
    rdb.save_file(buf, [(0, data, {})], rdb.SaveOptions())
    return buf.getvalue()


def test_rdb_round_trip_of_idmp_and_released_entries():
    s = rich_stream()
    image = save({b"s": s, b"plain": Stream()})
    assert rdb.STREAM_EXT_AUX in image
    got = rdb.load(image).dbs[0][b"s"]
    assert got.range() == s.range()
    st = got.idmp
    assert (st.duration, st.maxsize, st.configured, st.iids_added, st.iids_duplicates) == (
        300, 50, True, 3, 5)
    assert {p: dict(v) for p, v in st.producers.items()} == {
        b"p1": {b"a": (make_id(2, 0), 1000), b"b": (make_id(3, 0), 1001)},
        b"p2": {b"a": (make_id(4, 0), 1002)},
    }
    g = got.get_group(b"g")
    assert list(g.nacked) == [make_id(5, 0), make_id(2, 0)]
    assert g.pel[make_id(5, 0)].consumer is None and g.pel[make_id(5, 0)].delivery_count == 3
    assert sorted(g.consumers[b"c"].pel.keys()) == [make_id(i, 0) for i in (1, 3, 4, 6)]


def test_plain_streams_are_written_as_before():
    s = Stream()
    s.add([b"f", b"v"], make_id(1, 0))
    assert rdb.STREAM_EXT_AUX not in save({b"s": s})
    assert rdb.stream_ext(s, b"s") is None


@pytest.mark.requires("redis-check-rdb")
def test_redis_check_rdb_accepts_the_extension(tmp_path):
    path = tmp_path / "dump.rdb"
    path.write_bytes(save({b"s": rich_stream()}))
    out = subprocess.run(["redis-check-rdb", str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "RDB looks OK" in out.stdout


def test_aof_rewrite_reproduces_the_new_state(inproc):
    server, _client, _effects = inproc
    s = rich_stream()
    cmds = list(aof._rewrite_stream(b"s", s))
    names = [c[0] for c in cmds]
    assert b"XCFGSET" in names and b"XIDMPRECORD" in names and b"XNACK" in names
    loader = server.new_client()
    loader.id = -1  # the AOF loader: mustObeyClient
    for argv in cmds:
        server.execute(loader, argv)
    got = loader.db.lookup(b"s")
    assert got.range() == s.range()
    assert got.idmp.duration == 300 and got.idmp.maxsize == 50
    assert {p: list(v) for p, v in got.idmp.producers.items()} == {
        b"p1": [b"a", b"b"], b"p2": [b"a"]}
    g = got.get_group(b"g")
    assert list(g.nacked) == [make_id(5, 0), make_id(2, 0)]
    assert g.pel[make_id(5, 0)].delivery_count == 3 and g.pel[make_id(5, 0)].consumer is None
