"""RDB persistence through a real rill-server: SAVE/BGSAVE, save points, loading at start-up,
SHUTDOWN, DEBUG RELOAD, INFO persistence, and refusing a damaged file."""

from __future__ import annotations

import os
import signal
import time

import pytest

from tests.server.persistence_helpers import (
    info_field,
    populate,
    rill_in,
    snapshot,
    start_expecting_failure,
    wait_bgsave,
    wait_for,
    wait_rewrite,
)
from tests.support import RawClient


@pytest.fixture
def workdir(tmp_path):
    return str(tmp_path)


def test_save_then_restart_serves_the_same_dataset(workdir):
    with rill_in(workdir) as srv:
        c = RawClient(srv.port)
        populate(c)
        before = snapshot(c)
        assert c.call("SAVE") == b"+OK\r\n"
        assert c.call("LASTSAVE").startswith(b":")
        c.close()
    assert os.path.exists(os.path.join(workdir, "dump.rdb"))
    with rill_in(workdir) as srv:
        c = RawClient(srv.port)
        assert snapshot(c) == before
        assert info_field(c, "rdb_last_load_keys_loaded") == "9"
        assert info_field(c, "rdb_changes_since_last_save") == "0"
        c.close()


def test_bgsave_forks_and_the_parent_keeps_serving(workdir):
    with rill_in(workdir) as srv:
        c = RawClient(srv.port)
        populate(c)
        assert info_field(c, "rdb_changes_since_last_save") != "0"
        assert c.call("BGSAVE") == b"+Background saving started\r\n"
        c.call("SET", "during", "bgsave")  # served while the child writes
        wait_bgsave(c)
        assert info_field(c, "rdb_last_bgsave_status") == "ok"
        # Only what came after the fork is still unsaved.
        assert info_field(c, "rdb_changes_since_last_save") == "1"
        assert info_field(c, "rdb_saves") == "1"
        assert c.call("BGSAVE", "FOO") == b"-ERR syntax error\r\n"
        before = snapshot(c)
        c.close()
        srv.kill()
    with rill_in(workdir) as srv:
        c = RawClient(srv.port)
        assert c.call("GET", "during") == b"$-1\r\n"  # written after the snapshot
        c.call("SET", "during", "bgsave")
        assert snapshot(c)[1:] == before[1:]
        c.close()


def test_bgsave_while_one_runs_and_schedule(workdir):
    with rill_in(workdir) as srv:
        c = RawClient(srv.port)
        # a dataset big enough that the child is still running for the next command
        for _ in range(20):
            c.call("XADD", "s", "*", "f", "x" * 50000)
        c.call("CONFIG", "SET", "rdbcompression", "no")
        assert c.call("BGSAVE") == b"+Background saving started\r\n"
        reply = c.call("BGSAVE")
        assert reply in (b"-ERR Background save already in progress\r\n", b"+Background saving started\r\n")
        if reply.startswith(b"-"):
            assert c.call("SAVE") == b"-ERR Background save already in progress\r\n"
        wait_bgsave(c)
        c.close()


def test_save_points_trigger_a_background_save(workdir):
    with rill_in(workdir, "--save", "1 2") as srv:
        c = RawClient(srv.port)
        c.call("SET", "a", "1")
        time.sleep(1.3)
        assert info_field(c, "rdb_saves") == "0"  # one change, two needed
        c.call("SET", "b", "2")
        assert wait_for(lambda: info_field(c, "rdb_saves") == "1", timeout=5)
        wait_bgsave(c)
        assert info_field(c, "rdb_changes_since_last_save") == "0"
        c.close()
    assert os.path.exists(os.path.join(workdir, "dump.rdb"))


