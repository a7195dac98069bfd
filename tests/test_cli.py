"""The ``rill-server`` command line and the real ``redis-cli`` binary against rill.

rill-server must take redis-server's command line (a config file, then ``--name value``
overrides), log like Redis, and stop cleanly on SIGTERM/SIGINT; redis-cli's one-shot,
RESP3, pipe and interactive modes must behave as they do against redis-server.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from tests.support import (
    RawClient,
    ServerProcess,
    free_port,
    require_tool,
    scratch_dir,
    start_redis,
)

RILL_SERVER = Path(sys.executable).with_name("rill-server")
# Redis's log line: "pid:role dd Mon yyyy hh:mm:ss.mmm <level char> message".
# Redis writes lines from its signal handler as "pid:signal-handler (unixtime) message".
LOG_LINE = re.compile(r"^(\d+):(?:[MCSX] \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2}\.\d{3} [.\-*#]"
                      r"|signal-handler \(\d+\)) (.*)$")


def redis_cli(port: int, *args: str, stdin: bytes | None = None) -> tuple[int, str]:
    """Run the real redis-cli one-shot; (exit code, stdout+stderr)."""
    binary = require_tool("redis-cli")
    proc = subprocess.run([binary, "-p", str(port), *args], input=stdin or b"", capture_output=True,
                          timeout=20)
    return proc.returncode, (proc.stdout + proc.stderr).decode(errors="replace")


def rill_with(argv_after_script: list[str], port: int, workdir: str | None = None) -> ServerProcess:
    """Start the console script with an argv of our choosing (config file first, if any)."""
    workdir = workdir or scratch_dir("rill-cli-")
    return ServerProcess([str(RILL_SERVER), *argv_after_script], port, workdir).start()


def config_get(port: int, name: str) -> bytes:
    c = RawClient(port)
    try:
        return c.call("CONFIG", "GET", name)
    finally:
        c.close()


# -- the console script ------------------------------------------------------------------


def test_console_script_is_installed_next_to_the_interpreter():
    assert RILL_SERVER.is_file() and os.access(RILL_SERVER, os.X_OK)
    out = subprocess.run([str(RILL_SERVER), "--version"], capture_output=True, text=True, timeout=20)
    assert out.returncode == 0
    assert re.fullmatch(r"rill server v=\S+ redis_version=7\.0\.15 bits=64\n", out.stdout)


def test_help_shows_redis_server_usage():
    out = subprocess.run([str(RILL_SERVER), "--help"], capture_output=True, text=True, timeout=20)
    assert out.returncode == 0
    assert "Usage: rill-server [/path/to/redis.conf] [options]" in out.stdout


def test_config_file_then_command_line_overrides(tmp_path):
    file_port, port = free_port(), free_port()
    conf = tmp_path / "redis.conf"
    conf.write_text(
        "# a redis.conf as redis-server reads it\n"
        f"port {file_port}\n"
        "maxmemory 10mb\n"
        "hz 25\n"
        'save 900 1 300 10\n'
        "databases 4\n"
    )
    with rill_with([str(conf), "--port", str(port), "--hz", "50", "--save", ""], port, str(tmp_path)) as srv:
        # Overrides win over the file; what only the file sets stays.
        assert config_get(port, "port") == b"*2\r\n$4\r\nport\r\n$%d\r\n%d\r\n" % (len(str(port)), port)
        assert config_get(port, "hz") == b"*2\r\n$2\r\nhz\r\n$2\r\n50\r\n"
        assert config_get(port, "save") == b"*2\r\n$4\r\nsave\r\n$0\r\n\r\n"
        assert config_get(port, "maxmemory") == b"*2\r\n$9\r\nmaxmemory\r\n$8\r\n10485760\r\n"
        assert config_get(port, "databases") == b"*2\r\n$9\r\ndatabases\r\n$1\r\n4\r\n"
        with pytest.raises(OSError):  # the file's port was overridden: nothing listens there
            socket.create_connection(("127.0.0.1", file_port), timeout=1).close()
        assert "Configuration loaded" in srv.log()


def test_same_config_and_overrides_as_redis_server(tmp_path):
    """The same file and overrides give the same CONFIG GET replies on both servers."""
    redis_server = require_tool("redis-server")
    conf = tmp_path / "redis.conf"
    conf.write_text("maxmemory 1gb\nmaxmemory-policy allkeys-lru\nnotify-keyspace-events Ex\n"
                    "save 3600 1\ntimeout 30\nappendonly no\n")
    overrides = ["--save", "", "--timeout", "7", "--list-max-ziplist-size", "-3",
                 "--client-output-buffer-limit", "pubsub 64mb 16mb 90"]
    names = ["maxmemory", "maxmemory-policy", "notify-keyspace-events", "save", "timeout",
             "list-max-listpack-size", "list-max-ziplist-size", "client-output-buffer-limit"]
    rport, oport = free_port(), free_port()
    rdir, odir = tmp_path / "rill", tmp_path / "redis"
    rdir.mkdir()
    odir.mkdir()
    with rill_with([str(conf), "--port", str(rport), *overrides], rport, str(rdir)), \
            ServerProcess([redis_server, str(conf), "--port", str(oport), *overrides], oport,
                          str(odir)).start():
        for name in names:
            assert config_get(rport, name) == config_get(oport, name), name


def test_bad_config_is_fatal_like_redis_server(tmp_path):
    conf = tmp_path / "redis.conf"
    conf.write_text("port 7000\nno-such-directive yes\n")
    out = subprocess.run([str(RILL_SERVER), str(conf)], capture_output=True, text=True, timeout=20)
    assert out.returncode == 1
    assert "*** FATAL CONFIG FILE ERROR" in out.stderr
    assert "no-such-directive" in out.stderr
    out = subprocess.run([str(RILL_SERVER), "--port", "notaport"], capture_output=True, text=True, timeout=20)
    assert out.returncode == 1
    assert "*** FATAL CONFIG FILE ERROR" in out.stderr


def test_missing_config_file_is_fatal(tmp_path):
    out = subprocess.run([str(RILL_SERVER), str(tmp_path / "absent.conf")], capture_output=True, text=True,
                         timeout=20)
    assert out.returncode == 1
    assert "absent.conf" in out.stderr


# -- log lines and shutdown --------------------------------------------------------------


def _messages(log: str, pid: int) -> list[str]:
    """Every log line's message, checking each line has Redis's format and the server's pid."""
    out = []
    for line in log.splitlines():
        m = LOG_LINE.match(line)
        assert m, f"not a Redis-style log line: {line!r}"
        assert int(m.group(1)) == pid
        out.append(m.group(2))
    return out


