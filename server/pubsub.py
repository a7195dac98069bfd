"""Pub/Sub's subscriptions: who listens to which channel, pattern and shard channel.

Three registries (channel -> clients, pattern -> clients, shard channel -> clients,
insertion ordered like Redis's lists); a message is pushed to each subscriber's output
and its connection is woken to flush. The server builds one (``server.pubsub``); the
commands are in commands/pubsub.py and keyspace events publish through it (notify.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rill.protocol.reply import Push
from rill.storage.glob import compile_glob

if TYPE_CHECKING:
    from .client import Client


class PubSub:
    """channel -> subscribers and pattern -> subscribers, in subscription order."""

    def __init__(self) -> None:
        self.channels: dict[bytes, dict[Client, None]] = {}
        self.patterns: dict[bytes, dict[Client, None]] = {}
        self.shard_channels: dict[bytes, dict[Client, None]] = {}

    def channel_count(self) -> int:
        return len(self.channels)

    def pattern_count(self) -> int:
        return len(self.patterns)

    def publish(self, channel: bytes, message: bytes) -> int:
        receivers = 0
        for client in list(self.channels.get(channel, ())):
            client.push(Push([b"message", channel, message]))
            receivers += 1
        for pattern, clients in list(self.patterns.items()):
            if compile_glob(pattern)(channel):
                for client in list(clients):
                    client.push(Push([b"pmessage", pattern, channel, message]))
                    receivers += 1
        return receivers

    def spublish(self, channel: bytes, message: bytes) -> int:
        clients = list(self.shard_channels.get(channel, ()))
        for client in clients:
            client.push(Push([b"smessage", channel, message]))
        return len(clients)

    def drop_client(self, client: Client) -> None:
        for ch in client.pubsub_channels:
            discard_subscriber(self.channels, ch, client)
        for pat in client.pubsub_patterns:
            discard_subscriber(self.patterns, pat, client)
        for ch in client.pubsub_shard_channels:
            discard_subscriber(self.shard_channels, ch, client)
        client.pubsub_channels.clear()
        client.pubsub_patterns.clear()
        client.pubsub_shard_channels.clear()
        client.subscriptions = 0


def discard_subscriber(registry: dict[bytes, dict[Client, None]], name: bytes, client: Client) -> None:
    """Take ``client`` off ``name`` in one of the registries, dropping an emptied entry."""
    subs = registry.get(name)
    if subs is not None:
        subs.pop(client, None)
        if not subs:
            del registry[name]
