"""rill's Spark pipeline: a PySpark data source for streams, an offline RDB reader, jobs.

    from rill.pipeline import register
    register(spark)                     # formats "rill" and "rill-rdb"
    df = spark.read.format("rill").option("url", "redis://127.0.0.1:6379").option("streams", "a,b").load()

Needs the ``spark`` extra (pyspark >= 4.0, pyarrow); nothing here imports pyspark until used.

Layout:
    spark      ``register`` (the two formats) and ``write_streams`` (ordered batch writes)
    source     the ``rill`` format: reads streams (batch and streaming), plans ID ranges (plan)
    sink       its writers: idempotent XADDs, one ordered writer per stream
    rows       Arrow record batches from entries
    rdbsource  the ``rill-rdb`` format: reads an RDB file offline through persistence's codec
    conn, ids  a thin redis-py connection and stream-ID parsing (no pyspark)
    cli        ``rill-pipeline``: the archive and rollup jobs; submit: its spark-submit file
"""

from __future__ import annotations

from typing import Any

__all__ = ["register", "write_streams"]


def __getattr__(name: str) -> Any:
    """``register`` and ``write_streams``, from the module that needs pyspark."""
    if name in __all__:
        # Deferred: pyspark is the optional spark extra, and conn/ids/plan work without it.
        from . import spark

        return getattr(spark, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
