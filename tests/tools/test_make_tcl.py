"""The README's `make tcl` and `make tcl-tls` lines, run as written.

The real suite runs in tests/tools/test_tcl_suite.py; here a stand-in ``runtest`` takes its
place in a throwaway tree, so that each mode of the tool is exercised in seconds: it checks the server it is pointed at (or starts one
from ``src/`` as the suite does under ``--spawn``), PINGs it, checks that DEBUG is allowed,
and reports in runtest's format. What runs for real is everything the README's command
sets in motion: make, tools/run_tcl_units.py, a fresh redis-server and a fresh rill-server.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.support import require_tool

ROOT = Path(__file__).resolve().parents[2]

# The stand-in for ./runtest. Its two checks are what the real units lean on first: the
# server answers, and DEBUG is allowed (refused by default, as in Redis).
RUNTEST = r"""#!/bin/sh
host=127.0.0.1 port= tls= base=
while [ $# -gt 0 ]; do
    case "$1" in
        --host) host=$2; shift ;;
        --port) port=$2; shift ;;
        --baseport) base=$2; shift ;;
        --single) unit=$2; shift ;;
        --tls) tls="--tls --cacert tests/tls/ca.crt --cert tests/tls/client.crt --key tests/tls/client.key" ;;
    esac
    shift
done
if [ -z "$port" ]; then
    # --spawn: start a server from src/ with a config file, as the suite's start_server
    # does, and wait for its logo's PID line as the suite's wait_server_started does;
    # the suite's default.conf has a line rill refuses, which the tool's script must drop
    port=$base
    mkdir -p tests/tmp
    printf 'always-show-logo yes\npropagation-error-behavior panic\nport %s\nsave ""\n' "$port" \
        > tests/tmp/stand-in.conf
    printf 'enable-debug-command yes\ndir %s\n' "$PWD/tests/tmp" >> tests/tmp/stand-in.conf
    src/redis-server tests/tmp/stand-in.conf > tests/tmp/stand-in.log 2>&1 &
    spawned=$!
    for _ in $(seq 300); do
        grep -q " PID: $spawned" tests/tmp/stand-in.log && break
        sleep 0.1
    done
fi
cli="redis-cli -h $host -p $port $tls"
if [ "$($cli PING)" = PONG ]; then echo "[ok]: PING answers (1 ms)"; else echo "[err]: PING answers in tests/$unit.tcl"; fi
if [ "$($cli DEBUG SLEEP 0)" = OK ]; then echo "[ok]: DEBUG is allowed (0 ms)"; else echo "[err]: DEBUG is allowed in tests/$unit.tcl"; fi
if [ -n "$spawned" ]; then $cli SHUTDOWN NOSAVE >/dev/null 2>&1; wait "$spawned"; fi
exit 0
"""


def _stand_in_tree(tmp_path: Path) -> Path:
    tree = tmp_path / "redis-7.0.15"
    (tree / "tests" / "unit").mkdir(parents=True)
    (tree / "tests" / "unit" / "stand-in.tcl").write_text("")
    (tree / "src").mkdir()
    runtest = tree / "runtest"
    runtest.write_text(RUNTEST)
    runtest.chmod(0o755)
    return tree


def _make(*args: str) -> str:
    """Run make in the project root as a user would; stdout (the tool's table) returned."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    done = subprocess.run(["make", "-s", "-C", str(ROOT), *args], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


ROW = "| unit/stand-in | 2/0 | 2/0 |  |  |"


def test_make_tcl_runs_each_unit_against_a_fresh_redis_and_rill(tmp_path):
    for tool in ("redis-server", "redis-cli", "make"):
        require_tool(tool)
    tree = _stand_in_tree(tmp_path)
    out = _make("tcl", f"TREE={tree}", "UNITS=unit/stand-in", f"TCL_ARGS=--logs {tmp_path / 'logs'}")
    assert ROW in out.splitlines()
    # each server's own log is kept beside the harness's
    assert (tmp_path / "logs" / "unit_stand-in.rill.server.log").exists()


def test_make_tcl_spawn_lets_the_suite_start_rill_from_src(tmp_path):
    for tool in ("redis-server", "redis-cli", "make"):
        require_tool(tool)
    tree = _stand_in_tree(tmp_path)
    out = _make("tcl", f"TREE={tree}", "UNITS=unit/stand-in", "TCL_ARGS=--spawn")
    assert ROW in out.splitlines()
    # rill's run was the last: src/redis-server is the script that starts rill-server
    assert b"rill-server" in (tree / "src" / "redis-server").read_bytes()


def test_make_tcl_tls_runs_the_units_over_tls(tmp_path):
    for tool in ("redis-server", "redis-cli", "make", "openssl"):
        require_tool(tool)
    tree = _stand_in_tree(tmp_path)
    certs = tree / "tests" / "tls"
    certs.mkdir()
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]

    def openssl(*a: str) -> None:
        subprocess.run(["openssl", *a], cwd=certs, check=True, capture_output=True)

    openssl("req", "-x509", "-new", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-subj", "/CN=ca")
    for name in ("server", "client"):
        openssl("req", "-new", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}")
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", f"{name}.crt")
    # RFC 7919's fixed group: instant, and in the form redis-server reads (it refuses
    # the X9.42 form `dhparam -dsaparam` writes)
    openssl("genpkey", "-genparam", "-algorithm", "DH", "-pkeyopt", "group:ffdhe2048", "-out", "redis.dh")
    out = _make("tcl-tls", f"TREE={tree}", "UNITS=unit/stand-in")
    assert ROW in out.splitlines()


def test_the_readmes_make_tcl_lines_use_only_what_the_makefile_reads():
    """The lines the tests above run stand for the README's: same targets, same variables."""
    import re

    readme = (ROOT / "README.md").read_text()
    lines = re.findall(r"make (tcl(?:-tls)?)((?: [A-Z_]+=(?:\"[^\"]*\"|\S+))+)", readme)
    assert {target for target, _ in lines} == {"tcl", "tcl-tls"}
    makefile = (ROOT / "Makefile").read_text()
    for _, assignments in lines:
        for name in re.findall(r" ([A-Z_]+)=", assignments):
            assert re.search(rf"^{name} \?=", makefile, re.M), name


def test_make_tcl_without_a_tree_runs_a_fresh_copy_of_the_fetched_release():
    require_tool("make")
    out = _make("-n", "tcl", "UNITS=unit/type/incr")
    assert "tools/redis_suite.py --copy .cache/tcl-tree" in out
    assert out.rstrip().endswith("unit/type/incr")
