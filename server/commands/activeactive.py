"""ACTIVEACTIVE: the operator's view of Active-Active, and the link protocol peers speak.

docs/active-active.md describes every subcommand. STATUS, PAUSE, RESUME and WAIT are for
operators and tests; HELLO, APPLY and PING are what a peer's link sends (APPLY is also
what the AOF holds). The work is the engine's (server/activeactive/engine.py) and the
links' (links.py): the handlers parse and reply.
"""

from __future__ import annotations

from rill.protocol.effects import decode_apply, encode_vc
from rill.protocol.reply import OK, Map, ReplyError

from ..activeactive.engine import ActiveActive, parse_vc
from ..activeactive.state import merge_state
from ..blocking import parse_timeout
from ..client import Client
from .args import get_int
from .table import arg, command, command_spec

NOT_ENABLED = ReplyError("ERR Active-Active is not enabled (active-active-id is 0)")


def _spec(sub: str, arity: int, flags: list[str], summary: str, args: list) -> dict:
    return command_spec(
        f"activeactive|{sub}", arity, flags, ["@admin", "@slow", "@dangerous"],
        group="server", summary=summary, since="rill", complexity="O(1)", args=args,
    )


_LINK_FLAGS = ["admin", "noscript", "stale", "skip_monitor"]
_CONTAINER = command_spec(
    "activeactive", -2, [], ["@slow"], group="server",
    summary="Active-Active status, pauses, waits, and the link protocol between peers.",
    since="rill", complexity="Depends on subcommand.", args=[],
)


def engine_of(c: Client) -> ActiveActive:
    engine = c.server.active_active
    if engine is None:
        raise NOT_ENABLED
    return engine


@command("activeactive", spec=_CONTAINER)
def activeactive(c: Client, argv: list[bytes]):
    raise ReplyError(
        f"ERR unknown subcommand '{argv[1].decode(errors='replace')}'. Try ACTIVEACTIVE STATUS."
        if len(argv) > 1 else "ERR wrong number of arguments for 'activeactive' command"
    )


@command("activeactive|status", spec=_spec(
    "status", 2, ["admin", "noscript", "loading", "stale"],
    "Each peer's link: up or down, sync kind, effects sent and acknowledged, lag, backlog.", []))
def aa_status(c: Client, argv: list[bytes]):
    links = engine_of(c).links
    return [Map(row) for row in links.status()] if links is not None else []


def _peer_arg(argv: list[bytes]) -> bytes | None:
    return argv[2] if len(argv) > 2 else None


@command("activeactive|pause", spec=_spec(
    "pause", -2, ["admin", "noscript", "loading", "stale"],
    "Stop sending effects to one peer or all; they queue in the backlog.",
    [arg("peer", "string", optional=True)]))
def aa_pause(c: Client, argv: list[bytes]):
    return _pause_resume(c, argv, pause=True)


@command("activeactive|resume", spec=_spec(
    "resume", -2, ["admin", "noscript", "loading", "stale"],
    "Send effects to one peer or all again.", [arg("peer", "string", optional=True)]))
def aa_resume(c: Client, argv: list[bytes]):
    return _pause_resume(c, argv, pause=False)


def _pause_resume(c: Client, argv: list[bytes], pause: bool):
    if len(argv) > 3:
        raise ReplyError(f"ERR wrong number of arguments for 'activeactive|{'pause' if pause else 'resume'}' command")
    links = engine_of(c).links
    peer = _peer_arg(argv)
    done = links is not None and (links.pause(peer) if pause else links.resume(peer))
    if not done and peer is not None:
        raise ReplyError(f"ERR no such Active-Active peer '{peer.decode(errors='replace')}'")
    return OK


@command("activeactive|wait", spec=_spec(
    "wait", 3, ["noscript"],
    "Block until every peer applied this instance's effects so far, or the timeout (ms).",
    [arg("timeout", "integer")]))
def aa_wait(c: Client, argv: list[bytes]):
    engine = engine_of(c)
    timeout = parse_timeout(argv[2], unit_ms=True)
    links = engine.links
    if links is None:
        return 0
    return links.wait(c, engine.seq, timeout)


# -- the link protocol -------------------------------------------------------------------


@command("activeactive|hello", spec=_spec(
    "hello", 4, _LINK_FLAGS, "A peer's link opens: where to resume, and whether to send all state.",
    [arg("region", "integer"), arg("clock", "string")]))
def aa_hello(c: Client, argv: list[bytes]):
    engine = engine_of(c)
    peer = _region(argv[2])
    region, vc, full = engine.hello(peer, parse_vc(argv[3]))
    return [region, encode_vc(vc), int(full)]


@command("activeactive|apply", spec=_spec(
    "apply", -3, _LINK_FLAGS, "Apply a peer's effects (the AOF holds the same records).",
    [arg("record", "string", multiple=True)]))
def aa_apply(c: Client, argv: list[bytes]):
    """One bulk of compact records (many effects, in order), or one record as argv (the
    format AOFs from before it hold). The reply is the acknowledgement: how many of the
    last record's origin's effects are applied here."""
    # Once per batch: the states themselves, not their gating descriptors.
    server = c.server
    engine = server._active_active
    if engine is None:
        raise NOT_ENABLED
    try:
        # Each effect's record bytes only when an AOF will keep them (engine._apply).
        effects = decode_apply(argv, 2, server._loading or server.propagation.aof is not None)
    except ValueError as exc:
        raise ReplyError(f"ERR invalid Active-Active effect: {exc}") from None
    if server._loading:
        for e in effects:
            engine.replay(e)
    else:
        return engine.receive_all(effects)
    return engine.applied(effects[-1].origin)


@command("activeactive|ping", spec=_spec(
    "ping", 4, _LINK_FLAGS, "A peer's heartbeat, with its clock; the reply acknowledges its effects.",
    [arg("region", "integer"), arg("clock", "string")]))
def aa_ping(c: Client, argv: list[bytes]):
    engine = engine_of(c)
    return engine.heard(_region(argv[2]), parse_vc(argv[3]))


@command("activeactive|merge", spec=_spec(
    "merge", 5, _LINK_FLAGS, "A full sync: merge a peer's whole Active-Active state into this one's.",
    [arg("region", "integer"), arg("clock", "string"), arg("payload", "string")]))
def aa_merge(c: Client, argv: list[bytes]):
    engine = engine_of(c)
    origin = _region(argv[2])
    parse_vc(argv[3])  # the payload carries the clock it stands for; a malformed one is refused
    try:
        merge_state(c.server, argv[4])
    except ValueError as exc:
        raise ReplyError(f"ERR invalid Active-Active state: {exc}") from None
    engine.merged(origin)
    return OK


def _region(raw: bytes) -> int:
    region = get_int(raw)
    if not 1 <= region <= 255:
        raise ReplyError("ERR invalid Active-Active region")
    return region
