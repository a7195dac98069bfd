"""The multi-part AOF through a real rill-server: start-up, CONFIG SET appendonly, BGREWRITEAOF,
automatic rewrites, DEBUG LOADAOF, torn tails, corrupt middles, and the SYNC stream."""

from __future__ import annotations

import os

import pytest
from rill.persistence import aof

from tests.server.persistence_helpers import (
    files,
    info_field,
    populate,
    redis_in,
    rill_in,
    snapshot,
    start_expecting_failure,
    wait_for,
    wait_rewrite,
)
from tests.support import RawClient, RecordingTransport, StepLoop, encode_command


@pytest.fixture
def workdir(tmp_path):
    return str(tmp_path)


def aof_dir(workdir: str) -> str:
    return os.path.join(workdir, "appendonlydir")


def manifest(workdir: str) -> str:
    return open(os.path.join(aof_dir(workdir), "appendonly.aof.manifest")).read()


def incr_commands(workdir: str, name: str = "appendonly.aof.1.incr.aof") -> list[list[bytes]]:
    return list(aof.CommandParser(open(os.path.join(aof_dir(workdir), name), "rb").read()))


def test_fresh_start_creates_base_incr_and_manifest(workdir):
    with rill_in(workdir, "--appendonly", "yes") as srv:
        c = RawClient(srv.port)
        assert files(aof_dir(workdir)) == [
            "appendonly.aof.1.base.rdb", "appendonly.aof.1.incr.aof", "appendonly.aof.manifest"]
        assert manifest(workdir) == (
            "file appendonly.aof.1.base.rdb seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n")
        base = open(os.path.join(aof_dir(workdir), "appendonly.aof.1.base.rdb"), "rb").read()
        assert base.startswith(b"REDIS0010") and b"aof-base\xc0\x01" in base
        c.call("SET", "k", "v")
        c.call("SELECT", "2")
        c.call("SET", "EX", "v", "EX", "1000")
        c.call("INCR", "n")
        c.call("SELECT", "0")
        c.call("XADD", "s", "*", "f", "v")
        c.close()
    cmds = incr_commands(workdir)
    assert cmds[:3] == [[b"SELECT", b"0"], [b"SET", b"k", b"v"], [b"SELECT", b"2"]]
    assert cmds[3][:3] == [b"SET", b"EX", b"v"] and cmds[3][3] == b"PXAT"  # effects, not requests
    assert cmds[5] == [b"SELECT", b"0"] and cmds[6][2] != b"*"  # XADD * -> the real ID
    with rill_in(workdir, "--appendonly", "yes") as srv:
        c = RawClient(srv.port)
        assert c.call("GET", "k") == b"$1\r\nv\r\n"
        c.call("SELECT", "2")
        assert c.call("GET", "n") == b"$1\r\n1\r\n"
        c.close()


def test_config_set_appendonly_then_restart(workdir):
    with rill_in(workdir) as srv:
        c = RawClient(srv.port)
        populate(c)
        before = snapshot(c)
        assert c.call("CONFIG", "SET", "appendonly", "yes") == b"+OK\r\n"
        wait_rewrite(c)
        assert info_field(c, "aof_enabled") == "1"
        c.call("SET", "after", "on")
        c.close()
    with rill_in(workdir, "--appendonly", "yes") as srv:
        c = RawClient(srv.port)
        assert c.call("GET", "after") == b"$2\r\non\r\n"
        c.call("DEL", "after")
        assert snapshot(c, mask_seen=True) == [_mask(x) for x in before]
        assert c.call("CONFIG", "SET", "appendonly", "no") == b"+OK\r\n"
        c.call("SET", "not", "logged")
        c.close()
    with rill_in(workdir, "--appendonly", "yes") as srv:
        c = RawClient(srv.port)
        assert c.call("EXISTS", "not") == b":0\r\n"
        c.close()


@pytest.mark.parametrize("server", ["rill", "redis"])
def test_config_set_appendonly_inside_exec_schedules_the_rewrite(workdir, server):
    # Redis forks no rewrite in the middle of a transaction: EXEC's CONFIG SET
    # appendonly yes only schedules it, says so in the log, and the cron starts it.
    with (rill_in if server == "rill" else redis_in)(workdir) as srv:
        c = RawClient(srv.port)
        assert c.call("MULTI") == b"+OK\r\n"
        assert c.call("SET", "foo", "bar") == b"+QUEUED\r\n"
        assert c.call("CONFIG", "SET", "appendonly", "yes") == b"+QUEUED\r\n"
        assert c.call("EXEC") == b"*2\r\n+OK\r\n+OK\r\n"
        with open(srv.logfile) as f:
            assert "AOF was enabled during a transaction. An AOF background was scheduled to start when possible." in f.read()
        wait_rewrite(c)
        assert info_field(c, "aof_enabled") == "1"
        assert wait_for(lambda: info_field(c, "aof_rewrites") == "1")
        c.close()


def _mask(reply: bytes) -> bytes:
    import re

    reply = re.sub(rb"(\$9\r\nseen-time\r\n:)\d+", rb"\g<1>0", reply)
    return re.sub(rb"(\$11\r\nactive-time\r\n:)-?\d+", rb"\g<1>0", reply)