def test_shutdown_saves_with_save_points_and_nosave_does_not(workdir):
    with rill_in(workdir, "--save", "3600 1") as srv:
        c = RawClient(srv.port)
        c.call("SET", "k", "v1")
        c.send_raw(b"*2\r\n$8\r\nSHUTDOWN\r\n$6\r\nNOSAVE\r\n")
        srv.proc.wait(10)
    assert not os.path.exists(os.path.join(workdir, "dump.rdb"))
    with rill_in(workdir, "--save", "3600 1") as srv:
        c = RawClient(srv.port)
        c.call("SET", "k", "v2")
        c.send_raw(b"*1\r\n$8\r\nSHUTDOWN\r\n")
        srv.proc.wait(10)
    with rill_in(workdir) as srv:
        c = RawClient(srv.port)
        assert c.call("GET", "k") == b"$2\r\nv2\r\n"
        c.call("SET", "k", "v3")
        c.send_raw(b"*2\r\n$8\r\nSHUTDOWN\r\n$4\r\nSAVE\r\n")  # no save points, but asked
        srv.proc.wait(10)
    with rill_in(workdir, "--save", "3600 1") as srv:
        c = RawClient(srv.port)
        assert c.call("GET", "k") == b"$2\r\nv3\r\n"
        c.call("SET", "k", "v4")
        srv.proc.send_signal(signal.SIGTERM)  # SIGTERM shuts down like SHUTDOWN
        assert srv.proc.wait(10) == 0
    with rill_in(workdir) as srv:
        c = RawClient(srv.port)
        assert c.call("GET", "k") == b"$2\r\nv4\r\n"
        c.close()


def test_shutdown_refuses_when_the_final_save_fails(workdir):
    with rill_in(workdir, "--enable-protected-configs", "yes") as srv:
        c = RawClient(srv.port)
        c.call("SET", "k", "v")
        c.call("CONFIG", "SET", "dbfilename", "no/such/dir/dump.rdb")
        assert c.call("SHUTDOWN", "SAVE") == b"-ERR Errors trying to SHUTDOWN. Check logs.\r\n"
        assert c.call("PING") == b"+PONG\r\n"
        assert c.call("SAVE") == b"-ERR\r\n"
        # As in Redis, a failed foreground save does not turn on MISCONF.
        assert info_field(c, "rdb_last_bgsave_status") == "ok"
        assert c.call("SET", "k", "w") == b"+OK\r\n"
        c.close()


def test_failed_background_save_stops_writes_with_misconf(workdir):
    with rill_in(workdir, "--save", "3600 100", "--enable-protected-configs", "yes") as srv:
        c = RawClient(srv.port)
        c.call("SET", "k", "v")
        c.call("CONFIG", "SET", "dbfilename", "no/such/dir/dump.rdb")
        assert c.call("BGSAVE") == b"+Background saving started\r\n"
        wait_bgsave(c)
        assert info_field(c, "rdb_last_bgsave_status") == "err"
        misconf = (
            b"-MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist "
            b"to disk. Commands that may modify the data set are disabled, because this instance is "
            b"configured to report errors during writes if RDB snapshotting fails "
            b"(stop-writes-on-bgsave-error option). Please check the Redis logs for details about the "
            b"RDB error.\r\n"
        )
        assert c.call("SET", "k", "v2") == misconf
        assert c.call("PING") == misconf
        assert c.call("GET", "k") == b"$1\r\nv\r\n"  # reads still work
        c.call("MULTI")
        c.call("SET", "k", "v3")
        assert c.call("EXEC").startswith(b"-EXECABORT")
        c.call("CONFIG", "SET", "stop-writes-on-bgsave-error", "no")
        assert c.call("SET", "k", "v4") == b"+OK\r\n"
        c.call("CONFIG", "SET", "stop-writes-on-bgsave-error", "yes")
        assert c.call("SET", "k", "v5") == misconf
        c.call("CONFIG", "SET", "dbfilename", "dump.rdb")
        assert c.call("SAVE") == b"+OK\r\n"
        assert c.call("SET", "k", "v6") == b"+OK\r\n"
        c.close()


