"""Pub/Sub and keyspace notifications, side by side with Redis."""

from __future__ import annotations

from tests.support import RawClient


def _pair(port: int) -> tuple[RawClient, RawClient]:
    return RawClient(port), RawClient(port)


def test_subscribe_publish_side_by_side(rill_server, oracle_server):
    transcripts = []
    for port in (rill_server.port, oracle_server.port):
        sub, pub = _pair(port)
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
        transcripts.append(t)
        sub.close()
        pub.close()
    assert transcripts[0] == transcripts[1]


def test_resp3_pushes_side_by_side(rill_server, oracle_server):
    transcripts = []
    for port in (rill_server.port, oracle_server.port):
        sub, pub = _pair(port)
        sub.call("HELLO", "3")
        t = [sub.call("SUBSCRIBE", "c")]
        t.append(pub.call("PUBLISH", "c", "m"))
        t.append(sub.read_reply())
        t.append(sub.call("GET", "nokey"))  # RESP3 clients may run commands while subscribed
        transcripts.append(t)
        sub.close()
        pub.close()
    assert transcripts[0] == transcripts[1]


def test_keyspace_events_side_by_side(rill_server, oracle_server):
    transcripts = []
    for port in (rill_server.port, oracle_server.port):
        sub, cmd = _pair(port)
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
        transcripts.append(t)
        sub.close()
        cmd.close()
    assert transcripts[0] == transcripts[1]


def test_config_renders_event_classes_like_redis(sbs):
    for flags in ("KEA", "Kx", "Eg$", "gKElsztxed", "AKEm", "bogus", "K"):
        sbs.check("CONFIG", "SET", "notify-keyspace-events", flags)
        sbs.check("CONFIG", "GET", "notify-keyspace-events")
    sbs.check("CONFIG", "SET", "notify-keyspace-events", "")