@pytest.mark.parametrize("preamble", ["yes", "no"])
def test_bgrewriteaof_swaps_base_and_incr(workdir, preamble):
    with rill_in(workdir, "--appendonly", "yes", "--aof-use-rdb-preamble", preamble) as srv:
        c = RawClient(srv.port)
        populate(c)
        before = snapshot(c)
        assert c.call("BGREWRITEAOF") == b"+Background append only file rewriting started\r\n"
        c.call("SET", "during", "rewrite")
        wait_rewrite(c)
        ext = "rdb" if preamble == "yes" else "aof"
        assert files(aof_dir(workdir)) == [
            f"appendonly.aof.2.base.{ext}", "appendonly.aof.2.incr.aof", "appendonly.aof.manifest"]
        assert manifest(workdir) == (
            f"file appendonly.aof.2.base.{ext} seq 2 type b\nfile appendonly.aof.2.incr.aof seq 2 type i\n")
        assert info_field(c, "aof_rewrites") == "1"
        assert info_field(c, "aof_last_bgrewrite_status") == "ok"
        base = open(os.path.join(aof_dir(workdir), f"appendonly.aof.2.base.{ext}"), "rb").read()
        if preamble == "no":
            cmds = list(aof.CommandParser(base))
            assert [b"SELECT", b"0"] in cmds and any(x[0] == b"XSETID" for x in cmds)
        else:
            assert base.startswith(b"REDIS")
        assert [b"SET", b"during", b"rewrite"] in incr_commands(workdir, "appendonly.aof.2.incr.aof")
        c.close()
    with rill_in(workdir, "--appendonly", "yes") as srv:
        c = RawClient(srv.port)
        assert c.call("GET", "during") == b"$7\r\nrewrite\r\n"
        c.call("DEL", "during")
        assert snapshot(c, mask_seen=True) == [_mask(x) for x in before]
        c.close()


def test_bgrewriteaof_with_aof_off_and_errors(workdir):
    with rill_in(workdir) as srv:
        c = RawClient(srv.port)
        c.call("SET", "k", "v")
        assert c.call("BGREWRITEAOF") == b"+Background append only file rewriting started\r\n"
        wait_rewrite(c)
        # A base and a manifest, no incr file: nothing is being appended.
        assert manifest(workdir) == "file appendonly.aof.1.base.rdb seq 1 type b\n"
        for _ in range(30):
            c.call("XADD", "big", "*", "f", "x" * 50000)
        c.call("CONFIG", "SET", "rdbcompression", "no")
        c.call("BGSAVE")
        reply = c.call("BGREWRITEAOF")
        assert reply in (b"+Background append only file rewriting scheduled\r\n",
                         b"+Background append only file rewriting started\r\n")
        wait_rewrite(c)
        assert manifest(workdir).startswith("file appendonly.aof.")
        c.close()


def test_auto_rewrite_on_growth(workdir):
    with rill_in(workdir, "--appendonly", "yes", "--auto-aof-rewrite-min-size", "10kb",
                 "--auto-aof-rewrite-percentage", "100") as srv:
        c = RawClient(srv.port)
        for i in range(100):
            c.call("SET", f"k{i}", "x" * 200)
        assert wait_for(lambda: info_field(c, "aof_rewrites") == "1", timeout=5)
        wait_rewrite(c)
        assert "appendonly.aof.2.base.rdb" in files(aof_dir(workdir))
        size = int(info_field(c, "aof_current_size"))
        assert int(info_field(c, "aof_base_size")) <= size
        c.close()


def test_debug_loadaof(workdir):
    with rill_in(workdir, "--appendonly", "yes", "--appendfsync", "always") as srv:
        c = RawClient(srv.port)
        populate(c)
        before = snapshot(c)
        assert c.call("DEBUG", "LOADAOF") == b"+OK\r\n"
        # Replayed commands set consumers' seen-time to the replay time, in Redis too.
        assert snapshot(c, mask_seen=True) == [_mask(x) for x in before]
        c.call("BGREWRITEAOF")
        wait_rewrite(c)
        assert c.call("DEBUG", "LOADAOF") == b"+OK\r\n"
        assert snapshot(c, mask_seen=True) == [_mask(x) for x in before]
        c.close()


def test_debug_aof_flush_sleep_side_by_side(tmp_path):
    """DEBUG AOF-FLUSH-SLEEP <microsec> stalls each write of a non-empty AOF buffer (the
    Tcl suite's "AOF fsync always barrier issue" looks at the file meanwhile). Its replies
    match redis-server's (the number read as C's atoi); with it set, an acknowledged write
    is in the file and took at least the stall (a lower bound, which load cannot break)."""
    import time

    dirs = [tmp_path / "rill", tmp_path / "redis"]
    for d in dirs:
        d.mkdir()
    with rill_in(str(dirs[0]), "--appendonly", "yes", "--appendfsync", "always") as mine, \
            redis_in(str(dirs[1]), "--appendonly", "yes", "--appendfsync", "always") as theirs:
        a, b = RawClient(mine.port), RawClient(theirs.port)
        for args in [("DEBUG", "AOF-FLUSH-SLEEP"), ("DEBUG", "AOF-FLUSH-SLEEP", "1", "2"),
                     ("DEBUG", "aof-flush-sleep", "junk"), ("DEBUG", "AOF-FLUSH-SLEEP", " 12abc"),
                     ("DEBUG", "AOF-FLUSH-SLEEP", "-5"), ("DEBUG", "AOF-FLUSH-SLEEP", "0")]:
            assert a.call(*args) == b.call(*args), args
        for c, d in ((a, dirs[0]), (b, dirs[1])):
            assert c.call("DEBUG", "AOF-FLUSH-SLEEP", "300000") == b"+OK\r\n"
            start = time.monotonic()
            assert c.call("SET", "k", "v") == b"+OK\r\n"
            assert time.monotonic() - start >= 0.3
            assert [b"SET", b"k", b"v"] in incr_commands(str(d))
            assert c.call("DEBUG", "AOF-FLUSH-SLEEP", "0") == b"+OK\r\n"
            c.close()


