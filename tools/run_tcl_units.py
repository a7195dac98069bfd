"""Run Redis's own Tcl units against rill and against redis-server, one at a time.

Each unit gets a fresh server (its own temporary directory, a free port, DEBUG allowed,
no save points) and ``./runtest --host 127.0.0.1 --port N --single UNIT --clients 1
--durable``; redis-server runs the same unit the same way first, so the table shows
which tests real Redis passes as an external server (many are tagged to skip there).
Units run serially: the suite's timing tests are sensitive to a loaded machine.

    python tools/run_tcl_units.py --tree ~/redis-7.0.15 [--spawn] [--tls] [--timeout 900] [unit/other ...]

``--spawn`` lets the suite start its own servers instead, as Redis's CI does: every test
that external mode skips ("Not supported on external server": unit/maxmemory is one) then
runs. The tree's ``src/`` gets ``redis-server`` (the binary for redis's run; for rill's, a
small Python script that runs the rill-server script in its own process, so the server's
argv[0] is the path the suite started, as the process-title test wants), and ``redis-cli``, ``redis-benchmark`` and
``redis-check-aof``/``-rdb`` from the machine (redis-tools). The suite's
``tests/assets/default.conf`` sets one parameter rill refuses at that value
(``propagation-error-behavior panic``: README's list of parameters accepted only at their
default); the script drops that line from each config file the suite writes, and nothing
else. (``always-show-logo yes`` stays: the suite knows a server it spawned is up when the
logo's ``PID:`` line appears in its log.)

``--tls`` runs the same in TLS mode: each server listens on a TLS port only (``--port 0
--tls-port N``) with the tree's test certificates (``tests/tls``, made first by the tree's
``utils/gen-test-certs.sh`` when missing: its DH parameters take minutes once), as the
suite's own servers are configured, and the harness runs with ``--tls`` (Tcl's ``tls``
package: Debian's tcl-tls). ``unit/tls`` only runs its tests in this mode.

The tree is a checkout of Redis 7.0.15 (tag ``7.0.15``); the harness writes into its
``tests/tmp``, so it must be writable. Logs go to ``--logs`` (default: a temp dir).
Prints a Markdown table: unit, redis ok/err, rill ok/err, the tests redis-server passes
that rill fails, and those it passes that never ran on rill: a unit that stopped early,
or a test the suite guards by what the server reports (the jemalloc-only ones, for
rill's ``mem_allocator:pymalloc``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_RESULT = re.compile(r"^\[(ok|err|exception|timeout)\]: (.*?)(?: \(\d+ ms\))?$", re.M)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_ping(port: int, proc: subprocess.Popen, timeout: float = 30.0,
                  tls: ssl.SSLContext | None = None) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as raw:
                s = tls.wrap_socket(raw) if tls is not None else raw
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return True
        except OSError:  # ssl.SSLError included
            time.sleep(0.1)
    return False


def tls_setup(tree: Path) -> tuple[list[str], ssl.SSLContext]:
    """The server arguments of the suite's TLS mode (its servers' tls-* settings, but
    tls-cluster: no cluster bus) and a context to PING with; makes the certificates
    with the tree's own script when they are missing."""
    certs = tree / "tests" / "tls"
    if not (certs / "redis.dh").exists():
        print("generating tests/tls with utils/gen-test-certs.sh (minutes, once)", file=sys.stderr)
        subprocess.run(["utils/gen-test-certs.sh"], cwd=tree, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    args = ["--tls-cert-file", certs / "server.crt", "--tls-key-file", certs / "server.key",
            "--tls-client-cert-file", certs / "client.crt", "--tls-client-key-file", certs / "client.key",
            "--tls-dh-params-file", certs / "redis.dh", "--tls-ca-cert-file", certs / "ca.crt",
            "--tls-replication", "yes"]
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.load_verify_locations(str(certs / "ca.crt"))
    ctx.load_cert_chain(str(certs / "client.crt"), str(certs / "client.key"))
    return [str(a) for a in args], ctx


def default_units(tree: Path) -> list[str]:
    tests = tree / "tests"
    found = sorted(tests.glob("unit/*.tcl")) + sorted(tests.glob("unit/type/*.tcl"))
    # list-common.tcl is a helper sourced by the list units, not a unit
    return [str(p.relative_to(tests).with_suffix("")) for p in found if p.stem != "list-common"]


# The second line marks a script this tool wrote (it may replace it, and nothing else).
# It runs the rill-server script in its own process, under that script's interpreter,
# rather than exec'ing it: the suite's process-title test wants the server's argv[0]
# (its {{title}}) to be the path it started, ".../redis-server", and a #! script exec'd
# from a wrapper would see its own path instead.
_WRAPPER = """#!{python}
# rill in the place of src/redis-server (tools/run_tcl_units.py --spawn)
import re, sys
if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
    try:
        with open(sys.argv[1]) as f:
            text = f.read()
        with open(sys.argv[1], "w") as f:
            f.write(re.sub(r"(?m)^propagation-error-behavior .*\\n?", "", text))
    except OSError:
        pass  # rill-server reports the file it cannot read
# not runpy.run_path: it would make sys.argv[0] the script's path
with open({rill!r}) as f:
    exec(compile(f.read(), {rill!r}, "exec"), {{"__name__": "__main__", "__file__": {rill!r}}})
"""
_MARK = _WRAPPER.splitlines()[1]
_TOOLS = ("redis-cli", "redis-benchmark", "redis-check-aof", "redis-check-rdb")


def _replaceable(path: Path) -> bool:
    """Missing, a link, or a script of ours: a tree's own built binary is never overwritten."""
    if path.is_symlink() or not path.exists():
        return True
    with open(path, "rb") as f:
        return _MARK.encode() in f.read(200)


def _interpreter(script: str) -> str:
    """The Python that runs the rill-server console script: its #! line's."""
    with open(script, "rb") as f:
        first = f.readline().decode().strip()
    return first[2:].strip() if first.startswith("#!") else sys.executable


def spawn_setup(tree: Path, server: str, rill: bool) -> None:
    """Point the tree's src/redis-server at ``server`` (through the wrapper for rill) and
    its tools at the machine's, for the suite's own start_server."""
    src = tree / "src"
    names = [("redis-server", None)] + [(t, shutil.which(t)) for t in _TOOLS]
    for name, _ in names:
        if not _replaceable(src / name):
            raise SystemExit(f"{src / name} is a built binary: --spawn wants a tree without one")
    for name, found in names:
        path = src / name
        path.unlink(missing_ok=True)
        if name == "redis-server" and rill:
            path.write_text(_WRAPPER.format(python=_interpreter(server), rill=os.path.abspath(server)))
            path.chmod(0o755)
        elif name == "redis-server":
            path.symlink_to(shutil.which(server) or server)
        elif found is not None:
            path.symlink_to(found)


def run_spawned(tree: Path, unit: str, log: Path, timeout: float, tls: bool) -> None:
    """One runtest that starts its own servers from src/ (spawn_setup); output to ``log``."""
    base = 21111 + (os.getpid() % 250) * 40  # as run_unit's
    cmd = ["./runtest", "--single", unit, "--clients", "1", "--durable", "--baseport", str(base),
           *(["--tls"] if tls else [])]
    with open(log, "wb") as out:
        harness = subprocess.Popen(cmd, cwd=tree, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = harness.wait(timeout)
        except subprocess.TimeoutExpired:
            code = "timeout"
        # the harness's servers and test clients share its session: none outlives it
        try:
            os.killpg(harness.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        harness.wait()
        out.write(f"\nEXIT {code}\n".encode())


def run_unit(server_argv: list[str], tree: Path, unit: str, log: Path, timeout: float,
             tls: tuple[list[str], ssl.SSLContext] | None = None) -> None:
    """One fresh server, one runtest; the harness's output (and exit status) goes to ``log``."""
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="tcl-unit-")
    listen = ["--port", str(port)] if tls is None else ["--port", "0", "--tls-port", str(port), *tls[0]]
    argv = [*server_argv, *listen, "--save", "", "--enable-debug-command", "yes", "--dir", workdir]
    with open(log.with_suffix(".server.log"), "wb") as slog:
        server = subprocess.Popen(argv, cwd=workdir, stdout=slog, stderr=subprocess.STDOUT)
    try:
        with open(log, "wb") as out:
            if not wait_for_ping(port, server, tls=tls[1] if tls is not None else None):
                out.write(b"server did not start\nEXIT -1\n")
                return
            # --baseport: the harness's own listener (it probes base-32..base and those
            # +10000), kept apart from other harnesses running on the machine
            base = 21111 + (os.getpid() % 250) * 40
            cmd = ["./runtest", "--host", "127.0.0.1", "--port", str(port), "--single", unit,
                   "--clients", "1", "--durable", "--baseport", str(base), *(["--tls"] if tls else [])]
            harness = subprocess.Popen(cmd, cwd=tree, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            try:
                code = harness.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(harness.pid, signal.SIGKILL)  # the harness and its test clients
                harness.wait()
                code = "timeout"
            out.write(f"\nEXIT {code}\n".encode())
    finally:
        server.terminate()
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        shutil.rmtree(workdir, ignore_errors=True)


def parse(log: Path) -> tuple[list[str], list[str], str]:
    """(names of passed tests, names of failed ones, exit status) from a runtest log."""
    text = _ANSI.sub("", log.read_text(errors="replace"))
    ok: list[str] = []
    err: list[str] = []
    for m in _RESULT.finditer(text):
        name = re.sub(r" in tests/\S+$", "", m.group(2).strip())
        (ok if m.group(1) == "ok" else err).append(name)
    status = re.findall(r"^EXIT (\S+)$", text, re.M)
    return ok, err, status[-1] if status else "?"


def row(unit: str, redis: tuple[list[str], list[str], str], rill: tuple[list[str], list[str], str]) -> str:
    def cell(r: tuple[list[str], list[str], str]) -> str:
        return f"{len(r[0])}/{len(r[1])}" + ("" if r[2] == "0" else f" (exit {r[2]})")

    passed = set(redis[0]) - set(redis[1])  # a test Redis fails in one of its modes is not rill's
    failed = sorted(t for t in passed if t in rill[1])
    not_run = sorted(t for t in passed if t not in rill[0] and t not in rill[1])
    return f"| {unit} | {cell(redis)} | {cell(rill)} | {'; '.join(failed)} | {'; '.join(not_run)} |"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", required=True, type=Path, help="a writable Redis 7.0.15 source tree")
    ap.add_argument("--rill", default=str(Path(sys.executable).with_name("rill-server")))
    ap.add_argument("--redis", default=shutil.which("redis-server") or "redis-server")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per unit and server")
    ap.add_argument("--logs", type=Path, default=None)
    ap.add_argument("--tls", action="store_true", help="TLS mode: TLS-only servers, runtest --tls")
    ap.add_argument("--spawn", action="store_true",
                    help="the suite starts its own servers from the tree's src/ (see above)")
    ap.add_argument("units", nargs="*", help="e.g. unit/other unit/type/stream (default: all)")
    args = ap.parse_args()
    tree = args.tree.resolve()
    logs = args.logs or Path(tempfile.mkdtemp(prefix="tcl-logs-"))
    logs.mkdir(parents=True, exist_ok=True)
    units = args.units or default_units(tree)
    tls = tls_setup(tree) if args.tls else None  # spawned servers: the suite's own TLS set-up
    print(f"logs: {logs}", file=sys.stderr)
    rows = []
    for unit in units:
        name = unit.replace("/", "_")
        results = {}
        for label, argv in (("redis", [args.redis]), ("rill", [args.rill])):
            print(f"{time.strftime('%H:%M:%S')} {unit} on {label}", file=sys.stderr)
            log = logs / f"{name}.{label}.log"
            if args.spawn:
                spawn_setup(tree, argv[0], label == "rill")
                run_spawned(tree, unit, log, args.timeout, args.tls)
            else:
                run_unit(argv, tree, unit, log, args.timeout, tls)
            results[label] = parse(log)
        rows.append(row(unit, results["redis"], results["rill"]))
    print("| unit | redis ok/err | rill ok/err | rill fails, redis passes | not run on rill, redis passes |")
    print("|---|---|---|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
