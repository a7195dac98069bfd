"""The command table without sockets: facts declared at @command, read by name, and
the one key-spec walker that dispatch, COMMAND GETKEYS and ACL share."""

from __future__ import annotations

import pytest
from rill.server.acl import READ, WRITE, key_references
from rill.server.commands import load_all
from rill.server.commands.table import MAY_REPLICATE, PROTECTED, TABLE, Command
from rill.server.scripting import eval_cmd_flags


@pytest.fixture(scope="module", autouse=True)
def _loaded() -> None:
    load_all()


def cmd(name: str) -> Command:
    found = TABLE.lookup_name(name.encode())
    assert found is not None, name
    return found


def argv(*words: str) -> list[bytes]:
    return [w.encode() for w in words]


@pytest.mark.parametrize(("words", "expected"), [
    (("GET", "k"), [(1, 0)]),
    (("MSET", "a", "1", "b", "2"), [(1, 0), (3, 0)]),  # range, step 2, to the end
    (("ZUNIONSTORE", "d", "2", "a", "b"), [(1, 0), (3, 1), (4, 1)]),  # keynum
    (("XREAD", "COUNT", "1", "STREAMS", "a", "b", "0", "0"), [(4, 0), (5, 0)]),  # keyword, half the rest
    (("LMPOP", "x", "a", "LEFT"), []),  # a bad key count: no finder, so no keys
    (("LMPOP", "5", "a", "LEFT"), []),  # keys past the end
    (("SORT", "k", "BY", "w*", "STORE", "d"), [(1, 0), (5, 2)]),  # an unknown spec: SORT's own finder
    (("SORT_RO", "k", "GET", "x"), [(1, 0)]),
    (("MIGRATE", "h", "1", "", "0", "5", "AUTH", "pw", "KEYS", "a", "b"), [(9, 1), (10, 1)]),
    (("MIGRATE", "h", "1", "k", "0", "5"), [(3, 0)]),
    (("EVAL", "return 1", "2", "a", "b", "arg"), [(3, 0), (4, 0)]),
])
def test_keys_follow_the_key_specs_or_the_commands_finder(words, expected):
    args = argv(*words)
    assert cmd(words[0].lower()).keys(args) == expected
    assert cmd(words[0].lower()).key_positions(args) == sorted({p for p, _ in expected})


def test_acl_reads_the_access_of_the_same_walk():
    assert key_references(cmd("get"), argv("GET", "k")) == [(1, READ)]
    assert key_references(cmd("sort"), argv("SORT", "k", "STORE", "d")) == [(1, READ), (3, WRITE)]
    # variable_flags: SET's access depends on GET
    assert key_references(cmd("set"), argv("SET", "k", "v")) == [(1, WRITE)]
    assert key_references(cmd("set"), argv("SET", "k", "v", "GET")) == [(1, READ | WRITE)]
    assert key_references(cmd("bitfield"), argv("BITFIELD", "k", "GET", "u8", "0")) == [(1, READ)]


def test_decorator_facts():
    # Hidden flags are in the bits the dispatcher tests, never in COMMAND INFO's names.
    for name in ("debug", "module|load", "module|loadex", "module|unload"):
        assert cmd(name).flags & PROTECTED and "protected" not in cmd(name).flag_names
    for name in ("pfcount", "publish", "spublish", "eval", "evalsha", "fcall"):
        assert cmd(name).flags & MAY_REPLICATE and "may_replicate" not in cmd(name).flag_names
    assert not cmd("eval_ro").flags & MAY_REPLICATE
    # ZRANK takes 7.2's WITHSCORE: its arity, and COMMAND INFO's, is -3.
    assert cmd("zrank").arity == -3 and cmd("zrank").info_reply()[1] == -3
    # The dispatcher's arity check: exactly 2 for GET, at least 3 for MSET and ZRANK.
    assert (cmd("get").min_argc, cmd("get").max_argc) == (2, 2)
    assert cmd("mset").min_argc == 3 and cmd("mset").max_argc >= 1 << 31
    assert cmd("zrank").min_argc == 3 and cmd("zrank").max_argc >= 1 << 31
    assert cmd("eval").flags_for is eval_cmd_flags and cmd("get").flags_for is None
    assert cmd("sort").getkeys is not None and cmd("get").getkeys is None
    assert cmd("set").key_flags(argv("SET", "k", "v", "GET")) == (b"RW", b"access", b"update")
    assert cmd("set").categories == ["@write", "@string", "@slow"]


def test_has_keys():
    assert cmd("get").has_keys and cmd("sort").has_keys and cmd("eval").has_keys
    assert not cmd("ping").has_keys


def test_fast_dispatch_holds_only_plain_commands():
    """Containers resolve a subcommand and protected commands are checked first: both stay
    out of the dict the pipelined fast path reads, so it tests neither."""
    assert TABLE.dispatch[b"get"] is TABLE.dispatch[b"GET"] is cmd("get")
    for name in (b"config", b"CONFIG", b"command", b"xgroup", b"debug", b"DEBUG"):
        assert name not in TABLE.dispatch
    config = cmd("config")
    assert config.subcommands and all(sub.parent is config for sub in config.subcommands.values())