def _write_incr(workdir: str, data: bytes, name: str = "appendonly.aof.1.incr.aof") -> str:
    path = os.path.join(aof_dir(workdir), name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def _fresh_aof(workdir: str) -> None:
    with rill_in(workdir, "--appendonly", "yes") as srv:
        RawClient(srv.port).call("PING")


def test_torn_tail_is_repaired(workdir):
    _fresh_aof(workdir)
    good = encode_command([b"SET", b"a", b"1"]) + encode_command([b"SET", b"b", b"2"])
    path = _write_incr(workdir, good + encode_command([b"SET", b"c", b"3"])[:-4])
    with rill_in(workdir, "--appendonly", "yes") as srv:
        c = RawClient(srv.port)
        assert c.call("MGET", "a", "b", "c") == b"*3\r\n$1\r\n1\r\n$1\r\n2\r\n$-1\r\n"
        assert "short read" in srv.log()
        c.call("SET", "d", "4")
        c.close()
    data = open(path, "rb").read()
    assert data.startswith(good) and list(aof.CommandParser(data))[-1] == [b"SET", b"d", b"4"]


def test_unfinished_transaction_at_the_end_is_dropped(workdir):
    _fresh_aof(workdir)
    good = encode_command([b"SET", b"a", b"1"])
    multi = encode_command([b"MULTI"]) + encode_command([b"SET", b"b", b"2"])
    path = _write_incr(workdir, good + multi)
    with rill_in(workdir, "--appendonly", "yes") as srv:
        c = RawClient(srv.port)
        assert c.call("MGET", "a", "b") == b"*2\r\n$1\r\n1\r\n$-1\r\n"
        c.close()
    assert open(path, "rb").read().startswith(good)
    assert not list(aof.CommandParser(open(path, "rb").read()))[1:2] == [[b"MULTI"]]


def test_truncation_refused_when_not_allowed_or_not_last(workdir):
    _fresh_aof(workdir)
    torn = encode_command([b"SET", b"a", b"1"]) + b"*3\r\n$3\r\nSET"
    _write_incr(workdir, torn)
    code, log = start_expecting_failure(["--appendonly", "yes", "--aof-load-truncated", "no"], workdir)
    assert code == 1 and "Unexpected end of file" in log
    # A torn file that is not the last one cannot be repaired.
    _write_incr(workdir, encode_command([b"SET", b"b", b"2"]), "appendonly.aof.2.incr.aof")
    with open(os.path.join(aof_dir(workdir), "appendonly.aof.manifest"), "a") as f:
        f.write("file appendonly.aof.2.incr.aof seq 2 type i\n")
    code, log = start_expecting_failure(["--appendonly", "yes"], workdir)
    assert code == 1 and "not the last file" in log


def test_corrupt_middle_is_refused(workdir):
    _fresh_aof(workdir)
    data = (encode_command([b"SET", b"a", b"1"]) + b"garbage\r\n" + encode_command([b"SET", b"b", b"2"]))
    _write_incr(workdir, data)
    code, log = start_expecting_failure(["--appendonly", "yes"], workdir)
    assert code == 1 and "Bad file format" in log and "offset 27" in log


def test_unknown_command_and_bad_manifest_are_refused(workdir):
    _fresh_aof(workdir)
    _write_incr(workdir, encode_command([b"NOSUCHCMD", b"x"]))
    code, log = start_expecting_failure(["--appendonly", "yes"], workdir)
    assert code == 1 and "Unknown command 'NOSUCHCMD'" in log
    with open(os.path.join(aof_dir(workdir), "appendonly.aof.manifest"), "w") as f:
        f.write("file a seq 1\n")
    code, log = start_expecting_failure(["--appendonly", "yes"], workdir)
    assert code == 1 and "manifest" in log.lower()


def test_old_single_file_aof_is_upgraded(workdir):
    with open(os.path.join(workdir, "appendonly.aof"), "wb") as f:
        f.write(encode_command([b"SET", b"old", b"style"]))
    with rill_in(workdir, "--appendonly", "yes") as srv:
        c = RawClient(srv.port)
        assert c.call("GET", "old") == b"$5\r\nstyle\r\n"
        c.close()
    assert "file appendonly.aof seq 1 type b\n" in manifest(workdir)


def test_sync_streams_the_snapshot_then_the_effects(workdir):
    with rill_in(workdir) as srv:
        c = RawClient(srv.port)
        c.call("SET", "before", "1")
        repl = RawClient(srv.port)
        repl.send_raw(b"SYNC\r\n")
        header = b""
        while not header.endswith(b"\r\n"):
            header += repl.sock.recv(1)
        n = int(header.lstrip(b"\n")[1:-2])  # newlines keep the link alive while the snapshot is made
        payload = b""
        while len(payload) < n:
            payload += repl.sock.recv(n - len(payload))
        from rill.persistence import rdb

        assert rdb.load(payload).dbs[0] == {b"before": b"1"}
        c.call("XADD", "s", "*", "f", "v")
        c.call("SELECT", "1")
        c.call("SET", "k", "v", "EX", "100")
        c.call("MULTI")
        c.call("INCR", "n")
        c.call("INCR", "n")
        c.call("EXEC")
        expected = 8
        parser_data = b""
        got: list[list[bytes]] = []
        repl.sock.settimeout(5)
        while len(got) < expected:
            parser_data += repl.sock.recv(65536)
            try:
                got = list(aof.CommandParser(parser_data))
            except aof.AofTruncated:
                continue
        assert got[0] == [b"SELECT", b"0"]
        assert got[1][:2] == [b"XADD", b"s"] and got[1][2] != b"*"
        assert got[2] == [b"SELECT", b"1"]
        assert got[3][:3] == [b"SET", b"k", b"v"] and got[3][3] == b"PXAT"
        assert got[4:] == [[b"MULTI"], [b"INCR", b"n"], [b"INCR", b"n"], [b"EXEC"]]
        repl.close()
        c.close()


# -- the ordering guarantee, checked deterministically in-process ----------------------------------
@pytest.mark.parametrize("policy", ["always", "everysec", "no"])
def test_when_the_aof_is_written_relative_to_replies(tmp_path, monkeypatch, policy):
    from rill.server.commands import load_all
    from rill.server.config import Config
    from rill.server.connection import Connection
    from rill.server.server import Server

    load_all()
    cwd = os.getcwd()
    config = Config()
    for name, value in (("dir", str(tmp_path)), ("appendonly", "yes"), ("appendfsync", policy),
                        ("protected-mode", "no")):
        config.set(name, value, startup=True)
    os.chdir(cwd)
    server = Server(config)
    server.loop = StepLoop()
    p = server.persistence
    p.load_at_startup()
    synced = []
    real_fdatasync = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (synced.append(fd), real_fdatasync(fd)))
    incr = os.path.join(str(tmp_path), "appendonlydir", "appendonly.aof.1.incr.aof")
    seen = []

    def on_write(data: bytes) -> None:
        seen.append((data, open(incr, "rb").read(), len(synced)))

    conn = Connection(server)
    conn.connection_made(RecordingTransport(on_write))
    conn.data_received(encode_command([b"SET", b"a", b"1"]) + encode_command([b"INCR", b"n"]))
    assert seen == []  # replies leave with the loop iteration's batch, not inline
    server.loop.run_iteration()
    reply, on_disk, fsyncs = seen[0]
    assert reply == b"+OK\r\n:1\r\n"
    written = [[b"SELECT", b"0"], [b"SET", b"a", b"1"], [b"INCR", b"n"]]
    if policy == "always":
        # Written and fsynced before the reply left.
        assert list(aof.CommandParser(on_disk)) == written and fsyncs == 1
    else:
        # Written once for the whole loop iteration (Redis's beforeSleep), never fsynced inline.
        assert fsyncs == 0
        assert list(aof.CommandParser(open(incr, "rb").read())) == written
    conn.data_received(encode_command([b"GET", b"a"]))  # a read: no AOF work at all
    server.loop.run_iteration()
    assert seen[1][2] == fsyncs
    p.at_shutdown()


