"""ACL users, their rules and the permission checks, as Redis 7.0's acl.c has them.

A user has flags (on/off, nopass, payload sanitizing), SHA-256 password hashes and
selectors: the root selector (rules given outside parentheses) and any number of
``(...)`` selectors. A command runs when at least one selector allows the command,
every key it names (with the read/write access its key specs say) and every
channel it publishes or subscribes to.

Commands are bits in a Python int per selector (ids given in command-table
order), so categories apply and count as mask operations, and ACL GETUSER can
describe a selector with Redis's best-fit category algorithm.

The dispatcher's fast path knows nothing of this: a client whose user may run
everything (the ``default`` user out of the box) keeps ``client.authenticated``
true; any other client has it false and takes the checked path (``Acl.denied``).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import sys
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from rill.protocol.parser import split_args
from rill.protocol.reply import ReplyError
from rill.storage.glob import compile_glob

from .commands import load_all
from .commands.table import (
    KEY_READ,
    KEY_WRITE,
    NO_AUTH,
    TABLE,
    Command,
    redis_command,
    redis_commands,
    redis_subcommands,
)

if TYPE_CHECKING:
    from .client import Client
    from .server import Server

log = logging.getLogger("rill")

# In ACL CAT's order (Redis's ACLCommandCategories).
CATEGORIES = (
    "keyspace", "read", "write", "set", "sortedset", "list", "hash", "string", "bitmap",
    "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow", "blocking",
    "dangerous", "connection", "transaction", "scripting",
)

# Key pattern permissions (%R~, %W~, ~ is both).
READ = KEY_READ  # the key access a key spec grants (command table)
WRITE = KEY_WRITE
ALL = READ | WRITE

# Check results, ordered as Redis orders them when picking the error to report.
OK = 0
DENIED_CMD = 1
DENIED_KEY = 2
DENIED_AUTH = 3
DENIED_CHANNEL = 4

REASONS = {DENIED_CMD: b"command", DENIED_KEY: b"key", DENIED_AUTH: b"auth", DENIED_CHANNEL: b"channel"}

NOPERM = {
    DENIED_CMD: None,  # names the command
    DENIED_KEY: ReplyError("NOPERM this user has no permissions to access one of the keys used as arguments"),
    DENIED_CHANNEL: ReplyError(
        "NOPERM this user has no permissions to access one of the channels used as arguments"
    ),
}
# getAclErrorMessage: scripts prefix it with "The user executing the script ".
SCRIPT_REASONS = {
    DENIED_CMD: b"can't run this command or subcommand",
    DENIED_KEY: b"can't access at least one of the keys mentioned in the command arguments",
    DENIED_CHANNEL: b"can't publish to the channel mentioned in the command",
}
# EXEC re-checks queued commands; the reason it gives when the rules changed meanwhile.
EXEC_REASONS = {
    DENIED_CMD: b"no permission to execute the command or subcommand",
    DENIED_KEY: b"no permission to touch the specified keys",
    DENIED_CHANNEL: b"no permission to access one of the channels used as arguments",
}

# Channel arguments (db.c's commands_with_channels): name -> (flags, first, count).
PUBLISH, SUBSCRIBE, UNSUBSCRIBE, PATTERN = 1, 2, 4, 8
_CHANNEL_COMMANDS = {
    "subscribe": (SUBSCRIBE, 1, -1),
    "ssubscribe": (SUBSCRIBE, 1, -1),
    "unsubscribe": (UNSUBSCRIBE, 1, -1),
    "sunsubscribe": (UNSUBSCRIBE, 1, -1),
    "psubscribe": (PATTERN | SUBSCRIBE, 1, -1),
    "punsubscribe": (PATTERN | UNSUBSCRIBE, 1, -1),
    "publish": (PUBLISH, 1, 1),
    "spublish": (PUBLISH, 1, 1),
}

LOG_GROUPING_MS = 60000


class RuleError(Exception):
    """An ACL rule that cannot be applied; the message is ACLSetUserStringError's."""


E_SYNTAX = "Syntax error"
E_UNKNOWN = "Unknown command or category name in ACL"
E_KEYS_AFTER_ALL = (
    "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have "
    "any effect. Try 'resetkeys' to start with an empty list of patterns"
)
E_CHANNELS_AFTER_ALL = (
    "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not "
    "have any effect. Try 'resetchannels' to start with an empty list of channels"
)
E_NO_SUCH_PASS = "The password you are trying to remove from the user does not exist"
E_BAD_HASH = "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters"
E_DUPLICATE = "Duplicate user found. A user can only be defined once in config files"
E_FIRSTARG_OF_SUB = "Allowing first-arg of a subcommand is not supported"


def has_spaces(s: bytes) -> bool:
    """ACLStringHasSpaces: whitespace (C isspace) or NUL anywhere."""
    return any(ch in b" \t\n\v\f\r\x00" for ch in s)


def hash_password(password: bytes) -> bytes:
    return hashlib.sha256(password).hexdigest().encode()


def _rule_hash(op: bytes) -> bytes:
    """The SHA-256 hex a password rule names: ``>pw`` / ``<pw`` hash a clear password,
    ``#hash`` / ``!hash`` give one, which must be well formed."""
    if op[:1] in (b">", b"<"):
        return hash_password(op[1:])
    if not _valid_hash(op[1:]):
        raise RuleError(E_BAD_HASH)
    return op[1:]


