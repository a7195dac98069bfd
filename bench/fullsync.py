"""Issue 20 workload: how long clients wait while a replica does a full sync.

A master holding 500k keys gets a fresh redis-server replica (the same replica binary
for both masters, so only the master side differs). One client PINGs the master
back to back from before the replica connects until the replica reports its link up;
the row is the worst round trip seen. Redis forks for the snapshot, so its clients
wait about as long as the fork takes; a master that encoded the snapshot in its event
loop would stall every client for the whole encoding.

Registered at import time; bench/workloads.py imports this module.
"""

from __future__ import annotations

import shutil
import threading
import time
from dataclasses import dataclass

from .harness import BenchError, Client, Ctx, Row, Server, Target, Workload, redis_argv
from .workloads import register

SYNC_KEYS = 500_000


@dataclass(frozen=True)
class _RatioAndBound(Target):
    """At most ``value`` times redis-server's figure and at most ``bound`` in absolute terms."""

    bound: float = 0.0

    def met(self, redis: float, rill: float) -> bool:
        return rill <= self.bound and (rill / redis if redis else float("inf")) <= self.value

    def __str__(self) -> str:
        return f"<={self.value:.2f}x, <={self.bound:g}"


def _fill(ctx: Ctx, server: Server) -> None:
    n = ctx.n(SYNC_KEYS)
    with server.client() as c:
        errors = c.pipeline(
            ["MSET", *(x for i in range(j, min(j + 100, n)) for x in (f"key:{i:08d}", f"value:{i}"))]
            for j in range(0, n, 100)
        )
        if errors:
            raise BenchError(f"filling {n} keys: {errors} error replies")
        if c.call("DBSIZE") != n:
            raise BenchError("the master does not hold every key")


def _worst_ping_during_sync(diskless: bool, label: str):
    def measure(ctx: Ctx, server: Server) -> dict[str, float]:
        with server.client() as c:
            c.call("CONFIG", "SET", "repl-diskless-sync", "yes" if diskless else "no")
            c.call("CONFIG", "SET", "repl-diskless-sync-delay", "0")
            forks_before = int(c.info("stats").get("total_forks", "0"))
        stop = threading.Event()
        worst = [0.0]
        errors: list[BaseException] = []

        def probe() -> None:
            try:
                with Client(server.port, timeout=30.0) as p:
                    while not stop.is_set():
                        t = time.perf_counter()
                        if p.call("PING") != b"PONG":
                            raise BenchError("PING did not answer PONG")
                        worst[0] = max(worst[0], time.perf_counter() - t)
                        time.sleep(0.0005)
            except BaseException as e:  # noqa: BLE001 - reported by the main thread
                errors.append(e)

        master = server.port
        replica = Server("replica", lambda port, wd: [*redis_argv(port, wd), "--replicaof", "127.0.0.1",
                                                       str(master)], is_redis=True)
        thread = threading.Thread(target=probe, daemon=True)
        thread.start()
        try:
            replica.start()
            deadline = time.monotonic() + 300
            with replica.client() as r:
                while True:
                    info = r.info("replication")
                    if info.get("master_link_status") == "up" and info.get("master_sync_in_progress") == "0":
                        break
                    if time.monotonic() > deadline:
                        raise BenchError("the replica did not finish its full sync in time")
                    time.sleep(0.05)
                if r.call("DBSIZE") != ctx.n(SYNC_KEYS):
                    raise BenchError("the replica does not hold every key after its full sync")
        finally:
            stop.set()
            thread.join(30)
            replica.stop()
            shutil.rmtree(replica.workdir, ignore_errors=True)
        if errors:
            raise BenchError(f"PING probe: {errors[0]}")
        with server.client() as c:
            if int(c.info("stats").get("total_forks", "0")) <= forks_before:
                raise BenchError("the master did not fork for the full sync")
        return {label: worst[0] * 1000}

    return measure


for _diskless, _label in [(True, "worst PING during a full sync, 500k keys (diskless)"),
                          (False, "worst PING during a full sync, 500k keys (disk)")]:
    register(Workload(
        _label, "replication", 20,
        [Row(_label, "ms", _RatioAndBound("<=", 3.0, 25.0))],
        _worst_ping_during_sync(_diskless, _label),
        probe=[["CONFIG", "SET", "repl-diskless-sync-delay", "0"]],
        setup=_fill,
    ))