def _commandstats_after_aof_reload(start, workdir: str) -> list[str]:
    """INFO commandstats of a server that loaded an AOF at start-up, then ran DEBUG
    LOADAOF after one command of its own: replayed commands count as no calls."""
    with start("--appendonly", "yes", "--appendfsync", "always", workdir=workdir) as srv:
        c = RawClient(srv.port)
        c.call("SET", "a", "1")
        c.call("INCR", "n")
        c.call("RPUSH", "l", "x", "y")
        c.close()
    with start("--appendonly", "yes", "--appendfsync", "always", workdir=workdir) as srv:
        c = RawClient(srv.port)
        c.call("GET", "a")
        c.call("DEBUG", "LOADAOF")
        stats = c.call("INFO", "commandstats").decode().split("\r\n")
        c.close()
    # (the test harness's start-up PING is left out: whether it meets a loading server varies)
    return sorted(line.split(":")[0] for line in stats if line.startswith("cmdstat_") and "ping" not in line)


def test_replayed_commands_are_not_counted_as_calls(tmp_path):
    from tests.support import start_redis, start_rill

    (tmp_path / "rill").mkdir()
    (tmp_path / "redis").mkdir()
    mine = _commandstats_after_aof_reload(start_rill, str(tmp_path / "rill"))
    theirs = _commandstats_after_aof_reload(start_redis, str(tmp_path / "redis"))
    assert mine == theirs == ["cmdstat_debug", "cmdstat_get"]


