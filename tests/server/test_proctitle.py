"""The process title (set-proc-title, proc-title-template): the template language and
its validation, then rill's /proc/PID/cmdline side by side with redis-server's."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from rill.server.config import Config, ConfigError
from rill.server.proctitle import INVALID_TEMPLATE, expand, valid

from tests.support import RawClient, require_tool, scratch_dir, start_redis, start_rill, wait_until

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/PID/cmdline is Linux's")

_VARS = {"a": "1", "b": "two"}


@pytest.mark.parametrize("template, expected", [
    ("{a} {b}", "1 two"),
    ("x{a}y", "x1y"),
    ("{{a}", "{a}"),  # a doubled brace is a brace, and what follows is text
    ("}{a}}", "}1}"),  # a closing brace alone is text
    ("  {b}  ", "two"),  # spaces trimmed at both ends, not inside
    ("{a}  {b}", "1  two"),
    ("", ""),
    ("{c}", None),  # unknown variable
    ("{a", None),  # not closed
    ("x{", None),  # ends inside a variable
])
def test_expand_follows_redis_template_rules(template, expected):
    assert expand(template, _VARS.get) == expected


def test_validation_is_expansion_to_something_with_an_empty_title():
    values = Config().values
    assert valid("{title} {listen-addr}", values, None)
    assert valid("{port}", values, None)
    assert not valid("{title}", values, None)  # empty once {title} is ""
    assert not valid("{server-mode}", values, None)
    assert not valid("{unixsocket}", values, None)  # no unix socket configured
    assert not valid("   ", values, None)
    assert not valid("{nope}", values, None)


def test_config_refuses_an_invalid_template_with_redis_reason():
    c = Config()
    with pytest.raises(ConfigError, match=INVALID_TEMPLATE):
        c.set("proc-title-template", "{invalid-var}")
    c.set("proc-title-template", "{title} {port}")
    assert c["proc-title-template"] == "{title} {port}"


# -- side by side with redis-server ----------------------------------------------------------
def _cmdline(pid: int) -> bytes:
    """The title: up to the first NUL. What follows it depends on each server's own
    original command line (the kernel shows the whole argv area, NUL padding and the
    '.' Redis's setproctitle leaves at argv[0]'s old end, while the title fits in it),
    and so does a space after it (the mark of a title ending at argv[0]'s old end: the
    title itself is trimmed of spaces)."""
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().split(b"\0", 1)[0].rstrip(b" ")


def _pid(c: RawClient) -> int:
    text = c.call("INFO", "server").decode()
    return int(text.split("\r\nprocess_id:", 1)[1].split("\r\n", 1)[0])


@pytest.fixture
def pair():
    """(redis, rill): each a (server, client, pid), listening on 127.0.0.1 and a unix socket."""
    require_tool("redis-server")
    servers = []
    try:
        for start in (start_redis, start_rill):
            sock = os.path.join(scratch_dir("proctitle-"), "s.sock")
            srv = start("--bind", "127.0.0.1", "--unixsocket", sock)
            servers.append(srv)
        out = []
        for srv in servers:
            c = RawClient(srv.port)
            out.append((srv, c, _pid(c)))
        yield out
    finally:
        for srv in servers:
            srv.stop()


def _module_file(name: str) -> str:
    import importlib.util

    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.origin is not None
    return spec.origin


def _own(title: bytes, srv, argv0: str) -> bytes:
    """A title with this server's own argv[0], port and socket path replaced by markers."""
    sock = srv.argv[srv.argv.index("--unixsocket") + 1]
    if argv0:
        title = title.replace(argv0.encode(), b"ARGV0")
    return (title.replace(sock.encode(), b"SOCK")
            .replace(str(srv.port).encode(), b"PORT"))


def test_default_title_is_argv0_and_listen_address(pair):
    for srv, _c, pid in pair:
        # python -m runs the module's file: its path is rill's argv[0]
        argv0 = srv.argv[0] if srv.argv[1] != "-m" else _module_file("rill.server.main")
        assert _own(_cmdline(pid), srv, argv0) == b"ARGV0 127.0.0.1:PORT"


@pytest.mark.parametrize("template", [
    "T {listen-addr} {port} {tls-port} {unixsocket} {server-mode} {config-file} }x{{y",
    "   {port}   ",
    "{port}{port}",
])
def test_config_set_template_is_shown_as_redis_shows_it(pair, template):
    titles = []
    for srv, c, pid in pair:
        assert c.call("CONFIG", "SET", "proc-title-template", template) == b"+OK\r\n"
        titles.append(_own(_cmdline(pid), srv, ""))
    assert titles[0] == titles[1]


