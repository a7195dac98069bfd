"""ACL: SETUSER, GETUSER, DELUSER, USERS, LIST, WHOAMI, CAT, GENPASS, LOG, DRYRUN,
SAVE, LOAD, HELP (Redis 7.0's aclCommand). The users and checks live in server.acl."""

from __future__ import annotations

import logging
import os
import time

from rill.protocol.reply import OK, Double, Map, ReplyError, Set

from .. import acl as _acl
from ..acl import (
    CATEGORIES,
    DENIED_CHANNEL,
    DENIED_CMD,
    DENIED_KEY,
    REASONS,
    UNIVERSE,
    RuleError,
    Selector,
    categories_of,
    has_spaces,
)
from ..client import Client
from .args import NOT_INT, help_reply, redact, string2ll
from .table import command

log = logging.getLogger("rill")

_NO_ACLFILE = ReplyError(
    "ERR This Redis instance is not configured to use an ACL file. You may want to specify users via "
    "the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration "
    "file set) in order to store users in the Redis configuration."
)


@command("acl|setuser")
def acl_setuser(c: Client, argv: list[bytes]):
    acl = c.server.acl
    name, rules = argv[2], argv[3:]
    redact(argv, *range(2, len(argv)))
    if has_spaces(name):
        raise ReplyError("ERR Usernames can't contain spaces or null characters")
    try:
        acl.apply_rules(acl.users.get(name), name, rules, c)
    except RuleError as e:
        raise ReplyError("ERR " + str(e).replace("\r", " ").replace("\n", " ")) from None
    return OK


@command("acl|deluser")
def acl_deluser(c: Client, argv: list[bytes]):
    acl = c.server.acl
    if any(name == b"default" for name in argv[2:]):
        raise ReplyError("ERR The 'default' user cannot be removed")
    deleted = 0
    for name in argv[2:]:
        user = acl.users.get(name)
        if user is not None:
            acl.delete_user(user, c)
            deleted += 1
    return deleted


def _selector_fields(s: Selector) -> list[tuple[bytes, bytes]]:
    return [(b"commands", s.describe_commands()), (b"keys", s.describe_keys()),
            (b"channels", s.describe_channels())]


@command("acl|getuser")
def acl_getuser(c: Client, argv: list[bytes]):
    u = c.server.acl.users.get(argv[2])
    if u is None:
        return None
    return Map([
        (b"flags", Set(u.flag_names())),
        (b"passwords", list(u.passwords)),
        *_selector_fields(u.root),
        (b"selectors", [Map(_selector_fields(s)) for s in u.selectors[1:]]),
    ])


@command("acl|users")
def acl_users(c: Client, argv: list[bytes]):
    return sorted(c.server.acl.users)


@command("acl|list")
def acl_list(c: Client, argv: list[bytes]):
    return c.server.acl.describe_all()


@command("acl|whoami")
def acl_whoami(c: Client, argv: list[bytes]):
    return c.user.name


@command("acl|load")
def acl_load(c: Client, argv: list[bytes]):
    filename = c.server.config["aclfile"]
    if not filename:
        raise _NO_ACLFILE
    errors = c.server.acl.load_file(filename, c)
    if errors:
        raise ReplyError("ERR " + errors)
    return OK


@command("acl|save")
def acl_save(c: Client, argv: list[bytes]):
    filename = c.server.config["aclfile"]
    if not filename:
        raise _NO_ACLFILE
    if not c.server.acl.save_file(filename):
        raise ReplyError("ERR There was an error trying to save the ACLs. Please check the server logs for "
                         "more information")
    return OK


def _subcommand_error(argv: list[bytes]) -> ReplyError:
    return ReplyError(b"ERR unknown subcommand or wrong number of arguments for '%s'. Try %s HELP."
                      % (argv[1][:128], argv[0].upper()))