# -- a rewrite with the AOF off (Redis's Tcl unit/other, issue 20 finding 10) -----------------------
def _stale_incr_then_rewrite(start, workdir: str, preamble: str) -> tuple[list[bytes], str]:
    """Switch the AOF on and off again (its incr file stays in the manifest), build a
    new dataset, then BGREWRITEAOF + DEBUG LOADAOF with the AOF off, as unit/other
    does. Returns the checks that must hold and the manifest afterwards."""
    with start(workdir=workdir) as srv:
        c = RawClient(srv.port)
        c.call("CONFIG", "SET", "appendonly", "yes")
        wait_rewrite(c)
        # what the incr file records: a flush and older values, with a shorter TTL
        c.call("SET", "x", "stale", "EX", "50")
        c.call("FLUSHDB")
        c.call("SET", "gone", "1")
        c.call("CONFIG", "SET", "appendonly", "no")
        c.call("DEL", "gone")
        c.call("SET", "x", "10")
        c.call("EXPIRE", "x", "1000")
        c.call("RPUSH", "l", "a", "b")
        c.call("SELECT", "5")
        c.call("HSET", "h", "f", "v")
        c.call("SELECT", "0")
        digest = c.call("DEBUG", "DIGEST")
        c.call("CONFIG", "SET", "aof-use-rdb-preamble", preamble)
        assert c.call("BGREWRITEAOF") == b"+Background append only file rewriting started\r\n"
        wait_rewrite(c)
        assert c.call("DEBUG", "LOADAOF") == b"+OK\r\n"
        ttl = int(c.call("TTL", "x")[1:-2])
        checks = [
            c.call("DEBUG", "DIGEST") == digest,
            900 < ttl <= 1000,
            c.call("GET", "x"),
            c.call("EXISTS", "gone"),
            c.call("LRANGE", "l", "0", "-1"),
            c.call("SELECT", "5") + c.call("HGETALL", "h"),
        ]
        c.close()
        return checks, manifest(workdir)


@pytest.mark.parametrize("preamble", ["yes", "no"])
def test_rewrite_with_the_aof_off_keeps_the_dataset(tmp_path, preamble):
    """An incr file left from when the AOF was on must not be replayed on top of a new
    base: the digest and the TTL are the same after BGREWRITEAOF + DEBUG LOADAOF."""
    from tests.support import start_redis, start_rill

    (tmp_path / "rill").mkdir()
    (tmp_path / "redis").mkdir()
    mine, my_manifest = _stale_incr_then_rewrite(start_rill, str(tmp_path / "rill"), preamble)
    theirs, their_manifest = _stale_incr_then_rewrite(start_redis, str(tmp_path / "redis"), preamble)
    assert mine == theirs
    assert mine[:4] == [True, True, b"$2\r\n10\r\n", b":0\r\n"]
    ext = "rdb" if preamble == "yes" else "aof"
    assert my_manifest == their_manifest == f"file appendonly.aof.2.base.{ext} seq 2 type b\n"
    assert files(aof_dir(str(tmp_path / "rill"))) == [f"appendonly.aof.2.base.{ext}", "appendonly.aof.manifest"]


def _restart_over_an_old_aof(start, workdir: str, *extra: str) -> tuple[str, list[bytes]]:
    """An AOF written by an earlier run, then a server with the AOF off in the same
    directory: its rewrite follows on from the manifest already there."""
    with start("--appendonly", "yes", workdir=workdir) as srv:
        c = RawClient(srv.port)
        c.call("SET", "old", "1")
        c.close()
    with start(*extra, workdir=workdir) as srv:
        c = RawClient(srv.port)
        c.call("SET", "new", "2")
        c.call("BGREWRITEAOF")
        wait_rewrite(c)
        c.call("DEBUG", "LOADAOF")
        keys = [c.call("KEYS", "*")]
        c.call("CONFIG", "SET", "aof-disable-auto-gc", "no")
        text = manifest(workdir)
        c.close()
    return text, keys


def test_a_server_with_the_aof_off_continues_the_manifest_on_disk(tmp_path):
    from tests.support import start_redis, start_rill

    (tmp_path / "rill").mkdir()
    (tmp_path / "redis").mkdir()
    mine = _restart_over_an_old_aof(start_rill, str(tmp_path / "rill"))
    theirs = _restart_over_an_old_aof(start_redis, str(tmp_path / "redis"))
    assert mine == theirs == ("file appendonly.aof.2.base.rdb seq 2 type b\n", [b"*1\r\n$3\r\nnew\r\n"])
    assert files(aof_dir(str(tmp_path / "rill"))) == ["appendonly.aof.2.base.rdb", "appendonly.aof.manifest"]


def test_aof_disable_auto_gc_keeps_history_until_switched_off(tmp_path):
    from tests.support import start_redis, start_rill

    results = []
    for start, name in ((start_rill, "rill"), (start_redis, "redis")):
        d = tmp_path / name
        d.mkdir()
        with start("--appendonly", "yes", "--aof-disable-auto-gc", "yes", workdir=str(d)) as srv:
            c = RawClient(srv.port)
            c.call("SET", "k", "v")
            c.call("BGREWRITEAOF")
            wait_rewrite(c)
            kept = manifest(str(d))
            kept_files = files(aof_dir(str(d)))
            c.call("CONFIG", "SET", "aof-disable-auto-gc", "no")
            wait_for(lambda d=d: len(files(aof_dir(str(d)))) == 3)
            results.append((kept, kept_files, manifest(str(d)), files(aof_dir(str(d)))))
            c.close()
    assert results[0] == results[1]
    assert results[0][0] == (
        "file appendonly.aof.2.base.rdb seq 2 type b\n"
        "file appendonly.aof.1.incr.aof seq 1 type h\n"
        "file appendonly.aof.1.base.rdb seq 1 type h\n"
        "file appendonly.aof.2.incr.aof seq 2 type i\n"
    )
    assert results[0][3] == ["appendonly.aof.2.base.rdb", "appendonly.aof.2.incr.aof", "appendonly.aof.manifest"]


