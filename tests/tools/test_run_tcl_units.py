"""tools/run_tcl_units.py: reading runtest's output into the comparison table, and its TLS mode."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_PATH = Path(__file__).resolve().parents[2] / "tools" / "run_tcl_units.py"
_spec = importlib.util.spec_from_file_location("run_tcl_units", _PATH)
tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tool)

REDIS_LOG = (
    "[\x1b[0;32;49mok\x1b[0m]: SAVE works (11 ms)\n"
    "[\x1b[0;32;49mok\x1b[0m]: EXPIRES after a reload (78 ms)\n"
    "[\x1b[0;32;49mok\x1b[0m]: Same test, two modes (1 ms)\n"
    "[\x1b[0;32;49mok\x1b[0m]: Same test, two modes (1 ms)\n"
    "[\x1b[0;31;49merr\x1b[0m]: Broken in Redis too in tests/unit/x.tcl\n"
    "[\x1b[0;32;49mok\x1b[0m]: Only with jemalloc (5 ms)\n"
    "\nEXIT 0\n"
)
RILL_LOG = (
    "[\x1b[0;32;49mok\x1b[0m]: SAVE works (11 ms)\n"
    "[\x1b[0;31;49merr\x1b[0m]: EXPIRES after a reload in tests/unit/other.tcl\n"
    "Expected '1 1' to equal or match '1 0'\n"
    "[\x1b[0;32;49mok\x1b[0m]: Same test, two modes (1 ms)\n"
    "[\x1b[0;31;49merr\x1b[0m]: Same test, two modes in tests/unit/other.tcl\n"
    "[\x1b[0;31;49merr\x1b[0m]: Broken in Redis too in tests/unit/x.tcl\n"
    "\nEXIT 1\n"
)


def test_parse_and_row(tmp_path):
    (tmp_path / "redis.log").write_text(REDIS_LOG)
    (tmp_path / "rill.log").write_text(RILL_LOG)
    redis = tool.parse(tmp_path / "redis.log")
    rill = tool.parse(tmp_path / "rill.log")
    assert redis == (["SAVE works", "EXPIRES after a reload", "Same test, two modes", "Same test, two modes",
                      "Only with jemalloc"], ["Broken in Redis too"], "0")
    assert rill[2] == "1" and len(rill[0]) == 2 and len(rill[1]) == 3
    # a test Redis fails too is not rill's; one that fails in one of its modes is; one
    # that never ran on rill (guarded by what the server reports) is apart
    assert tool.row("unit/other", redis, rill) == (
        "| unit/other | 5/1 | 2/3 (exit 1) | EXPIRES after a reload; Same test, two modes | Only with jemalloc |")


def test_default_units_skip_the_list_helper(tmp_path):
    for rel in ("unit/other.tcl", "unit/type/list.tcl", "unit/type/list-common.tcl",
                "unit/cluster/x.tcl", "integration/replication.tcl"):
        p = tmp_path / "tests" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("")
    assert tool.default_units(tmp_path) == ["unit/other", "unit/type/list"]


def test_tls_mode_serves_a_tls_port_with_the_suites_settings(tmp_path):
    """--tls: the server arguments the suite gives its own servers in TLS mode (bar
    tls-cluster, which rill refuses), and a context that PINGs over TLS; a rill server
    started with them answers it on the TLS port alone."""
    import subprocess
    import sys

    from tests.support import free_port, require_tool

    require_tool("openssl")
    certs = tmp_path / "tests" / "tls"
    certs.mkdir(parents=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run = lambda *a: subprocess.run(["openssl", *a], cwd=certs, check=True, capture_output=True)  # noqa: E731
    run("req", "-x509", "-new", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-subj", "/CN=ca")
    for name in ("server", "client"):
        run("req", "-new", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}")
        run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", f"{name}.crt")
    run("dhparam", "-dsaparam", "-out", "redis.dh", "2048")
    args, ctx = tool.tls_setup(tmp_path)
    assert "--tls-replication" in args and "--tls-cluster" not in args
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "rill.server.main", "--port", "0", "--tls-port", str(port),
                               *args, "--save", "", "--dir", str(tmp_path)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert tool.wait_for_ping(port, server, tls=ctx)
        assert not tool.wait_for_ping(port, server, timeout=1.0)  # plain text gets nothing
    finally:
        server.terminate()
        server.wait(15)


def test_spawn_points_the_trees_src_at_the_server_and_drops_only_the_refused_line(tmp_path):
    """--spawn: for rill's run, src/redis-server is a script that drops the suite's one
    refused setting from the config file it is given and runs rill-server (a Python
    console script) in its own process with the same arguments, its argv[0] still the
    script's path (the process title's {title}); for redis's, a link to the binary. The
    tools link to the machine's."""
    import subprocess
    import sys

    (tmp_path / "src").mkdir()
    fake = tmp_path / "fake-rill"
    fake.write_text(f"#!{sys.executable}\nimport sys\n"
                    "print('argv0:', sys.argv[0])\nprint('args:', *sys.argv[1:])\n"
                    "print(open(sys.argv[1]).read(), end='')\n")
    fake.chmod(0o755)
    tool.spawn_setup(tmp_path, str(fake), rill=True)
    conf = tmp_path / "test.conf"
    conf.write_text("always-show-logo yes\nport 21111\npropagation-error-behavior panic\n"
                    "notify-keyspace-events KEA\n")
    out = subprocess.run([str(tmp_path / "src" / "redis-server"), str(conf), "--loglevel", "debug"],
                         capture_output=True, text=True, check=True).stdout
    assert out == (f"argv0: {tmp_path / 'src' / 'redis-server'}\nargs: {conf} --loglevel debug\n"
                   "always-show-logo yes\nport 21111\nnotify-keyspace-events KEA\n")
    for name in tool._TOOLS:
        link = tmp_path / "src" / name
        assert not link.exists() or link.is_symlink()
    # redis's run replaces the script with a link, and rill's the link with the script
    tool.spawn_setup(tmp_path, "/bin/true", rill=False)
    assert (tmp_path / "src" / "redis-server").resolve() == Path("/bin/true").resolve()
    tool.spawn_setup(tmp_path, str(fake), rill=True)
    assert not (tmp_path / "src" / "redis-server").is_symlink()


def test_spawn_never_overwrites_a_built_binary(tmp_path):
    import pytest

    (tmp_path / "src").mkdir()
    built = tmp_path / "src" / "redis-server"
    built.write_bytes(b"\x7fELF built by make")
    with pytest.raises(SystemExit, match="built binary"):
        tool.spawn_setup(tmp_path, "/bin/true", rill=True)
    assert built.read_bytes() == b"\x7fELF built by make"
