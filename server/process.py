"""The process around the server, as Redis 7.0 sets it up: ``daemonize`` and ``pidfile``,
``supervised`` (systemd's NOTIFY_SOCKET, upstart's SIGSTOP), ``oom-score-adj`` with
``oom-score-adj-values``, and ``tcp-keepalive`` on client sockets; and which form of
the hot core (compiled or pure Python) the process runs.

No asyncio here: main.py calls these at the right moments of start-up and shutdown.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import socket
from collections.abc import Callable
from typing import Any

from rill import persistence, protocol, server, storage

log = logging.getLogger("rill")

# oom-score-adj-values holds one value per process class, in this order.
OOM_MASTER, OOM_REPLICA, OOM_BGCHILD = 0, 1, 2


# -- the hot core -------------------------------------------------------------------
def hot_core() -> tuple[str, list[str], list[str]]:
    """(mode, modules running compiled, problems): the mode is ``compiled`` when every
    package's hot modules run compiled, ``pure`` when none do (RILL_PURE=1, no build,
    or a stale one: see protocol/_native.py); ``partial``, were they ever to differ."""
    natives = [protocol.native, storage.native, persistence.native, server.native]
    modes = {n.mode for n in natives}
    mode = modes.pop() if len(modes) == 1 else "partial"
    return (mode, [m for n in natives for m in n.compiled_modules()],
            [n.problem for n in natives if n.problem])


# -- daemonize and the pidfile ------------------------------------------------------
def daemonize() -> None:
    """Go to the background: the parent exits at once, the child leads a new session
    with stdin, stdout and stderr on /dev/null (so with no ``logfile`` it logs nowhere,
    as Redis does)."""
    if os.fork() != 0:
        os._exit(0)
    os.setsid()
    fd = os.open(os.devnull, os.O_RDWR)
    for target in (0, 1, 2):
        os.dup2(fd, target)
    if fd > 2:
        os.close(fd)


def write_pidfile(path: str) -> None:
    """Best effort, as Redis's createPidFile: a pidfile that cannot be written is no error."""
    try:
        with open(path, "w") as f:
            f.write(f"{os.getpid()}\n")
    except OSError as e:
        log.warning("Failed to write PID file: %s", e.strerror)


# -- supervision ----------------------------------------------------------------
class Supervisor:
    """``supervised``: which supervisor (if any) rill reports to; ``mode`` is "no",
    "upstart" or "systemd" once start-up has detected it."""

    def __init__(self, mode: str = "no") -> None:
        self.mode = mode

    @classmethod
    def detect(cls, setting: str, environ: dict[str, str] | None = None) -> Supervisor:
        """Redis's redisIsSupervised: ``auto`` picks upstart when UPSTART_JOB is set,
        else systemd when NOTIFY_SOCKET is; a requested supervisor that is not there
        is warned about and supervision is off (so ``daemonize`` applies again)."""
        env = os.environ if environ is None else environ
        mode = setting
        if mode == "auto":
            mode = "upstart" if env.get("UPSTART_JOB") else "systemd" if env.get("NOTIFY_SOCKET") else "no"
        if mode == "upstart" and not env.get("UPSTART_JOB"):
            log.warning("upstart supervision requested, but UPSTART_JOB not found!")
            mode = "no"
        sup = cls(mode)
        if mode == "systemd":
            if not sup.notify("STATUS=Redis is loading...\n"):
                mode = sup.mode = "no"
            else:
                log.log(25, "Supervised by systemd. Please make sure you set appropriate values "
                        "for TimeoutStartSec and TimeoutStopSec in your service unit.")
        return sup

    @property
    def supervised(self) -> bool:
        return self.mode != "no"

    def notify(self, message: str) -> bool:
        """One sd_notify datagram to $NOTIFY_SOCKET (a path, or "@name" in the abstract
        namespace); False, with Redis's warning, if there is none or it fails."""
        path = os.environ.get("NOTIFY_SOCKET", "")
        if not path:
            log.warning("systemd supervision error: NOTIFY_SOCKET not found!")
            return False
        address = "\0" + path[1:] if path.startswith("@") else path
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
                s.sendto(message.encode(), address)
        except OSError as e:
            log.warning("systemd supervision error: sd_notify: %d", -(e.errno or 1))
            return False
        return True

    def systemd(self, message: str) -> None:
        """Send ``message`` if, and only if, systemd supervises rill."""
        if self.mode == "systemd":
            self.notify(message)

    def ready(self, replica: bool) -> None:
        """The listeners are up: upstart is told by stopping (it sends SIGCONT), systemd
        by READY=1 after a STATUS line that says whether writes are accepted yet."""
        if self.mode == "upstart":
            log.log(25, "supervised by upstart, will stop to signal readiness.")
            os.kill(os.getpid(), signal.SIGSTOP)
            os.environ.pop("UPSTART_JOB", None)
        elif self.mode == "systemd":
            if replica:
                self.notify("STATUS=Ready to accept connections in read-only mode. "
                            "Waiting for MASTER <-> REPLICA sync\n")
            else:
                self.notify("STATUS=Ready to accept connections\n")
            self.notify("READY=1\n")