def test_a_bad_manifest_stops_start_up_even_with_the_aof_off(tmp_path):
    """Redis reads the manifest at start whatever appendonly says, and exits on a bad one."""
    import subprocess

    from tests.support import free_port, redis_server_binary

    codes = []
    for name in ("rill", "redis"):
        d = tmp_path / name
        (d / "appendonlydir").mkdir(parents=True)
        (d / "appendonlydir" / "appendonly.aof.manifest").write_text("file x seq 1 type q\n")
        if name == "rill":
            code, out = start_expecting_failure(["--appendonly", "no"], str(d))
            assert "Unknown AOF file type" in out
        else:
            binary = redis_server_binary()
            assert binary is not None, "redis-server (the oracle) is required"
            proc = subprocess.run([binary, "--port", str(free_port()), "--save", "", "--appendonly", "no",
                                   "--dir", str(d)], capture_output=True, timeout=30)
            code = proc.returncode
            assert b"Unknown AOF file type" in proc.stdout + proc.stderr
        codes.append(code)
    assert codes == [1, 1]


@pytest.mark.parametrize("oracle", [False, True], ids=["rill", "redis"])
def test_turning_aof_off_kills_the_rewrite_child_and_says_so(oracle):
    """unit/aofrw "Turning off AOF kills the background writing child if any" looks for
    Redis's "Killing running AOF rewrite child: <pid>" in the log."""
    import re

    from tests.support import start_redis, start_rill, wait_until

    with (start_redis if oracle else start_rill)("--appendonly", "yes") as srv:
        c = RawClient(srv.port)
        wait_until(lambda: b"aof_rewrite_in_progress:0" in c.call("INFO", "persistence"))
        assert c.call("SET", "k", "v") == b"+OK\r\n"
        assert c.call("CONFIG", "SET", "rdb-key-save-delay", 10_000_000) == b"+OK\r\n"  # a child that lingers
        assert c.call("BGREWRITEAOF") == b"+Background append only file rewriting started\r\n"
        assert c.call("CONFIG", "SET", "appendonly", "no") == b"+OK\r\n"
        assert re.search(r"Killing running AOF rewrite child: \d+", srv.log())
        assert b"aof_rewrite_in_progress:0" in c.call("INFO", "persistence")
        c.close()


def _refused_start(command: list[str], workdir: str) -> tuple[int, list[str]]:
    """Start ``command`` (rill-server's or redis-server's) on ``workdir`` with appendonly yes,
    expecting it to exit: (exit code, its log's messages, timestamps and pids dropped)."""
    import re
    import subprocess

    from tests.support import free_port

    proc = subprocess.run([*command, "--port", str(free_port()), "--save", "", "--dir", workdir,
                           "--appendonly", "yes"], cwd=workdir, capture_output=True, timeout=60)
    text = (proc.stdout + proc.stderr).decode(errors="replace")
    lines = [re.sub(r"^\d+:[A-Z] \d+ \w+ \d+ [\d:.]+ [.\-*#] ", "", ln) for ln in text.splitlines()]
    return proc.returncode, [ln for ln in lines if ln.strip()]


_BAD_MANIFESTS = {
    "blank line": "file appendonly.aof.1.incr.aof seq 1 type i\n\nfile appendonly.aof.3.incr.aof seq 3 type i\n",
    "line too long": "file appendonly.aof.1.incr.aof seq 1 type i\n" + "x" * 1100 + "\n",
    "no newline at the end": "file appendonly.aof.1.incr.aof seq 1 type i",
    "missing key": "file appendonly.aof.1.incr.aof seq 1 typo i\n",
    "odd parameter": "file appendonly.aof.1.incr.aof seq 1 type i newkey\n",
    "seq zero": "file appendonly.aof.1.incr.aof seq 0 type i\n",
    "seq not a number": "file appendonly.aof.1.incr.aof seq x1 type i\n",
    "a listed file missing": "file appendonly.aof.1.incr.aof seq 1 type i\nfile appendonly.aof.2.incr.aof seq 2 type i\n",
}


@pytest.mark.parametrize("case", sorted(_BAD_MANIFESTS))
def test_a_bad_manifest_stops_the_start_as_in_redis(tmp_path, case):
    """aofLoadManifestFromFile's refusals (a blank line, a line past 1024 bytes or
    without its newline, a missing key, seq 0) and a listed file that is not there:
    both servers exit with status 1 and log the same report (the Tcl suite's
    integration/aof-multi-part counts its lines)."""
    from tests.support import redis_server_binary

    redis_bin = redis_server_binary()
    if redis_bin is None:
        pytest.skip("redis-server not installed")
    logs = []
    import sys

    for name, command in (("rill", [sys.executable, "-m", "rill.server.main"]), ("redis", [redis_bin])):
        d = tmp_path / name / "appendonlydir"
        d.mkdir(parents=True)
        (d / "appendonly.aof.1.incr.aof").write_bytes(encode_command(["SET", "k1", "v1"]))
        (d / "appendonly.aof.3.incr.aof").write_bytes(encode_command(["SET", "k3", "v3"]))
        (d / "appendonly.aof.manifest").write_text(_BAD_MANIFESTS[case])
        code, lines = _refused_start(command, str(tmp_path / name))
        assert code == 1, (name, lines)
        start = next(i for i, ln in enumerate(lines) if "FATAL AOF MANIFEST" in ln or "Unable to obtain" in ln)
        logs.append(lines[start:])
    assert logs[0] == logs[1]


