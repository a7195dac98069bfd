"""rill's Spark pipeline: a PySpark data source for streams, an offline RDB reader, jobs.

    from rill.pipeline import register
    register(spark)                     # formats "rill" and "rill-rdb"
    df = spark.read.format("rill").option("url", "redis://127.0.0.1:6379").option("streams", "a,b").load()

Needs the ``spark`` extra (pyspark >= 4.0, pyarrow); nothing here imports pyspark until used.
"""

from __future__ import annotations

from typing import Any

__all__ = ["register", "write_streams"]


def register(spark: Any) -> None:
    """Register the ``rill`` and ``rill-rdb`` formats on a SparkSession."""
    from .rdbsource import RdbDataSource
    from .source import RillDataSource

    spark.dataSource.register(RillDataSource)
    spark.dataSource.register(RdbDataSource)


def write_streams(df: Any, url: str, stream: str | None = None, **options: str) -> None:
    """Batch-write a DataFrame with one ordered writer per stream.

    Rows are repartitioned by their ``stream`` column and sorted by ID within each
    partition, so explicit IDs arrive in order and parallel tasks never race on a stream.
    """
    from pyspark.sql import functions as F

    cols = df.columns
    if "stream" in cols:
        df = df.repartition("stream")
        if "id" in cols:
            ms = F.split(F.col("id"), "-").getItem(0).cast("decimal(20,0)")
            seq = F.split(F.col("id"), "-").getItem(1).cast("decimal(20,0)")
            df = df.sortWithinPartitions("stream", ms, seq)
    elif "id" in cols:
        df = df.coalesce(1)
    w = df.write.format("rill").option("url", url).mode("append")
    if stream:
        w = w.option("stream", stream)
    for k, v in options.items():
        w = w.option(k, str(v))
    w.save()
