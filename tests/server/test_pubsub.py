"""Pub/Sub and keyspace notifications, side by side with Redis."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.support import RawClient, encode_command

Scenario = Callable[[RawClient, RawClient], list]


def _same_on_both(rill_server, oracle_server, scenario: Scenario) -> None:
    """Run ``scenario(first, second)`` with two fresh connections to each server and
    compare the transcripts it returns."""
    transcripts = []
    for port in (rill_server.port, oracle_server.port):
        first, second = RawClient(port), RawClient(port)
        try:
            transcripts.append(scenario(first, second))
        finally:
            first.close()
            second.close()
    assert transcripts[0] == transcripts[1]


def test_subscribe_publish_side_by_side(rill_server, oracle_server):
    def scenario(sub: RawClient, pub: RawClient) -> list:
        t = [sub.call("SUBSCRIBE", "a", "b")]
        t.append(sub.read_reply())
        t.append(sub.call("PSUBSCRIBE", "n*"))
        t.append(pub.call("PUBLISH", "a", "hello"))
        t.append(sub.read_reply())
        t.append(pub.call("PUBLISH", "news", "x"))
        t.append(sub.read_reply())
        t.append(pub.call("PUBLISH", "nobody", "x"))
        t.append(sub.read_reply())
        t.append(pub.call("PUBSUB", "NUMSUB", "a", "zz"))
        t.append(pub.call("PUBSUB", "NUMPAT"))
        t.append(sub.call("GET", "x"))
        t.append(sub.call("PING"))
        # Redis unsubscribes "all" in its dict's order: leave one channel so the order is fixed.
        t.append(sub.call("UNSUBSCRIBE", "a"))
        t.append(sub.call("UNSUBSCRIBE"))
        t.append(sub.call("PUNSUBSCRIBE"))
        t.append(sub.call("UNSUBSCRIBE"))
        t.append(sub.call("PING"))
        return t

    _same_on_both(rill_server, oracle_server, scenario)


def test_resp3_pushes_side_by_side(rill_server, oracle_server):
    def scenario(sub: RawClient, pub: RawClient) -> list:
        sub.call("HELLO", "3")
        t = [sub.call("SUBSCRIBE", "c")]
        t.append(pub.call("PUBLISH", "c", "m"))
        t.append(sub.read_reply())
        t.append(sub.call("GET", "nokey"))  # RESP3 clients may run commands while subscribed
        return t

    _same_on_both(rill_server, oracle_server, scenario)


def test_keyspace_events_side_by_side(rill_server, oracle_server):
    def scenario(sub: RawClient, cmd: RawClient) -> list:
        cmd.call("FLUSHALL")
        t = [cmd.call("CONFIG", "SET", "notify-keyspace-events", "KEA"),
             cmd.call("CONFIG", "GET", "notify-keyspace-events")]
        sub.call("PSUBSCRIBE", "__key*__:*")
        cmd.call("SET", "k", "v")
        cmd.call("LPUSH", "l", "a")
        cmd.call("DEL", "k")
        cmd.call("SET", "e", "1", "PX", "1")
        for _ in range(7):
            t.append(sub.read_reply())
        cmd.call("CONFIG", "SET", "notify-keyspace-events", "")
        return t

    _same_on_both(rill_server, oracle_server, scenario)


def test_config_renders_event_classes_like_redis(sbs):
    for flags in ("KEA", "Kx", "Eg$", "gKElsztxed", "AKEm", "bogus", "K"):
        sbs.check("CONFIG", "SET", "notify-keyspace-events", flags)
        sbs.check("CONFIG", "GET", "notify-keyspace-events")
    sbs.check("CONFIG", "SET", "notify-keyspace-events", "")


def test_new_key_events_side_by_side(rill_server, oracle_server):
    # 'n' is not part of 'A': only keys that did not exist fire "new", before the command's event.
    def scenario(sub: RawClient, cmd: RawClient) -> list:
        cmd.call("FLUSHALL")
        t = [cmd.call("CONFIG", "SET", "notify-keyspace-events", "KEnA")]
        sub.call("PSUBSCRIBE", "*")
        cmd.call("SET", "foo", "bar")
        cmd.call("SET", "foo", "baz")  # exists: no "new"
        cmd.call("XADD", "s", "1-1", "f", "v")
        cmd.call("RENAME", "s", "s2")
        for _ in range(10):
            t.append(sub.read_reply())
        cmd.call("CONFIG", "SET", "notify-keyspace-events", "En")
        cmd.call("HSET", "h", "f", "v")
        t.append(sub.read_reply())
        cmd.call("CONFIG", "SET", "notify-keyspace-events", "")
        cmd.call("SET", "quiet", "1")
        t.append(cmd.call("PING"))
        return t

    _same_on_both(rill_server, oracle_server, scenario)


@pytest.mark.parametrize("proto", ["2", "3"])
def test_subscribe_confirmations_ignore_client_reply_off(rill_server, oracle_server, proto):
    # Redis marks (un)subscribe confirmations as pushes: CLIENT REPLY OFF does not hide them.
    def scenario(sub: RawClient, pub: RawClient) -> list:
        sub.call("HELLO", proto)
        sub.send_raw(encode_command([b"CLIENT", b"REPLY", b"OFF"]))  # no reply to read
        t = [sub.call("SUBSCRIBE", "chan"), sub.call("PSUBSCRIBE", "ch*")]
        pub.call("PUBLISH", "chan", "hi")
        t += [sub.read_reply(), sub.read_reply()]
        t += [sub.call("UNSUBSCRIBE", "chan"), sub.call("PUNSUBSCRIBE")]
        return t

    _same_on_both(rill_server, oracle_server, scenario)


@pytest.mark.parametrize("proto", [2, 3])
def test_shard_channels_side_by_side(rill_server, oracle_server, proto):
    def scenario(sub: RawClient, pub: RawClient) -> list:
        if proto == 3:
            sub.call("HELLO", "3")
        t = [sub.call("SUNSUBSCRIBE")]  # nothing to leave: one confirmation, count 0
        t.append(sub.call("SSUBSCRIBE", "s1", "s2"))
        t.append(sub.read_reply())
        t.append(sub.call("SSUBSCRIBE", "s1"))  # again: confirmed, not counted twice
        # Shard subscriptions are counted apart from channels and patterns.
        t.append(sub.call("SUBSCRIBE", "c"))
        t.append(sub.call("PSUBSCRIBE", "s*"))
        t.append(pub.call("SPUBLISH", "s1", "hello"))
        t.append(sub.read_reply())  # only the smessage: patterns never see shard channels
        t.append(pub.call("PUBLISH", "s1", "plain"))
        t.append(sub.read_reply())  # the pattern's pmessage, not a shard delivery
        t.append(pub.call("SPUBLISH", "nobody", "x"))
        t.append(pub.call("PUBSUB", "SHARDCHANNELS", "s1"))
        t.append(pub.call("PUBSUB", "SHARDCHANNELS", "z*"))
        t.append(pub.call("PUBSUB", "SHARDNUMSUB", "s1", "s2", "c", "none"))
        t.append(pub.call("PUBSUB", "NUMSUB", "s1", "c"))
        t.append(pub.call("PUBSUB", "CHANNELS", "s*"))
        t.append(sub.call("PING"))
        t.append(sub.call("SUNSUBSCRIBE", "s2", "never"))
        t.append(sub.read_reply())
        t.append(sub.call("UNSUBSCRIBE"))
        t.append(sub.call("PUNSUBSCRIBE"))
        t.append(sub.call("GET", "k"))  # RESP2: still in subscribed mode through s1
        t.append(sub.call("SUNSUBSCRIBE"))
        t.append(sub.call("GET", "k"))
        t.append(pub.call("PUBSUB", "SHARDCHANNELS"))
        return t

    _same_on_both(rill_server, oracle_server, scenario)


def test_shard_subscriptions_in_client_list_info_and_transactions(rill_server, oracle_server):
    def scenario(sub: RawClient, pub: RawClient) -> list:
        t = [pub.call("MULTI"), pub.call("SSUBSCRIBE", "x"), pub.call("EXEC")]
        sub.call("SSUBSCRIBE", "a", "b")
        sub.read_reply()
        listing = pub.call("CLIENT", "LIST").decode()
        t.append(sorted(f for line in listing.splitlines() for f in line.split() if f.startswith(("ssub=", "flags="))))
        info = pub.call("INFO", "stats").decode()
        t.append([line for line in info.splitlines() if line.startswith("pubsubshard_channels:")])
        t.append(pub.call("RESET"))
        t.append(sub.call("RESET"))
        t.append(pub.call("PUBSUB", "SHARDNUMSUB", "a"))
        return t

    _same_on_both(rill_server, oracle_server, scenario)