def _valid_hash(h: bytes) -> bool:
    return len(h) == 64 and all(c in b"0123456789abcdef" for c in h)


# -- the command universe ---------------------------------------------------------
class _Universe:
    """Command ids and category masks.

    The commands are the table's plus every other command of Redis 7.0's table
    (CLUSTER, READONLY, ...; described, never run), so ACL rules and files written
    for Redis apply here unchanged, and categories count what Redis counts.
    """

    def __init__(self) -> None:
        self.size = -1
        self.ids: dict[str, int] = {}
        self.tops: list[Command] = []
        self.top_names: dict[bytes, Command] = {}
        self.children: dict[str, list[Command]] = {}
        self.sub_names: dict[bytes, dict[bytes, Command]] = {}
        self.change: list[int] = []  # by id: the bits ACLChangeSelectorPerm touches
        self.members: dict[str, int] = {}  # category -> commands having it
        self.apply: dict[str, int] = {}  # category -> bits +@cat / -@cat set or clear
        self.firstarg_tops: dict[str, list[int]] = {}  # category -> ids whose first args reset
        self.all = 0

    def refresh(self) -> _Universe:
        """Take in commands registered since the last call (normally none)."""
        size = len(TABLE.all())
        if size == self.size:
            return self
        self.size = size
        tops: dict[bytes, Command] = dict(TABLE.commands)
        subs = {name: dict(cmd.subcommands) for name, cmd in tops.items()}
        for name in redis_commands():
            key = name.encode()
            if key not in tops:
                tops[key] = redis_command(name)
                subs[key] = {}
            for fullname in redis_subcommands(name):
                sub = fullname.partition("|")[2].encode()
                if sub not in subs[key]:
                    phantom = redis_command(fullname)
                    phantom.parent = tops[key]
                    subs[key][sub] = phantom
        self.tops = list(tops.values())
        self.top_names = tops
        self.sub_names = subs
        self.children = {cmd.fullname: list(subs[name].values()) for name, cmd in tops.items()}
        everything = [c for top in self.tops for c in (top, *self.children[top.fullname])]
        for cmd in everything:
            if cmd.fullname not in self.ids:
                self.ids[cmd.fullname] = len(self.ids)
        self.change = [0] * len(self.ids)
        members = dict.fromkeys(CATEGORIES, 0)
        apply = dict.fromkeys(CATEGORIES, 0)
        firstarg_tops: dict[str, list[int]] = {c: [] for c in CATEGORIES}
        for cmd in everything:
            i = self.ids[cmd.fullname]
            bits = 1 << i
            for sub in self.children.get(cmd.fullname, ()):
                bits |= 1 << self.ids[sub.fullname]
            self.change[i] = bits
        for cmd in everything:
            i = self.ids[cmd.fullname]
            for cat in categories_of(cmd):
                if cat in members:
                    members[cat] |= 1 << i
                    apply[cat] |= self.change[i]
                    firstarg_tops[cat].append(i)
        self.members, self.apply, self.firstarg_tops = members, apply, firstarg_tops
        self.all = (1 << len(self.ids)) - 1
        return self

    def lookup(self, name: bytes) -> Command | None:
        """ACLLookupCommand: "get" or "config|get", strictly (no deeper levels)."""
        parts = name.lower().split(b"|")
        if len(parts) > 2:
            return None
        base = self.top_names.get(parts[0])
        if base is None:
            return None
        if len(parts) == 1:
            return base
        subs = self.sub_names[parts[0]]
        if not subs:
            return None
        return subs.get(parts[1])

    def subcommands(self, cmd: Command) -> list[Command]:
        return self.children.get(cmd.fullname, [])

    def lookup_argv(self, argv: list[bytes]) -> Command | None:
        """lookupCommand over every command Redis knows (ACL DRYRUN of one rill lacks)."""
        base = self.refresh().top_names.get(argv[0].lower())
        subs = self.sub_names.get(argv[0].lower())
        if base is None or not subs or len(argv) == 1:
            return base
        return subs.get(argv[1].lower())


UNIVERSE = _Universe()


def categories_of(cmd: Command) -> list[str]:
    """A command's ACL categories, without the '@'."""
    return [x[1:] for x in cmd.categories]


# -- rules --------------------------------------------------------------------------
class KeyPattern:
    __slots__ = ("pattern", "flags", "match")

    def __init__(self, pattern: bytes, flags: int) -> None:
        self.pattern = pattern
        self.flags = flags
        # stringmatchlen, so no pattern matches the empty key: not even "*" (only the
        # allkeys flag, which "~*" sets, admits it).
        self.match = compile_glob(pattern)

    def describe(self) -> bytes:
        prefix = {ALL: b"~", READ: b"%R~", WRITE: b"%W~"}[self.flags]
        return prefix + self.pattern