@command("acl|cat")
def acl_cat(c: Client, argv: list[bytes]):
    if len(argv) == 2:
        return [cat.encode() for cat in CATEGORIES]
    if len(argv) != 3:
        raise _subcommand_error(argv)
    cat = argv[2].lower().decode(errors="replace")
    if cat not in CATEGORIES:
        raise ReplyError(b"ERR Unknown category '%s'" % argv[2][:128])
    out = []
    u = UNIVERSE.refresh()
    for cmd in u.tops:
        for one in (cmd, *u.subcommands(cmd)):
            if cat in categories_of(one):
                out.append(one.fullname.encode())
    return out


@command("acl|genpass")
def acl_genpass(c: Client, argv: list[bytes]):
    bits = 256
    if len(argv) == 3:
        v = string2ll(argv[2])
        if v is None:
            raise NOT_INT
        bits = v
    elif len(argv) > 3:
        raise _subcommand_error(argv)
    if bits <= 0 or bits > 4096:
        raise ReplyError("ERR ACL GENPASS argument must be the number of bits for the output password, "
                         "a positive number up to 4096")
    chars = (bits + 3) // 4
    return os.urandom((chars + 1) // 2).hex()[:chars].encode()


@command("acl|log")
def acl_log(c: Client, argv: list[bytes]):
    acl = c.server.acl
    count = 10
    if len(argv) == 3:
        if argv[2].lower() == b"reset":
            acl.log.clear()
            return OK
        v = string2ll(argv[2])
        if v is None:
            raise NOT_INT
        count = max(v, 0)
    elif len(argv) > 3:
        raise _subcommand_error(argv)
    now = int(time.time() * 1000)
    out = []
    for e in list(acl.log)[:count]:
        out.append(Map([
            (b"count", e.count),
            (b"reason", REASONS[e.reason]),
            (b"context", e.context),
            (b"object", e.object),
            (b"username", e.username),
            (b"age-seconds", Double((now - e.ctime) / 1000)),
            (b"client-info", e.cinfo),
        ]))
    return out


@command("acl|dryrun")
def acl_dryrun(c: Client, argv: list[bytes]):
    server = c.server
    u = server.acl.users.get(argv[2])
    if u is None:
        raise ReplyError(b"ERR User '%s' not found" % argv[2])
    args = argv[3:]
    cmd = server.table.lookup(args) or UNIVERSE.lookup_argv(args)
    if cmd is None:
        raise ReplyError(b"ERR Command '%s' not found" % argv[3])
    if (cmd.arity > 0 and cmd.arity != len(args)) or len(args) < -cmd.arity:
        raise ReplyError(f"ERR wrong number of arguments for '{cmd.fullname}' command")
    res, idx = u.check(cmd, args)
    if res == _acl.OK:
        return OK
    if res == DENIED_CMD:
        return f"This user has no permissions to run the '{cmd.fullname}' command".encode()
    what = {DENIED_KEY: b"key", DENIED_CHANNEL: b"channel"}[res]
    return b"This user has no permissions to access the '%s' %s" % (args[idx], what)


@command("acl|help")
def acl_help(c: Client, argv: list[bytes]):
    return help_reply([
        "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CAT [<category>]",
        "    List all commands that belong to <category>, or all command categories",
        "    when no category is specified.",
        "DELUSER <username> [<username> ...]",
        "    Delete a list of users.",
        "DRYRUN <username> <command> [<arg> ...]",
        "    Returns whether the user can execute the given command without executing the command.",
        "GETUSER <username>",
        "    Get the user's details.",
        "GENPASS [<bits>]",
        "    Generate a secure 256-bit user password. The optional `bits` argument can",
        "    be used to specify a different size.",
        "LIST",
        "    Show users details in config file format.",
        "LOAD",
        "    Reload users from the ACL file.",
        "LOG [<count> | RESET]",
        "    Show the ACL log entries.",
        "SAVE",
        "    Save the current config to the ACL file.",
        "SETUSER <username> <attribute> [<attribute> ...]",
        "    Create or modify a user with the specified attributes.",
        "USERS",
        "    List all the registered usernames.",
        "WHOAMI",
        "    Return the current connection username.",
    ])
