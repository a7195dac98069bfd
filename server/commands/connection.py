"""Connection commands: PING, ECHO, HELLO, AUTH, SELECT, SWAPDB, QUIT, RESET."""

from __future__ import annotations

from rill.protocol.reply import OK, PONG, Map, ReplyError, Status

from .. import REDIS_VERSION
from ..client import REPLY_ON, Client
from .args import DB_RANGE, SYNTAX_ERR, get_int, redact, string2ll
from .table import TABLE, command

WRONGPASS = ReplyError("WRONGPASS invalid username-password pair or user is disabled.")


def ping(c: Client, argv: list[bytes]):
    if len(argv) > 2:
        raise ReplyError("ERR wrong number of arguments for 'ping' command")
    if c.subscriptions and not c.resp3:
        return [b"pong", argv[1] if len(argv) == 2 else b""]
    if len(argv) == 1:
        return PONG
    return argv[1]


# Registered after its definition: connection.pxd types it (a .pxd cannot type a decorated def).
command("ping")(ping)


def _probe() -> None:
    """Only its type matters: see _COMPILED."""


# Whether this module runs compiled (what ``cython.compiled`` says, without importing Cython).
_COMPILED = type(_probe).__name__ != "function"

if _COMPILED:
    # The dispatcher's C entry for PING (connection.pxd): a C call, not a Python one.
    _c_set_entry(TABLE.commands[b"ping"], ping, _e_ping)  # noqa: F821


@command("echo")
def echo(c: Client, argv: list[bytes]):
    return argv[1]


@command("auth")
def auth(c: Client, argv: list[bytes]):
    if len(argv) > 3:
        raise SYNTAX_ERR
    secrets = argv[1:]
    redact(argv, *range(1, len(argv)))
    if len(argv) == 2:
        if c.server.acl.default.nopass:
            raise ReplyError(
                "ERR AUTH <password> called without any password configured for the default "
                "user. Are you sure your configuration is correct?"
            )
        username, password = b"default", secrets[0]
    else:
        username, password = secrets
    if c.server.acl.authenticate(c, username, password, argv[0]):
        return OK
    raise WRONGPASS


def set_client_name(c: Client, name: bytes) -> None:
    for ch in name:
        if ch < 33 or ch > 126:
            raise ReplyError("ERR Client names cannot contain spaces, newlines or special characters.")
    c.name = name


@command("hello")
def hello(c: Client, argv: list[bytes]):
    ver = 0
    i = 1
    if len(argv) >= 2:
        ver = get_int(argv[1], "Protocol version is not an integer or out of range")
        i = 2
        if ver < 2 or ver > 3:
            raise ReplyError("NOPROTO unsupported protocol version")
    while i < len(argv):
        more = len(argv) - 1 - i
        opt = argv[i].lower()
        if opt == b"auth" and more >= 2:
            username, password = argv[i + 1], argv[i + 2]
            redact(argv, i + 1, i + 2)
            if not c.server.acl.authenticate(c, username, password, argv[0]):
                raise WRONGPASS
            i += 3
        elif opt == b"setname" and more:
            set_client_name(c, argv[i + 1])
            i += 2
        else:
            raise ReplyError(b"ERR Syntax error in HELLO option '%s'" % argv[i])
    if not c.logged_in:
        raise ReplyError(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the "
            "HELLO AUTH <user> <pass> option can be used to authenticate the client and select "
            "the RESP protocol version at the same time"
        )
    if ver:
        c.resp3 = ver == 3
    return _hello_reply(c)


def _hello_reply(c: Client) -> Map:
    return Map(
        [
            (b"server", b"redis"),
            (b"version", REDIS_VERSION.encode()),
            (b"proto", 3 if c.resp3 else 2),
            (b"id", c.id),
            (b"mode", b"standalone"),
            (b"role", b"master"),
            (b"modules", []),
        ]
    )


@command("select")
def select(c: Client, argv: list[bytes]):
    idx = get_int(argv[1])
    if idx < -(2**31) or idx > 2**31 - 1:
        raise ReplyError("ERR value is out of range, value must between -2147483648 and 2147483647")
    if idx < 0 or idx >= len(c.server.keyspace):
        raise DB_RANGE
    c.db = c.server.keyspace[idx]
    return OK


@command("swapdb")
def swapdb(c: Client, argv: list[bytes]):
    a = string2ll(argv[1])
    if a is None:
        raise ReplyError("ERR invalid first DB index")
    b = string2ll(argv[2])
    if b is None:
        raise ReplyError("ERR invalid second DB index")
    server = c.server
    n = len(server.keyspace)
    if a < 0 or a >= n or b < 0 or b >= n:
        raise DB_RANGE
    if a != b:
        ks = server.keyspace
        server.touch_all_watched(ks[a], ks[b])
        server.touch_all_watched(ks[b], ks[a])
        ks.swap(a, b)
        server.blocking.signal_db(a)
        server.blocking.signal_db(b)
        server.dirty += 1
    return OK


@command("quit")
def quit_(c: Client, argv: list[bytes]):
    c.close_after_reply = True
    return OK


@command("reset")
def reset(c: Client, argv: list[bytes]):
    server = c.server
    if c.multi is not None or c.watched:
        server.discard_transaction(c)
    if c.monitor:
        c.monitor = False
        if c in server.monitors:
            server.monitors.remove(c)
    server.pubsub.drop_client(c)
    c.db = server.keyspace[0]
    c.resp3 = False
    c.name = b""
    c.reply_mode = REPLY_ON
    c.no_evict = False
    c.no_touch = False
    if c.tracking:
        server.tracking.disable(c)
    server.acl.init_client(c)  # back to the default user, logged in if it needs no password
    return Status(b"RESET")
