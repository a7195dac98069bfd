"""The offline RDB reader against the live server, and the rill-pipeline jobs end to end."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from rill.pipeline import cli
from rill.pipeline.ids import parse_id

from .conftest import fill


def test_offline_reader_equals_live_server(spark, rill):
    url, client = rill
    fill(client, "big", 3000)
    fill(client, "small", 7, start_ms=3)
    client.xdel("big", "1100-100", "2999-2999")
    client.set("str", "hello")
    client.set("num", 12345)
    client.rpush("list", "a", "b", "c")
    client.pexpireat("str", 4102444800000)
    client.execute_command("SAVE")
    path = os.path.join(client.config_get("dir")["dir"], "dump.rdb")
    rdb = spark.read.format("rill-rdb").option("partitions", "3").load(path)
    assert rdb.filter("type = 'stream'").rdd.getNumPartitions() >= 2
    live = spark.read.format("rill").option("url", url).option("streams", "big,small").load()

    def norm(rows, keycol):
        return sorted(((getattr(r, keycol), r.id, r.ms, r.seq, dict(r.fields)) for r in rows),
                      key=lambda t: (t[0], parse_id(t[1])))

    assert norm(rdb.filter("type = 'stream'").collect(), "key") == norm(live.collect(), "stream")
    others = {r.key: r for r in rdb.filter("type != 'stream'").collect()}
    assert others["str"].value == "hello" and others["str"].expire_at == 4102444800000
    assert others["num"].value == "12345"
    assert others["list"].members == ["a", "b", "c"] and others["list"].type == "list"
    only = spark.read.format("rill-rdb").option("streams", "small").load(path)
    assert only.count() == 7


def test_archive_job_end_to_end(spark, rill, tmp_path, capsys):
    url, client = rill
    fill(client, "events", 400)
    out = str(tmp_path / "archive")
    argv = ["archive", "--url", url, "--streams", "events", "--output", out,
            "--checkpoint", str(tmp_path / "ck"), "--available-now", "--max-per-batch", "150"]
    cli.main(argv)
    err = capsys.readouterr().err
    assert "batch 0: 150 rows" in err and "rows/s" in err and "lag events" in err
    df = spark.read.parquet(out)
    assert set(df.columns) >= {"stream", "date", "id", "fields"}
    assert df.count() == 400
    client.xadd("events", {"n": "x"}, id="9999999-0")
    cli.main(argv)  # resumes from the checkpoint: only the new entry
    assert spark.read.parquet(out).count() == 401


def test_rollup_job_to_stream_and_parquet(spark, rill, tmp_path):
    url, client = rill
    pipe = client.pipeline(transaction=False)
    # Two sensors, one reading a second for three minutes, then one late reading to close the windows.
    for s in range(180):
        for sensor in ("s1", "s2"):
            temp = 20 + (s % 60) / 10 + (5 if sensor == "s2" else 0)
            pipe.xadd("sensors", {"sensor-id": sensor, "temperature": f"{temp}"}, id=f"{s * 1000}-{sensor[1]}")
    pipe.xadd("sensors", {"sensor-id": "s1", "temperature": "0"}, id="900000-0")
    pipe.execute()
    common = ["--url", url, "--stream", "sensors", "--fields", "temperature", "--key", "sensor-id",
              "--window", "1 minute", "--available-now"]
    cli.main(["rollup", *common, "--to-stream", "sensors:1m", "--checkpoint", str(tmp_path / "c1")])
    entries = client.xrange("sensors:1m")
    rows = {(int(e[0].decode().split("-")[0]), e[1][b"key"].decode()): e[1] for e in entries}
    assert set(rows) == {(w * 60000, s) for w in range(3) for s in ("s1", "s2")}
    first = rows[(0, "s1")]
    assert first[b"count"] == b"60" and float(first[b"temperature_min"]) == 20.0
    assert abs(float(first[b"temperature_avg"]) - 22.95) < 1e-9 and first[b"window_end"] == b"60000"
    out = str(tmp_path / "p")
    cli.main(["rollup", *common, "--output", out, "--checkpoint", str(tmp_path / "c2")])
    got = {(r.window_start.timestamp(), r.key): r["count"] for r in spark.read.parquet(out).collect()}
    assert len(got) == 6 and set(got.values()) == {60}


def test_drain_defaults_to_batches_that_report_progress():
    args = cli.build_parser().parse_args(["archive", "--streams", "s", "--output", "o", "--checkpoint", "c"])
    assert args.max_per_batch == cli.MAX_PER_BATCH == 100_000  # a 1M drain: ten progress lines


class _Lines:
    """stderr for a job: keeps each line and whether a query was still running when it came."""

    def __init__(self, spark, stop_after_rows: int) -> None:
        self.spark, self.stop_after = spark, stop_after_rows
        self.lines: list[tuple[str, bool]] = []
        self.rows = 0

    def write(self, text: str) -> int:
        for line in text.splitlines():
            running = bool(self.spark.streams.active)
            self.lines.append((line, running))
            m = re.search(r"batch \d+: (\d+) rows", line)
            if m:
                self.rows += int(m.group(1))
                if self.rows >= self.stop_after:
                    for q in self.spark.streams.active:
                        q.stop()
        return len(text)

    def flush(self) -> None:
        pass


def test_drain_prints_progress_while_it_runs(spark, rill, tmp_path, monkeypatch):
    url, client = rill
    fill(client, "events", 500)
    out = _Lines(spark, 500)
    monkeypatch.setattr(sys, "stderr", out)
    # Continuous: the query only ends when the lines it printed have covered every entry.
    cli.main(["archive", "--url", url, "--streams", "events", "--output", str(tmp_path / "o"),
              "--checkpoint", str(tmp_path / "ck"), "--interval", "0.2", "--max-per-batch", "100"])
    batches = [(line, running) for line, running in out.lines if "rows/s" in line]
    assert out.rows == 500 and len(batches) >= 5
    assert all(running for _line, running in batches)  # every line came while the drain ran


def test_rdb_scan_reports_progress_while_it_scans(spark, rill, capfd):
    from rill.pipeline import rdbsource

    url, client = rill
    fill(client, "big", 3000)  # one key: progress must come from inside the stream
    client.execute_command("SAVE")
    path = os.path.join(client.config_get("dir")["dir"], "dump.rdb")
    calls: list[tuple[int, int, int]] = []
    rdbsource.scan(path, progress=lambda pos, size, keys: calls.append((pos, size, keys)))
    size = os.path.getsize(path)
    assert calls[-1] == (size, size, 1)
    during = calls[:-1]
    assert len(during) >= 5 and all(pos < size and keys == 0 for pos, _s, keys in during)
    assert [c[0] for c in calls] == sorted(c[0] for c in calls)
    rdbsource.print_progress(path)(size // 2, size, 7)
    assert "[rill-rdb] dump.rdb: scanned" in capfd.readouterr().err


@pytest.mark.timeout(900)
def test_spark_submit_runs_the_entry_point(spark, rill, tmp_path):
    import pyspark

    url, client = rill
    fill(client, "events", 250)
    entry = subprocess.run([sys.executable, "-m", "rill.pipeline.submit"], capture_output=True, text=True,
                           check=True).stdout.strip()
    assert entry.endswith(".py") and os.path.isfile(entry)
    submit = os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-submit")
    assert os.path.isfile(submit), "spark-submit ships with pyspark"
    out = str(tmp_path / "archive")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "SPARK_LOCAL_IP": "127.0.0.1"}
    proc = subprocess.run([submit, "--master", "local[1]", "--conf", "spark.ui.enabled=false", entry,
                           "archive", "--url", url, "--streams", "events", "--output", out,
                           "--checkpoint", str(tmp_path / "ck"), "--available-now", "--max-per-batch", "100"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "batch 2: 50 rows" in proc.stdout + proc.stderr
    assert spark.read.parquet(out).count() == 250
