"""FAILOVER: a coordinated switch of roles between this master and one of its replicas,
without losing a write (Redis 6.2's command, as 7.0 behaves).

The master pauses writes (the pause's own purpose, beside CLIENT PAUSE's), waits until
the chosen replica (or, with no TO, the first) has acknowledged the whole stream, then
follows it as a replica and sends its PSYNC with a FAILOVER argument: a replica that
gets one for its own replication ID promotes itself before answering, so the old
master continues as its replica with a partial resync. The switch ends, and the pause
with it, when that PSYNC is answered; a refusal (or ABORT, or TIMEOUT without FORCE)
leaves this server the master it was. FORCE goes ahead at the timeout even though the
target never caught up.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rill.protocol.reply import ReplyError

from ..disk import master_side
from .master import _notice, replica_address

if TYPE_CHECKING:
    from ..client import Client
    from ..server import Server

NO_FAILOVER = "no-failover"
WAIT_FOR_SYNC = "waiting-for-sync"
IN_PROGRESS = "failover-in-progress"


class Failover:
    """The state of one FAILOVER (INFO's master_failover_state)."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.state = NO_FAILOVER
        self.host: str | None = None
        self.port = 0
        self.end = 0.0  # time.monotonic() at TIMEOUT's end; 0: none
        self.force = False
        server.cron_hooks.append(self.cron)

    @property
    def active(self) -> bool:
        """A FAILOVER is under way (waiting for its target, or switching)."""
        return self.state != NO_FAILOVER

    def start(self, host: str | None, port: int, timeout_ms: int, force: bool) -> None:
        """FAILOVER [TO host port [FORCE]] [TIMEOUT ms], its arguments parsed."""
        server = self.server
        if self.state != NO_FAILOVER:
            raise ReplyError("ERR FAILOVER already in progress.")
        if server.replica_side.host is not None:
            raise ReplyError("ERR FAILOVER is not valid when server is a replica.")
        if not master_side(server).live_replicas():
            raise ReplyError("ERR FAILOVER requires connected replicas.")
        if force and (not timeout_ms or host is None):
            raise ReplyError("ERR FAILOVER with force option requires both a timeout and target HOST and IP.")
        if host is not None:
            target = self._replica_at(host, port)
            if target is None:
                raise ReplyError("ERR FAILOVER target HOST and PORT is not a replica.")
            if not target.repl.online:
                raise ReplyError("ERR FAILOVER target replica is not online.")
            self.host, self.port = host, port
            _notice("FAILOVER requested to %s:%d.", host, port)
        else:
            _notice("FAILOVER requested to any replica.")
        self.end = time.monotonic() + timeout_ms / 1000 if timeout_ms else 0.0
        self.force = force
        self.state = WAIT_FOR_SYNC
        server.pause("failover", float("inf"), writes_only=True)

    def abort(self, reason: str) -> None:
        """Give up: a server already following the target is a master again."""
        if self.state == NO_FAILOVER:
            return
        target = f"{self.host}:{self.port}" if self.host is not None else "any replica"
        _notice("FAILOVER to %s aborted: %s", target, reason)
        if self.state == IN_PROGRESS:
            self.server.replica_side.stop()
        self.clear()

    def clear(self) -> None:
        """The switch is over, done or not: writes go on (refused, if we now follow)."""
        self.state = NO_FAILOVER
        self.host, self.port = None, 0
        self.end = 0.0
        self.force = False
        self.server.unpause("failover")

    # -- the old master's PSYNC to its target -----------------------------------------
    @property
    def psync_flag(self) -> list[bytes]:
        """What the PSYNC to the target adds: FAILOVER, which makes it promote itself."""
        return [b"FAILOVER"] if self.state == IN_PROGRESS else []

    def psync_answered(self, accepted: bool) -> None:
        """The target's answer to that PSYNC: +CONTINUE or +FULLRESYNC end the switch
        (a full sync is unexpected but sound); an error abandons it."""
        if self.state != IN_PROGRESS:
            return
        if accepted:
            self.clear()
        else:
            self.abort("Failover target rejected psync request")

    # -- progress (every cron tick, as Redis runs its replication cron every 100 ms then)
    def cron(self) -> None:
        if self.state != WAIT_FOR_SYNC:
            return
        if self.end and time.monotonic() >= self.end:
            if self.force:
                _notice("FAILOVER to %s:%d time out exceeded, failing over.", self.host, self.port)
                self._follow_target()
            else:
                self.abort("Replica never caught up before timeout")
            return
        p = master_side(self.server)
        if self.host is not None:
            target = self._replica_at(self.host, self.port)
            caught_up = target is not None and target.repl.ack_offset == p.repl_offset
        else:
            caught_up = False
            for r in p.live_replicas():
                if r.repl.ack_offset == p.repl_offset:
                    self.host, self.port = replica_address(r), r.repl.listening_port
                    caught_up = True
                    break
        if caught_up:
            _notice("Failover target %s:%d is synced, failing over.", self.host, self.port)
            self._follow_target()

    def _follow_target(self) -> None:
        self.state = IN_PROGRESS
        assert self.host is not None
        self.server.replica_side.follow(self.host, self.port)

    def _replica_at(self, host: str, port: int) -> Client | None:
        for r in master_side(self.server).live_replicas():
            if replica_address(r).lower() == host.lower() and r.repl.listening_port == port:
                return r
        return None
