"""Shutdown when the final save fails, side by side with redis-server 7.0.

Redis will not exit on SIGTERM, SIGINT or SHUTDOWN while the final snapshot cannot be
written: it logs why and goes on serving, so the data is still there to save once the
cause is fixed. FORCE (SHUTDOWN FORCE, shutdown-on-sigterm force) exits anyway.

The save is made to fail with a directory where the snapshot file goes: renaming the
temp file onto it fails for every user, root included (a mode bit would not stop root).
It is created after start-up, since a server would refuse to load it.
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Callable

import pytest

from tests.support import RawClient, ServerProcess, scratch_dir, start_redis, start_rill, wait_until

ServerStarter = Callable[..., ServerProcess]
SERVERS = {"rill": start_rill, "redis": start_redis}
GAVE_UP = "Errors trying to shut down the server. Check the logs for more information."

# A log line: "pid:R dd Mon yyyy hh:mm:ss.mmm L message", or the one a C signal handler
# writes: "pid:signal-handler (unixtime) message".
_LINE = re.compile(r"^\d+:(?:[A-Z] \d+ \w+ \d+ [\d:.]+ (?P<level>.)|signal-handler \(\d+\)) (?P<msg>.*)$")


def messages(srv: ServerProcess) -> list[str]:
    """The log's messages, with the server's pid and directory made comparable."""
    out = []
    for line in srv.log().splitlines():
        m = _LINE.match(line)
        if m:
            msg = m["msg"].replace(f"temp-{srv.proc.pid}.rdb", "temp-PID.rdb")
            out.append(msg.replace(os.path.realpath(srv.workdir), "DIR"))
    return out


def shutdown_attempts(srv: ServerProcess) -> list[list[str]]:
    """Each shutdown attempt's messages: from the signal (or SHUTDOWN) to its outcome."""
    attempts: list[list[str]] = []
    current: list[str] | None = None
    for msg in messages(srv):
        if msg.startswith("Received SIG") or (msg == "User requested shutdown..." and current is None):
            current = []
            attempts.append(current)
        if current is not None:
            current.append(msg)
            if msg == GAVE_UP or msg.endswith("bye bye..."):
                current = None
    return attempts


def start(kind: str, workdir: str, *args: str) -> ServerProcess:
    return SERVERS[kind]("--save", "3600 1", *args, workdir=workdir)


def block_the_snapshot(srv: ServerProcess) -> str:
    path = os.path.join(srv.workdir, "dump.rdb")
    os.mkdir(path)
    return path


@pytest.mark.parametrize("kind", ["rill", "redis"])
def test_sigterm_and_sigint_with_a_failing_final_save_keep_serving(kind):
    workdir = scratch_dir(f"shutdown-{kind}-")
    with start(kind, workdir) as srv:
        c = RawClient(srv.port)
        assert c.call("SET", "k", "kept") == b"+OK\r\n"
        blocker = block_the_snapshot(srv)
        for n, sig in enumerate([signal.SIGTERM, signal.SIGTERM, signal.SIGINT], 1):
            srv.proc.send_signal(sig)
            wait_until(lambda n=n: messages(srv).count(GAVE_UP) == n)
            assert srv.proc.poll() is None
            assert c.call("GET", "k") == b"$4\r\nkept\r\n"
        # Fixed, the next SIGTERM saves and exits cleanly, and nothing was lost.
        os.rmdir(blocker)
        srv.proc.send_signal(signal.SIGTERM)
        assert srv.proc.wait(15) == 0
        c.close()
    with SERVERS[kind](workdir=workdir) as srv:
        c = RawClient(srv.port)
        assert c.call("GET", "k") == b"$4\r\nkept\r\n"
        c.close()


def test_a_failed_final_save_logs_what_redis_logs():
    logs = {}
    for kind in SERVERS:
        with start(kind, scratch_dir(f"shutdown-log-{kind}-")) as srv:
            c = RawClient(srv.port)
            c.call("SET", "k", "v")
            block_the_snapshot(srv)
            srv.proc.send_signal(signal.SIGTERM)
            wait_until(lambda srv=srv: GAVE_UP in messages(srv))
            assert c.call("SHUTDOWN") == b"-ERR Errors trying to SHUTDOWN. Check logs.\r\n"
            assert c.call("PING") == b"+PONG\r\n"
            logs[kind] = shutdown_attempts(srv)
            c.close()
            # Its final save still fails, so a SIGTERM would never end it: the stop at the
            # end of the with-block waited its 10 s for nothing before killing it.
            srv.kill()
    assert logs["rill"] == logs["redis"]
    assert logs["rill"][0] == [
        "Received SIGTERM scheduling shutdown...",
        "User requested shutdown...",
        "Saving the final RDB snapshot before exiting.",
        "Error moving temp DB file temp-PID.rdb on the final destination dump.rdb "
        "(in server root dir DIR): Is a directory",
        "Error trying to save the DB, can't exit.",
        GAVE_UP,
    ]


@pytest.mark.parametrize("kind", ["rill", "redis"])
@pytest.mark.parametrize("how", ["SHUTDOWN FORCE", "SHUTDOWN NOSAVE", "shutdown-on-sigterm force",
                                 "shutdown-on-sigterm nosave"])
