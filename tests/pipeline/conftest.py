"""One SparkSession (local[2]) for every pipeline test, and servers to read from.

Everything here is marked ``spark`` so a quick run can deselect it (``-m "not spark"``);
``make test`` runs it.  pyspark comes with the ``spark`` extra and needs Java; both are
required in CI.
"""

from __future__ import annotations

import os
import sys

import pytest
import redis

from tests.support import require_java, require_module


def pytest_collection_modifyitems(config, items):
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.spark)


def pytest_configure(config):
    config.addinivalue_line("markers", "spark: needs pyspark and a local Spark session")


@pytest.fixture(scope="session")
def spark():
    # Skipped locally without pyspark or Java, failed in CI (make installs the spark
    # extra, .ci/run a JRE).
    require_module("pyspark")
    require_java()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession
    from rill.pipeline import register

    session = (SparkSession.builder.master("local[2]").appName("rill-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.default.parallelism", "2")
               .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()


@pytest.fixture(params=["rill", "redis"])
def store(request, rill_server):
    """(url, client) on a flushed server: rill, then a real redis-server >= 7.0."""
    server = rill_server if request.param == "rill" else request.getfixturevalue("oracle_server")
    client = redis.Redis(port=server.port)
    client.flushall()
    yield f"redis://127.0.0.1:{server.port}", client
    client.close()


@pytest.fixture
def rill(rill_server):
    client = redis.Redis(port=rill_server.port)
    client.flushall()
    yield f"redis://127.0.0.1:{rill_server.port}", client
    client.close()


def fill(client: redis.Redis, key: str, n: int, *, start_ms: int = 1_000, burst: bool = False) -> list:
    """``n`` entries with explicit IDs (deterministic); ``burst`` packs most into a few milliseconds."""
    pipe = client.pipeline(transaction=False)
    for i in range(n):
        if burst:  # a tenth spread over n seconds, the rest in a burst a few ms long
            sparse = n // 10
            ms = start_ms + i * 1000 if i < sparse else start_ms + sparse * 1000 + (i - sparse) // 1000
        else:
            ms = start_ms + i
        pipe.xadd(key, {"n": str(i), "v": f"{i * 0.5}"}, id=f"{ms}-{i}")
        if len(pipe) >= 1000:
            pipe.execute()
    pipe.execute()
    return client.xrange(key)


def as_rows(xrange: list, key: str) -> list[tuple]:
    out = []
    for eid, fields in xrange:
        ms, seq = eid.decode().split("-")
        out.append((key, eid.decode(), int(ms), int(seq),
                    {k.decode(): v.decode() for k, v in fields.items()}))
    return out