class Selector:
    """One set of permissions: commands (bits), key patterns, channel patterns."""

    __slots__ = ("root", "allkeys", "allchannels", "allcommands", "future", "allowed", "firstargs",
                 "patterns", "channels")

    def __init__(self, root: bool, allchannels: bool) -> None:
        self.root = root
        self.allkeys = False
        self.allchannels = allchannels  # acl-pubsub-default when created
        self.allcommands = False  # skip the bit test altogether (+@all, not undone since)
        self.future = False  # Redis's reserved bit: +@all was the starting point
        self.allowed = 0
        self.firstargs: dict[int, list[bytes]] = {}  # command id -> allowed argv[1] values
        self.patterns: list[KeyPattern] = []
        self.channels: list[bytes] = []

    def copy(self) -> Selector:
        s = Selector(self.root, self.allchannels)
        s.allkeys, s.allcommands, s.future, s.allowed = self.allkeys, self.allcommands, self.future, self.allowed
        s.firstargs = {k: list(v) for k, v in self.firstargs.items()}
        s.patterns = [KeyPattern(p.pattern, p.flags) for p in self.patterns]
        s.channels = list(self.channels)
        return s

    @property
    def unrestricted(self) -> bool:
        return self.allcommands and self.allkeys and self.allchannels

    # ACLChangeSelectorPerm: a container's subcommands follow it.
    def _change(self, u: _Universe, cmd: Command, allow: bool) -> None:
        i = u.ids[cmd.fullname]
        if allow:
            self.allowed |= u.change[i]
        else:
            self.allowed &= ~u.change[i]
            self.allcommands = False
        self.firstargs.pop(i, None)

    def apply(self, op: bytes) -> None:
        """ACLSetSelector: one rule; RuleError when it cannot be applied."""
        low = op.lower()
        if low in (b"allkeys", b"~*"):
            self.allkeys = True
            self.patterns = []
        elif low == b"resetkeys":
            self.allkeys = False
            self.patterns = []
        elif low in (b"allchannels", b"&*"):
            self.allchannels = True
            self.channels = []
        elif low == b"resetchannels":
            self.allchannels = False
            self.channels = []
        elif low in (b"allcommands", b"+@all"):
            self.allowed = UNIVERSE.refresh().all
            self.allcommands = self.future = True
            self.firstargs = {}
        elif low in (b"nocommands", b"-@all"):
            self.allowed = 0
            self.allcommands = self.future = False
            self.firstargs = {}
        elif op[:1] in (b"~", b"%"):
            self._add_key_pattern(op)
        elif op[:1] == b"&":
            if self.allchannels:
                raise RuleError(E_CHANNELS_AFTER_ALL)
            pat = op[1:]
            if has_spaces(pat):
                raise RuleError(E_SYNTAX)
            if pat not in self.channels:
                self.channels.append(pat)
            self.allchannels = False
        elif op[:1] == b"+" and op[1:2] != b"@":
            self._allow(op[1:])
        elif op[:1] == b"-" and op[1:2] != b"@":
            u = UNIVERSE.refresh()
            cmd = u.lookup(op[1:])
            if cmd is None:
                raise RuleError(E_UNKNOWN)
            self._change(u, cmd, False)
        elif op[:2] in (b"+@", b"-@"):
            cat = op[2:].lower().decode(errors="replace")
            u = UNIVERSE.refresh()
            if cat not in u.members:
                raise RuleError(E_UNKNOWN)
            if op[:1] == b"+":
                self.allowed |= u.apply[cat]
            else:
                self.allowed &= ~u.apply[cat]
                self.allcommands = False
            for i in u.firstarg_tops[cat]:
                self.firstargs.pop(i, None)
        else:
            raise RuleError(E_SYNTAX)

    def _add_key_pattern(self, op: bytes) -> None:
        if self.allkeys:
            raise RuleError(E_KEYS_AFTER_ALL)
        flags = 0
        offset = 1
        if op[:1] == b"%":
            while offset < len(op):
                ch = op[offset : offset + 1]
                if ch.upper() == b"R" and not flags & READ:
                    flags |= READ
                elif ch.upper() == b"W" and not flags & WRITE:
                    flags |= WRITE
                elif ch == b"~":
                    offset += 1
                    break
                else:
                    raise RuleError(E_SYNTAX)
                offset += 1
            if not flags:
                raise RuleError(E_SYNTAX)  # "%~x" (the oracle refuses a pattern with no access)
        else:
            flags = ALL
        pat = op[offset:]
        if has_spaces(pat):
            raise RuleError(E_SYNTAX)
        for p in self.patterns:
            if p.pattern == pat:
                p.flags |= flags
                break
        else:
            self.patterns.append(KeyPattern(pat, flags))
        self.allkeys = False

    def _allow(self, name: bytes) -> None:
        u = UNIVERSE.refresh()
        if b"|" not in name:
            cmd = u.lookup(name)
            if cmd is None:
                raise RuleError(E_UNKNOWN)
            self._change(u, cmd, True)
            return
        base_name, _, sub = name.rpartition(b"|")
        cmd = u.lookup(base_name)
        if cmd is None:
            raise RuleError(E_UNKNOWN)
        if cmd.parent is not None:
            raise RuleError(E_FIRSTARG_OF_SUB)
        if not sub:
            raise RuleError(E_SYNTAX)
        if cmd.subcommands:
            subcmd = u.lookup(name)
            if subcmd is None:
                raise RuleError(E_UNKNOWN)
            self._change(u, subcmd, True)
            return
        # SELECT|0, DEBUG|OBJECT: an allowed first argument of an otherwise denied command.
        log.warning("Deprecation warning: Allowing a first arg of an otherwise blocked command is a "
                    "misuse of ACL and may get disabled in the future (offender: +%s)",
                    name.decode(errors="replace"))
        args = self.firstargs.setdefault(u.ids[cmd.fullname], [])
        if all(a.lower() != sub.lower() for a in args):
            args.append(sub)

    # -- checks --------------------------------------------------------------
    def check_key(self, key: bytes, need: int) -> bool:
        if self.allkeys:
            return True
        for p in self.patterns:
            if p.flags & need == need and p.match(key):
                return True
        return False

    def unrestricted_keys(self, need: int) -> bool:
        """ACLSelectorHasUnrestrictedKeyAccess: '~*' (or allkeys) with at least ``need``."""
        if self.allkeys:
            return True
        return any(p.flags & need == need and p.pattern == b"*" for p in self.patterns)

    def check(self, cmd: Command, argv: list[bytes], keys: list[Any]) -> tuple[int, int]:
        """ACLSelectorCheckCmd: (result, index of the offending argument).

        ``keys`` is a one-item cache shared by a user's selectors: the key
        positions and access flags, worked out at most once per check.
        """
        if not self.allcommands and not cmd.flags & NO_AUTH:
            u = UNIVERSE
            i = u.ids.get(cmd.fullname)
            if i is None:
                u.refresh()
                i = u.ids[cmd.fullname]
            if not self.allowed >> i & 1:
                args = self.firstargs.get(i)
                if len(argv) < 2 or not args:
                    return DENIED_CMD, 0
                first = argv[2 if cmd.parent is not None else 1].lower()
                if all(a.lower() != first for a in args):
                    return DENIED_CMD, 0
        if not self.allkeys and cmd.has_keys:
            if not keys:
                keys.append(key_references(cmd, argv))
            for pos, need in keys[0]:
                if not self.check_key(argv[pos], need):
                    return DENIED_KEY, pos
        if not self.allchannels:
            spec = _CHANNEL_COMMANDS.get(cmd.fullname)
            if spec is not None and spec[0] & (PUBLISH | SUBSCRIBE):
                pattern = bool(spec[0] & PATTERN)
                end = len(argv) if spec[2] < 0 else min(len(argv), spec[1] + spec[2])
                for pos in range(spec[1], end):
                    if not channel_allowed(self.channels, argv[pos], pattern):
                        return DENIED_CHANNEL, pos
        return OK, 0

    # -- description -----------------------------------------------------------
    def describe_commands(self) -> bytes:
        """ACLDescribeSelectorCommandRules: +@all or -@all, the best-fitting
        categories, then the single commands (and first args) still differing."""
        u = UNIVERSE.refresh()
        additive = not self.future
        rules = [b"-@all" if additive else b"+@all"]
        fake = 0 if additive else u.all
        temp = self.allowed
        applied: set[str] = set()
        while True:
            best = None
            mindiff, maxsame = 1 << 62, 0
            for cat in CATEGORIES:
                if cat in applied:
                    continue
                members = u.members[cat]
                on = (temp & members).bit_count()
                off = members.bit_count() - on
                diff, same = (off, on) if additive else (on, off)
                if same > diff and (diff < mindiff or (diff == mindiff and same > maxsame)):
                    best, mindiff, maxsame = cat, diff, same
            if best is None:
                break
            if additive:
                fake |= u.apply[best]
                temp &= ~u.apply[best]
            else:
                fake &= ~u.apply[best]
                temp |= u.apply[best]
            rules.append((b"+@" if additive else b"-@") + best.encode())
            applied.add(best)

        def singles(cmds: Any) -> None:
            nonlocal fake
            for cmd in cmds:
                i = u.ids[cmd.fullname]
                userbit = self.allowed >> i & 1
                if userbit != fake >> i & 1:
                    rules.append((b"+" if userbit else b"-") + cmd.fullname.encode())
                    fake = fake | u.change[i] if userbit else fake & ~u.change[i]
                kids = u.subcommands(cmd)
                if kids:
                    singles(kids)
                if not userbit:
                    for a in self.firstargs.get(i, ()):
                        rules.append(b"+" + cmd.fullname.encode() + b"|" + a)

        singles(u.tops)
        return b" ".join(rules)

    def describe_keys(self) -> bytes:
        if self.allkeys:
            return b"~*"
        return b" ".join(p.describe() for p in self.patterns)

    def describe_channels(self) -> bytes:
        if self.allchannels:
            return b"&*"
        return b" ".join(b"&" + c for c in self.channels)

    def describe(self) -> bytes:
        """ACLDescribeSelector: keys, channels, commands, as ACL LIST shows them."""
        parts = []
        if self.allkeys:
            parts.append(b"~*")
        else:
            parts.extend(p.describe() for p in self.patterns)
        if self.allchannels:
            parts.append(b"&*")
        else:
            parts.append(b"resetchannels")
            parts.extend(b"&" + c for c in self.channels)
        parts.append(self.describe_commands())
        return b" ".join(parts)