def test_force_and_nosave_exit_despite_the_failing_save(kind, how):
    with start(kind, scratch_dir(f"shutdown-force-{kind}-")) as srv:
        c = RawClient(srv.port)
        c.call("SET", "k", "v")
        block_the_snapshot(srv)
        if how.startswith("SHUTDOWN"):
            c.send_raw(how.encode() + b"\r\n")
        else:
            name, value = how.split()
            assert c.call("CONFIG", "SET", name, value) == b"+OK\r\n"
            srv.proc.send_signal(signal.SIGTERM)
        assert srv.proc.wait(15) == 0
        c.close()
        msgs = messages(srv)
    assert GAVE_UP not in msgs
    assert msgs[-1].endswith("is now ready to exit, bye bye...")
    forced = how.lower().endswith("force")
    assert ("Error trying to save the DB. Exit anyway." in msgs) == forced
    assert ("Saving the final RDB snapshot before exiting." in msgs) == forced


@pytest.mark.parametrize("args", [
    ("SHUTDOWN", "SAVE", "NOSAVE"), ("SHUTDOWN", "NOSAVE", "SAVE"), ("SHUTDOWN", "ABORT", "NOW"),
    ("SHUTDOWN", "FORCE", "ABORT"), ("SHUTDOWN", "ABORT"), ("SHUTDOWN", "ABORT", "ABORT"),
    ("SHUTDOWN", "NOW", "BOGUS"),
])
def test_shutdown_argument_errors_match(sbs, args):
    sbs.check(*args)


@pytest.mark.parametrize("kind", ["rill", "redis"])
def test_sigterm_while_the_first_aof_is_written_keeps_serving(kind):
    """Turning the AOF on starts a rewrite that is the AOF's only copy of the data: a
    SIGTERM meanwhile would lose it, so the server refuses to exit; FORCE exits anyway."""
    with start(kind, scratch_dir(f"shutdown-aof-{kind}-"), "--save", "") as srv:
        c = RawClient(srv.port)
        for i in range(20):
            c.call("SET", f"k{i}", "v")
        c.call("CONFIG", "SET", "rdb-key-save-delay", "1000000")  # a second per key: the child lasts
        assert c.call("CONFIG", "SET", "appendonly", "yes") == b"+OK\r\n"
        srv.proc.send_signal(signal.SIGTERM)
        wait_until(lambda: GAVE_UP in messages(srv))
        assert srv.proc.poll() is None
        assert shutdown_attempts(srv)[0][-2:] == ["Writing initial AOF, can't exit.", GAVE_UP]
        assert c.call("GET", "k0") == b"$1\r\nv\r\n"
        c.send_raw(b"SHUTDOWN NOSAVE FORCE\r\n")
        assert srv.proc.wait(15) == 0
        c.close()
    assert "Writing initial AOF. Exit anyway." in messages(srv)


@pytest.mark.parametrize("kind", ["rill", "redis"])
def test_shutdown_abort_cancels_a_signal_the_cron_has_not_acted_on(kind):
    # The signal only asks; the cron starts the shutdown. With the cron paused, SHUTDOWN
    # ABORT finds the request and cancels it, and nothing is left to abort after.
    with start(kind, scratch_dir(f"shutdown-abort-{kind}-")) as srv:
        c = RawClient(srv.port)
        assert c.call("DEBUG", "PAUSE-CRON", "1") == b"+OK\r\n"
        srv.proc.send_signal(signal.SIGTERM)
        wait_until(lambda: "Received SIGTERM scheduling shutdown..." in messages(srv))
        assert c.call("SHUTDOWN", "ABORT") == b"+OK\r\n"
        assert "Shutdown manually aborted." in messages(srv)
        assert c.call("DEBUG", "PAUSE-CRON", "0") == b"+OK\r\n"
        assert c.call("PING") == b"+PONG\r\n"
        assert c.call("SHUTDOWN", "ABORT") == b"-ERR No shutdown in progress.\r\n"
        assert srv.proc.poll() is None
        c.close()


@pytest.mark.parametrize("kind", ["rill", "redis"])
def test_a_second_sigint_during_the_final_save_exits_and_removes_the_temp_rdb(kind):
    with start(kind, scratch_dir(f"shutdown-insist-{kind}-")) as srv:
        c = RawClient(srv.port)
        for i in range(20):
            c.call("SET", str(i), str(i))
        # A second per key: the final save is still writing when the second SIGINT comes.
        assert c.call("CONFIG", "SET", "rdb-key-save-delay", "1000000") == b"+OK\r\n"
        temp = os.path.join(srv.workdir, f"temp-{srv.proc.pid}.rdb")
        srv.proc.send_signal(signal.SIGINT)
        wait_until(lambda: os.path.exists(temp))
        srv.proc.send_signal(signal.SIGINT)
        assert srv.proc.wait(15) == 1
        assert not os.path.exists(temp)
        assert "You insist... exiting now." in messages(srv)
        assert not os.path.exists(os.path.join(srv.workdir, "dump.rdb"))
        c.close()