def test_debug_reload(workdir):
    with rill_in(workdir) as srv:
        c = RawClient(srv.port)
        populate(c)
        before = snapshot(c)
        digest = c.call("DEBUG", "DIGEST")
        assert c.call("DEBUG", "RELOAD") == b"+OK\r\n"
        assert snapshot(c) == before
        assert c.call("DEBUG", "DIGEST") == digest
        # NOSAVE reloads the file as it is; NOFLUSH+MERGE adds on top.
        c.call("SET", "later", "1")
        assert c.call("DEBUG", "RELOAD", "NOSAVE") == b"+OK\r\n"
        assert c.call("EXISTS", "later") == b":0\r\n"
        c.call("SET", "extra", "1")
        assert c.call("DEBUG", "RELOAD", "NOSAVE", "NOFLUSH", "MERGE") == b"+OK\r\n"
        assert c.call("EXISTS", "extra", "str") == b":2\r\n"
        assert c.call("DEBUG", "RELOAD", "BOGUS") == (
            b"-ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.\r\n")
        c.close()


def test_reload_drops_expired_keys(workdir):
    with rill_in(workdir) as srv:
        c = RawClient(srv.port)
        c.call("DEBUG", "SET-ACTIVE-EXPIRE", "0")
        c.call("SET", "gone", "1", "PX", "50")
        c.call("SET", "kept", "1")
        time.sleep(0.1)
        c.call("DEBUG", "RELOAD")
        assert c.call("DBSIZE") == b":1\r\n"
        assert info_field(c, "rdb_last_load_keys_expired") == "1"
        c.close()


def test_flushall_with_save_points_saves_the_empty_dataset(workdir):
    with rill_in(workdir, "--save", "3600 100") as srv:
        c = RawClient(srv.port)
        c.call("SET", "k", "v")
        c.call("FLUSHALL")
        assert info_field(c, "rdb_changes_since_last_save") == "0"
        c.close()
        srv.kill()
    with rill_in(workdir) as srv:
        c = RawClient(srv.port)
        assert c.call("DBSIZE") == b":0\r\n"
        c.close()