def channel_allowed(channels: list[bytes], channel: bytes, is_pattern: bool) -> bool:
    """ACLCheckChannelAgainstList: a PSUBSCRIBE pattern must be listed literally."""
    for pat in channels:
        if is_pattern:
            if pat == channel:
                return True
        elif pat == b"*" or compile_glob(pat)(channel):
            return True
    return False


def _need(flags: Any) -> int:
    need = 0
    for f in flags:
        if f == "access":
            need |= READ
        elif f in ("insert", "delete", "update"):
            need |= WRITE
    return need


def key_references(cmd: Command, argv: list[bytes]) -> list[tuple[int, int]]:
    """getKeysFromCommandWithSpecs: (argument index, READ/WRITE needed) of each key,
    found by the command table's one key-spec walker (Command.keys). SET and
    BITFIELD say their access per call (variable_flags)."""
    if cmd.key_flags is not None:
        return [(1, _need(f.decode().lower() for f in cmd.key_flags(argv)))]
    access = cmd.key_access
    return [(pos, access[index]) for pos, index in cmd.keys(argv)]


# -- users ----------------------------------------------------------------------
class User:
    """An ACL user: flags, password hashes, selectors (the root one first)."""

    __slots__ = ("name", "enabled", "nopass", "sanitize", "passwords", "selectors", "unrestricted")

    def __init__(self, name: bytes, allchannels: bool) -> None:
        self.name = name
        self.enabled = False
        self.nopass = False
        self.sanitize = 0  # 1: skip-sanitize-payload, 2: sanitize-payload
        self.passwords: list[bytes] = []
        self.selectors = [Selector(True, allchannels)]
        self.unrestricted = False

    @property
    def root(self) -> Selector:
        return self.selectors[0]

    def copy_from(self, other: User) -> None:
        """ACLCopyUser: the rules of ``other``, keeping this user's name."""
        self.enabled, self.nopass, self.sanitize = other.enabled, other.nopass, other.sanitize
        self.passwords = list(other.passwords)
        self.selectors = [s.copy() for s in other.selectors]
        self.update()

    def update(self) -> None:
        """Cache whether every check passes (the dispatcher's fast path)."""
        self.unrestricted = any(s.unrestricted for s in self.selectors)

    def apply(self, op: bytes, allchannels_default: bool) -> None:
        """ACLSetUser: one rule (flags, passwords, selectors, or a root-selector rule)."""
        if not op:
            return
        low = op.lower()
        if low == b"on":
            self.enabled = True
        elif low == b"off":
            self.enabled = False
        elif low == b"skip-sanitize-payload":
            self.sanitize = 1
        elif low == b"sanitize-payload":
            self.sanitize = 2
        elif low == b"nopass":
            self.nopass = True
            self.passwords = []
        elif low == b"resetpass":
            self.nopass = False
            self.passwords = []
        elif op[:1] in (b">", b"#"):
            h = _rule_hash(op)
            if h not in self.passwords:
                self.passwords.append(h)
            self.nopass = False
        elif op[:1] in (b"<", b"!"):
            h = _rule_hash(op)
            if h not in self.passwords:
                raise RuleError(E_NO_SUCH_PASS)
            self.passwords.remove(h)
        elif op[:1] == b"(" and op[-1:] == b")":
            sel = Selector(False, allchannels_default)
            for inner in split_args(op[1:-1]) or []:
                sel.apply(inner)
            self.selectors.append(sel)
        elif low == b"clearselectors":
            del self.selectors[1:]
        elif low == b"reset":
            self.nopass = False
            self.passwords = []
            root = self.root
            root.apply(b"resetkeys")
            root.apply(b"resetchannels")
            if allchannels_default:
                root.apply(b"allchannels")
            self.enabled = False
            self.sanitize = 2
            del self.selectors[1:]
            root.apply(b"-@all")
        else:
            self.root.apply(op)
        self.update()

    def describe(self) -> bytes:
        """ACLDescribeUser: the rules, as ACL LIST and ACL SAVE write them."""
        parts = [f for f in self.flag_names()]
        parts.extend(b"#" + h for h in self.passwords)
        out = b" ".join(parts)
        out = out + b" " if out else out
        out += self.root.describe()
        for sel in self.selectors[1:]:
            out += b" (" + sel.describe() + b")"
        return out

    def flag_names(self) -> list[bytes]:
        flags = [b"on" if self.enabled else b"off"]
        if self.nopass:
            flags.append(b"nopass")
        if self.sanitize == 1:
            flags.append(b"skip-sanitize-payload")
        elif self.sanitize == 2:
            flags.append(b"sanitize-payload")
        return flags

    def check(self, cmd: Command, argv: list[bytes]) -> tuple[int, int]:
        """ACLCheckAllUserCommandPerm: OK, or the error to report and its argument."""
        relevant, last = DENIED_CMD, 0
        keys: list[Any] = []
        for sel in self.selectors:
            res, idx = sel.check(cmd, argv, keys)
            if res == OK:
                return OK, 0
            if res > relevant or (res == relevant and idx > last):
                relevant, last = res, idx
        return relevant, last


