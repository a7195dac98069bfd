"""The ``rill`` sink and ``write_streams``: no row lost, none written twice, refusals that say why.

Issue 20, finding 1: a copy of two streams whose auto IDs collide, a ``stream`` column that
silently beat the ``stream`` option, explicit-ID partitions held in memory, retries.
"""

from __future__ import annotations

from collections import Counter

import pytest
from rill.pipeline import write_streams
from rill.pipeline.conn import Conn
from rill.pipeline.ids import parse_id

from .conftest import fill


def supports_idmp(conn: Conn) -> bool:
    """The sink's probe; its module imports pyspark, so only tests that have ``spark`` call it."""
    from rill.pipeline.sink import supports_idmp as probe

    return probe(conn)


def interleaved(client, n: int = 3000) -> None:
    """Streams a and b, ``n`` auto-ID entries each, written alternately (their IDs collide)."""
    pipe = client.pipeline(transaction=False)
    for i in range(n):
        pipe.xadd("a", {"src": "a", "i": str(i)})
        pipe.xadd("b", {"src": "b", "i": str(i)})
        if len(pipe) >= 1000:
            pipe.execute()
    pipe.execute()


def contents(client, key: str) -> Counter:
    return Counter(tuple(sorted(f.items())) for _eid, f in client.xrange(key))


def read(spark, url, streams, parts=4):
    df = spark.read.format("rill").option("url", url).option("streams", streams).option("partitions", str(parts))
    return df.load()


def test_merging_streams_with_colliding_ids_keeps_every_row(spark, store):
    url, client = store
    interleaved(client)
    a, b = client.xrange("a"), client.xrange("b")
    assert {e[0] for e in a} & {e[0] for e in b}, "the setup must produce colliding IDs"
    df = read(spark, url, "a,b")
    assert df.rdd.getNumPartitions() >= 4
    write_streams(df.selectExpr("'copy' as stream", "id", "fields"), url, ids="renumber")
    copy = client.xrange("copy")
    assert len(copy) == 6000
    assert contents(client, "copy") == contents(client, "a") + contents(client, "b")
    # Time order kept: each entry keeps its source millisecond, ranks follow within it.
    ms_of = {(f[b"src"], f[b"i"]): int(eid.split(b"-")[0]) for eid, f in a + b}
    assert all(int(eid.split(b"-")[0]) == ms_of[(f[b"src"], f[b"i"])] for eid, f in copy)
    # A rerun computes the same IDs: nothing added, nothing refused.
    write_streams(df.selectExpr("'copy' as stream", "id", "fields"), url, ids="renumber")
    assert client.xrange("copy") == copy


def test_colliding_ids_kept_as_they_are_fail_loudly(spark, rill):
    url, client = rill
    interleaved(client, 1500)
    df = read(spark, url, "a,b")
    with pytest.raises(Exception, match=r"stream 'copy': an entry with ID \d+-\d+ already exists with different"):
        write_streams(df.selectExpr("'copy' as stream", "id", "fields"), url)


def test_one_stream_over_several_partitions_copies_exactly_and_replays(spark, store):
    url, client = store
    fill(client, "src", 6000, burst=True)
    df = read(spark, url, "src")
    assert df.rdd.getNumPartitions() >= 4
    out = df.selectExpr("'dst' as stream", "id", "fields")
    write_streams(out, url)
    assert client.xrange("dst") == client.xrange("src")
    write_streams(out, url)  # a replay: every row is already there with the same fields
    assert client.xrange("dst") == client.xrange("src")


def test_stream_column_and_option_together_are_refused(spark, rill):
    url, client = rill
    interleaved(client, 100)
    df = read(spark, url, "a,b", 2)
    with pytest.raises(Exception, match="'stream' column and option 'stream' is 'out'"):
        df.write.format("rill").option("url", url).option("stream", "out").mode("append").save()
    assert client.xlen("a") == client.xlen("b") == 100 and not client.exists("out")
    with pytest.raises(ValueError, match="give one, not both"):
        write_streams(df, url, "out")


def test_option_stream_takes_rows_without_a_stream_column(spark, store):
    url, client = store
    interleaved(client)
    df = read(spark, url, "a,b")
    df.select("fields").write.format("rill").option("url", url).option("stream", "out").mode("append").save()
    assert client.xlen("out") == 6000
    assert contents(client, "out") == contents(client, "a") + contents(client, "b")


def test_overwrite_is_refused(spark, rill):
    url, client = rill
    df = spark.createDataFrame([("x", {"f": "v"})], "stream string, fields map<string,string>")
    with pytest.raises(Exception, match=r"only appends: mode\('overwrite'\)"):
        df.write.format("rill").option("url", url).mode("overwrite").save()
    assert not client.exists("x")


def test_replayed_id_with_other_fields_is_an_error_not_a_duplicate(spark, store):
    url, client = store
    client.xadd("w", {"f": "original"}, id="100-0")
    schema = "stream string, id string, fields map<string,string>"
    same = spark.createDataFrame([("w", "100-0", {"f": "original"})], schema)
    same.write.format("rill").option("url", url).mode("append").save()  # a replay: fine
    other = spark.createDataFrame([("w", "100-0", {"f": "changed"})], schema)
    with pytest.raises(Exception, match=r"stream 'w': an entry with ID 100-0 already exists with different"):
        other.write.format("rill").option("url", url).mode("append").save()
    assert client.xrange("w") == [(b"100-0", {b"f": b"original"})]


