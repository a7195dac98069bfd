"""The machinery of ``make bench``: servers, clients, redis-benchmark, the table.

Workloads (bench/workloads.py) only say what to measure; everything here is shared:
starting redis-server and rill on free ports, a small pipelining client, running
redis-benchmark with ``--csv`` and reading its rates, and turning the numbers into
rows with ratios and targets.
"""

from __future__ import annotations

import atexit
import csv
import io
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import hiredis

Arg = bytes | str | int


class BenchError(Exception):
    """A workload could not be measured on one server (the message says why)."""


# -- wire --------------------------------------------------------------------------------


def encode(args: Iterable[Arg]) -> bytes:
    """One command as a RESP multibulk request."""
    items = [a if isinstance(a, bytes) else str(a).encode() for a in args]
    out = [b"*%d\r\n" % len(items)]
    for a in items:
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Client:
    """A blocking client that pipelines; error replies come back as hiredis.ReplyError values."""

    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 120.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader = hiredis.Reader()

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _read(self) -> object:
        while True:
            reply = self.reader.gets()
            if reply is not False:
                return reply
            data = self.sock.recv(1 << 16)
            if not data:
                raise BenchError("connection closed by the server")
            self.reader.feed(data)

    def call(self, *args: Arg) -> object:
        self.sock.sendall(encode(args))
        return self._read()

    def pipeline(self, commands: Iterable[Iterable[Arg]], batch: int = 1000) -> int:
        """Send commands in batches, reading every reply; the number of error replies."""
        errors = 0
        pending: list[bytes] = []

        def flush() -> int:
            self.sock.sendall(b"".join(pending))
            n = 0
            for _ in range(len(pending)):
                if isinstance(self._read(), hiredis.ReplyError):
                    n += 1
            pending.clear()
            return n

        for cmd in commands:
            pending.append(encode(cmd))
            if len(pending) >= batch:
                errors += flush()
        if pending:
            errors += flush()
        return errors

    def info(self, section: str = "") -> dict[str, str]:
        """INFO as a dict; empty when the server has no INFO yet."""
        reply = self.call("INFO", section) if section else self.call("INFO")
        if not isinstance(reply, bytes):
            return {}
        out = {}
        for line in reply.decode(errors="replace").splitlines():
            if ":" in line and not line.startswith("#"):
                k, v = line.split(":", 1)
                out[k] = v
        return out


def is_unknown_command(reply: object) -> bool:
    return isinstance(reply, hiredis.ReplyError) and (
        str(reply).startswith("ERR unknown command") or str(reply).startswith("ERR unknown subcommand")
    )


