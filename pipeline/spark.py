"""What needs a SparkSession: registering rill's formats, and ordered batch writes."""

from __future__ import annotations

from typing import Any

from pyspark.sql import Window
from pyspark.sql import functions as F

from .rdbsource import RdbDataSource
from .source import RillDataSource


def register(spark: Any) -> None:
    """Register the ``rill`` and ``rill-rdb`` formats on a SparkSession."""
    spark.dataSource.register(RillDataSource)
    spark.dataSource.register(RdbDataSource)


def write_streams(df: Any, url: str, stream: str | None = None, *, ids: str = "keep", **options: str) -> None:
    """Batch-write a DataFrame with one ordered writer per target stream.

    Rows go to their ``stream`` column or, when there is none, to ``stream`` (giving both is
    refused).  With an ``id`` column, each target's rows are merge-sorted by ID (numerically,
    across every input partition) and written by one task, streaming through Spark's sort:

    * ``ids="keep"``: every row keeps its ID.  A row equal to an entry already there (same ID,
      same fields) is a replay and is skipped; two different rows with one ID are a conflict
      and the write fails naming the stream and the ID (nothing is dropped silently).
    * ``ids="renumber"``: for merging streams whose IDs collide (auto IDs of two streams share
      milliseconds).  Each row keeps its millisecond; the sequence becomes the row's rank
      within that millisecond of the target (by original sequence, then fields), so time
      order is kept, no two rows collide and a rerun computes the same IDs (idempotent).
    """
    if ids not in ("keep", "renumber"):
        raise ValueError(f"ids is 'keep' or 'renumber', not {ids!r}")
    cols = df.columns
    if stream is not None:
        if "stream" in cols:
            raise ValueError(f"the rows have a 'stream' column and stream={stream!r} was given: give one, "
                             "not both (df.drop('stream') to write every row to one stream)")
        df = df.withColumn("stream", F.lit(stream))
    elif "stream" not in cols:
        raise ValueError("write_streams needs a 'stream' column or stream=")
    if "id" in cols:
        parts = F.split(F.col("id"), "-")
        ms = parts.getItem(0).cast("decimal(20,0)")
        seq = parts.getItem(1).cast("decimal(20,0)")
        if ids == "renumber":
            others = [c for c in df.columns if c not in ("stream", "id")]
            tiebreak = F.to_json(F.struct(*others)) if others else F.lit("")
            rank = F.row_number().over(Window.partitionBy("stream", ms).orderBy(seq, tiebreak)) - 1
            df = df.withColumn("id", F.concat(parts.getItem(0), F.lit("-"), rank.cast("string")))
            parts = F.split(F.col("id"), "-")
            ms = parts.getItem(0).cast("decimal(20,0)")
            seq = parts.getItem(1).cast("decimal(20,0)")
        df = df.repartition("stream").sortWithinPartitions("stream", ms, seq)
    # Without IDs no shuffle: a retried task sees its rows in the same order, which the
    # sink's idempotent IDs (IDMP) rely on.
    w = df.write.format("rill").option("url", url).mode("append")
    for k, v in options.items():
        w = w.option(k, str(v))
    w.save()
