"""Dialling other servers: the one way rill opens an outgoing link.

The replica's link to its master (replication/replica.py) and the Active-Active peer links
(activeactive/links.py) connect alike: on the event loop, within ``repl-timeout`` seconds,
and over TLS when ``tls-replication`` is yes, with the client context (our certificate; the
peer's chain checked against the CA; no host name check, as Redis's replicas do).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from .tls import TLSConfigError

if TYPE_CHECKING:
    from .server import Server

# Dial attempts under way: the loop keeps only weak references to its tasks.
_attempts: set[asyncio.Task] = set()


def dial(server: Server, factory: Callable[[], asyncio.Protocol], host: str, port: int,
         on_error: Callable[[str], None]) -> bool:
    """Start connecting to ``host:port``; ``factory`` makes the protocol once connected.

    False when no attempt could start (no loop yet, or the TLS configuration does not load,
    which the TLS layer has logged); ``on_error`` gets the reason when the attempt fails
    later (refused, timed out, TLS handshake)."""
    loop = server.loop
    if loop is None:
        return False
    config = server.config
    timeout = max(1, config.int("repl-timeout"))
    tls_context = None
    if config.bool("tls-replication"):
        try:
            tls_context = server.tls.client_context()
        except TLSConfigError:
            return False

    async def attempt() -> None:
        try:
            await asyncio.wait_for(
                loop.create_connection(factory, host, port, ssl=tls_context,
                                       server_hostname="" if tls_context is not None else None), timeout)
        except OSError as e:  # TimeoutError and TLS handshake failures included
            on_error(e.strerror or str(e) or "timed out")

    task = loop.create_task(attempt())
    _attempts.add(task)
    task.add_done_callback(_attempts.discard)
    return True