def merge_selector_args(args: list[bytes]) -> tuple[list[bytes] | None, int]:
    """ACLMergeSelectorArguments: a "(...)" selector given over several arguments
    becomes one; (None, index of the opening one) when its ")" never comes."""
    out: list[bytes] = []
    start = -1
    current = b""
    for j, op in enumerate(args):
        if start < 0 and op[:1] == b"(" and op[-1:] != b")":
            current, start = op, j
            continue
        if start >= 0:
            current += b" " + op
            if op[-1:] == b")":
                start = -1
                out.append(current)
            continue
        out.append(op)
    if start >= 0:
        return None, start
    return out, 0


class LogEntry:
    __slots__ = ("count", "reason", "context", "object", "username", "ctime", "cinfo")

    def __init__(self, reason: int, context: bytes, obj: bytes, username: bytes, cinfo: bytes) -> None:
        self.count = 1
        self.reason = reason
        self.context = context
        self.object = obj
        self.username = username
        self.ctime = int(time.time() * 1000)
        self.cinfo = cinfo


class Acl:
    """The users of one server, its ACL log, and the checks the dispatcher calls."""

    def __init__(self, server: Server) -> None:
        load_all()  # command ids cover the whole table before any rule is applied
        self.server = server
        self.users: dict[bytes, User] = {}
        self.log: deque[LogEntry] = deque()
        self.default = self._create_default()
        self.users[b"default"] = self.default
        self.set_default_password(server.config["requirepass"])
        server.config_changed_hooks["requirepass"] = self._requirepass_changed
        server.config.rewrite_hooks["user"] = self._rewrite_lines

    # -- users ---------------------------------------------------------------
    @property
    def pubsub_default(self) -> bool:
        return self.server.config["acl-pubsub-default"] == "allchannels"

    def new_user(self, name: bytes) -> User:
        return User(name, self.pubsub_default)

    def _create_default(self) -> User:
        u = User(b"default", self.pubsub_default)
        for op in (b"+@all", b"~*", b"&*", b"on", b"nopass"):
            u.apply(op, False)
        return u

    def set_default_password(self, password: str) -> None:
        """requirepass: the default user's only password (none: nopass)."""
        u = self.default
        u.apply(b"resetpass", False)
        if password:
            u.apply(b">" + password.encode(errors="surrogateescape"), False)
        else:
            u.apply(b"nopass", False)
        self.users_changed()

    def _requirepass_changed(self) -> None:
        self.set_default_password(self.server.config["requirepass"])

    def apply_rules(self, user: User | None, name: bytes, args: list[bytes], current: Client | None) -> None:
        """ACLStringSetUser: every rule applies (to a copy first) or none does."""
        ops, bad = merge_selector_args(args)
        if ops is None:
            raise RuleError(f"Unmatched parenthesis in acl selector starting at '{args[bad].decode(errors='replace')}'.")
        temp = self.new_user(name)
        if user is not None:
            temp.copy_from(user)
        for op in ops:
            try:
                temp.apply(op, self.pubsub_default)
            except RuleError as e:
                raise RuleError(f"Error in ACL SETUSER modifier '{op.decode(errors='replace')}': {e}") from None
        if user is not None:
            self._kill_pubsub_clients_if_needed(temp, user, current)
        else:
            user = self.users[name] = self.new_user(name)
        user.copy_from(temp)
        self.users_changed()

    def delete_user(self, user: User, current: Client | None) -> None:
        del self.users[user.name]
        self.disconnect_users_clients({user}, current)

    def disconnect_users_clients(self, users: set[User], current: Client | None) -> None:
        """ACLFreeUserAndKillClients: the clients logged in as these users are closed
        (the one running this command after its reply)."""
        for c in list(self.server.clients.values()):
            if c.id > 0 and c.user in users:
                c.user = self.default
                c.logged_in = False
                c.authenticated = False
                self._disconnect(c, current)

    def _disconnect(self, c: Client, current: Client | None) -> None:
        if c is current:
            c.close_after_reply = True
            return
        # Gone at once, as Redis's freeClient: the next CLIENT LIST must not show it
        # (client_gone runs again, harmlessly, when the connection is lost).
        self.server.client_gone(c)
        c.kill_requested = True
        c.on_output(c)

    def _kill_pubsub_clients_if_needed(self, new: User, original: User, current: Client | None) -> None:
        """Subscribers of ``original`` lose their connection when ``new`` no longer
        lets them hold one of their subscriptions."""
        if any(s.allchannels for s in new.selectors):
            return
        upcoming = [ch for s in new.selectors for ch in s.channels]
        superset = True
        for s in original.selectors:
            if s.allchannels or any(ch not in upcoming for ch in s.channels):
                superset = False
                break
        if superset:
            return
        for c in list(self.server.clients.values()):
            if c.user is not original or c.id <= 0 or not c.subscriptions:
                continue
            kill = any(not channel_allowed(upcoming, p, True) for p in c.pubsub_patterns)
            if not kill:
                kill = any(not channel_allowed(upcoming, ch, False)
                           for ch in (*c.pubsub_channels, *c.pubsub_shard_channels))
            if kill:
                self._disconnect(c, current)

    def users_changed(self) -> None:
        """Rules changed: every client's fast-path flag is worked out again."""
        for c in self.server.clients.values():
            if c.id > 0:
                self.refresh(c)

    # -- clients ---------------------------------------------------------------
    def init_client(self, c: Client) -> None:
        """A new (or RESET) client: the default user, logged in if it needs no password."""
        d = self.default
        c.user = d
        if c.id < 0:  # internal clients (AOF loading, scripts) are not checked
            c.logged_in = c.authenticated = True
            return
        c.logged_in = d.nopass and d.enabled
        self.refresh(c)

    def refresh(self, c: Client) -> None:
        c.authenticated = c.user.unrestricted and not self.auth_required(c)

    def auth_required(self, c: Client) -> bool:
        """authRequired: not logged in, and the default user wants a password."""
        d = self.default
        return not c.logged_in and (not d.nopass or not d.enabled)

    def check_credentials(self, username: bytes, password: bytes) -> User | None:
        u = self.users.get(username)
        if u is None or not u.enabled:
            return None
        if u.nopass:
            return u
        h = hash_password(password)
        for p in u.passwords:
            if hmac.compare_digest(h, p):
                return u
        return None

    def authenticate(self, c: Client, username: bytes, password: bytes, argv0: bytes) -> bool:
        """ACLAuthenticateUser: log ``c`` in, or log the failure (object: the command)."""
        u = self.check_credentials(username, password)
        if u is None:
            self.add_log(c, DENIED_AUTH, self._context(c), argv0, username)
            return False
        c.user = u
        c.logged_in = True
        self.refresh(c)
        return True

    # -- checks ------------------------------------------------------------------
    def denied(self, c: Client, cmd: Command, argv: list[bytes]) -> ReplyError | None:
        """processCommand's ACL check for a client that is not unrestricted:
        None, or the NOPERM error (logged in the ACL log)."""
        res, idx = c.user.check(cmd, argv)
        if res == OK:
            return None
        self.log_denial(c, res, self._context(c), cmd, argv, idx)
        err = NOPERM[res]
        if err is None:
            err = ReplyError(f"NOPERM this user has no permissions to run the '{cmd.fullname}' command")
        return err

    def exec_denied(self, c: Client, cmd: Command, argv: list[bytes]) -> ReplyError | None:
        """EXEC's re-check of a queued command (the rules may have changed since)."""
        res, idx = c.user.check(cmd, argv)
        if res == OK:
            return None
        self.log_denial(c, res, b"multi", cmd, argv, idx)
        return ReplyError(
            b"NOPERM ACLs rules changed between the moment the transaction was accumulated and the "
            b"EXEC call. This command is no longer allowed for the following reason: " + EXEC_REASONS[res]
        )

    def script_denied(self, caller: Client, cmd: Command, argv: list[bytes]) -> bytes | None:
        """redis.call's check against the calling user: None, or the error text."""
        res, idx = caller.user.check(cmd, argv)
        if res == OK:
            return None
        self.log_denial(caller, res, b"lua", cmd, argv, idx)
        return b"The user executing the script " + SCRIPT_REASONS[res]

    def full_key_access(self, c: Client, cmd: Command, argv: list[bytes]) -> bool:
        """ACLUserCheckCmdWithUnrestrictedKeyAccess for reading (SORT's BY and GET)."""
        if c.authenticated:
            return True
        keys: list[Any] = []
        for sel in c.user.selectors:
            if sel.check(cmd, argv, keys)[0] == OK and sel.unrestricted_keys(READ):
                return True
        return False

    @staticmethod
    def _context(c: Client) -> bytes:
        return b"multi" if c.multi is not None or c.in_exec else b"toplevel"

    # -- the log -------------------------------------------------------------------
    def log_denial(self, c: Client, res: int, context: bytes, cmd: Command, argv: list[bytes], idx: int) -> None:
        obj = cmd.fullname.encode() if res == DENIED_CMD else argv[idx]
        self.add_log(c, res, context, obj, c.user.name)

    def add_log(self, c: Client, reason: int, context: bytes, obj: bytes, username: bytes) -> None:
        """addACLLogEntry: a similar recent entry (among the last ten) is bumped instead."""
        entry = LogEntry(reason, context, obj, username, c.info_line())
        for i, old in enumerate(list(self.log)[:10]):
            if (old.reason == reason and old.context == context and old.object == obj
                    and old.username == username and abs(old.ctime - entry.ctime) <= LOG_GROUPING_MS):
                del self.log[i]
                old.cinfo, old.ctime = entry.cinfo, entry.ctime
                old.count += 1
                self.log.appendleft(old)
                return
        self.log.appendleft(entry)
        limit = self.server.config.int("acllog-max-len")
        while len(self.log) > limit:
            self.log.pop()

    # -- files -------------------------------------------------------------------------
    def load_at_startup(self) -> None:
        """Load the users the config file declares (``user`` lines, or ``aclfile``) at start-up.

        Both at once, or a rule that does not apply, stops the server as Redis does.
        """
        config = self.server.config
        directives = getattr(config, "user_directives", [])
        aclfile = config["aclfile"]
        if aclfile and directives:
            log.warning("Configuring Redis with users defined in redis.conf and at the same setting an ACL "
                        "file path is invalid. This setup is very likely to lead to configuration errors and "
                        "security holes, please define either an ACL file or declare users directly in your "
                        "redis.conf, but not both.")
            sys.exit(1)
        try:
            self.load_configured(directives)
        except RuleError as e:
            log.warning("%s", e)
            log.warning("Critical error while loading ACLs. Exiting.")
            sys.exit(1)
        if aclfile:
            errors = self.load_file(aclfile)
            if errors:
                log.warning("Aborting Redis startup because of ACL errors: %s", errors)
                sys.exit(1)

    def _rewrite_lines(self) -> list[str] | None:
        """CONFIG REWRITE's ``user`` lines: none with an ACL file (it holds the users)."""
        if self.server.config["aclfile"]:
            return []
        return [line.decode(errors="surrogateescape") for line in self.describe_all()]

    def load_configured(self, directives: list[list[bytes]]) -> None:
        """ACLLoadConfiguredUsers: the ``user`` lines of the config file; RuleError
        (with Redis's log message) on a rule that does not apply."""
        for args in directives:
            name = args[0]
            if has_spaces(name):
                raise RuleError("Spaces not allowed in ACL usernames")
            u = self.users.get(name)
            if u is None:
                u = self.users[name] = self.new_user(name)
            else:
                u.apply(b"reset", self.pubsub_default)
            for op in args[1:]:
                try:
                    u.apply(op, self.pubsub_default)
                except RuleError as e:
                    raise RuleError(f"Error loading ACL rule '{op.decode(errors='replace')}' for the user "
                                    f"named '{name.decode(errors='replace')}': {e}") from None
            if not u.enabled:
                log.log(25, "The user '%s' is disabled (there is no 'on' modifier in the user description). "
                        "Make sure this is not a configuration error.", name.decode(errors="replace"))
        self.users_changed()

    def load_file(self, filename: str, current: Client | None = None) -> str | None:
        """ACLLoadFromFile: replace every user with the file's, or change nothing and
        return the errors found (all of them, in one line)."""
        try:
            with open(filename, "rb") as f:
                data = f.read()
        except OSError as e:
            return f"Error loading ACLs, opening file '{filename}': {os.strerror(e.errno or 0)}"
        errors: list[str] = []
        users: dict[bytes, User] = {}
        fname = self.server.config["aclfile"]
        for linenum, line in enumerate(data.split(b"\n"), 1):
            line = line.strip(b" \t\r\n")
            if not line:
                continue
            argv = line.split(b" ")
            if argv[0] != b"user" or len(argv) < 2:
                errors.append(f"{fname}:{linenum} should start with user keyword followed by the username. ")
                continue
            name = argv[1]
            sname = name.decode(errors="replace")
            if has_spaces(name):
                errors.append(f"'{fname}:{linenum}: username '{sname}' contains invalid characters. ")
                continue
            if name in users:
                errors.append(f"WARNING: Duplicate user '{sname}' found on line {linenum}. ")
                continue
            u = users[name] = self.new_user(name)
            ops, _ = merge_selector_args(argv[2:])
            if ops is None:
                errors.append(f"{fname}:{linenum}: Unmatched parenthesis in selector definition.")
                ops = []
            syntax_error = False
            for op in ops:
                op = op.strip(b"\t\r\n")
                try:
                    u.apply(op, self.pubsub_default)
                except RuleError as e:
                    if str(e) == E_UNKNOWN:
                        errors.append(f"{fname}:{linenum}: Error in applying operation "
                                      f"'{op.decode(errors='replace')}': {e}. ")
                    elif not syntax_error:
                        errors.append(f"{fname}:{linenum}: {e}. ")
                        syntax_error = True
        if errors:
            return "".join(errors) + (
                "WARNING: ACL errors detected, no change to the previously active ACL rules was performed")
        new_default = users.pop(b"default", None) or self._create_default()
        old = [u for u in self.users.values() if u is not self.default]
        self.default.copy_from(new_default)
        self.users = {b"default": self.default, **users}
        # Every old user object is gone, even one the file defines again: its clients go too.
        self.disconnect_users_clients(set(old), current)
        self.users_changed()
        return None

    def describe_all(self) -> list[bytes]:
        """``user <name> <rules>`` for every user, in name order (ACL LIST, ACL SAVE)."""
        return [b"user " + name + b" " + self.users[name].describe() for name in sorted(self.users)]

    def save_file(self, filename: str) -> bool:
        """ACLSaveToFile: write through a temporary file renamed into place."""
        content = b"".join(line + b"\n" for line in self.describe_all())
        tmp = f"{filename}.tmp-{os.getpid()}-{int(time.time() * 1000)}"
        try:
            with open(tmp, "wb") as f:
                f.write(content)
            os.rename(tmp, filename)
        except OSError as e:
            log.warning("Saving the ACL file: %s", e)
            try:
                os.unlink(tmp)
            except OSError:
                pass
            return False
        return True


def validate_user_directive(args: list[bytes]) -> tuple[int, str] | None:
    """ACLAppendUserForLoading's check of a config-file ``user`` line (name first):
    None, or (index into ``args`` of the bad rule, the reason). Unknown commands
    and categories are let through, to be reported when the users are loaded."""
    ops, bad = merge_selector_args(args[1:])
    if ops is None:
        return bad, E_SYNTAX  # Redis reports the line's argv[bad], wherever that falls
    fake = User(b"", False)
    for j, op in enumerate(ops):
        try:
            fake.apply(op, False)
        except RuleError as e:
            if str(e) != E_UNKNOWN:
                return j, str(e)
    return None
