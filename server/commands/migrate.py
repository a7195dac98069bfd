"""MIGRATE: keys moved to another server as DUMP payloads, then deleted here.

The connections themselves (cached per target, closed by the cron when idle) are
server/migrate.py's; the payloads are DUMP's (commands/persistence.py).
"""

from __future__ import annotations

import time

from rill.persistence.aof import encode_command
from rill.protocol.reply import OK, ReplyError, Status

from .. import notify as events
from ..client import Client
from ..migrate import links_of
from .args import SYNTAX_ERR, get_int, redact
from .persistence import dump_payload
from .table import command


class _SocketError(Exception):
    """MIGRATE lost its connection: ``writing`` says in which direction, ``retry`` whether
    nothing was done and the connection merely died (not timed out), ``reply`` the
    target's error to report instead of the I/O error."""

    def __init__(self, writing: bool, retry: bool, reply: ReplyError | None = None) -> None:
        self.writing = writing
        self.retry = retry
        self.reply = reply


def _migrate_keys(argv: list[bytes]) -> list[tuple[int, int]]:
    """migrateGetKeys: the key at 3, or everything after KEYS (AUTH and AUTH2 skip their
    arguments); none when KEYS comes with a non-empty key argument. Spec 0 is the
    single key's, spec 1 the KEYS list's."""
    i = 6
    while i < len(argv):
        word = argv[i].lower()
        if word == b"keys":
            if argv[3]:
                return []
            return [(k, 1) for k in range(i + 1, len(argv))]
        i += {b"auth": 1, b"auth2": 2}.get(word, 0) + 1
    return [(3, 0)]


@command("migrate", getkeys=_migrate_keys)
def migrate(c: Client, argv: list[bytes]):
    """MIGRATE host port key|"" db timeout [COPY] [REPLACE] [AUTH pw] [AUTH2 user pw] [KEYS k...].

    RESTOREs each key on the target (DUMP payloads, TTLs as they stand) and, unless
    COPY, deletes the keys the target acknowledged: those deletions are what
    replicas and the AOF see, as one DEL. A cached connection that turns out to be
    dead (not slow) is reopened once before the error is reported.
    """
    n = len(argv)
    copy = replace = False
    username = password = None
    first_key, num_keys = 3, 1
    j = 6
    while j < n:
        opt = argv[j].lower()
        more = n - 1 - j
        if opt == b"copy":
            copy = True
        elif opt == b"replace":
            replace = True
        elif opt == b"auth":
            if not more:
                raise SYNTAX_ERR
            j += 1
            password = argv[j]
            redact(argv, j)
        elif opt == b"auth2":
            if more < 2:
                raise SYNTAX_ERR
            username, password = argv[j + 1], argv[j + 2]
            redact(argv, j + 1, j + 2)
            j += 2
        elif opt == b"keys":
            if argv[3]:
                raise ReplyError(
                    "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string"
                )
            first_key, num_keys = j + 1, n - j - 1
            break
        else:
            raise SYNTAX_ERR
        j += 1
    timeout_ms = get_int(argv[5])
    dbid = get_int(argv[4])
    if timeout_ms <= 0:
        timeout_ms = 1000
    timeout = timeout_ms / 1000
    db = c.db
    found = []
    for key in argv[first_key : first_key + num_keys]:
        value = db.lookup_read(key)
        if value is not None:
            found.append((key, value))
    if not found:
        return Status(b"NOKEY")
    links = links_of(c.server)
    host, port = argv[1], argv[2]
    may_retry = True
    while True:
        link = links.get(host, port, timeout)
        if link is None:
            raise ReplyError("IOERR error or timeout connecting to the client")
        try:
            return _migrate_over(c, link, found, dbid, timeout, copy, replace, username, password)
        except _SocketError as e:
            links.close(host, port)
            if e.reply is not None:
                raise e.reply from None
            if may_retry and e.retry:
                may_retry = False
                continue
            raise ReplyError(
                "IOERR error or timeout %s to target instance" % ("writing" if e.writing else "reading")
            ) from None


def _migrate_over(c: Client, link, found: list, dbid: int, timeout: float, copy: bool, replace: bool,
                  username: bytes | None, password: bytes | None):
    """One attempt of MIGRATE over ``link``; raises _SocketError when it may be retried
    or has to be reported as an I/O error."""
    db = c.db
    request = []
    if password is not None:
        request.append(encode_command([b"AUTH", password] if username is None else [b"AUTH", username, password]))
    select = link.last_dbid != dbid
    if select:
        request.append(encode_command([b"SELECT", b"%d" % dbid]))
    now = int(time.time() * 1000)
    sent = []
    for key, value in found:
        ttl = 0
        when = db.get_expire(key)
        if when is not None:
            ttl = when - now
            if ttl < 0:
                continue  # expired since it was looked up
            ttl = max(ttl, 1)
        sent.append(key)
        restore = [b"RESTORE", key, b"%d" % ttl, dump_payload(c, value)]
        if replace:
            restore.append(b"REPLACE")
        request.append(encode_command(restore))
    try:
        link.send(b"".join(request), timeout)
    except OSError as e:
        raise _SocketError(True, not isinstance(e, TimeoutError)) from None
    try:
        auth_reply = link.read_line(timeout) if password is not None else b"+OK"
        select_reply = link.read_line(timeout) if select else b"+OK"
    except OSError as e:
        raise _SocketError(False, not isinstance(e, TimeoutError)) from None
    error = None
    lost: OSError | None = None
    deleted = []
    for i, key in enumerate(sent):
        try:
            reply = link.read_line(timeout)
        except OSError as e:
            if i == 0 and not isinstance(e, TimeoutError):
                raise _SocketError(False, True) from None  # nothing was done: try again
            lost = e
            break
        failed = next((r for r in (auth_reply, select_reply, reply) if r[:1] == b"-"), None)
        if failed is not None:
            if error is None:
                link.last_dbid = -1
                error = ReplyError(b"ERR Target instance replied with error: " + failed[1:])
        elif not copy:
            db.delete(key)
            db.modified(key)
            events.notify(db.id, "g", b"del", key)
            c.server.dirty += 1
            deleted.append(key)
    if deleted:
        c.server.rewrite_propagation([b"DEL", *deleted])
    if lost is not None:
        raise _SocketError(False, False, error)  # some keys may have moved: never retried
    if error is not None:
        raise error
    link.last_dbid = dbid
    return OK