# -- the OOM killer ------------------------------------------------------------
class OomScoreAdj:
    """oom-score-adj: rill's own /proc/self/oom_score_adj, by process class. In
    ``relative`` (or ``yes``) mode the class's value is added to the score the process
    had before rill first changed it; ``absolute`` writes it as is; ``no`` puts the
    original score back. Values are clamped to [-1000, 1000] as the kernel wants."""

    def __init__(self, path: str = "/proc/self/oom_score_adj") -> None:
        self.path = path
        self.base: int | None = None  # the score before rill changed it

    def apply(self, mode: str, values: str, process_class: int) -> None:
        """Set the score for ``process_class``; OSError if the file cannot be written."""
        if mode == "no":
            if self.base is None:
                return
            value, self.base = self.base, None
        else:
            if self.base is None:
                with open(self.path) as f:
                    self.base = int(f.read().strip() or 0)
            value = int(values.split()[process_class])
            if mode in ("yes", "relative"):
                value += self.base
            value = max(-1000, min(1000, value))
        with open(self.path, "w") as f:
            f.write(f"{value}\n")


# -- CPU affinity ----------------------------------------------------------------
def parse_cpulist(text: str) -> set[int] | None:
    """A cpulist as Redis reads one: comma-separated CPUs or ranges ``a-b``, a range
    optionally with a stride ``a-b:s`` ("0-7:2" is 0, 2, 4, 6). None if malformed
    (Redis then leaves the affinity alone)."""
    cpus: set[int] = set()
    for part in text.split(","):
        first, dash, rest = part.partition("-")
        last, colon, stride = rest.partition(":") if dash else (first, "", "")
        if not (first.isdigit() and last.isdigit() and (not colon or stride.isdigit())):
            return None
        a, b, s = int(first), int(last), int(stride) if colon else 1
        if a > b or s == 0:
            return None
        cpus.update(range(a, b + 1, s))
    return cpus


def set_cpu_affinity(cpulist: str) -> None:
    """server_cpulist: pin the calling thread (the event loop's) to these CPUs."""
    cpus = parse_cpulist(cpulist) if cpulist else None
    if cpus:
        try:
            os.sched_setaffinity(0, cpus)
        except OSError as e:
            log.warning("Failed to set CPU affinity to %s: %s", cpulist, e.strerror)


# -- transparent huge pages ------------------------------------------------------
PR_SET_THP_DISABLE = 41  # linux/prctl.h, since Linux 3.15


def disable_thp(enabled_path: str = "/sys/kernel/mm/transparent_hugepage/enabled") -> bool | None:
    """disable-thp: when the kernel gives every process huge pages ("[always]"), opt
    rill out (prctl PR_SET_THP_DISABLE), as Redis does: copy-on-write after the fork of
    a background save would copy 2 MB pages. None if there was nothing to do, else
    whether it worked (a warning says why not)."""
    try:
        with open(enabled_path) as f:
            if "[always]" not in f.read():
                return None
    except OSError:
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) == 0:
        return True
    log.warning("WARNING you have Transparent Huge Pages (THP) support enabled in your kernel "
                "and rill could not turn it off for itself (%s). This will create latency and "
                "memory usage issues with rill.", os.strerror(ctypes.get_errno()))
    return False


# -- TCP keepalive -------------------------------------------------------------
def set_keepalive(sock: Any, interval: int) -> None:
    """tcp-keepalive on one connected socket, as Redis sets it: probes start after
    ``interval`` idle seconds, repeat every interval/3 (at least 1) and three
    unanswered ones close the connection."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    if hasattr(socket, "TCP_KEEPIDLE"):  # Linux; elsewhere the system's timing applies
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, interval)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, max(1, interval // 3))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 3)


def at_fork_child(hook: Callable[[], None]) -> None:
    """Run ``hook`` in every child rill forks (BGSAVE, BGREWRITEAOF) from now on."""
    os.register_at_fork(after_in_child=hook)