def test_log_line_format_is_redis_servers_own():
    """The pattern the rill checks use really is redis-server's log format."""
    require_tool("redis-server")
    srv = start_redis()
    pid = srv.proc.pid
    srv.stop()
    messages = _messages(srv.log(), pid)
    assert any(m.startswith("Ready to accept connections") for m in messages)
    assert "Received SIGTERM scheduling shutdown..." in messages


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_start_up_log_and_clean_shutdown_on_signal(sig):
    port = free_port()
    srv = rill_with(["--port", str(port), "--save", ""], port)
    pid = srv.proc.pid
    c = RawClient(port)
    assert c.call("PING") == b"+PONG\r\n"
    srv.proc.send_signal(sig)
    assert srv.proc.wait(15) == 0
    assert c.closed_by_peer()
    c.close()
    messages = _messages(srv.log(), pid)
    text = "\n".join(messages)
    assert "redis_version=7.0.15" in text and f"pid={pid}" in text
    assert any(m.startswith("Ready to accept connections") for m in messages)
    assert f"Received {sig.name} scheduling shutdown..." in messages
    assert messages[-1].endswith("is now ready to exit, bye bye...")
    # The port is free again at once.
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))


def test_logfile_directive_writes_the_log_there(tmp_path):
    port = free_port()
    logfile = tmp_path / "rill.log"
    with rill_with(["--port", str(port), "--save", "", "--logfile", str(logfile)], port, str(tmp_path)) as srv:
        pid = srv.proc.pid
    messages = _messages(logfile.read_text(), pid)
    assert any(m.startswith("Ready to accept connections") for m in messages)


def test_shutdown_command_from_redis_cli_stops_the_server():
    port = free_port()
    srv = rill_with(["--port", str(port), "--save", ""], port)
    code, out = redis_cli(port, "SHUTDOWN", "NOSAVE")
    assert (code, out) == (0, "")
    assert srv.proc.wait(15) == 0


# -- the real redis-cli, side by side with redis-server ----------------------------------

def _normalise(args: tuple[str, ...], out: str) -> str:
    """Connection ids in HELLO's reply differ between servers; nothing else may."""
    if "HELLO" in args:
        out = re.sub(r"(?m)^id( |\n)\d+$", r"id\1<id>", out)
        out = re.sub(r'(?m)^(\d+# "id" => \(integer\) )\d+$', r"\1<id>", out)
        out = re.sub(r'"id":\d+', '"id":<id>', out)
    return out


