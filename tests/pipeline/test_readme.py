"""Every Python block of the README's "Spark pipeline" section runs, against rill and redis-server.

The blocks are read from README.md itself, so the README and this test cannot drift; only the
URL and the paths (``/data/...``, the RDB file) are swapped for the test's own.
"""

from __future__ import annotations

import os
import re
from collections import Counter

import pytest

README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")


def spark_blocks() -> list[str]:
    text = open(README, encoding="utf-8").read()
    start = text.index("\n## Spark pipeline")
    end = text.index("\n## ", start + 1)
    return re.findall(r"```py\n(.*?)```", text[start:end], re.S)


def test_the_section_has_python_blocks():
    blocks = spark_blocks()
    assert blocks and all("rill" in b for b in blocks)


def setup_data(client) -> None:
    pipe = client.pipeline(transaction=False)
    for i in range(3000):  # interleaved auto IDs: a's and b's IDs collide
        pipe.xadd("a", {"src": "a", "i": str(i)})
        pipe.xadd("b", {"src": "b", "i": str(i)})
        if i % 20 == 0:
            pipe.xadd("sensors", {"sensor-id": f"s{i % 3}", "temperature": str(20 + i % 7)})
        if len(pipe) >= 1000:
            pipe.execute()
    pipe.execute()
    client.execute_command("SAVE")


def fields(client, key: str) -> Counter:
    return Counter(tuple(sorted(f.items())) for _e, f in client.xrange(key))


@pytest.mark.timeout(900)
def test_readme_spark_blocks_run(spark, store, tmp_path):
    url, client = store
    setup_data(client)
    dump = os.path.join(client.config_get("dir")["dir"], client.config_get("dbfilename")["dbfilename"])
    data = str(tmp_path / "data")
    ns: dict = {}
    for block in spark_blocks():
        code = (block.replace('"redis://127.0.0.1:6379"', repr(url))
                .replace('"/var/lib/rill/dump.rdb"', repr(dump))
                .replace('"/data/', '"' + data + "/"))
        assert code != block
        exec(compile(code, "README.md (Spark pipeline)", "exec"), ns)  # noqa: S102 - the README's own code
    # What the snippets promise, checked on the server.
    assert ns["df"].count() == 6000 and ns["temps"].count() == 150
    assert not ns["q"].isActive and ns["q"].exception() is None
    by_type = {r.type: r["count"] for r in ns["rdb"].groupBy("type").count().collect()}
    assert by_type["stream"] == 6150
    assert len(ns["spark"].read.parquet(os.path.join(data, "a")).collect()) == 3000
    assert client.xrange("a:copy") == client.xrange("a") and client.xrange("b:copy") == client.xrange("b")
    assert client.xlen("copy") == 6000 and fields(client, "copy") == fields(client, "a") + fields(client, "b")
    assert client.xlen("out") == 6000 and fields(client, "out") == fields(client, "a") + fields(client, "b")