# -- servers -----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A server process under test, restartable (a fresh process for memory workloads)."""

    def __init__(self, label: str, argv: Callable[[int, str], list[str]], *, is_redis: bool = False,
                 port: int = 0) -> None:
        self.label = label
        self.is_redis = is_redis  # memory is read from INFO used_memory rather than RSS
        self._argv = argv
        self.workdir = tempfile.mkdtemp(prefix=f"rill-bench-{label}-")
        # A fixed port (0: a free one at each start), for servers others must know in advance.
        self.fixed_port = port
        self.port = port
        self.proc: subprocess.Popen | None = None
        self.version = ""

    def start(self, timeout: float = 20.0) -> Server:
        self.port = self.fixed_port or free_port()
        logf = open(os.path.join(self.workdir, "server.log"), "ab")
        self.proc = subprocess.Popen(
            self._argv(self.port, self.workdir), cwd=self.workdir, stdout=logf, stderr=subprocess.STDOUT,
            env=None if self.is_redis else python_env(),
        )
        logf.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BenchError(f"{self.label} exited at start-up: {self.log_tail()}")
            try:
                with Client(self.port, timeout=1.0) as c:
                    if c.call("PING") == b"PONG":
                        self.version = c.info("server").get("redis_version", "")
                        return self
            except (OSError, BenchError):
                time.sleep(0.05)
        raise BenchError(f"{self.label} did not answer PING: {self.log_tail()}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def ensure_running(self) -> str:
        """Restart a server that died during the previous workload; a note saying so, or ''."""
        if self.alive():
            return ""
        code = self.proc.returncode if self.proc is not None else None
        self.start()
        return f"{self.label} had exited (code {code}) and was restarted"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def rss_bytes(self) -> int:
        """Resident set size of the server process (Linux /proc)."""
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        raise BenchError("no VmRSS in /proc")

    def client(self) -> Client:
        return Client(self.port)

    def log_tail(self, lines: int = 15) -> str:
        try:
            with open(os.path.join(self.workdir, "server.log"), "rb") as f:
                return b"\n".join(f.read().splitlines()[-lines:]).decode(errors="replace")
        except OSError:
            return ""


_PYC_DIR: list[str] = []


def python_env() -> dict[str, str]:
    """rill's environment: bytecode cached, in a scratch directory, even where the caller
    sets PYTHONDONTWRITEBYTECODE (this machine's and CI's environments do), so that a
    start measures what a user's does (an installed rill has its bytecode) rather than
    ~110 modules compiled from source at every start: an empty rill-server took 1.73e9
    user instructions to its first PONG so, 0.56e9 with bytecode (perf stat). The first
    start fills the cache. A PYTHONPYCACHEPREFIX of the caller's own is kept."""
    env = dict(os.environ)
    if not env.get("PYTHONPYCACHEPREFIX"):
        if not _PYC_DIR:
            _PYC_DIR.append(tempfile.mkdtemp(prefix="rill-bench-pyc-"))
            atexit.register(shutil.rmtree, _PYC_DIR[0], True)
        env["PYTHONPYCACHEPREFIX"] = _PYC_DIR[0]
    # Also with a prefix of the caller's own: left set, nothing is cached there and every
    # start compiles from source (the reuse row then read ~2 MB less growth for rill).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def redis_argv(port: int, workdir: str) -> list[str]:
    binary = shutil.which("redis-server")
    if binary is None:
        raise BenchError("redis-server not found (apt-get install redis-server)")
    return [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--dir", workdir, "--daemonize", "no", "--logfile", ""]


def rill_argv(port: int, workdir: str) -> list[str]:
    return [sys.executable, "-m", "rill.server.main", "--port", str(port), "--bind", "127.0.0.1",
            "--save", "", "--appendonly", "no", "--dir", workdir]


# -- redis-benchmark ---------------------------------------------------------------------


def redis_benchmark_binary() -> str:
    binary = shutil.which("redis-benchmark")
    if binary is None:
        raise BenchError("redis-benchmark not found (apt-get install redis-tools)")
    return binary


def parse_csv(text: str) -> dict[str, float]:
    """redis-benchmark --csv output: test label -> requests per second."""
    rates: dict[str, float] = {}
    for row in csv.reader(io.StringIO(text)):
        if len(row) < 2 or row[0] == "test":
            continue
        try:
            rates[row[0]] = float(row[1])
        except ValueError:
            continue
    return rates


def redis_benchmark(
    port: int,
    *,
    requests: int,
    clients: int = 50,
    pipeline: int = 1,
    test: str | None = None,
    command: list[str] | None = None,
    extra: Iterable[str] = (),
    timeout: float = 180.0,
) -> float:
    """Requests per second of one redis-benchmark test (``-t``) or custom command.

    One test per invocation: redis-benchmark exits at the first error reply, so a
    command rill lacks cannot take the other measurements down with it.
    """
    argv = [redis_benchmark_binary(), "-h", "127.0.0.1", "-p", str(port), "-c", str(clients),
            "-n", str(requests), "-P", str(pipeline), "--csv", *extra]
    if test is not None:
        argv += ["-t", test]
    if command is not None:
        argv += command
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise BenchError(f"redis-benchmark timed out after {timeout:.0f}s") from None
    if proc.returncode != 0:
        lines = [ln for ln in (proc.stdout + "\n" + proc.stderr).splitlines() if ln.strip()]
        msg = next((ln for ln in reversed(lines) if "rror" in ln), lines[-1] if lines else "")
        msg = msg[msg.find("Error"):] if "Error" in msg else msg
        raise BenchError(f"redis-benchmark failed: {msg.strip()[:160]}")
    rates = parse_csv(proc.stdout)
    if not rates:
        raise BenchError("redis-benchmark printed no rates")
    if test is not None:
        # Some tests print a preparation row first ("LPUSH (needed to benchmark LRANGE)").
        want = test.upper()
        for label, rps in rates.items():
            if label.upper().startswith(want):
                return rps
        raise BenchError(f"no {want} row in redis-benchmark output: {list(rates)}")
    return list(rates.values())[-1]


# -- workloads, targets, results ---------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """A goal from the issues: a ratio rill/redis (``>=`` or ``<=``) or an absolute bound on rill."""

    op: str  # ">=" | "<=" ratio;  "abs<=" absolute value of rill's measurement
    value: float

    def met(self, redis: float, rill: float) -> bool:
        if self.op == "abs<=":
            return rill <= self.value
        ratio = rill / redis if redis else float("inf")
        return ratio >= self.value if self.op == ">=" else ratio <= self.value

    def __str__(self) -> str:
        if self.op == "abs<=":
            return f"<={self.value:g}"
        return f"{self.op}{self.value:.2f}x"


def AT_LEAST(ratio: float) -> Target:  # capitalised: reads as prose in the registry
    return Target(">=", ratio)


def AT_MOST(ratio: float) -> Target:
    return Target("<=", ratio)


@dataclass
class Row:
    """One line of the table: a label, its unit, and the target it is judged against."""

    label: str
    unit: str = "rps"
    target: Target | None = None

    @property
    def lower_is_better(self) -> bool:
        return self.unit in ("B/entry", "ms")

    def best(self, old: float | None, new: float) -> float:
        if old is None:
            return new
        return min(old, new) if self.lower_is_better else max(old, new)


@dataclass
class Ctx:
    """What a workload may read about the run."""

    quick: bool = False
    clients: int = 50
    repeat: int = 1

    def n(self, full: int) -> int:
        """A request count scaled for the run (a tenth with BENCH_QUICK)."""
        return max(1000, full // 10) if self.quick else full


# A workload's measurement: row label -> value (one value per Row it declares).
Measure = Callable[[Ctx, Server], dict[str, float]]


@dataclass
class Workload:
    """One measurement run against both servers, producing one or more rows.

    ``probe`` holds commands run once on rill before anything else: if rill answers
    any of them with an unknown-command error, the rows are skipped with a note.
    ``setup`` runs on each server right before ``measure`` (prefill, groups, ...).
    ``fresh`` restarts both servers first (memory deltas need a clean process).
    """

    name: str
    group: str
    issue: int
    rows: list[Row]
    measure: Measure
    probe: list[list[Arg]] = field(default_factory=list)
    setup: Callable[[Ctx, Server], None] | None = None
    fresh: bool = False


@dataclass
class Outcome:
    row: Row
    group: str
    redis: float | None = None
    rill: float | None = None
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.redis and self.rill is not None:
            return self.rill / self.redis
        return None

    @property
    def status(self) -> str:
        if self.redis is None or self.rill is None:
            return "skipped" if "not implemented in rill yet" in self.note else "no result"
        if self.row.target is None:
            return ""
        return "meets" if self.row.target.met(self.redis, self.rill) else "MISSES"

    def as_dict(self) -> dict:
        return {"row": self.row.label, "group": self.group, "unit": self.row.unit, "redis": self.redis,
                "rill": self.rill, "ratio": self.ratio, "target": str(self.row.target or ""),
                "status": self.status, "note": self.note}


def run_workload(ctx: Ctx, w: Workload, redis: Server, rill: Server) -> list[Outcome]:
    """Measure one workload on redis-server then on rill; skip gracefully on rill's gaps."""
    outcomes = [Outcome(r, w.group) for r in w.rows]

    def note_all(msg: str) -> list[Outcome]:
        for o in outcomes:
            o.note = "; ".join(filter(None, [o.note, msg]))
        return outcomes

    notes = [redis.ensure_running(), rill.ensure_running()]
    note_all("; ".join(filter(None, notes)))
    with rill.client() as c:
        for cmd in w.probe:
            if is_unknown_command(c.call(*cmd)):
                name = str(cmd[0]).upper() if not isinstance(cmd[0], bytes) else cmd[0].decode().upper()
                return note_all(f"not implemented in rill yet ({name})")
    # Interleave the servers on each repeat and keep the best figure of each: on a
    # shared machine the noise only ever makes a server look slower.
    for _ in range(ctx.repeat):
        for server in (redis, rill):
            if w.fresh:
                server.restart()
            flush(server)
            try:
                if w.setup is not None:
                    w.setup(ctx, server)
                values = w.measure(ctx, server)
            except (BenchError, OSError) as e:
                if not server.alive():
                    e = BenchError(f"{e} (server exited: {server.log_tail(3)})")
                note_all(f"{server.label}: {e}")
                continue
            side = "redis" if server is redis else "rill"
            for o in outcomes:
                if o.row.label in values:
                    setattr(o, side, o.row.best(getattr(o, side), values[o.row.label]))
    return outcomes


def flush(server: Server) -> None:
    """Start each workload from an empty keyspace where the server can do it."""
    with server.client() as c:
        c.call("FLUSHALL")


# -- the table ---------------------------------------------------------------------------


def fmt_value(v: float | None, unit: str) -> str:
    if v is None:
        return "-"
    if unit in ("rps", "entries/s"):
        return f"{v:,.0f}"
    if unit == "ms":
        return f"{v:.2f} ms"
    if unit == "B/entry":
        return f"{v:.1f} B"
    return f"{v:g}"


def render_table(outcomes: list[Outcome]) -> str:
    header = ("workload", "unit", "redis-server", "rill", "ratio", "target", "status")
    rows = []
    for o in outcomes:
        ratio = f"{o.ratio:.2f}x" if o.ratio is not None else "-"
        status = f"skipped: {o.note}" if o.status == "skipped" else o.status
        rows.append((o.row.label, o.row.unit, fmt_value(o.redis, o.row.unit), fmt_value(o.rill, o.row.unit),
                     ratio, str(o.row.target or ""), status))
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)] + [6]
    right = {2, 3, 4}

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(cells))

    out = [line(header), "  ".join("-" * w for w in widths)]
    group = None
    for o, r in zip(outcomes, rows, strict=True):
        if o.group != group:
            if group is not None:
                out.append("")
            group = o.group
        out.append(line(r).rstrip())
    notes = [(o.row.label, o.note) for o in outcomes if o.note and o.status != "skipped"]
    if notes:
        out.append("")
        out.append("notes:")
        out.extend(f"  {label}: {note}" for label, note in notes)
    return "\n".join(out)
