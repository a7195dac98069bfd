"""The Spark source reads an Active-Active instance's merged streams exactly as XRANGE
returns them (issue 22): entries from every region, in ID order, whichever instance it
reads from."""

from __future__ import annotations

from tests.server.activeactive.cluster import Cluster

from .test_source import collect


def test_spark_reads_the_merged_stream_of_every_region(spark):
    with Cluster(2) as cluster:
        a, b = cluster[0], cluster[1]
        cluster.pause_all()
        for i in range(300):  # interleaved milliseconds: region 2's entries land between region 1's
            a.call("XADD", "s", str(1000 + 2 * i), "n", str(i), "from", "1")
            b.call("XADD", "s", str(1001 + 2 * i), "n", str(i), "from", "2")
        b.call("XADD", "t", "*", "only", "2")
        cluster.sync()
        for node in (a, b):
            url = f"redis://127.0.0.1:{node.port}"
            df = (spark.read.format("rill").option("url", url).option("streams", "s,t")
                  .option("partitions", "3").load())
            expected = []
            for key in ("s", "t"):
                for eid, flat in node.call("XRANGE", key, "-", "+"):
                    ms, seq = eid.decode().split("-")
                    fields = {flat[k].decode(): flat[k + 1].decode() for k in range(0, len(flat), 2)}
                    expected.append((key, eid.decode(), int(ms), int(seq), fields))
            assert len(expected) == 601
            assert collect(df) == expected
