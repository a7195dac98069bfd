"""Pub/Sub: SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE, their UNSUBSCRIBEs, PUBLISH, SPUBLISH,
PUBSUB, and keyspace events.

Subscriptions live in three registries on the server (channel -> clients,
pattern -> clients, shard channel -> clients, insertion ordered like Redis's
lists); messages are pushed to subscribers' output and their connections are
woken to flush. Shard channels are Redis 7's cluster-scoped channels; on a
single server they are a namespace of their own (no patterns, "smessage"
deliveries, a subscription count of their own in the confirmations).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rill.protocol.reply import Push, ReplyError
from rill.storage.glob import compile_glob

from ..client import Client
from ..outcomes import NO_REPLY, ReplicasOnly
from . import keys as _keys
from .args import help_reply
from .table import MAY_REPLICATE, command

if TYPE_CHECKING:
    from ..server import Server


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
            _discard(self.channels, ch, client)
        for pat in client.pubsub_patterns:
            _discard(self.patterns, pat, client)
        for ch in client.pubsub_shard_channels:
            _discard(self.shard_channels, ch, client)
        client.pubsub_channels.clear()
        client.pubsub_patterns.clear()
        client.pubsub_shard_channels.clear()
        client.subscriptions = 0


def _discard(registry: dict[bytes, dict[Client, None]], name: bytes, client: Client) -> None:
    subs = registry.get(name)
    if subs is not None:
        subs.pop(client, None)
        if not subs:
            del registry[name]


def pubsub_of(server: Server) -> PubSub:
    ps = getattr(server, "pubsub", None)
    if ps is None:
        ps = server.pubsub = PubSub()
        server.pubsub_client_gone = ps.drop_client
        server.config_changed_hooks["notify-keyspace-events"] = lambda: _install_notifier(server)
        _install_notifier(server)
    return ps


def _count(c: Client) -> int:
    """What (un)subscribe confirmations report: channels and patterns, not shard channels."""
    return len(c.pubsub_channels) + len(c.pubsub_patterns)


def _recount(c: Client) -> None:
    c.subscriptions = len(c.pubsub_channels) + len(c.pubsub_patterns) + len(c.pubsub_shard_channels)


# (Un)subscribe confirmations are pushed like messages: CLIENT REPLY OFF/SKIP does not
# silence them (Redis marks these replies CLIENT_PUSHING, in RESP2 as in RESP3).


@command("subscribe")
def subscribe(c: Client, argv: list[bytes]):
    if c.in_exec:
        # Redis refuses SUBSCRIBE inside MULTI only when the client cannot take pushes.
        if not c.resp3:
            raise ReplyError("ERR SUBSCRIBE isn't allowed for a DENY BLOCKING client")
    ps = pubsub_of(c.server)
    for ch in argv[1:]:
        if ch not in c.pubsub_channels:
            c.pubsub_channels.add(ch)
            ps.channels.setdefault(ch, {})[c] = None
            _recount(c)
        c.push(Push([b"subscribe", ch, _count(c)]))
    return NO_REPLY


@command("psubscribe")
def psubscribe(c: Client, argv: list[bytes]):
    if c.in_exec and not c.resp3:
        raise ReplyError("ERR PSUBSCRIBE isn't allowed for a DENY BLOCKING client")
    ps = pubsub_of(c.server)
    for pat in argv[1:]:
        if pat not in c.pubsub_patterns:
            c.pubsub_patterns.add(pat)
            ps.patterns.setdefault(pat, {})[c] = None
            _recount(c)
        c.push(Push([b"psubscribe", pat, _count(c)]))
    return NO_REPLY


def _unsubscribe(c: Client, argv: list[bytes], patterns: bool) -> None:
    ps = pubsub_of(c.server)
    mine = c.pubsub_patterns if patterns else c.pubsub_channels
    registry = ps.patterns if patterns else ps.channels
    kind = b"punsubscribe" if patterns else b"unsubscribe"
    names = argv[1:] or list(mine)
    if not names:
        c.push(Push([kind, None, _count(c)]))
        return
    for name in names:
        if name in mine:
            mine.discard(name)
            _discard(registry, name, c)
            _recount(c)
        c.push(Push([kind, name, _count(c)]))


@command("unsubscribe")
def unsubscribe(c: Client, argv: list[bytes]):
    _unsubscribe(c, argv, patterns=False)
    return NO_REPLY


@command("punsubscribe")
def punsubscribe(c: Client, argv: list[bytes]):
    _unsubscribe(c, argv, patterns=True)
    return NO_REPLY


@command("publish", hidden_flags=MAY_REPLICATE)  # hidden in 7.0's COMMAND INFO
def publish(c: Client, argv: list[bytes]):
    # Replicas deliver it to their own subscribers (not the AOF: a message is not data).
    c.server.also_propagate(c.db.id, ReplicasOnly(argv))
    return pubsub_of(c.server).publish(argv[1], argv[2])


@command("ssubscribe")
def ssubscribe(c: Client, argv: list[bytes]):
    if c.in_exec:
        # Unlike SUBSCRIBE, no exception for transactions: EXEC denies blocking.
        raise ReplyError("ERR SSUBSCRIBE isn't allowed for a DENY BLOCKING client")
    ps = pubsub_of(c.server)
    mine = c.pubsub_shard_channels
    for ch in argv[1:]:
        if ch not in mine:
            mine.add(ch)
            ps.shard_channels.setdefault(ch, {})[c] = None
            _recount(c)
        c.push(Push([b"ssubscribe", ch, len(mine)]))
    return NO_REPLY


@command("sunsubscribe")
def sunsubscribe(c: Client, argv: list[bytes]):
    ps = pubsub_of(c.server)
    mine = c.pubsub_shard_channels
    names = argv[1:] or list(mine)
    if not names:
        c.push(Push([b"sunsubscribe", None, 0]))
        return NO_REPLY
    for name in names:
        if name in mine:
            mine.discard(name)
            _discard(ps.shard_channels, name, c)
            _recount(c)
        c.push(Push([b"sunsubscribe", name, len(mine)]))
    return NO_REPLY


@command("spublish", hidden_flags=MAY_REPLICATE)  # hidden in 7.0's COMMAND INFO
def spublish(c: Client, argv: list[bytes]):
    c.server.also_propagate(c.db.id, ReplicasOnly(argv))
    return pubsub_of(c.server).spublish(argv[1], argv[2])


@command("pubsub|shardchannels")
def pubsub_shardchannels(c: Client, argv: list[bytes]):
    ps = pubsub_of(c.server)
    if len(argv) == 3:
        match = compile_glob(argv[2])
        return [ch for ch in ps.shard_channels if match(ch)]
    return list(ps.shard_channels)


@command("pubsub|shardnumsub")
def pubsub_shardnumsub(c: Client, argv: list[bytes]):
    ps = pubsub_of(c.server)
    out: list = []
    for ch in argv[2:]:
        out += [ch, len(ps.shard_channels.get(ch, ()))]
    return out


@command("pubsub|channels")
def pubsub_channels(c: Client, argv: list[bytes]):
    ps = pubsub_of(c.server)
    if len(argv) == 3:
        match = compile_glob(argv[2])
        return [ch for ch in ps.channels if match(ch)]
    return list(ps.channels)


@command("pubsub|numsub")
def pubsub_numsub(c: Client, argv: list[bytes]):
    ps = pubsub_of(c.server)
    out: list = []
    for ch in argv[2:]:
        out += [ch, len(ps.channels.get(ch, ()))]
    return out


@command("pubsub|numpat")
def pubsub_numpat(c: Client, argv: list[bytes]):
    return pubsub_of(c.server).pattern_count()


@command("pubsub|help")
def pubsub_help(c: Client, argv: list[bytes]):
    return help_reply([
        "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CHANNELS [<pattern>]",
        "    Return the currently active channels matching a <pattern> (default: '*').",
        "NUMPAT",
        "    Return number of subscriptions to patterns.",
        "NUMSUB [<channel> ...]",
        "    Return the number of subscribers for the specified channels, excluding",
        "    pattern subscriptions(default: no channels).",
        "SHARDCHANNELS [<pattern>]",
        "    Return the currently active shard level channels matching a <pattern> (default: '*').",
        "SHARDNUMSUB [<shardchannel> ...]",
        "    Return the number of subscribers for the specified shard level channel(s)",
    ])


# -- keyspace notifications ------------------------------------------------------
_ALL_CLASSES = "g$lshzxetd"


def _install_notifier(server: Server) -> None:
    """Publish keyspace events for the classes notify-keyspace-events enables."""
    flags = server.config["notify-keyspace-events"]
    if not flags or not ({"K", "E"} & set(flags)):
        _keys.notifier = None
        server.keyspace.on_new = None
        return
    # The classes come from the value as given: its shown form drops 'n' next to 'A'.
    classes = set(server.config.given.get("notify-keyspace-events", flags))
    if "A" in classes:
        classes |= set(_ALL_CLASSES)
    keyspace, keyevent = "K" in classes, "E" in classes
    ps = server.pubsub

    def notify(db_id: int, cls: str, event: bytes, key: bytes) -> None:
        if cls not in classes:
            return
        if keyspace:
            ps.publish(b"__keyspace@%d__:%s" % (db_id, key), event)
        if keyevent:
            ps.publish(b"__keyevent@%d__:%s" % (db_id, event), key)

    _keys.notifier = notify
    # 'n' (not part of 'A'): a "new" event whenever a key is created, before the
    # creating command's own event, as Redis's dbAdd fires it.
    server.keyspace.on_new = (lambda db, key: notify(db.id, "n", b"new", key)) if "n" in classes else None


def setup(server: Server) -> None:
    """Attach the registry at start-up so keyspace events work before any SUBSCRIBE."""
    pubsub_of(server)
