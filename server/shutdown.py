"""The shutdown sequence of SHUTDOWN, SIGTERM and SIGINT, with Redis 7.0's
``shutdown-timeout``: when replicas lag behind, writes are paused, the replicas are
asked for an ACK, and the final duties wait until every replica acknowledged the
whole stream or the timeout passes (``SHUTDOWN NOW`` and ``shutdown-timeout 0`` do
not wait). The SHUTDOWN caller stays blocked meanwhile; ``SHUTDOWN ABORT`` cancels.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from rill.protocol.reply import ReplyError

log = logging.getLogger("rill")

SHUTDOWN_FAILED = ReplyError("ERR Errors trying to SHUTDOWN. Check logs.")


class PendingShutdown:
    """A shutdown waiting for replicas: its flags, its deadline (time.monotonic()) and
    the SHUTDOWN callers blocked until it ends."""

    __slots__ = ("save", "force", "deadline", "clients")

    def __init__(self, save: bool | None, force: bool, deadline: float) -> None:
        self.save = save
        self.force = force
        self.deadline = deadline
        self.clients: list[Any] = []


def _replication(server: Any) -> Any:
    """The master side of replication (built with persistence)."""
    return server.persistence.master


def _lagging(server: Any) -> tuple[list[Any], int, int]:
    """(replicas whose ACK is behind the stream, how many replicas, the master offset)."""
    p = _replication(server)
    replicas = p.live_replicas()
    offset = p.repl_offset
    return [r for r in replicas if r.repl.ack_offset != offset], len(replicas), offset


def prepare(server: Any, save: bool | None, force: bool, now: bool) -> bool:
    """Start shutting down (prepareForShutdown). True: the server stops serving now.
    False: a shutdown is under way, waiting for replicas. ReplyError if the final
    duties failed and the server goes on serving."""
    if server.pending_shutdown is not None:
        return False
    log.warning("User requested shutdown...")
    notify = getattr(server, "notify_systemd", None)
    if notify is not None:
        notify("STOPPING=1\n")
    timeout = server.config.int("shutdown-timeout")
    if not now and timeout and _lagging(server)[0]:
        server.pending_shutdown = PendingShutdown(save, force, time.monotonic() + timeout)
        if not server.pause_until:
            _replication(server).request_acks()
        # Writes wait (as CLIENT PAUSE WRITE) so the replicas can catch up for good.
        server.pause("shutdown", float("inf"), writes_only=True)
        log.log(25, "Waiting for replicas before shutting down.")
        return False
    finish(server, save, force)
    return True


def finish(server: Any, save: bool | None, force: bool) -> None:
    """finishShutdown: report lagging replicas, then the final duties; ReplyError if
    they failed (and ``force`` is not given)."""
    lagging, total, offset = _lagging(server)
    now = int(time.time())
    for r in lagging:
        link = r.repl
        log.warning("Lagging replica %s reported offset %d behind master, lag=%d, state=%s.",
                    _replica_name(r), offset - link.ack_offset,
                    now - link.ack_time if link.online else 0, "online" if link.online else "wait_bgsave")
    if total:
        log.log(25, "%d of %d replicas are in sync when shutting down.", total - len(lagging), total)
    prepare_duties = getattr(server, "prepare_shutdown", None)
    if prepare_duties is not None:
        prepare_duties(save, force)
    server.request_shutdown()


def _replica_name(r: Any) -> str:
    host = r.repl.ip or r.addr.rpartition(":")[0]
    return f"{host}:{r.repl.listening_port}"


def check(server: Any) -> None:
    """The cron's part: finish a waiting shutdown once the replicas caught up or the
    timeout passed. If the final duties fail, the shutdown is cancelled and its
    callers get the error, as in Redis."""
    pending = server.pending_shutdown
    if pending is None:
        return
    if time.monotonic() < pending.deadline and _lagging(server)[0]:
        return
    try:
        finish(server, pending.save, pending.force)
    except ReplyError:
        _cancel(server)


def abort(server: Any) -> bool:
    """SHUTDOWN ABORT: cancel a waiting shutdown; False if none is under way."""
    if server.pending_shutdown is None:
        if not getattr(server, "shutdown_asap", 0):
            return False
        server.shutdown_asap = 0  # a signal's shutdown the cron has not started yet
    else:
        _cancel(server)
    log.log(25, "Shutdown manually aborted.")
    return True


def _cancel(server: Any) -> None:
    pending, server.pending_shutdown = server.pending_shutdown, None
    server.shutdown_asap = 0  # a signal's request ends with the shutdown it started
    server.unpause("shutdown")
    for client in pending.clients:
        if client.blocked is not None:
            server.blocking.unblock(client, SHUTDOWN_FAILED)
