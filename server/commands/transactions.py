"""Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH."""

from __future__ import annotations

from rill.protocol.reply import NULL_ARRAY, OK, Raw, ReplyError
from rill.storage.keyspace import freeze_expiry_clock, release_expiry_clock

from ..client import Client
from ..outcomes import NO_REPLY
from .table import command


@command("multi")
def multi(c: Client, argv: list[bytes]):
    if c.multi is not None:
        raise ReplyError("ERR MULTI calls can not be nested")
    c.multi = []
    c.multi_dirty = False
    c.multi_flags = 0
    return OK


@command("discard")
def discard(c: Client, argv: list[bytes]):
    if c.multi is None:
        raise ReplyError("ERR DISCARD without MULTI")
    c.server.discard_transaction(c)
    return OK


@command("exec")
def exec_(c: Client, argv: list[bytes]):
    server = c.server
    if c.multi is None:
        raise ReplyError("ERR EXEC without MULTI")
    # An error while queuing wins over a touched WATCHed key: EXECABORT, not a nil reply.
    if c.multi_dirty:
        server.discard_transaction(c)
        raise ReplyError("EXECABORT Transaction discarded because of previous errors.")
    if c.dirty_cas or server.watched_key_expired(c):
        server.discard_transaction(c)
        return NULL_ARRAY
    queued = c.multi
    server.discard_transaction(c)  # unwatch first: our own writes must not dirty us
    c.reply(Raw(b"*%d\r\n" % len(queued)))
    c.in_exec = server.in_exec = True
    server.begin_exec_propagation()
    clock = freeze_expiry_clock()
    try:
        for cmd, args in queued:
            if not c.authenticated:
                # A restricted user's commands are checked again: its rules may have changed.
                denied = server.acl.exec_denied(c, cmd, args)
                if denied is not None:
                    server.count_error(denied)
                    c.reply(denied)
                    continue
            server.call(c, cmd, args)
    finally:
        release_expiry_clock(clock)
        c.in_exec = server.in_exec = False
        server.end_exec_propagation()
    return NO_REPLY


@command("watch")
def watch(c: Client, argv: list[bytes]):
    if c.multi is not None:
        raise ReplyError("ERR WATCH inside MULTI is not allowed")
    for key in argv[1:]:
        c.server.watch(c, key)
    return OK


@command("unwatch")
def unwatch(c: Client, argv: list[bytes]):
    c.server.unwatch_all(c)
    return OK