def _sink(url: str, with_id: bool, **options: str):
    """A sink as one Spark task would run it, driven directly (tests ask for ``spark`` first,
    so pyspark's absence is handled by the session fixture)."""
    from pyspark.sql.types import MapType, StringType, StructField, StructType
    from rill.pipeline.sink import StreamSink

    fields = [StructField("stream", StringType())]
    if with_id:
        fields.append(StructField("id", StringType()))
    fields.append(StructField("fields", MapType(StringType(), StringType())))
    return StreamSink({"url": url, **options}, StructType(fields))


def test_explicit_ids_stream_through_in_bounded_batches(spark, rill):
    url, client = rill
    sink = _sink(url, True, batchSize="500")
    seen_while_writing = []

    def rows():
        for i in range(5000):
            if i == 3000:
                seen_while_writing.append(client.xlen("big"))
            yield {"stream": "big", "id": f"{i + 1}-0", "fields": {"i": str(i)}}

    result = sink.write(rows())
    assert result.written == 5000 and client.xlen("big") == 5000
    # Row 3000 was pulled after the first 3000 rows were already on the server.
    assert seen_while_writing == [3000]


def test_idmp_is_detected_not_assumed(spark, rill_server, oracle_server):
    with Conn(f"redis://127.0.0.1:{rill_server.port}") as conn:
        assert supports_idmp(conn)
    with Conn(f"redis://127.0.0.1:{oracle_server.port}") as conn:
        assert not supports_idmp(conn)  # redis-server 7.0


def test_retried_task_without_ids_is_exactly_once_with_idmp(spark, rill):
    url, client = rill
    sink = _sink(url, False, batchSize="100")
    assert sink.idmp

    def rows(fail_at=None):
        for i in range(1000):
            if i == fail_at:
                raise RuntimeError("task died")
            yield {"stream": "auto", "fields": {"i": str(i % 7)}}  # repeated contents on purpose

    with pytest.raises(RuntimeError, match="task died"):
        sink.write(rows(fail_at=250))
    assert client.xlen("auto") == 200  # two pipelines went out before the task died
    sink.write(rows())  # the retry re-sends everything
    assert client.xlen("auto") == 1000
    assert Counter(f[b"i"] for _e, f in client.xrange("auto")) == Counter(str(i % 7).encode() for i in range(1000))


def test_without_idmp_rows_without_ids_are_at_least_once(spark, oracle_server):
    client_url = f"redis://127.0.0.1:{oracle_server.port}"
    import redis

    client = redis.Redis(port=oracle_server.port)
    client.flushall()
    sink = _sink(client_url, False, batchSize="100")
    assert not sink.idmp
    with pytest.raises(ValueError, match="has no XADD IDMP"):
        _sink(client_url, False, idempotent="true")
    sink.write({"stream": "auto", "fields": {"i": str(i)}} for i in range(300))
    assert client.xlen("auto") == 300
    client.close()


def test_small_idmp_window_is_refused(spark, rill):
    url, client = rill
    client.xadd("tiny", {"f": "v"})
    client.execute_command("XCFGSET", "tiny", "IDMP-MAXSIZE", "10")
    sink = _sink(url, False)
    with pytest.raises(RuntimeError, match=r"stream 'tiny' keeps 10 idempotent IDs per producer"):
        sink.write(iter([{"stream": "tiny", "fields": {"f": "v"}}]))
    assert client.xlen("tiny") == 1


def test_replayed_micro_batch_without_ids_is_written_once(spark, store, tmp_path):
    """A streaming query that dies after writing a batch but before committing it replays the
    batch on restart; the producer IDs come from the query ID and batch ID, so IDMP drops it.
    redis-server 7.0 has no IDMP: there the replay appends again (at-least-once), which shows
    the replay really happened."""
    import os

    url, client = store
    exactly_once = supports_idmp(Conn(url))
    fill(client, "in", 300)
    ckpt = str(tmp_path / "ck")

    def run():
        df = spark.readStream.format("rill").option("url", url).option("streams", "in").load()
        q = (df.select("fields").writeStream.format("rill").option("url", url).option("stream", "mirror")
             .option("checkpointLocation", ckpt).trigger(availableNow=True).start())
        q.awaitTermination(120)
        assert not q.isActive and q.exception() is None

    run()
    assert client.xlen("mirror") == 300
    for name in ("0", ".0.crc"):  # as if the query died before committing batch 0
        os.remove(os.path.join(ckpt, "commits", name))
    run()
    copies = 1 if exactly_once else 2
    assert client.xlen("mirror") == 300 * copies
    assert sorted(int(f[b"n"]) for _e, f in client.xrange("mirror")) == sorted(list(range(300)) * copies)


def test_seq_ids_sort_numerically_in_write_streams(spark, rill):
    url, client = rill
    rows = [("k", f"5-{s}", {"s": str(s)}) for s in (10, 2, 1, 11, 100)]
    df = spark.createDataFrame(rows, "stream string, id string, fields map<string,string>").repartition(3)
    write_streams(df, url)
    assert [parse_id(e[0]) for e in client.xrange("k")] == sorted(parse_id(f"5-{s}") for s in (1, 2, 10, 11, 100))
