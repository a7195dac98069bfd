"""The propagation path's named feeds (server/propagation.py), in-process: which feed gets
a write's effects, in which order, and the one flag handlers ask before building effects."""

from __future__ import annotations

import pytest
from rill.server.commands import load_all
from rill.server.config import Config
from rill.server.server import Server


@pytest.fixture
def server():
    load_all()
    return Server()


def test_no_feed_means_not_propagating_and_no_effect_built(server):
    """XADD * rewrites itself to the real ID only when some feed would take it."""
    assert server.propagating is False
    rewrites = []
    server.rewrite_propagation = rewrites.append
    c = server.new_client()
    server.execute(c, [b"XADD", b"s", b"*", b"f", b"v"])
    assert rewrites == []
    server.propagation.attach("observer", lambda ops: None)
    server.execute(c, [b"XADD", b"s", b"*", b"f", b"v"])
    (argv,) = rewrites
    assert argv[:2] == [b"XADD", b"s"] and argv[2] != b"*" and argv[3:] == [b"f", b"v"]


def test_the_active_active_feed_alone_wants_no_commands():
    """Active-Active takes its ops from the streams: with only its feed attached, XADD *
    does not rewrite itself for nobody; with a command feed too, it does."""
    load_all()
    config = Config()
    config.set("active-active-id", "1", startup=True)
    server = Server(config)
    assert server.propagating is True and server.commands_wanted is False
    rewrites = []
    server.rewrite_propagation = rewrites.append
    c = server.new_client()
    server.execute(c, [b"XADD", b"s", b"*", b"f", b"v"])
    assert rewrites == [] and server.active_active.seq == 1
    server.propagation.attach("observer", lambda ops: None)
    assert server.commands_wanted is True
    server.execute(c, [b"XADD", b"s", b"*", b"f", b"v"])
    (argv,) = rewrites
    assert argv[:2] == [b"XADD", b"s"] and argv[2] != b"*" and server.active_active.seq == 2


def test_propagating_follows_attach_and_detach(server):
    feeds = server.propagation
    feeds.attach("aof", lambda ops: None)
    assert server.propagating is True
    feeds.attach("replication", lambda ops: None)
    feeds.detach("aof")
    assert server.propagating is True
    feeds.detach("replication")
    assert server.propagating is False and server.commands_wanted is False


def test_an_unknown_feed_name_is_refused(server):
    with pytest.raises(ValueError):
        server.propagation.attach("peers", lambda ops: None)
    with pytest.raises(ValueError):
        server.propagation.detach("sinks")
    assert server.propagating is False


def test_each_unit_goes_to_the_aof_then_the_replicas_then_the_observer(server):
    seen = []
    feeds = server.propagation
    # Attached in the opposite order: the order of the calls is propagate()'s, by name.
    feeds.attach("observer", lambda ops: seen.append(("observer", ops)))
    feeds.attach("replication", lambda ops: seen.append(("replication", ops)))
    feeds.attach("aof", lambda ops: seen.append(("aof", ops)))
    c = server.new_client()
    server.execute(c, [b"SET", b"k", b"v"])
    unit = [(0, [b"SET", b"k", b"v"])]
    assert seen == [("aof", unit), ("replication", unit), ("observer", unit)]


def test_suspended_feeds_get_nothing_and_come_back(server):
    seen = []
    server.propagation.attach("aof", seen.append)
    c = server.new_client()
    with server.propagation.suspended():
        assert server.propagating is False
        server.execute(c, [b"SET", b"a", b"1"])
    assert server.propagating is True
    server.execute(c, [b"SET", b"b", b"2"])
    assert seen == [[(0, [b"SET", b"b", b"2"])]]
