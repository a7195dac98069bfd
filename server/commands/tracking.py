"""CLIENT TRACKING, CLIENT CACHING, CLIENT GETREDIR, CLIENT TRACKINGINFO: client-side
caching as Redis 6+ serves it. The state and the invalidations live in server/tracking.py."""

from __future__ import annotations

from rill.protocol.reply import OK, Map, ReplyError, Set

from ..client import (
    TRACKING_BCAST,
    TRACKING_CACHING,
    TRACKING_NOLOOP,
    TRACKING_ON,
    TRACKING_OPTIN,
    TRACKING_OPTOUT,
    Client,
)
from .args import SYNTAX_ERR, get_int
from .table import command

_OPTIONS = {b"bcast": TRACKING_BCAST, b"optin": TRACKING_OPTIN, b"optout": TRACKING_OPTOUT,
            b"noloop": TRACKING_NOLOOP}


def _prefix_collision(c: Client, prefixes: list[bytes]) -> ReplyError | None:
    """Two prefixes of one client overlap when one starts the other: a key would be
    announced twice (checkPrefixCollisionsOrReply)."""
    for i, p in enumerate(prefixes):
        for existing in c.tracking_prefixes or ():
            if p.startswith(existing) or existing.startswith(p):
                return ReplyError(
                    b"ERR Prefix '%s' overlaps with an existing prefix '%s'. "
                    b"Prefixes for a single client must not overlap." % (p, existing))
        for other in prefixes[i + 1:]:
            if p.startswith(other) or other.startswith(p):
                return ReplyError(
                    b"ERR Prefix '%s' overlaps with another provided prefix '%s'. "
                    b"Prefixes for a single client must not overlap." % (p, other))
    return None


@command("client|tracking")
def client_tracking(c: Client, argv: list[bytes]):
    server = c.server
    redirect = 0
    options = 0
    prefixes: list[bytes] = []
    j = 3
    n = len(argv)
    while j < n:
        opt = argv[j].lower()
        more = j + 1 < n
        if opt == b"redirect" and more:
            j += 1
            if redirect:
                raise ReplyError("ERR A client can only redirect to a single other client")
            redirect = get_int(argv[j])
            # Checked now, though the client may leave later (then the redirect is broken).
            if redirect not in server.clients:
                raise ReplyError("ERR The client ID you want redirect to does not exist")
        elif opt in _OPTIONS:
            options |= _OPTIONS[opt]
        elif opt == b"prefix" and more:
            j += 1
            prefixes.append(argv[j])
        else:
            raise SYNTAX_ERR
        j += 1
    status = argv[2].lower()
    if status == b"on":
        current = c.tracking
        if not options & TRACKING_BCAST and prefixes:
            raise ReplyError("ERR PREFIX option requires BCAST mode to be enabled")
        if current & TRACKING_ON and bool(current & TRACKING_BCAST) != bool(options & TRACKING_BCAST):
            raise ReplyError("ERR You can't switch BCAST mode on/off before disabling tracking for "
                             "this client, and then re-enabling it with a different mode.")
        if options & TRACKING_BCAST and options & (TRACKING_OPTIN | TRACKING_OPTOUT):
            raise ReplyError("ERR OPTIN and OPTOUT are not compatible with BCAST")
        if options & TRACKING_OPTIN and options & TRACKING_OPTOUT:
            raise ReplyError("ERR You can't specify both OPTIN mode and OPTOUT mode")
        if (options & TRACKING_OPTIN and current & TRACKING_OPTOUT) or (
                options & TRACKING_OPTOUT and current & TRACKING_OPTIN):
            raise ReplyError("ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for "
                             "this client, and then re-enabling it with a different mode.")
        if options & TRACKING_BCAST:
            err = _prefix_collision(c, prefixes)
            if err is not None:
                raise err
        server.tracking.enable(c, redirect, options, prefixes)
    elif status == b"off":
        server.tracking.disable(c)
    else:
        raise SYNTAX_ERR
    return OK


@command("client|caching")
def client_caching(c: Client, argv: list[bytes]):
    if not c.tracking:
        raise ReplyError("ERR CLIENT CACHING can be called only when the client is in tracking mode "
                         "with OPTIN or OPTOUT mode enabled")
    opt = argv[2].lower()
    if opt == b"yes":
        if not c.tracking & TRACKING_OPTIN:
            raise ReplyError("ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.")
    elif opt == b"no":
        if not c.tracking & TRACKING_OPTOUT:
            raise ReplyError("ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.")
    else:
        raise SYNTAX_ERR
    c.tracking |= TRACKING_CACHING  # for the next command (or transaction) only
    return OK


@command("client|getredir")
def client_getredir(c: Client, argv: list[bytes]):
    return c.tracking_redir if c.tracking else -1


@command("client|trackinginfo")
def client_trackinginfo(c: Client, argv: list[bytes]):
    info = c.server.tracking.info(c)
    return Map([
        (b"flags", Set(info["flags"])),
        (b"redirect", info["redirect"]),
        (b"prefixes", info["prefixes"]),
    ])