def test_an_interrupted_upgrade_is_completed_as_in_redis(tmp_path):
    """A pre-7 appendonly.aof still in the data directory while the manifest already
    names it as the base (an upgrade stopped before its rename): both servers move it
    in, load it, and end with the same manifest (integration/aof-multi-part "can
    continue the upgrade from the interrupted upgrade state")."""
    from tests.support import start_redis, start_rill

    seen = []
    for name, start in (("rill", start_rill), ("redis", start_redis)):
        d = tmp_path / name
        (d / "appendonlydir").mkdir(parents=True)
        (d / "appendonly.aof").write_bytes(b"".join(encode_command(["SET", f"k{i}", f"v{i}"]) for i in (1, 2, 3)))
        (d / "appendonlydir" / "appendonly.aof.manifest").write_text("file appendonly.aof seq 1 type b\n")
        with start("--appendonly", "yes", workdir=str(d)) as srv:
            c = RawClient(srv.port)
            seen.append((c.call("MGET", "k1", "k2", "k3"), os.path.exists(d / "appendonly.aof"),
                         files(str(d / "appendonlydir")), manifest(str(d)),
                         "Successfully migrated an old-style AOF file (appendonly.aof) into the AOF directory "
                         "(appendonlydir)." in srv.log()))
            c.close()
    assert seen[0] == seen[1]
    assert seen[0][0] == b"*3\r\n$2\r\nv1\r\n$2\r\nv2\r\n$2\r\nv3\r\n" and not seen[0][1] and seen[0][4]


@pytest.mark.parametrize("oracle", [False, True], ids=["rill", "redis"])
def test_repeated_rewrite_failures_hold_automatic_rewrites_back(oracle):
    """integration/aof-multi-part "AOF will trigger limit when AOFRW fails many times":
    three killed rewrites in a row, then growth that would start one: the server logs
    Redis's limit line instead and starts none; BGREWRITEAOF still runs at once."""
    import signal

    from tests.support import start_redis, start_rill, wait_until

    def child(pid: int) -> int:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            kids = f.read().split()
        return int(kids[0]) if kids else 0

    def in_progress(c: RawClient) -> bool:
        return b"aof_rewrite_in_progress:1" in c.call("INFO", "persistence")

    with (start_redis if oracle else start_rill)("--appendonly", "yes") as srv:
        c = RawClient(srv.port)
        wait_until(lambda: not in_progress(c))
        assert c.call("CONFIG", "SET", "rdb-key-save-delay", 10_000_000) == b"+OK\r\n"
        assert c.call("CONFIG", "SET", "auto-aof-rewrite-percentage", 1) == b"+OK\r\n"
        assert c.call("CONFIG", "SET", "auto-aof-rewrite-min-size", "1kb") == b"+OK\r\n"
        assert c.call("SET", "k", "v") == b"+OK\r\n"
        for _ in range(3):
            assert c.call("BGREWRITEAOF") == b"+Background append only file rewriting started\r\n"
            os.kill(wait_until(lambda: child(srv.proc.pid)), signal.SIGKILL)
            wait_until(lambda: not in_progress(c))
        assert b"aof_rewrites_consecutive_failures:3" in c.call("INFO", "persistence")
        assert c.call("SET", "x", "x" * 1024) == b"+OK\r\n"
        wait_until(lambda: "triggered the limit, will retry in 1 minutes" in srv.log())
        assert not in_progress(c)
        assert c.call("BGREWRITEAOF") == b"+Background append only file rewriting started\r\n"
        assert in_progress(c)
        c.close()


@pytest.mark.parametrize("oracle", [False, True], ids=["rill", "redis"])
def test_a_failed_first_rewrite_removes_the_temp_incr_and_retries(oracle):
    """integration/aof-multi-part: AOF switched on at run time gathers writes in a temp
    INCR file until its first rewrite succeeds; a killed rewrite removes that file,
    saying so in the log, and the rewrite is tried again."""
    import signal

    from tests.support import start_redis, start_rill, wait_until

    def child(pid: int) -> int:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            kids = f.read().split()
        return int(kids[0]) if kids else 0

    with (start_redis if oracle else start_rill)() as srv:
        c = RawClient(srv.port)
        assert c.call("SET", "k", "v") == b"+OK\r\n"
        assert c.call("CONFIG", "SET", "rdb-key-save-delay", 10_000_000) == b"+OK\r\n"
        assert c.call("CONFIG", "SET", "appendonly", "yes") == b"+OK\r\n"
        temp = os.path.join(srv.workdir, "appendonlydir", "temp-appendonly.aof.incr")
        assert os.path.exists(temp)
        first = wait_until(lambda: child(srv.proc.pid))
        os.kill(first, signal.SIGKILL)
        line = "Removing the temp incr aof file temp-appendonly.aof.incr in the background"
        wait_until(lambda: line in srv.log())
        # Scheduled again: a new child, and a new temp file gathering writes.
        wait_until(lambda: child(srv.proc.pid) not in (0, first))
        assert c.call("CONFIG", "SET", "rdb-key-save-delay", 0) == b"+OK\r\n"
        os.kill(child(srv.proc.pid), signal.SIGKILL)
        wait_until(lambda: b"aof_rewrite_in_progress:0" in c.call("INFO", "persistence")
                   and b"aof_enabled:1" in c.call("INFO", "persistence"))
        assert srv.log().count(line) == 2
        c.close()


