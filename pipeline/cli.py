"""``rill-pipeline``: the jobs built on the data source.

    rill-pipeline archive --url redis://h:6379 --streams a,b --output /data/archive --checkpoint /data/ck
    rill-pipeline rollup  --url redis://h:6379 --stream sensors --window "1 minute" --key sensor-id \\
                          --fields temperature,humidity --to-stream sensors:1m --checkpoint /data/ck2

``archive`` copies streams to Parquet partitioned by stream and day; ``rollup`` turns a
sensor-style stream into per-window count/min/max/avg of numeric fields, written back to
a stream or to Parquet.  Both are Structured Streaming queries with a checkpoint: they run
continuously (``--interval``) or drain what is there and stop (``--available-now``), and
print one progress line per batch (rows, rows/s, how far behind the newest entry); batches
hold at most ``--max-per-batch`` entries (100,000), so a long drain reports as it goes.
``--master`` picks the Spark master (``local[*]`` by default; under spark-submit the
submitted master wins: ``spark-submit $(python -m rill.pipeline.submit) archive ...``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from .conn import Conn
from .ids import parse_id
from .spark import register, write_streams

# Batches of this size keep a drain of millions of entries printing progress every few seconds
# without a batch's fixed cost (planning, commit) mattering.
MAX_PER_BATCH = 100_000


def session(master: str | None, app: str) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    b = SparkSession.builder.appName(app).config("spark.ui.showConsoleProgress", "false")
    if master or not os.environ.get("SPARK_ENV_LOADED"):
        b = b.master(master or "local[*]")
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    register(spark)
    return spark


def reader(spark: Any, args: argparse.Namespace, streams: str) -> Any:
    r = spark.readStream.format("rill").option("url", args.url).option("streams", streams)
    if args.group:
        r = r.option("group", args.group).option("consumer", args.consumer)
    if args.max_per_batch:
        r = r.option("maxEntriesPerTrigger", str(args.max_per_batch))
    if args.starting:
        r = r.option("startingOffsets", args.starting)
    return r.load()


def lag_ms(url: str, progress: dict) -> dict[str, int]:
    """Per stream: milliseconds between the newest entry and the last one this batch reached."""
    out: dict[str, int] = {}
    for src in progress.get("sources", []):
        end = src.get("endOffset")
        if isinstance(end, str):
            end = json.loads(end)
        streams = (end or {}).get("streams", {})
        if not streams:
            continue
        with Conn(url) as conn:
            for key, sid in streams.items():
                last = conn.call("XREVRANGE", key, "+", "-", "COUNT", 1)
                newest = parse_id(last[0][0]) >> 64 if last else 0
                out[key] = max(0, newest - (parse_id(sid) >> 64))
    return out


def watch(query: Any, url: str, out: Any = None, poll: float = 1.0) -> None:
    """Print a line per finished batch until the query stops (Ctrl-C stops it cleanly)."""
    out = out or sys.stderr
    seen = -1
    total = 0
    started = time.monotonic()
    try:
        while query.isActive:
            query.awaitTermination(poll)
            for p in query.recentProgress:
                if p["batchId"] <= seen:
                    continue
                seen = p["batchId"]
                rows = p.get("numInputRows", 0)
                total += rows
                rate = p.get("processedRowsPerSecond") or 0.0
                lag = lag_ms(url, p)
                lag_text = ", ".join(f"{k} {v} ms" for k, v in lag.items()) or "-"
                print(f"[{query.name or 'job'}] batch {seen}: {rows} rows, {rate:,.0f} rows/s, "
                      f"{total} total in {time.monotonic() - started:.1f}s; lag {lag_text}", file=out, flush=True)
    except KeyboardInterrupt:
        query.stop()
    if query.exception() is not None:
        raise SystemExit(f"query failed: {query.exception()}")


def trigger(w: Any, args: argparse.Namespace) -> Any:
    if args.available_now:
        return w.trigger(availableNow=True)
    return w.trigger(processingTime=f"{args.interval} seconds")


def archive(args: argparse.Namespace) -> Any:
    spark = session(args.master, "rill-archive")
    df = reader(spark, args, args.streams)
    df = df.withColumn("date", F.to_date(F.timestamp_millis(F.col("ms"))))
    w = (df.writeStream.format("parquet").option("path", args.output)
         .option("checkpointLocation", args.checkpoint).partitionBy("stream", "date").queryName("archive"))
    q = trigger(w, args).start()
    watch(q, args.url)
    return q


def rollup_frame(df: Any, window: str, key: str | None, fields: list[str], lateness: str) -> Any:
    """Count, min, max and avg of each numeric field per event-time window (and key)."""
    ts = F.timestamp_millis(F.col("ms"))
    df = df.withColumn("ts", ts).withWatermark("ts", lateness)
    groups = [F.window("ts", window)]
    if key:
        groups.append(F.col("fields").getItem(key).alias("key"))
    aggs = [F.count(F.lit(1)).alias("count")]
    for f in fields:
        v = F.col("fields").getItem(f).cast("double")
        aggs += [F.min(v).alias(f"{f}_min"), F.max(v).alias(f"{f}_max"), F.avg(v).alias(f"{f}_avg")]
    out = df.groupBy(*groups).agg(*aggs)
    cols = [F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end")]
    if key:
        cols.append(F.col("key"))
    return out.select(*cols, "count", *[c for f in fields for c in (f"{f}_min", f"{f}_max", f"{f}_avg")])


def rollup(args: argparse.Namespace) -> Any:
    spark = session(args.master, "rill-rollup")
    fields = [f.strip() for f in args.fields.split(",") if f.strip()]
    agg = rollup_frame(reader(spark, args, args.stream), args.window, args.key, fields, args.lateness)
    if args.to_stream:
        # Each closed window becomes one entry, its ID the window's start (ms) so a replay is idempotent.
        value_cols = [c for c in agg.columns if c not in ("window_start", "window_end")]
        fields_map = F.create_map(*[x for c in value_cols for x in (F.lit(c), F.col(c).cast("string"))])
        key_seq = F.abs(F.hash(F.col("key"))) if args.key else F.lit(0)
        out = agg.select(F.lit(args.to_stream).alias("stream"),
                         F.concat(F.unix_millis(F.col("window_start")).cast("string"), F.lit("-"),
                                  key_seq.cast("string")).alias("id"),
                         F.map_concat(F.create_map(F.lit("window_end"), F.unix_millis("window_end").cast("string")),
                                      fields_map).alias("fields"))
        url = args.url

        def write_batch(batch: Any, _batch_id: int) -> None:
            # A micro-batch's windows come out of the aggregation in no particular order and a
            # streaming plan cannot sort; each batch is a static frame, which write_streams
            # sorts by ID for one ordered writer.
            write_streams(batch, url)

        w = out.writeStream.foreachBatch(write_batch)
    else:
        w = agg.writeStream.format("parquet").option("path", args.output)
    w = w.outputMode("append").option("checkpointLocation", args.checkpoint).queryName("rollup")
    q = trigger(w, args).start()
    watch(q, args.url)
    return q


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="rill-pipeline", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="job", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--url", default="redis://127.0.0.1:6379", help="server URL (rill or Redis >= 7.0)")
        p.add_argument("--master", default=None, help="Spark master (default local[*])")
        p.add_argument("--checkpoint", required=True, help="checkpoint directory (resume point)")
        p.add_argument("--available-now", action="store_true", help="process what is there, then stop")
        p.add_argument("--interval", type=float, default=5.0, help="seconds between batches when continuous")
        p.add_argument("--max-per-batch", type=int, default=MAX_PER_BATCH,
                       help=f"entries per batch at most (default {MAX_PER_BATCH:,}: a long drain prints a "
                            "progress line per batch as it goes; 0 = everything in one batch)")
        p.add_argument("--starting", default=None, help="earliest | latest | JSON of per-stream IDs")
        p.add_argument("--group", default=None, help="read through this consumer group (at-least-once, XACK)")
        p.add_argument("--consumer", default="rill-pipeline", help="consumer name in --group")

    a = sub.add_parser("archive", help="streams -> Parquet partitioned by stream and date")
    common(a)
    a.add_argument("--streams", required=True, help="comma-separated stream keys")
    a.add_argument("--output", required=True, help="Parquet directory")
    a.set_defaults(run=archive)

    r = sub.add_parser("rollup", help="time-window aggregates of numeric fields")
    common(r)
    r.add_argument("--stream", required=True)
    r.add_argument("--fields", required=True, help="comma-separated numeric fields")
    r.add_argument("--window", default="1 minute")
    r.add_argument("--key", default=None, help="group by this field too (e.g. sensor-id)")
    r.add_argument("--lateness", default="0 seconds", help="how late an entry may be (watermark)")
    dest = r.add_mutually_exclusive_group(required=True)
    dest.add_argument("--to-stream", help="write each window as an entry of this stream")
    dest.add_argument("--output", help="or to this Parquet directory")
    r.set_defaults(run=rollup)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.run(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
