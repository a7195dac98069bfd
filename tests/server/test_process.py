"""The process around the server: daemonize and pidfile, supervision (systemd, upstart),
oom-score-adj, tcp-keepalive and tcp-backlog, each checked on a real rill-server."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import pytest
from rill.server.process import OOM_BGCHILD, OOM_MASTER, OOM_REPLICA, OomScoreAdj, set_keepalive

from tests.support import RawClient, free_port, require_tool, scratch_dir, start_rill, wait_until


def _info(c: RawClient, field: str) -> str:
    text = c.call("INFO", "server").decode()
    return text.split(f"\r\n{field}:", 1)[1].split("\r\n", 1)[0]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


# -- tcp-keepalive ------------------------------------------------------------------
@pytest.mark.parametrize("interval, intvl", [(60, 20), (300, 100), (2, 1)])
def test_keepalive_socket_options_are_redis_s(interval, intvl):
    listener = socket.create_server(("127.0.0.1", 0))
    with listener, socket.create_connection(listener.getsockname()) as s:
        set_keepalive(s, interval)
        assert s.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        assert s.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == interval
        assert s.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL) == intvl
        assert s.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT) == 3


def _server_side_timer(server_port: int, client_port: int) -> tuple[int, int]:
    """(timer kind, ticks left) of the server's end of a connection, from /proc/net/tcp:
    kind 2 is the keepalive timer."""
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            local, remote = fields[1], fields[2]
            if int(local.split(":")[1], 16) == server_port and int(remote.split(":")[1], 16) == client_port:
                kind, when = fields[5].split(":")
                return int(kind, 16), int(when, 16)
    raise AssertionError("connection not found")


def test_server_sets_keepalive_on_accepted_clients():
    with start_rill("--tcp-keepalive", "100") as srv:
        c = RawClient(srv.port)
        assert c.call("PING") == b"+PONG\r\n"
        kind, when = _server_side_timer(srv.port, c.sock.getsockname()[1])
        ticks = os.sysconf("SC_CLK_TCK")
        assert kind == 2 and 50 * ticks < when <= 100 * ticks
        c.close()


def test_tcp_keepalive_zero_leaves_it_off():
    with start_rill("--tcp-keepalive", "0") as srv:
        c = RawClient(srv.port)
        assert c.call("PING") == b"+PONG\r\n"
        assert _server_side_timer(srv.port, c.sock.getsockname()[1])[0] == 0
        c.close()


def test_tcp_backlog_is_the_listen_backlog():
    ss = require_tool("ss")  # iproute2's, to read a listening socket's backlog
    with start_rill("--tcp-backlog", "37", "--bind", "127.0.0.1") as srv:
        out = subprocess.run([ss, "-ltnH", f"sport = :{srv.port}"], capture_output=True, text=True).stdout
        assert out.split()[2] == "37", out  # Send-Q of a listener is its backlog


# -- pidfile and daemonize ----------------------------------------------------------
def test_pidfile_is_written_without_daemonize_and_removed_at_exit():
    pidfile = os.path.join(scratch_dir("rill-pid-"), "rill.pid")
    with start_rill("--pidfile", pidfile) as srv:
        assert open(pidfile).read() == f"{srv.proc.pid}\n"
        c = RawClient(srv.port)
        c.send_raw(b"SHUTDOWN NOSAVE\r\n")
        assert srv.proc.wait(15) == 0
    assert not os.path.exists(pidfile)


def test_daemonize_goes_to_the_background_with_a_pidfile():
    workdir = scratch_dir("rill-daemon-")
    pidfile = os.path.join(workdir, "rill.pid")
    port = free_port()
    argv = [sys.executable, "-m", "rill.server.main", "--port", str(port), "--save", "",
            "--daemonize", "yes", "--pidfile", pidfile, "--logfile", os.path.join(workdir, "log")]
    launcher = subprocess.run(argv, cwd=workdir, capture_output=True, timeout=60)
    assert launcher.returncode == 0 and launcher.stdout == b""  # the parent just exits
    pid = int(wait_until(lambda: os.path.exists(pidfile) and open(pidfile).read().strip()))
    try:
        c = wait_until(lambda: _connect(port))
        assert int(_info(c, "process_id")) == pid
        assert os.getsid(pid) == pid  # a session of its own, detached from ours
        assert os.readlink(f"/proc/{pid}/fd/0") == "/dev/null"
        assert "Ready to accept connections" in open(os.path.join(workdir, "log")).read()
        c.send_raw(b"SHUTDOWN NOSAVE\r\n")
        wait_until(lambda: not _alive(pid))
        assert not os.path.exists(pidfile)
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def _connect(port: int) -> RawClient | None:
    try:
        return RawClient(port)
    except OSError:
        return None


# -- supervision ----------------------------------------------------------------
@pytest.fixture
def notify_socket(monkeypatch):
    """A systemd-style notification socket: a unix datagram socket rill is told of."""
    path = os.path.join(scratch_dir("rill-notify-"), "notify")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(20)
    monkeypatch.setenv("NOTIFY_SOCKET", path)
    monkeypatch.delenv("UPSTART_JOB", raising=False)
    yield sock
    sock.close()


@pytest.mark.parametrize("setting", ["systemd", "auto"])
def test_systemd_is_told_loading_ready_and_stopping(notify_socket, setting):
    with start_rill("--supervised", setting, "--daemonize", "yes") as srv:
        assert notify_socket.recv(4096) == b"STATUS=Redis is loading...\n"
        assert notify_socket.recv(4096) == b"STATUS=Ready to accept connections\n"
        assert notify_socket.recv(4096) == b"READY=1\n"
        # Supervised, daemonize is ignored: the process systemd started is the server.
        assert srv.proc.poll() is None
        c = RawClient(srv.port)
        assert _info(c, "process_supervised") == "systemd"
        assert int(_info(c, "process_id")) == srv.proc.pid
        c.send_raw(b"SHUTDOWN NOSAVE\r\n")
        assert notify_socket.recv(4096) == b"STOPPING=1\n"
        assert srv.proc.wait(15) == 0


def test_systemd_in_the_abstract_namespace(monkeypatch):
    name = f"rill-test-{os.getpid()}-{free_port()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        sock.settimeout(20)
        monkeypatch.setenv("NOTIFY_SOCKET", "@" + name)
        with start_rill("--supervised", "systemd"):
            got = [sock.recv(4096) for _ in range(3)]
    assert got[-1] == b"READY=1\n"


def test_systemd_without_notify_socket_is_not_supervised(monkeypatch):
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    with start_rill("--supervised", "systemd") as srv:
        c = RawClient(srv.port)
        assert _info(c, "process_supervised") == "no"
        assert "systemd supervision error: NOTIFY_SOCKET not found!" in srv.log()
        c.close()


def test_auto_without_a_supervisor_is_not_supervised(monkeypatch):
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    monkeypatch.delenv("UPSTART_JOB", raising=False)
    with start_rill("--supervised", "auto") as srv:
        c = RawClient(srv.port)
        assert _info(c, "process_supervised") == "no"
        c.close()


def test_upstart_stops_itself_when_ready(monkeypatch):
    monkeypatch.setenv("UPSTART_JOB", "rill-test")
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    workdir = scratch_dir("rill-upstart-")
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "rill.server.main", "--port", str(port), "--save", "",
                             "--supervised", "upstart"], cwd=workdir, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        # Upstart waits for the job to stop itself (SIGSTOP), then continues it.
        wait_until(lambda: open(f"/proc/{proc.pid}/stat").read().rsplit(")", 1)[1].split()[0] == "T")
        os.kill(proc.pid, signal.SIGCONT)
        c = wait_until(lambda: _connect(port))
        assert _info(c, "process_supervised") == "upstart"
        c.send_raw(b"SHUTDOWN NOSAVE\r\n")
        assert proc.wait(15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# -- oom-score-adj ----------------------------------------------------------------
def test_oom_score_adj_modes(tmp_path):
    path = tmp_path / "oom_score_adj"
    path.write_text("100\n")
    oom = OomScoreAdj(str(path))
    oom.apply("relative", "0 200 800", OOM_REPLICA)
    assert path.read_text() == "300\n"
    oom.apply("yes", "0 200 800", OOM_MASTER)  # yes is relative
    assert path.read_text() == "100\n"
    oom.apply("relative", "0 200 950", OOM_BGCHILD)
    assert path.read_text() == "1000\n"  # clamped
    oom.apply("absolute", "-5 200 800", OOM_MASTER)
    assert path.read_text() == "-5\n"
    oom.apply("no", "-5 200 800", OOM_MASTER)
    assert path.read_text() == "100\n"  # back to what it was before rill
    oom.apply("no", "-5 200 800", OOM_MASTER)
    assert path.read_text() == "100\n"


def _oom(pid: int) -> int:
    with open(f"/proc/{pid}/oom_score_adj") as f:
        return int(f.read())


def test_oom_score_adj_on_a_server():
    base = _oom(os.getpid())  # rill inherits ours
    with start_rill("--oom-score-adj-values", "10 20 30", "--oom-score-adj", "relative") as srv:
        pid = srv.proc.pid
        assert _oom(pid) == base + 10
        c = RawClient(srv.port)
        assert c.call("CONFIG", "SET", "oom-score-adj", "absolute") == b"+OK\r\n"
        assert _oom(pid) == 10
        assert c.call("CONFIG", "SET", "oom-score-adj-values", "40 50 60") == b"+OK\r\n"
        assert _oom(pid) == 40
        # The background save's child takes the third value.
        for i in range(20):
            c.call("SET", f"k{i}", "v")
        assert c.call("CONFIG", "SET", "rdb-key-save-delay", "200000") == b"+OK\r\n"
        assert c.call("BGSAVE") == b"+Background saving started\r\n"
        child = int(wait_until(lambda: open(f"/proc/{pid}/task/{pid}/children").read().split() or None)[0])
        wait_until(lambda: _oom(child) == 60)
        assert c.call("CONFIG", "SET", "rdb-key-save-delay", "0") == b"+OK\r\n"
        os.kill(child, signal.SIGKILL)  # no need to wait the save out
        assert c.call("CONFIG", "SET", "oom-score-adj", "no") == b"+OK\r\n"
        assert _oom(pid) == base
        c.close()


def test_oom_score_adj_follows_the_role():
    # Redis sets the new role's score inside REPLICAOF itself (its Tcl unit reads
    # /proc right after the reply), not at a later cron tick.
    base = _oom(os.getpid())
    with start_rill("--oom-score-adj-values", "10 20 30", "--oom-score-adj", "yes") as srv:
        c = RawClient(srv.port)
        assert c.call("REPLICAOF", "127.0.0.1", str(free_port())) == b"+OK\r\n"
        assert _oom(srv.proc.pid) == base + 20
        assert c.call("REPLICAOF", "NO", "ONE") == b"+OK\r\n"
        assert _oom(srv.proc.pid) == base + 10
        c.close()


# -- disable-thp -------------------------------------------------------------------
def _thp_probe(setting: str) -> str:
    """THP_enabled of a fresh interpreter after disable_thp() read ``setting``."""
    path = os.path.join(scratch_dir("rill-thp-"), "enabled")
    with open(path, "w") as f:
        f.write(setting + "\n")
    code = ("from rill.server.process import disable_thp\n"
            f"print(disable_thp({path!r}))\n"
            "print([l for l in open('/proc/self/status') if l.startswith('THP_enabled')][0].split()[1])")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout


def test_disable_thp_opts_out_when_the_kernel_forces_huge_pages():
    assert _thp_probe("[always] madvise never") == "True\n0\n"
    assert _thp_probe("always [madvise] never") == "None\n1\n"


# -- syslog ----------------------------------------------------------------------
def test_syslog_gets_each_message_with_ident_pid_facility_and_level(tmp_path):
    from rill.server.config import Config
    from rill.server.main import log, notice, setup_logging

    path = str(tmp_path / "log.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as syslogd:
        syslogd.bind(path)
        syslogd.settimeout(10)
        config = Config()
        for name, value in (("syslog-enabled", "yes"), ("syslog-ident", "rill-test"),
                            ("syslog-facility", "local3"), ("logfile", str(tmp_path / "file.log"))):
            config.set(name, value, startup=True)
        saved = list(log.handlers), log.level
        try:
            setup_logging(config, syslog_address=path)
            notice("Ready to accept connections")
            log.warning("Received SIGTERM scheduling shutdown...")
            log.debug("not at loglevel notice")
            got = [syslogd.recv(4096), syslogd.recv(4096)]
        finally:
            for h in log.handlers:
                h.close()
            log.handlers[:], _ = saved
            log.setLevel(saved[1])
    pid = os.getpid()
    # <priority> is facility * 8 + severity: local3 is 19, notice 5, warning 4.
    assert got == [f"<{19 * 8 + 5}>rill-test[{pid}]: Ready to accept connections\0".encode(),
                   f"<{19 * 8 + 4}>rill-test[{pid}]: Received SIGTERM scheduling shutdown...\0".encode()]
    assert "Ready to accept connections" in (tmp_path / "file.log").read_text()


def test_syslog_that_is_not_there_loses_messages_quietly(tmp_path):
    with start_rill("--syslog-enabled", "yes", "--logfile", str(tmp_path / "file.log")) as srv:
        c = RawClient(srv.port)
        assert c.call("PING") == b"+PONG\r\n"
        c.close()
    assert "Traceback" not in (tmp_path / "file.log").read_text()


# -- server_cpulist -----------------------------------------------------------------
def test_cpulist_syntax_is_redis_s():
    from rill.server.process import parse_cpulist

    assert parse_cpulist("0-7:2") == {0, 2, 4, 6}
    assert parse_cpulist("1,3-4") == {1, 3, 4}
    assert parse_cpulist("5") == {5}
    for bad in ("", "abc", "3-1", "0-4:0", "1,", "-1", "0-"):
        assert parse_cpulist(bad) is None, bad


def test_server_cpulist_pins_the_server():
    cpu = min(os.sched_getaffinity(0))
    with start_rill("--server_cpulist", str(cpu)) as srv:
        assert os.sched_getaffinity(srv.proc.pid) == {cpu}


@pytest.mark.parametrize("show", ["yes", "no"])
def test_the_logo_or_its_line_says_mode_port_and_pid(show):
    """always-show-logo yes: the logo, written raw (no log prefix) before "Server
    initialized", with the port and a " PID: <pid>" Redis's test suite waits for; no (and
    a log that is not a terminal): Redis's one line instead."""
    workdir = scratch_dir("rill-logo-")
    log = os.path.join(workdir, "log")
    port = free_port()
    argv = [sys.executable, "-m", "rill.server.main", "--port", str(port), "--save", "",
            "--always-show-logo", show, "--logfile", log]
    proc = subprocess.Popen(argv, cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: os.path.exists(log) and "Ready to accept connections" in open(log).read())
        text = open(log).read()
    finally:
        proc.terminate()
        proc.wait(30)
    lines = text.splitlines()
    initialized = next(i for i, line in enumerate(lines) if line.endswith("* Server initialized"))
    if show == "yes":
        assert "Running mode=" not in text
        before = "\n".join(lines[:initialized])
        assert f" PID: {proc.pid}\n" in before + "\n" and f" Port: {port}\n" in before + "\n"
        assert "Running in standalone mode" in before
        pid_line = next(line for line in lines if " PID: " in line)
        assert not pid_line.startswith(f"{proc.pid}:M")  # raw, as Redis writes its logo
    else:
        assert " PID: " not in text
        assert lines[initialized - 1].endswith(f"* Running mode=standalone, port={port}.")
