"""The ``rill`` data source against rill and a real redis-server: batch, partitions, sink."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rill.pipeline.conn import Conn
from rill.pipeline.ids import ID_MAX, format_id, parse_id
from rill.pipeline.plan import plan_ranges

from .conftest import as_rows, fill


def collect(df) -> list[tuple]:
    return sorted(((r.stream, r.id, r.ms, r.seq, dict(r.fields)) for r in df.collect()),
                  key=lambda t: (t[0], parse_id(t[1])))


def test_batch_read_equals_xrange(spark, store):
    url, client = store
    a = fill(client, "a", 3000, burst=True)
    fill(client, "b", 50, start_ms=7)
    client.xdel("a", a[5][0], a[2000][0])
    df = spark.read.format("rill").option("url", url).option("streams", "a,b").option("partitions", "4").load()
    assert df.rdd.getNumPartitions() >= 3
    expected = as_rows(client.xrange("a"), "a") + as_rows(client.xrange("b"), "b")
    assert collect(df) == expected


def test_batch_start_end_and_typed_schema(spark, store):
    url, client = store
    fill(client, "s", 200)
    df = (spark.read.format("rill").option("url", url).option("streams", "s")
          .option("start", "1010").option("end", "1019").schema("id string, n long, v double, missing int")
          .load())
    rows = sorted(df.collect(), key=lambda r: r.n)
    assert [(r.id, r.n, r.v, r.missing) for r in rows] == [(f"{1000 + i}-{i}", i, i * 0.5, None)
                                                          for i in range(10, 20)]


def test_seq_order_is_numeric_not_lexical(spark, rill):
    url, client = rill
    for seq in (1, 2, 10, 11, 3):
        client.xadd("q", {"f": str(seq)}, id=f"5-{seq}") if seq != 3 else None
    df = spark.read.format("rill").option("url", url).option("streams", "q").option("partitions", "1").load()
    assert [r.seq for r in df.collect()] == [1, 2, 10, 11]


def _count(client, key, lo, hi):
    return len(client.xrange(key, format_id(lo), format_id(hi)))


@pytest.mark.parametrize("burst", [False, True])
def test_partitions_tile_the_stream_balanced(rill, burst):
    url, client = rill
    fill(client, "p", 20000, burst=burst)
    with Conn(url) as conn:
        ranges = plan_ranges(conn, "p", 0, ID_MAX, 4)
    assert ranges[0][0] == 0 and ranges[-1][1] == ID_MAX
    assert all(a <= b for a, b in ranges)
    assert all(ranges[i][1] + 1 == ranges[i + 1][0] for i in range(len(ranges) - 1))
    counts = [_count(client, "p", a, b) for a, b in ranges]
    assert sum(counts) == 20000
    assert len(ranges) == 4 and max(counts) <= 2 * 20000 / 4, counts


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(1, 30)), min_size=0, max_size=40),
       st.integers(1, 6))
def test_partitions_never_gap_or_overlap(rill, gaps, parts):
    url, client = rill
    client.delete("h")
    ms = 1
    for gap, burst in gaps:
        ms += gap
        for _ in range(burst):
            client.xadd("h", {"f": "v"}, id=f"{ms}-*")
    total = client.xlen("h")
    with Conn(url) as conn:
        ranges = plan_ranges(conn, "h", 1 << 64, ID_MAX - 1, parts, probe=8)
    if not total:
        assert ranges == []
        return
    assert ranges[0][0] == 1 << 64 and ranges[-1][1] == ID_MAX - 1 and len(ranges) <= parts
    assert all(ranges[i][1] + 1 == ranges[i + 1][0] for i in range(len(ranges) - 1))
    assert sum(_count(client, "h", a, b) for a, b in ranges) == total


def test_writer_round_trip(spark, store):
    url, client = store
    fill(client, "src", 500)
    df = spark.read.format("rill").option("url", url).option("streams", "src").load()
    df.selectExpr("'copy' as stream", "id", "fields").write.format("rill").option("url", url).mode("append").save()
    assert client.xrange("copy") == client.xrange("src")
    # A replay of the same rows (explicit IDs) is recognised as duplicates, not errors.
    df.selectExpr("'copy' as stream", "id", "fields").write.format("rill").option("url", url).mode("append").save()
    assert client.xrange("copy") == client.xrange("src")


def test_writer_columns_as_fields_auto_ids_and_maxlen(spark, store):
    url, client = store
    df = spark.createDataFrame([(i, float(i) / 2, f"s{i % 3}") for i in range(300)], "n long, t double, sensor string")
    df.coalesce(1).write.format("rill").option("url", url).option("stream", "out").option("maxlen", "100") \
        .option("approximate", "false").mode("append").save()
    entries = client.xrange("out")
    assert len(entries) == 100
    assert entries[-1][1] == {b"n": b"299", b"t": b"149.5", b"sensor": b"s2"}


def test_writer_refuses_to_lose_out_of_order_ids(spark, rill):
    url, client = rill
    client.xadd("w", {"f": "v"}, id="100-0")
    df = spark.createDataFrame([("w", "50-0", {"f": "x"})], "stream string, id string, fields map<string,string>")
    with pytest.raises(Exception, match="out of order"):
        df.write.format("rill").option("url", url).mode("append").save()


def test_write_streams_helper_orders_each_stream(spark, rill):
    from rill.pipeline import write_streams

    url, client = rill
    rows = [(f"k{i % 3}", f"{i // 3 + 1}-{i % 7}", {"i": str(i)}) for i in range(600)]
    df = spark.createDataFrame(rows, "stream string, id string, fields map<string,string>").repartition(4)
    write_streams(df, url)
    for k in range(3):
        want = sorted((parse_id(sid), f) for s, sid, f in rows if s == f"k{k}")
        got = [(parse_id(eid.decode()), {a.decode(): b.decode() for a, b in f.items()})
               for eid, f in client.xrange(f"k{k}")]
        assert got == want