ONE_SHOT = [
    ("PING",),
    ("PING", "hello world"),
    ("ECHO", "a\nb"),
    ("--no-raw", "ECHO", "a\nb"),
    ("FOO", "bar"),
    ("--no-raw", "FOO", "bar"),
    ("PING", "a", "b"),
    ("SELECT", "100"),
    ("-n", "3", "PING"),
    ("-r", "3", "PING"),
    ("-3", "HELLO"),
    ("-3", "--no-raw", "HELLO"),
    ("-3", "--json", "HELLO"),
    ("-3", "PING"),
    ("-2", "HELLO"),
    ("help", "set"),
    ("help", "ping"),
    ("help", "client", "setname"),
    ("HELLO", "4"),
]


@pytest.mark.parametrize("args", ONE_SHOT, ids=[" ".join(a) for a in ONE_SHOT])
def test_redis_cli_one_shot_like_redis_server(rill_server, oracle_server, args):
    mine = redis_cli(rill_server.port, *args)
    theirs = redis_cli(oracle_server.port, *args)
    assert (mine[0], _normalise(args, mine[1])) == (theirs[0], _normalise(args, theirs[1]))


def test_redis_cli_ping_and_resp3_hello(rill_server):
    assert redis_cli(rill_server.port, "PING") == (0, "PONG\n")
    code, out = redis_cli(rill_server.port, "-3", "HELLO")
    assert code == 0
    # Without a tty redis-cli prints a RESP3 map as "key value" lines.
    lines = out.splitlines()
    assert "proto 3" in lines and "version 7.0.15" in lines and "server redis" in lines


def test_redis_cli_stdin_argument(rill_server, oracle_server):
    for port in (rill_server.port, oracle_server.port):
        assert redis_cli(port, "-x", "ECHO", stdin=b"from stdin") == (0, "from stdin\n")


def test_redis_cli_pipe_mode(rill_server, oracle_server):
    """--pipe (mass insertion) writes raw RESP and ends with an ECHO of a random marker."""
    payload = b"".join(b"*2\r\n$4\r\nECHO\r\n$%d\r\n%d\r\n" % (len(str(i)), i) for i in range(2000))
    payload += b"PING\r\n*1\r\n$3\r\nFOO\r\n"
    mine = redis_cli(rill_server.port, "--pipe", stdin=payload)
    theirs = redis_cli(oracle_server.port, "--pipe", stdin=payload)
    assert mine == theirs
    assert "errors: 1, replies: 2002" in mine[1]


def _interactive_hint(port: int, typed: bytes, until: bytes) -> bytes:
    """Type into an interactive redis-cli on a pty; the screen bytes once ``until`` shows."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 250, 0, 0))
    proc = subprocess.Popen([require_tool("redis-cli"), "-p", str(port)], stdin=slave, stdout=slave,
                            stderr=slave, env={**os.environ, "TERM": "xterm"}, close_fds=True)
    os.close(slave)

    def read_until(needle: bytes, timeout: float = 10.0) -> bytes:
        """Read until ``needle`` has shown and the screen has then been quiet for 0.3s."""
        buf = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.3)
            if ready:
                try:
                    buf += os.read(master, 4096)
                except OSError:
                    break
            elif needle in buf:
                break
        return buf

    try:
        assert read_until(b"> ").endswith(b"> ")
        os.write(master, typed)
        screen = read_until(until)
        os.write(master, b"\x15quit\r")
        proc.wait(10)
        return screen
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)


def test_interactive_redis_cli_shows_hints_from_rills_command_docs(rill_server, oracle_server):
    require_tool("redis-cli")
    c = RawClient(rill_server.port)
    try:
        def docs_calls() -> int:
            m = re.search(rb"cmdstat_command\|docs:calls=(\d+)", c.call("INFO", "commandstats"))
            return int(m.group(1)) if m else 0

        before = docs_calls()
        for typed, hint in [(b"SET ", b"key value [NX|XX] [GET]"), (b"hello ", b"[protover [AUTH username")]:
            mine = _interactive_hint(rill_server.port, typed, hint)
            theirs = _interactive_hint(oracle_server.port, typed, hint)
            assert hint in mine
            # Every hint shown while typing (grey text) is the one redis-server's docs give.
            grey = re.compile(rb"\x1b\[0;90;49m(.*?)\x1b\[0m")
            assert grey.findall(mine) == grey.findall(theirs)
        # The hints came from rill's COMMAND DOCS, not redis-cli's built-in table.
        assert docs_calls() >= before + 2
    finally:
        c.close()