def _saved_rdb(workdir) -> str:
    """The path of the dump.rdb a rill with populate()'s keys SAVEd in ``workdir``."""
    with rill_in(workdir) as srv:
        c = RawClient(srv.port)
        populate(c)
        c.call("SAVE")
        c.close()
    return os.path.join(workdir, "dump.rdb")


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_a_damaged_rdb_is_refused_at_startup(workdir, damage):
    path = _saved_rdb(workdir)
    data = bytearray(open(path, "rb").read())
    if damage == "flip":
        data[len(data) // 2] ^= 0x10
    else:
        data = data[: len(data) - 100]
    open(path, "wb").write(bytes(data))
    code, log = start_expecting_failure([], workdir)
    assert code == 1
    assert "offset" in log and "Exiting" in log


def test_a_wrong_rdb_checksum_is_logged_as_redis_logs_it(workdir):
    """integration/rdb "Server should not start if RDB is corrupted" looks for "CRC error"
    in the log: Redis's line naming both sums (the computed one as "expected") and its
    "RDB CRC error" reason, the same from redis-server and rill for the same file."""
    import re
    import subprocess
    import sys

    from tests.support import free_port, require_tool

    redis = require_tool("redis-server")
    path = _saved_rdb(workdir)
    with open(path, "r+b") as f:
        f.seek(-8, os.SEEK_END)
        f.write(b"foobar00")  # as the suite corrupts it
    logs = []
    for argv in ([redis], [sys.executable, "-m", "rill.server.main"]):
        done = subprocess.run([*argv, "--port", str(free_port()), "--save", "", "--dir", workdir],
                              cwd=workdir, capture_output=True, timeout=60)
        assert done.returncode == 1
        logs.append((done.stdout + done.stderr).decode(errors="replace"))
    lines = [re.search(r"Wrong RDB checksum expected: \((\w+)\) but got \((\w+)\)\. Aborting now\.", log)
             for log in logs]
    assert lines[0] and lines[1] and lines[0].groups() == lines[1].groups()
    assert all("-> RDB CRC error" in log for log in logs)


def test_info_persistence_fields(workdir):
    with rill_in(workdir) as srv:
        c = RawClient(srv.port)
        text = c.call("INFO", "persistence").decode()
        names = [line.split(":")[0] for line in text.split("\r\n") if line and line[0] not in "$#"]
        assert names == [
            "loading", "async_loading", "current_cow_peak", "current_cow_size", "current_cow_size_age",
            "current_fork_perc", "current_save_keys_processed", "current_save_keys_total",
            "rdb_changes_since_last_save", "rdb_bgsave_in_progress", "rdb_last_save_time",
            "rdb_last_bgsave_status", "rdb_last_bgsave_time_sec", "rdb_current_bgsave_time_sec",
            "rdb_saves", "rdb_last_cow_size", "rdb_last_load_keys_expired", "rdb_last_load_keys_loaded",
            "aof_enabled", "aof_rewrite_in_progress", "aof_rewrite_scheduled", "aof_last_rewrite_time_sec",
            "aof_current_rewrite_time_sec", "aof_last_bgrewrite_status", "aof_rewrites",
            "aof_rewrites_consecutive_failures", "aof_last_write_status", "aof_last_cow_size",
            "module_fork_in_progress", "module_fork_last_cow_size",
        ]
        c.call("CONFIG", "SET", "appendonly", "yes")
        text = c.call("INFO", "persistence").decode()
        for name in ("aof_current_size", "aof_base_size", "aof_pending_rewrite", "aof_buffer_length",
                     "aof_pending_bio_fsync", "aof_delayed_fsync"):
            assert f"\r\n{name}:" in text
        # The AOF's first rewrite must end before the with-block's SIGTERM, which a server
        # still writing its initial AOF refuses (as Redis): the stop then waited 10 s to kill.
        wait_rewrite(c)
        c.close()


@pytest.mark.parametrize("oracle", [False, True], ids=["rill", "redis"])
def test_a_background_save_reports_its_progress_and_copy_on_write(oracle):
    """INFO persistence while a BGSAVE child works: the keys there were at the fork, the
    keys it has written (reported through its pipe every 1024 keys, at most once a
    second), the percentage of them, its copy-on-write; once it is done, its peak COW is
    rdb_last_cow_size and the current figures are 0 again (integration/rdb's "Test
    child sending info")."""
    from tests.support import start_redis, start_rill, wait_until

    def fields(c: RawClient) -> dict[str, str]:
        text = c.call("INFO", "persistence").decode()
        return dict(line.split(":", 1) for line in text.split("\r\n") if ":" in line)

    with (start_redis if oracle else start_rill)() as srv:
        c = RawClient(srv.port)
        assert c.call("DEBUG", "POPULATE", 5000, "key", 500) == b"+OK\r\n"
        assert c.call("CONFIG", "SET", "rdb-key-save-delay", 1000) == b"+OK\r\n"  # 5 s or more
        assert c.call("BGSAVE") == b"+Background saving started\r\n"
        assert fields(c)["current_save_keys_total"] == "5000"
        now = wait_until(lambda: (f := fields(c)) and int(f["current_save_keys_processed"]) > 1 and f)
        assert now["rdb_bgsave_in_progress"] == "1"
        assert now["current_fork_perc"] == "%.2f" % (int(now["current_save_keys_processed"]) / 5000 * 100)
        assert int(now["current_cow_peak"]) >= int(now["current_cow_size"]) > 0
        for i in range(64):  # pages the child still maps: copied on write
            c.call("SETRANGE", f"key:{i}", 0, "B" * 500)
        done = wait_until(lambda: (f := fields(c))["rdb_bgsave_in_progress"] == "0" and f, timeout=120)
        assert int(done["rdb_last_cow_size"]) > 0
        for name in ("current_cow_peak", "current_cow_size", "current_save_keys_processed",
                     "current_save_keys_total"):
            assert done[name] == "0"
        assert done["current_fork_perc"] == "0.00"
        c.close()
