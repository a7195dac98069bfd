"""Keyspace events (notify-keyspace-events), as Redis's notify.c.

Writes call ``notify(db_id, cls, event, key)`` with Redis's class letter ('g'
generic, '$' string, 'l' list, 'x' expired, 'e' evicted, 'n' new, ...). When
notify-keyspace-events enables none, ``notifier`` is None and a hot handler
tests that one module attribute (``if notify.notifier is not None``) before
building anything; when it does, ``configure`` sets ``notifier`` to a callable
that publishes ``__keyspace@<db>__:<key>`` and ``__keyevent@<db>__:<event>``
through the server's Pub/Sub.

The notifier is one per process, like the config it follows: the server
configures it when it is built and on every CONFIG SET of the parameter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .server import Server

# The publishing callable, or None while no event class is enabled.
notifier: Callable[[int, str, bytes, bytes], None] | None = None

# What the 'A' alias stands for ('n', new-key events, is not part of it).
_ALL_CLASSES = "g$lshzxetd"


def notify(db_id: int, cls: str, event: bytes, key: bytes) -> None:
    """Fire a keyspace event if anyone listens (cheap when nobody does)."""
    if notifier is not None:
        notifier(db_id, cls, event, key)


def configure(server: Server) -> None:
    """Publish keyspace events for the classes notify-keyspace-events enables."""
    global notifier
    flags = server.config["notify-keyspace-events"]
    if not flags or not ({"K", "E"} & set(flags)):
        notifier = None
        server.keyspace.on_new = None
        return
    # The classes come from the value as given: its shown form drops 'n' next to 'A'.
    classes = set(server.config.given.get("notify-keyspace-events", flags))
    if "A" in classes:
        classes |= set(_ALL_CLASSES)
    keyspace, keyevent = "K" in classes, "E" in classes
    ps = server.pubsub

    def publish(db_id: int, cls: str, event: bytes, key: bytes) -> None:
        if cls not in classes:
            return
        if keyspace:
            ps.publish(b"__keyspace@%d__:%s" % (db_id, key), event)
        if keyevent:
            ps.publish(b"__keyevent@%d__:%s" % (db_id, event), key)

    notifier = publish
    # 'n' (not part of 'A'): a "new" event whenever a key is created, before the
    # creating command's own event, as Redis's dbAdd fires it.
    server.keyspace.on_new = (lambda db, key: publish(db.id, "n", b"new", key)) if "n" in classes else None
