"""Pub/Sub: SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE, their UNSUBSCRIBEs, PUBLISH, SPUBLISH
and PUBSUB.

Subscriptions live in the server's ``PubSub`` (server/pubsub.py); keyspace events
publish through it (server/notify.py). Shard channels are Redis 7's cluster-scoped
channels; on a single server they are a namespace of their own (no patterns,
"smessage" deliveries, a subscription count of their own in the confirmations).
"""

from __future__ import annotations

from rill.protocol.reply import Push, ReplyError
from rill.storage.glob import compile_glob

from ..client import Client
from ..outcomes import NO_REPLY, ReplicasOnly
from ..pubsub import discard_subscriber
from .args import help_reply
from .table import MAY_REPLICATE, command


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
    ps = c.server.pubsub
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
    ps = c.server.pubsub
    for pat in argv[1:]:
        if pat not in c.pubsub_patterns:
            c.pubsub_patterns.add(pat)
            ps.patterns.setdefault(pat, {})[c] = None
            _recount(c)
        c.push(Push([b"psubscribe", pat, _count(c)]))
    return NO_REPLY


def _unsubscribe(c: Client, argv: list[bytes], patterns: bool) -> None:
    ps = c.server.pubsub
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
            discard_subscriber(registry, name, c)
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
    return c.server.pubsub.publish(argv[1], argv[2])


@command("ssubscribe")
def ssubscribe(c: Client, argv: list[bytes]):
    if c.in_exec:
        # Unlike SUBSCRIBE, no exception for transactions: EXEC denies blocking.
        raise ReplyError("ERR SSUBSCRIBE isn't allowed for a DENY BLOCKING client")
    ps = c.server.pubsub
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
    ps = c.server.pubsub
    mine = c.pubsub_shard_channels
    names = argv[1:] or list(mine)
    if not names:
        c.push(Push([b"sunsubscribe", None, 0]))
        return NO_REPLY
    for name in names:
        if name in mine:
            mine.discard(name)
            discard_subscriber(ps.shard_channels, name, c)
            _recount(c)
        c.push(Push([b"sunsubscribe", name, len(mine)]))
    return NO_REPLY


@command("spublish", hidden_flags=MAY_REPLICATE)  # hidden in 7.0's COMMAND INFO
def spublish(c: Client, argv: list[bytes]):
    c.server.also_propagate(c.db.id, ReplicasOnly(argv))
    return c.server.pubsub.spublish(argv[1], argv[2])


@command("pubsub|shardchannels")
def pubsub_shardchannels(c: Client, argv: list[bytes]):
    ps = c.server.pubsub
    if len(argv) == 3:
        match = compile_glob(argv[2])
        return [ch for ch in ps.shard_channels if match(ch)]
    return list(ps.shard_channels)


@command("pubsub|shardnumsub")
def pubsub_shardnumsub(c: Client, argv: list[bytes]):
    ps = c.server.pubsub
    out: list = []
    for ch in argv[2:]:
        out += [ch, len(ps.shard_channels.get(ch, ()))]
    return out


@command("pubsub|channels")
def pubsub_channels(c: Client, argv: list[bytes]):
    ps = c.server.pubsub
    if len(argv) == 3:
        match = compile_glob(argv[2])
        return [ch for ch in ps.channels if match(ch)]
    return list(ps.channels)


@command("pubsub|numsub")
def pubsub_numsub(c: Client, argv: list[bytes]):
    ps = c.server.pubsub
    out: list = []
    for ch in argv[2:]:
        out += [ch, len(ps.channels.get(ch, ()))]
    return out


@command("pubsub|numpat")
def pubsub_numpat(c: Client, argv: list[bytes]):
    return c.server.pubsub.pattern_count()


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
