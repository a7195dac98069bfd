"""Active-Active: several instances accept writes to the same keys and converge.

docs/active-active.md states the rules. Layout:
    engine    effects made from writes, peers' effects applied, clocks, tombstones, TTLs
    keyed     strings, hashes, sets and sorted sets: their ops, apply and merge (cells)
    lists     lists: element positions, their ops, apply and merge
    hll       HyperLogLogs: registers merged by maximum, delete-wins
    backlog   this instance's own effect records, kept for partial resyncs
    links     one outbound link per peer: handshake, resync, records out, acks in
    plain     ordinary commands that mirror an applied peer op, for plain replicas
    state     the whole Active-Active state as one payload (full sync), and its merge

The engine is on while ``active-active-id`` is not 0. Its feed sits on the one
propagation path (server/propagation.py); ``Server.call`` runs writes through it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rill.storage.stream.active import ActiveStream

from ..config import ConfigError, parse_peers
from .engine import ActiveActive
from .links import PeerLinks

if TYPE_CHECKING:
    from ..server import Server


def install(server: Server) -> None:
    """Turn the mode on if configured, and follow the parameters' changes."""
    config = server.config
    config.appliers["active-active-id"] = lambda value: _change_id(server, int(value))
    server.config_changed_hooks["active-active-xadd-id-mode"] = lambda: _id_mode(server)
    server.config_changed_hooks["active-active-backlog-size"] = lambda: _backlog_size(server)
    server.cron_hooks.append(lambda: _cron(server))
    config.appliers["active-active-peers"] = lambda value: _peers(server, value)
    server.shutdown_hooks.append(lambda: _close_links(server))
    _id_mode(server)
    region = config.int("active-active-id")
    if region:
        enable(server, region)


def enable(server: Server, region: int) -> ActiveActive:
    """Start the engine for ``region``: its feed joins the propagation path."""
    engine = ActiveActive(server, region, server.config.int("active-active-backlog-size"))
    server.active_active = engine
    server.propagation.attach("active_active", engine.seal)
    engine.links = PeerLinks(server, engine)
    engine.links.configure(parse_peers(server.config["active-active-peers"]))
    return engine


def _peers(server: Server, value: str) -> None:
    """CONFIG SET active-active-peers: links to peers no longer named close, new ones open."""
    engine = server.active_active
    if engine is not None:
        engine.links.configure(parse_peers(value))


def _close_links(server: Server) -> None:
    engine = server.active_active
    if engine is not None:
        engine.links.close()


def _change_id(server: Server, region: int) -> None:
    engine = server.active_active
    current = engine.region if engine is not None else 0
    if region == current:
        return
    if current:
        raise ConfigError("the Active-Active region of a running instance cannot change")
    if any(len(db) for db in server.keyspace):
        raise ConfigError("Active-Active can only be turned on over an empty dataset")
    enable(server, region)


def _id_mode(server: Server) -> None:
    ActiveStream.id_mode = server.config["active-active-xadd-id-mode"]


def _backlog_size(server: Server) -> None:
    engine = server.active_active
    if engine is not None:
        engine.backlog.resize(server.config.int("active-active-backlog-size"))


def _cron(server: Server) -> None:
    engine = server.active_active
    if engine is not None and engine.tombstones:
        engine.collect_tombstones()


__all__ = ["ActiveActive", "enable", "install"]