@pytest.mark.parametrize("oracle", [False, True], ids=["rill", "redis"])
def test_scripts_in_the_aof_write_on_a_read_only_replica(oracle, tmp_path):
    """integration/aof "EVAL can process writes from AOF in read-only replicas": the AOF
    being loaded is obeyed like a master, so its scripts' writes are not READONLY."""
    from tests.support import start_redis, start_rill

    os.makedirs(tmp_path / "appendonlydir")
    (tmp_path / "appendonlydir" / "appendonly.aof.manifest").write_text(
        "file appendonly.aof.1.incr.aof seq 1 type i\n")
    (tmp_path / "appendonlydir" / "appendonly.aof.1.incr.aof").write_bytes(
        encode_command(["SELECT", "9"])
        + encode_command(["EVAL", 'redis.call("set",KEYS[1],"100")', "1", "foo"])
        + encode_command(["EVAL", 'redis.call("incr",KEYS[1])', "1", "foo"]) * 2)
    start = start_redis if oracle else start_rill
    with start("--appendonly", "yes", "--replica-read-only", "yes", "--replicaof", "127.0.0.1", "0",
               workdir=str(tmp_path)) as srv:
        c = RawClient(srv.port)
        c.call("SELECT", "9")
        assert c.call("GET", "foo") == b"$3\r\n102\r\n"
        c.close()


@pytest.mark.parametrize("oracle", [False, True], ids=["rill", "redis"])
def test_timestamp_annotations(oracle, tmp_path):
    """integration/aof "Generate timestamp annotations in AOF": with aof-timestamp-enabled
    the incr file dates its commands ("#TS:<seconds>" before the first of each second) and a
    RESP base opens with one; redis-check-aof can cut the history at such a time, and the
    annotated files load back."""
    import re
    import subprocess
    import time

    from tests.support import require_tool, start_redis, start_rill

    start = start_redis if oracle else start_rill
    d = str(tmp_path / "appendonlydir")
    with start("--appendonly", "yes", workdir=str(tmp_path)) as srv:
        c = RawClient(srv.port)
        wait_rewrite(c)
        assert c.call("CONFIG", "SET", "aof-timestamp-enabled", "yes") == b"+OK\r\n"
        assert c.call("CONFIG", "GET", "aof-timestamp-enabled") == (
            b"*2\r\n$21\r\naof-timestamp-enabled\r\n$3\r\nyes\r\n")
        assert c.call("CONFIG", "SET", "aof-use-rdb-preamble", "no") == b"+OK\r\n"
        before = int(time.time())
        assert c.call("SET", "foo", "bar") == b"+OK\r\n"
        incr = open(os.path.join(d, "appendonly.aof.1.incr.aof"), "rb").read()
        m = re.match(rb"#TS:(\d+)\r\n\*2\r\n\$6\r\nSELECT\r\n", incr)
        assert m and before <= int(m.group(1)) <= int(time.time())
        assert c.call("BGREWRITEAOF") == b"+Background append only file rewriting started\r\n"
        wait_rewrite(c)
        assert re.match(rb"#TS:\d+\r\n\*2\r\n\$6\r\nSELECT\r\n\$1\r\n0\r\n\*3\r\n\$3\r\nSET\r\n",
                        open(os.path.join(d, "appendonly.aof.2.base.aof"), "rb").read())
        # The new incr file continues the dating: no second already annotated again.
        assert c.call("SET", "foo", "bar") == b"+OK\r\n"
        m2 = re.match(rb"#TS:(\d+)\r\n", open(os.path.join(d, "appendonly.aof.2.incr.aof"), "rb").read())
        assert m2 is None or int(m2.group(1)) > int(m.group(1))
        c.close()
    with start("--appendonly", "yes", workdir=str(tmp_path)) as srv:
        c = RawClient(srv.port)
        assert c.call("GET", "foo") == b"$3\r\nbar\r\n"
        c.close()
    checker = require_tool("redis-check-aof")
    with open(os.path.join(d, "appendonly.aof.2.incr.aof"), "wb") as f:
        t = int(time.time())  # after the base's annotation
        f.write(b"#TS:%d\r\n" % (t + 100) + encode_command(["SET", "foo1", "bar1"])
                + b"#TS:%d\r\n" % (t + 300) + encode_command(["SET", "foo2", "bar2"]))
    out = subprocess.run([checker, "--truncate-to-timestamp", str(t + 200),
                          os.path.join(d, "appendonly.aof.manifest")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    with start("--appendonly", "yes", workdir=str(tmp_path)) as srv:
        c = RawClient(srv.port)
        assert c.call("MGET", "foo", "foo1", "foo2") == b"*3\r\n$3\r\nbar\r\n$4\r\nbar1\r\n$-1\r\n"
        c.close()
