"""Issue 7: the Spark pipeline with rill as the store vs redis-server as the store.

Both servers get the same 1M-entry stream (an RDB written by rill's codec, like the
persistence workloads); one SparkSession on local[2] (started once, shared by both
sides) then reads it: a batch count over all partitions, and a streaming AvailableNow
drain of the same stream.  Targets: rill-backed rate >= 0.8x the redis-backed rate,
and >= 100k rows/s for the batch read on two cores.  Skipped with a note when pyspark
(the ``spark`` extra) is not installed.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from typing import Any

from .harness import AT_LEAST, BenchError, Ctx, Row, Server, Workload
from .workloads import _install_dump, register

KEY = "bench:save"  # the key _stream_dump writes
ENTRIES = 1_000_000
_session: list[Any] = []
_dumps: dict[int, bytes] = {}


def _spark() -> Any:
    if _session:
        return _session[0]
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise BenchError("pyspark not installed (pip install -e '.[spark]')") from None
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession
    from rill.pipeline import register as register_formats

    spark = (SparkSession.builder.master("local[2]").appName("rill-bench")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register_formats(spark)
    # Warm the Python workers so neither side pays their start-up.
    spark.range(4).rdd.map(lambda x: x).count()
    _session.append(spark)
    return spark


def _dump(n: int) -> bytes:
    """One stream of ``n`` two-field entries, nodes of 100 (the persistence bench's image)."""
    if n not in _dumps:
        from .workloads import _stream_dump

        _dumps[n] = _stream_dump(n)
    return _dumps[n]


def _setup(ctx: Ctx, server: Server) -> None:
    _spark()
    _install_dump(server, _dump(ctx.n(ENTRIES)))
    try:
        os.unlink(os.path.join(server.workdir, "dump.rdb"))  # later restarts start empty
    except OSError:
        pass


def _url(server: Server) -> str:
    return f"redis://127.0.0.1:{server.port}"


def _batch(ctx: Ctx, server: Server) -> dict[str, float]:
    spark = _spark()
    n = ctx.n(ENTRIES)
    # A tiny read first: Python workers for the data source start outside the timing.
    spark.read.format("rill").option("url", _url(server)).option("streams", KEY).option("end", "1").load().count()
    t = time.perf_counter()
    got = (spark.read.format("rill").option("url", _url(server)).option("streams", KEY)
           .option("partitions", "2").load().count())
    secs = time.perf_counter() - t
    if got != n:
        raise BenchError(f"batch read counted {got} of {n} entries")
    rate = n / secs
    t = time.perf_counter()
    with tempfile.TemporaryDirectory() as ck:
        q = (spark.readStream.format("rill").option("url", _url(server)).option("streams", KEY)
             .option("partitions", "2").load().writeStream.format("noop")
             .option("checkpointLocation", ck).trigger(availableNow=True).start())
        q.awaitTermination()
        rows = sum(p["numInputRows"] for p in q.recentProgress)
    ssecs = time.perf_counter() - t
    if rows != n:
        raise BenchError(f"streaming drain saw {rows} of {n} entries")
    return {BATCH: rate, STREAM: n / ssecs}


BATCH = "Spark batch read 1M entries (local[2])"
STREAM = "Spark streaming AvailableNow 1M entries"

register(Workload(
    "Spark read", "spark", 7,
    [Row(BATCH, "entries/s", AT_LEAST(0.8)), Row(STREAM, "entries/s", AT_LEAST(0.8))],
    _batch,
    probe=[["XINFO", "HELP"]],
    setup=_setup,
))