@pytest.mark.parametrize("template", ["{invalid-var}", "{title}", "", "{server-mode}", "{port", "x{"])
def test_config_set_refuses_what_redis_refuses(pair, template):
    replies = [c.call("CONFIG", "SET", "proc-title-template", template) for _srv, c, _pid in pair]
    assert replies[1] == replies[0]
    assert replies[0].startswith(b"-ERR CONFIG SET failed")


def test_title_follows_config_set_port_and_bind(pair):
    titles = []
    for srv, c, pid in pair:
        assert c.call("CONFIG", "SET", "proc-title-template", "{listen-addr} {port}") == b"+OK\r\n"
        assert c.call("CONFIG", "SET", "bind", "127.0.0.1 -::1") == b"+OK\r\n"
        first = _own(_cmdline(pid), srv, "")
        assert c.call("CONFIG", "SET", "port", "0") == b"+OK\r\n"  # this connection stays
        titles.append((first, _own(_cmdline(pid), srv, "")))
    assert titles[0] == titles[1]


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(p) for p in f.read().split()]


def test_background_save_child_names_itself_as_redis_does(pair):
    titles = []
    for srv, c, pid in pair:
        assert c.call("DEBUG", "POPULATE", "20") == b"+OK\r\n"
        assert c.call("CONFIG", "SET", "rdb-key-save-delay", "1000000") == b"+OK\r\n"  # a child that lingers
        assert c.call("BGSAVE") == b"+Background saving started\r\n"
        child = wait_until(lambda: _children(pid))[0]  # noqa: B023
        # the child renames itself soon after the fork: until then it shows its parent's title
        titles.append(_own(wait_until(lambda: _cmdline(child).startswith(b"redis-") and _cmdline(child)),  # noqa: B023
                           srv, ""))
        c.call("CONFIG", "SET", "rdb-key-save-delay", "0")
        os.kill(child, 9)
    assert titles[0] == titles[1] == b"redis-rdb-bgsave 127.0.0.1:PORT"


def test_set_proc_title_no_leaves_the_command_line_alone():
    with start_rill("--set-proc-title", "no") as srv:
        c = RawClient(srv.port)
        with open(f"/proc/{_pid(c)}/cmdline", "rb") as f:
            before = f.read()
        assert before == b"".join(a.encode() + b"\0" for a in srv.argv)
        assert c.call("CONFIG", "SET", "proc-title-template", "{port}") == b"+OK\r\n"
        with open(f"/proc/{_pid(c)}/cmdline", "rb") as f:
            assert f.read() == before


def test_startup_refuses_an_invalid_template_as_redis_does():
    redis = require_tool("redis-server")
    errors = []
    for argv in ([redis], [sys.executable, "-m", "rill.server.main"]):
        workdir = scratch_dir("proctitle-")
        conf = os.path.join(workdir, "t.conf")
        with open(conf, "w") as f:
            f.write('proc-title-template "{title} {nope}"\n')
        done = subprocess.run([*argv, conf], cwd=workdir, capture_output=True, text=True, timeout=60)
        assert done.returncode == 1
        errors.append((done.stdout + done.stderr).split("***\n", 1)[1])
    assert errors[1] == errors[0]


def test_command_line_marks_argv0_end_as_redis_setproctitle():
    """Written into a buffer standing for the argv area: argv[0] is 5 bytes, the area 12."""
    import ctypes

    from rill.server.proctitle import CommandLine

    buf = ctypes.create_string_buffer(b"argv0\0-x\0yz\0", 12)
    line = CommandLine.__new__(CommandLine)
    line.start, line.nul, line.end, line.cleared = ctypes.addressof(buf), ctypes.addressof(buf) + 5, \
        ctypes.addressof(buf) + 12, False
    line.write("ab")  # shorter than argv[0]: a '.' where argv[0] ended
    assert buf.raw == b"ab\0\0\0.\0\0\0\0\0\0"
    line.write("abcde")  # ends where argv[0] did: a space there
    assert buf.raw == b"abcde \0\0\0\0\0\0"
    line.write("a title longer than the area")  # cut, and always NUL-terminated
    assert buf.raw == b"a title lon\0"
