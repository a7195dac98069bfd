"""String commands, side by side with redis-server 7.0 (RESP2 and RESP3), plus propagation,
WATCH, encodings and expiry checks that need rill's insides or timing."""

from __future__ import annotations

import asyncio
import re
import time

import pytest
import redis
import redis.asyncio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rill.server.commands import load_all
from rill.server.server import Server

from tests.support import wait_until

FAR = 4102444800  # 2100-01-01, an EXAT far enough to be deterministic
FAR_MS = FAR * 1000 + 123
HYPO = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def run(sbs, *script) -> None:
    for cmd in script:
        sbs.check(*cmd)


# -- an in-process server, for what the wire cannot show (propagation, dirty) ----------
class Local:
    """A Server driven without sockets: replies as bytes, propagated effects recorded."""

    def __init__(self) -> None:
        load_all()
        self.server = Server()
        self.client = self.server.new_client()
        self.propagated: list[list[bytes]] = []
        self.server.propagation.attach("observer", self._sink)

    def _sink(self, ops) -> None:
        for _db, argv in ops:
            self.propagated.append([bytes(a) for a in argv])

    def __call__(self, *args) -> bytes:
        argv = [a if isinstance(a, bytes) else str(a).encode() for a in args]
        self.client.out.clear()
        self.server.execute(self.client, argv)
        return b"".join(self.client.out)

    def effects(self, *args) -> list[list[bytes]]:
        self.propagated.clear()
        self(*args)
        return self.propagated


@pytest.fixture
def local() -> Local:
    return Local()


class FakeList:
    """A non-string value for WRONGTYPE paths that do not depend on the list family."""

    type_name = b"list"

    def encoding(self) -> bytes:
        return b"quicklist"

    def memory_usage(self) -> int:
        return 0

    def copy(self) -> FakeList:
        return FakeList()


# -- SET / GET --------------------------------------------------------------------------
def test_set_get_basics(sbs):
    run(
        sbs,
        ("SET", "k", "v"),
        ("GET", "k"),
        ("SET", "k", ""),
        ("GET", "k"),
        ("STRLEN", "k"),
        ("GET", "missing"),
        ("SET", "", "empty key"),
        ("GET", ""),
        ("SET", "bin\x00key", "bin\x00\xffvalue"),
        ("GET", "bin\x00key"),
        ("SET", "k"),
        ("GET",),
        ("GET", "a", "b"),
        ("SET", "k", "v", "ex"),
    )


def test_set_nx_xx_get(sbs):
    run(
        sbs,
        ("SET", "k", "v", "NX"),
        ("SET", "k", "v2", "NX"),
        ("GET", "k"),
        ("SET", "k", "v3", "XX"),
        ("GET", "k"),
        ("SET", "m", "v", "XX"),
        ("EXISTS", "m"),
        ("SET", "k", "v4", "GET"),
        ("SET", "k", "v5", "get", "GeT"),
        ("SET", "new", "v", "GET"),
        ("SET", "k", "v6", "NX", "GET"),
        ("GET", "k"),
        ("SET", "nope", "v", "XX", "GET"),
        ("EXISTS", "nope"),
        ("SET", "nope", "v", "NX", "GET"),
        ("GET", "nope"),
        ("SET", "k", "v7", "nx", "nx"),
        ("SET", "k", "v7", "xx", "xx"),
    )


def test_set_expire_options(sbs):
    run(
        sbs,
        ("SET", "k", "v", "EX", "100"),
        ("TTL", "k"),
        ("SET", "k", "v", "PX", "100000"),
        ("TTL", "k"),
        ("SET", "k", "v", "EXAT", FAR),
        ("EXPIRETIME", "k"),
        ("SET", "k", "v", "PXAT", FAR_MS),
        ("PEXPIRETIME", "k"),
        ("SET", "k", "v2", "KEEPTTL"),
        ("PEXPIRETIME", "k"),
        ("GET", "k"),
        ("SET", "k", "v3"),
        ("TTL", "k"),
        ("SET", "k", "v", "EX", "10", "EX", "100"),
        ("TTL", "k"),
        ("SET", "k", "v", "pxat", "9223372036854775807"),
        ("PEXPIRETIME", "k"),
        ("SET", "k", "v", "exat", "9223372036854775"),
        ("PEXPIRETIME", "k"),
        ("SET", "k", "v", "XX", "GET", "EX", "100", "KEEPTTL"),
        ("SET", "k", "v", "KEEPTTL", "GET", "XX"),
        ("TTL", "k"),
        ("SET", "k", "v", "EXAT", "1"),  # in the past: set, then gone at the next access
        ("GET", "k"),
    )


@pytest.mark.parametrize(
    "opts",
    [
        ("NX", "XX"),
        ("XX", "NX"),
        ("EX", "10", "PX", "10"),
        ("PX", "10", "EX", "10"),
        ("EX", "10", "EXAT", "10"),
        ("PXAT", "10", "PX", "10"),
        ("EXAT", "10", "PXAT", "10"),
        ("EX",),
        ("PX",),
        ("KEEPTTL", "EX", "10"),
        ("EX", "10", "KEEPTTL"),
        ("PERSIST",),
        ("FOO",),
        ("NX", "FOO"),
        ("GETT",),
        ("E",),
    ],
)
def test_set_syntax_errors(sbs, opts):
    sbs.check("SET", "k", "v", *opts)
    sbs.check("EXISTS", "k")


@pytest.mark.parametrize(
    "opts",
    [
        ("EX", "0"),
        ("EX", "-1"),
        ("PX", "0"),
        ("EXAT", "0"),
        ("PXAT", "-5"),
        ("EX", "abc"),
        ("EX", "1.5"),
        ("EX", ""),
        ("EX", "10000000000000000"),
        ("EX", "-9999999999999999"),
        ("EX", "9223372036854776"),
        ("EX", "9223372036854775"),  # fits in ms, but not once "now" is added
        ("PX", "9223372036854775807"),
        ("PX", "9223372036854775808"),
        ("EX", "abc", "GET"),
    ],
)
def test_set_bad_expire(sbs, opts):
    sbs.check("SET", "k", "v", *opts)
    sbs.check("EXISTS", "k")


def test_setnx_setex_psetex(sbs):
    run(
        sbs,
        ("SETNX", "k", "v"),
        ("SETNX", "k", "v2"),
        ("GET", "k"),
        ("SETEX", "k", "100", "v3"),
        ("TTL", "k"),
        ("GET", "k"),
        ("PSETEX", "k", "100000", "v4"),
        ("TTL", "k"),
        ("SETEX", "k", "0", "v"),
        ("SETEX", "k", "-10", "v"),
        ("SETEX", "k", "abc", "v"),
        ("SETEX", "k", "10000000000000000", "v"),
        ("PSETEX", "k", "0", "v"),
        ("PSETEX", "k", "9223372036854775807", "v"),
        ("SETEX", "k", "10"),
        ("SETNX", "k"),
        ("GET", "k"),
    )


def test_getset_getdel(sbs):
    run(
        sbs,
        ("GETSET", "k", "v"),
        ("GETSET", "k", "v2"),
        ("GET", "k"),
        ("SET", "t", "v", "EX", "100"),
        ("GETSET", "t", "w"),
        ("TTL", "t"),
        ("GETDEL", "k"),
        ("GETDEL", "k"),
        ("EXISTS", "k"),
        ("GETDEL", "k", "x"),
    )


def test_getex(sbs):
    run(
        sbs,
        ("SET", "k", "v"),
        ("GETEX", "k"),
        ("TTL", "k"),
        ("GETEX", "k", "EX", "100"),
        ("TTL", "k"),
        ("GETEX", "k", "PX", "200000"),
        ("TTL", "k"),
        ("GETEX", "k", "EXAT", FAR),
        ("EXPIRETIME", "k"),
        ("GETEX", "k", "PXAT", FAR_MS),
        ("PEXPIRETIME", "k"),
        ("GETEX", "k", "PERSIST"),
        ("TTL", "k"),
        ("GETEX", "k", "PERSIST"),
        ("GETEX", "missing", "EX", "100"),
        ("GETEX", "missing", "EX", "-1"),
        ("GETEX", "k", "EX", "0"),
        ("GETEX", "k", "EX", "10000000000000000"),
        ("GETEX", "k", "EX", "-9999999999999999"),
        ("GETEX", "k", "PX", "abc"),
        ("GETEX", "k", "EX"),
        ("GETEX", "k", "PERSIST", "EX", "10"),
        ("GETEX", "k", "EX", "10", "PERSIST"),
        ("GETEX", "k", "EX", "10", "PX", "10"),
        ("GETEX", "k", "KEEPTTL"),
        ("GETEX", "k", "NX"),
        ("GETEX", "k", "GET"),
        ("GETEX", "k", "EXAT", "1"),  # in the past: replies the value, deletes the key
        ("EXISTS", "k"),
        ("SET", "k", "v"),
        ("GETEX", "k", "PXAT", "1"),
        ("EXISTS", "k"),
        ("GETEX",),
    )


def test_mget_mset_msetnx(sbs):
    run(
        sbs,
        ("MSET", "a", "1", "b", "2", "c", "3"),
        ("MGET", "a", "b", "c", "missing"),
        ("MSET", "a", "1", "b"),
        ("MSET", "a"),
        ("MSETNX", "a", "9", "z", "9"),
        ("MGET", "a", "z"),
        ("MSETNX", "x", "1", "y", "2"),
        ("MGET", "x", "y"),
        ("MSETNX", "p", "1", "p", "2"),
        ("GET", "p"),
        ("MSETNX", "q", "1", "q"),
        ("MSET", "a", "1", "a", "2"),
        ("GET", "a"),
        ("MGET",),
    )


def test_append_strlen(sbs):
    run(
        sbs,
        ("APPEND", "k", "hello"),
        ("APPEND", "k", " world"),
        ("GET", "k"),
        ("STRLEN", "k"),
        ("APPEND", "k", ""),
        ("STRLEN", "missing"),
        ("SET", "n", "12345"),
        ("STRLEN", "n"),
        ("APPEND", "n", "6"),
        ("GET", "n"),
        ("INCR", "n"),
        ("SET", "t", "v", "EX", "100"),
        ("APPEND", "t", "w"),
        ("TTL", "t"),
        ("APPEND", "k"),
    )


def test_getrange_substr(sbs):
    sbs.check("SET", "k", "Hello World")
    sbs.check("SET", "n", "1234567")
    sbs.check("SET", "e", "")
    ranges = [(0, 3), (-3, -1), (0, -1), (10, 5), (-1, -5), (5, 100), (-100, 2), (100, 200),
              (-1, -1), (0, 0), (-5, -3), (3, -100), ("9223372036854775807", "9223372036854775807"),
              ("-9223372036854775808", "9223372036854775807"), (0, "-9223372036854775808")]
    for key in ("k", "n", "e", "missing"):
        for a, b in ranges:
            sbs.check("GETRANGE", key, a, b)
    run(
        sbs,
        ("SUBSTR", "k", 0, 4),
        ("GETRANGE", "k", "a", 1),
        ("GETRANGE", "k", 1, "1.5"),
        ("GETRANGE", "missing", "x", 1),
        ("GETRANGE", "k", 1),
    )


def test_setrange(sbs):
    run(
        sbs,
        ("SETRANGE", "k", 5, "abc"),
        ("GET", "k"),
        ("SETRANGE", "k", 0, "XY"),
        ("GET", "k"),
        ("SETRANGE", "k", 7, "long tail"),
        ("GET", "k"),
        ("SETRANGE", "k", 2, ""),
        ("SETRANGE", "missing", 3, ""),
        ("EXISTS", "missing"),
        ("SETRANGE", "k", -1, "x"),
        ("SETRANGE", "k", "x", "x"),
        ("SETRANGE", "k", 536870911, ""),
        ("SETRANGE", "k", 536870912, "x"),
        ("SETRANGE", "new", 536870911, "xy"),
        ("SETRANGE", "k", "9223372036854775807", "A"),
        ("SET", "n", "1234"),
        ("SETRANGE", "n", 1, "x"),
        ("GET", "n"),
        ("SET", "t", "v", "EX", "100"),
        ("SETRANGE", "t", 3, "x"),
        ("TTL", "t"),
        ("GET", "t"),
        ("SETRANGE", "k", 1),
    )


def test_incr_decr(sbs):
    run(
        sbs,
        ("INCR", "n"),
        ("INCR", "n"),
        ("DECR", "n"),
        ("INCRBY", "n", "100"),
        ("DECRBY", "n", "50"),
        ("DECRBY", "n", "-50"),
        ("INCRBY", "n", "-1000"),
        ("GET", "n"),
        ("SET", "n", "9223372036854775806"),
        ("INCR", "n"),
        ("INCR", "n"),
        ("SET", "n", "-9223372036854775807"),
        ("DECR", "n"),
        ("DECR", "n"),
        ("INCRBY", "n", "-1"),
        ("DECRBY", "m", "-9223372036854775808"),
        ("DECRBY", "m", "9223372036854775807"),
        ("INCRBY", "m", "9223372036854775808"),
        ("INCRBY", "m", "abc"),
        ("INCRBY", "m", "1.0"),
        ("SET", "s", " 1"),
        ("INCR", "s"),
        ("SET", "s", "1 "),
        ("INCR", "s"),
        ("SET", "s", "01"),
        ("INCR", "s"),
        ("SET", "s", "+1"),
        ("INCR", "s"),
        ("SET", "s", "-0"),
        ("INCR", "s"),
        ("SET", "s", "1.0"),
        ("DECR", "s"),
        ("SET", "s", ""),
        ("INCR", "s"),
        ("SET", "t", "10", "EX", "100"),
        ("INCR", "t"),
        ("TTL", "t"),
        ("APPEND", "a", "4"),
        ("APPEND", "a", "2"),
        ("INCR", "a"),
        ("INCR",),
        ("INCRBY", "n"),
    )


def test_incr_digit_reading_bounds(sbs):
    # INCR's compiled fast path reads "0" or '-' and up to 18 digits in C; everything at
    # and past its edges must answer as Redis's string2ll does.
    script = []
    for value in ("0", "-1", "-", "-0", "00", "7", "12a4", "1\x00", "999999999999999999",
                  "-999999999999999999", "1000000000000000000", "-1000000000000000000",
                  "9223372036854775807", "-9223372036854775808", "92233720368547758070"):
        script += [("SET", "c", value), ("INCR", "c"), ("INCR", "c"), ("GET", "c")]
    run(sbs, *script)


def test_incr_in_place_is_invisible_to_every_holder(local):
    """Compiled, INCR overwrites its counter's bytes in place when only the database holds
    them (strings.pxd's _c_bump_in_place). Whatever else holds the old value must keep it:
    a reference taken before, a GET's reply not yet written, MULTI's results, a COPY, the
    propagated stream. And the bumped object must hash as its new contents."""
    db = local.client.db
    local("SET", "k", b"%d" % 10)
    held = db.data[b"k"]
    assert local("INCR", "k") == b":11\r\n"
    assert held == b"10" and hash(held) == hash(b"10") and db.data[b"k"] == b"11"
    del held
    # A GET's reply and an INCR in one batch, the reply joined only afterwards.
    local.client.out.clear()
    local.server.execute_all(local.client, [[b"GET", b"k"], [b"INCR", b"k"], [b"GET", b"k"]])
    assert b"".join(local.client.out) == b"$2\r\n11\r\n:12\r\n$2\r\n12\r\n"
    # The cached hash of the old contents is dropped: a hash taken at 12 must not stay.
    hash(db.data[b"k"])
    assert local("INCR", "k") == b":13\r\n"
    assert hash(db.data[b"k"]) == hash(b"13") and db.data[b"k"] in {b"13"}
    assert local("MULTI") == b"+OK\r\n"
    for cmd in (("GET", "k"), ("INCR", "k"), ("GET", "k"), ("INCR", "k")):
        assert local(*cmd) == b"+QUEUED\r\n"
    assert local("EXEC") == b"*4\r\n$2\r\n13\r\n:14\r\n$2\r\n14\r\n:15\r\n"
    assert local("COPY", "k", "k2") == b":1\r\n"
    assert local("INCR", "k") == b":16\r\n" and local("GET", "k2") == b"$2\r\n15\r\n"
    assert local("INCR", "k2") == b":16\r\n" and local("GET", "k") == b"$2\r\n16\r\n"
    assert local.effects("INCR", "k") == [[b"INCR", b"k"]]
    dump = local("DUMP", "k")
    assert local("RESTORE", "k3", 0, dump[dump.index(b"\r\n") + 2:-2]) == b"+OK\r\n"
    assert local("INCR", "k") == b":18\r\n" and local("GET", "k3") == b"$2\r\n17\r\n"
    assert local("OBJECT", "ENCODING", "k") == b"$3\r\nint\r\n"
    # Across a length change (99 -> 100 cannot be bumped in place) and negatives.
    local("SET", "n", b"%d" % -101)
    assert [local("INCR", "n") for _ in range(3)] == [b":-100\r\n", b":-99\r\n", b":-98\r\n"]
    local("SET", "n", b"%d" % 98)
    assert [local("INCR", "n") for _ in range(3)] == [b":99\r\n", b":100\r\n", b":101\r\n"]
    assert local("GET", "n") == b"$3\r\n101\r\n"


def test_incr_in_place_matches_redis(sbs):
    """The in-place bump beside Redis: a value read back between increments, WATCH seeing
    the change, a COPY that must not move, a pipeline of INCRs and GETs."""
    run(sbs, ("SET", "c", "5"), ("INCR", "c"), ("GET", "c"), ("COPY", "c", "d"),
        *[("INCR", "c") for _ in range(6)], ("GET", "c"), ("GET", "d"), ("INCR", "d"),
        ("GET", "d"), ("OBJECT", "ENCODING", "c"), ("STRLEN", "c"), ("APPEND", "c", "7"),
        ("INCR", "c"), ("GET", "c"))


def test_incrbyfloat_cases(sbs):
    run(
        sbs,
        ("INCRBYFLOAT", "f", "10.5"),
        ("INCRBYFLOAT", "f", "0.1"),
        ("INCRBYFLOAT", "f", "-5.0e3"),
        ("INCRBYFLOAT", "f", "5.0e3"),
        ("SET", "f", "0.1"),
        ("INCRBYFLOAT", "f", "0.2"),
        ("INCRBYFLOAT", "g", "1e400"),
        ("INCRBYFLOAT", "g", "-1e400"),
        ("INCRBYFLOAT", "h", "1.7976931348623157e308"),
        ("INCRBYFLOAT", "h", "1.7976931348623157e308"),
        ("INCRBYFLOAT", "i", "1e-4940"),
        ("INCRBYFLOAT", "i", "1e-20"),
        ("INCRBYFLOAT", "j", "-1e-20"),
        ("INCRBYFLOAT", "k", "0x1p3"),
        ("INCRBYFLOAT", "k", "0X.8P1"),
        ("INCRBYFLOAT", "k", ".5"),
        ("INCRBYFLOAT", "k", "5."),
        ("INCRBYFLOAT", "k", "+3"),
        ("INCRBYFLOAT", "k", "-0"),
        ("INCRBYFLOAT", "z", "-0"),
        ("INCRBYFLOAT", "x", "1e4932"),
        ("INCRBYFLOAT", "x", "1e4933"),
        ("INCRBYFLOAT", "x", "1e-5000"),
        ("INCRBYFLOAT", "x", "0e99999999999"),
        ("INCRBYFLOAT", "x", "inf"),
        ("INCRBYFLOAT", "x", "-Infinity"),
        ("INCRBYFLOAT", "x", "nan"),
        ("INCRBYFLOAT", "x", "abc"),
        ("INCRBYFLOAT", "x", " 1"),
        ("INCRBYFLOAT", "x", "1 "),
        ("INCRBYFLOAT", "x", ""),
        ("INCRBYFLOAT", "x", "1e"),
        ("INCRBYFLOAT", "x", "0x"),
        ("INCRBYFLOAT", "x", "1_0"),
        ("INCRBYFLOAT", "x", "1\x002"),
        ("SET", "y", "inf"),
        ("INCRBYFLOAT", "y", "1"),
        ("SET", "y", "abc"),
        ("INCRBYFLOAT", "y", "1"),
        ("SET", "t", "1", "EX", "100"),
        ("INCRBYFLOAT", "t", "1.5"),
        ("TTL", "t"),
        ("INCRBYFLOAT", "t"),
    )


@HYPO
@given(st.lists(st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.integers(0, 25).flatmap(lambda p: st.decimals(allow_nan=False, allow_infinity=False, places=p)).map(str),
    st.integers(-(10**20), 10**20).map(str),
    st.from_regex(r"\A-?[0-9]{1,3}(\.[0-9]{0,20})?([eE][+-]?[0-9]{1,3})?\Z"),
), min_size=1, max_size=4))
def test_incrbyfloat_matches_redis(sbs, increments):
    sbs.check("DEL", "f")
    for inc in increments:
        sbs.check("INCRBYFLOAT", "f", inc)
        sbs.check("OBJECT", "ENCODING", "f")
        sbs.check("OBJECT", "REFCOUNT", "f")
    sbs.check("GET", "f")


def _show(key: str) -> list[tuple]:
    return [("OBJECT", "ENCODING", key), ("OBJECT", "REFCOUNT", key), ("GET", key)]


def test_incrbyfloat_integral_result_is_an_embstr(sbs):
    """Redis keeps INCRBYFLOAT's formatted result a string object: "3" is an embstr
    with refcount 1, not the shared integer SET would make of it, until the value is
    replaced (any write, or a reload re-encoding it); it moves with its key."""
    run(sbs, ("SET", "k", "1"), ("INCRBYFLOAT", "k", "2"), *_show("k"),
        ("INCRBYFLOAT", "k", "99997"), *_show("k"),  # "100000": an embstr too
        ("INCRBYFLOAT", "k", "-100000"), *_show("k"),  # "0"
        ("INCRBYFLOAT", "k", "0.5"), *_show("k"),
        ("INCRBYFLOAT", "k", "0.5"), *_show("k"),
        ("INCRBYFLOAT", "new", "7"), *_show("new"))
    # What replaces the value makes it a shared integer again (or raw).
    for write in [("SET", "k", "3"), ("SET", "k", "3", "GET"), ("INCR", "k"), ("INCRBY", "k", "0"),
                  ("GETSET", "k", "4"), ("MSET", "k", "4"), ("SET", "k", "4", "KEEPTTL"),
                  ("APPEND", "k", ""), ("SETRANGE", "k", 0, "5"), ("SETBIT", "k", 0, 0)]:
        run(sbs, ("SET", "k", "1"), ("INCRBYFLOAT", "k", "2"), write, *_show("k"))
    # What leaves it alone keeps it an embstr.
    run(sbs, ("SET", "k", "1"), ("INCRBYFLOAT", "k", "2"), ("SETRANGE", "k", 0, ""),
        ("GETEX", "k", "EX", 100), ("GETRANGE", "k", 0, -1), ("STRLEN", "k"), *_show("k"),
        ("PERSIST", "k"), *_show("k"))
    # It goes with its key: RENAME, MOVE, SWAPDB; and the key's next value owes it nothing.
    run(sbs, ("RENAME", "k", "r"), *_show("r"), ("SET", "k", "3"), *_show("k"),
        ("MOVE", "r", 1), ("SELECT", 1), *_show("r"), ("SWAPDB", 0, 1), ("SELECT", 0),
        *_show("r"), ("SWAPDB", 0, 1), ("SELECT", 1), *_show("r"), ("DEL", "r"),
        ("SET", "r", "3"), *_show("r"), ("INCRBYFLOAT", "r", "1"), ("FLUSHDB",),
        ("SET", "r", "4"), *_show("r"), ("SELECT", 0))
    # RESTORE and DEBUG RELOAD encode what they load afresh.
    sbs.check("SET", "k", "1")
    sbs.check("INCRBYFLOAT", "k", "2")
    dump = sbs.oracle.call("DUMP", "k")
    payload = dump[dump.index(b"\r\n") + 2:-2]
    run(sbs, ("RESTORE", "k2", 0, payload), *_show("k2"), ("DEBUG", "RELOAD"), *_show("k"))


def test_incrbyfloat_embstr_lost_at_expiry(sbs):
    # A TTL far beyond the checks (nothing here may race the clock), kept by INCRBYFLOAT;
    # then a 1 ms one, which does not touch the value, lets the key expire.
    run(sbs, ("SET", "k", "1"), ("PEXPIRE", "k", 100_000), ("INCRBYFLOAT", "k", "2"), *_show("k"))
    assert all(int(r[1:-2]) > 0 for r in sbs.both("PTTL", "k"))
    run(sbs, ("PEXPIRE", "k", 1))
    wait_until(lambda: sbs.both("EXISTS", "k") == (b":0\r\n", b":0\r\n"))
    run(sbs, ("SET", "k", "3"), *_show("k"))


def test_debug_object_refcount_and_encoding(sbs):
    """DEBUG OBJECT's refcount and encoding fields say what OBJECT does."""
    run(sbs, ("SET", "a", "5"), ("COPY", "a", "b"), ("SET", "c", "1"), ("INCRBYFLOAT", "c", "1"),
        ("SET", "d", "12345"))
    for key in "abcd":
        mine, theirs = sbs.both("DEBUG", "OBJECT", key)
        fields = [re.search(rb"refcount:\d+ encoding:\w+", r).group() for r in (mine, theirs)]
        assert fields[0] == fields[1], (key, mine, theirs)


def test_incrbyfloat_replica_sees_an_integer(local):
    """A replica gets INCRBYFLOAT as SET ... KEEPTTL, so it stores the shared integer
    (as a Redis replica does) while the primary keeps the embstr."""
    local("SET", "k", "1")
    effects = local.effects("INCRBYFLOAT", "k", "2")
    assert effects == [[b"SET", b"k", b"3", b"KEEPTTL"]]
    assert local("OBJECT", "ENCODING", "k") == b"$6\r\nembstr\r\n"
    replica = Local()
    replica("SET", "k", "1")
    replica(*effects[0])
    assert replica("OBJECT", "ENCODING", "k") == b"$3\r\nint\r\n"
    assert replica("OBJECT", "REFCOUNT", "k") == b":2147483647\r\n"


def test_lcs(sbs):
    a = "ohmytext"
    b = "mynewtext"
    rna1 = "CACCTTCCCAGGTAACAAACCAACCAACTTTCGATCTCTTGTAGATCTGTTCTCTAAACGAACTTTAAAATCTGTGTGGCTGTCACTCG"
    rna2 = "ATTAAAGGTTTATACCTTCCCAGGTAACAAACCAACCAACTTTCGATCTCTTGTAGATCTGTTCTCTAAACGAACTTTAAAATCTGTG"
    run(
        sbs,
        ("MSET", "a", a, "b", b, "r1", rna1, "r2", rna2),
        ("LCS", "a", "b"),
        ("LCS", "a", "b", "LEN"),
        ("LCS", "a", "b", "IDX"),
        ("LCS", "a", "b", "IDX", "WITHMATCHLEN"),
        ("LCS", "a", "b", "IDX", "MINMATCHLEN", "4"),
        ("LCS", "a", "b", "IDX", "MINMATCHLEN", "-4", "WITHMATCHLEN"),
        ("LCS", "r1", "r2"),
        ("LCS", "r1", "r2", "LEN"),
        ("LCS", "r1", "r2", "IDX"),
        ("LCS", "r1", "r2", "IDX", "MINMATCHLEN", "5", "WITHMATCHLEN"),
        ("LCS", "a", "missing"),
        ("LCS", "missing", "a", "IDX"),
        ("LCS", "a", "b", "LEN", "IDX"),
        ("LCS", "a", "b", "MINMATCHLEN"),
        ("LCS", "a", "b", "MINMATCHLEN", "x"),
        ("LCS", "a", "b", "FOO"),
        ("LCS", "a"),
    )


def test_lcs_long_strings(sbs):
    import random

    rng = random.Random(7)
    a = "".join(rng.choice("ACGT") for _ in range(3000))
    b = "".join(rng.choice("ACGT") for _ in range(2500))
    run(sbs, ("MSET", "a", a, "b", b), ("LCS", "a", "b"), ("LCS", "b", "a", "LEN"),
        ("LCS", "a", "b", "IDX", "MINMATCHLEN", "4", "WITHMATCHLEN"))
    run(sbs, ("CONFIG", "SET", "proto-max-bulk-len", "1000000"), ("LCS", "a", "b"))
    run(sbs, ("CONFIG", "SET", "proto-max-bulk-len", "536870912"))


@HYPO
@given(st.text("abc", max_size=12), st.text("abc", max_size=12), st.integers(0, 3))
def test_lcs_matches_redis(sbs, a, b, minlen):
    sbs.check("MSET", "a", a, "b", b)
    sbs.check("LCS", "a", "b")
    sbs.check("LCS", "a", "b", "IDX", "MINMATCHLEN", minlen, "WITHMATCHLEN")


def test_resp3(sbs3):
    run(
        sbs3,
        ("GET", "missing"),
        ("SET", "k", "v", "NX"),
        ("SET", "k", "v", "NX"),
        ("SET", "k", "v2", "XX", "GET"),
        ("MGET", "k", "missing"),
        ("GETDEL", "missing"),
        ("GETEX", "missing"),
        ("INCRBYFLOAT", "f", "1.5"),
        ("MSET", "a", "ohmytext", "b", "mynewtext"),
        ("LCS", "a", "b", "IDX", "WITHMATCHLEN"),
        ("LCS", "a", "b", "LEN"),
        ("GETRANGE", "missing", 0, 1),
    )


def test_object_encoding(sbs):
    values = ["123", "-9223372036854775808", "9223372036854775807", "9223372036854775808",
              "0", "-0", "012", "+1", " 1", "abc", "x" * 44, "x" * 45, "1" * 21, ""]
    for i, v in enumerate(values):
        sbs.check("SET", f"k{i}", v)
        sbs.check("OBJECT", "ENCODING", f"k{i}")
    run(
        sbs,
        ("APPEND", "a", "1"),
        ("OBJECT", "ENCODING", "a"),
        ("APPEND", "a", "2"),
        ("OBJECT", "ENCODING", "a"),
        ("INCR", "a"),
        ("OBJECT", "ENCODING", "a"),
        ("SETRANGE", "s", 0, "1"),
        ("OBJECT", "ENCODING", "s"),
        ("SET", "t", "abc"),
        ("SETRANGE", "t", 1, "x"),
        ("OBJECT", "ENCODING", "t"),
        ("INCRBYFLOAT", "f", "1.5"),
        ("OBJECT", "ENCODING", "f"),
        ("MSET", "m1", "7", "m2", "seven"),
        ("OBJECT", "ENCODING", "m1"),
        ("OBJECT", "ENCODING", "m2"),
        ("GETSET", "m1", "8"),
        ("OBJECT", "ENCODING", "m1"),
        ("SETEX", "e", 100, "9"),
        ("OBJECT", "ENCODING", "e"),
        ("COPY", "a", "a2"),
        ("OBJECT", "ENCODING", "a2"),
        ("COPY", "t", "t2"),
        ("OBJECT", "ENCODING", "t2"),
    )


def test_string_encoding_helper():
    from rill.server.commands.strings import string_encoding

    assert string_encoding(b"123") == b"int"
    assert string_encoding(b"-9223372036854775808") == b"int"
    assert string_encoding(b"9223372036854775808") == b"embstr"
    assert string_encoding(b"x" * 44) == b"embstr"
    assert string_encoding(b"x" * 45) == b"raw"
    assert string_encoding(bytearray(b"1")) == b"raw"


# -- WRONGTYPE, without depending on another family --------------------------------------
@pytest.mark.parametrize(
    "cmd",
    [
        ("GET", "l"), ("GETSET", "l", "v"), ("GETDEL", "l"), ("GETEX", "l", "EX", "10"),
        ("STRLEN", "l"), ("GETRANGE", "l", 0, 1), ("SUBSTR", "l", 0, 1), ("APPEND", "l", "x"),
        ("SETRANGE", "l", 0, "x"), ("INCR", "l"), ("DECR", "l"), ("INCRBY", "l", 1),
        ("DECRBY", "l", 1), ("INCRBYFLOAT", "l", 1), ("SET", "l", "v", "GET"),
    ],
)
def test_wrongtype(local, cmd):
    local.server.keyspace[0].set(b"l", FakeList())
    assert local(*cmd) == b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    assert type(local.server.keyspace[0].data[b"l"]) is FakeList


def test_wrongtype_non_errors(local):
    local.server.keyspace[0].set(b"l", FakeList())
    assert local("MGET", "l", "x") == b"*2\r\n$-1\r\n$-1\r\n"
    assert local("LCS", "l", "x") == b"-ERR The specified keys must contain string values\r\n"
    assert local("SET", "l", "v") == b"+OK\r\n"
    assert local("GET", "l") == b"$1\r\nv\r\n"
    local.server.keyspace[0].set(b"l", FakeList())
    assert local("SETRANGE", "l", 0, "") == b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    assert local("MSETNX", "l", "v") == b":0\r\n"


# -- propagation and dirty ------------------------------------------------------------------
def test_propagation_of_set_family(local):
    before = int(time.time() * 1000)
    (op,) = local.effects("SET", "k", "v", "EX", "100")
    assert op[:4] == [b"SET", b"k", b"v", b"PXAT"]
    assert before + 100_000 <= int(op[4]) <= int(time.time() * 1000) + 100_000
    assert local.effects("SET", "k", "v", "PXAT", FAR_MS, "XX") == [[b"SET", b"k", b"v", b"PXAT", str(FAR_MS).encode()]]
    assert local.effects("SET", "k", "v", "GET", "get", "KEEPTTL") == [[b"SET", b"k", b"v", b"KEEPTTL"]]
    assert local.effects("SET", "k", "v") == [[b"SET", b"k", b"v"]]
    assert local.effects("SET", "k", "v", "NX") == []
    assert local.effects("SETNX", "k", "v") == []
    assert local.effects("SETNX", "n", "v") == [[b"SETNX", b"n", b"v"]]
    (op,) = local.effects("SETEX", "k", "100", "v")
    assert op[:4] == [b"SET", b"k", b"v", b"PXAT"]
    (op,) = local.effects("PSETEX", "k", "100000", "v")
    assert op[:4] == [b"SET", b"k", b"v", b"PXAT"]
    assert local.effects("GETSET", "k", "w") == [[b"SET", b"k", b"w"]]
    assert local.effects("INCRBYFLOAT", "f", "1.5") == [[b"SET", b"f", b"1.5", b"KEEPTTL"]]
    assert local.effects("GETDEL", "f") == [[b"DEL", b"f"]]
    assert local.effects("GETDEL", "f") == []
    assert local.effects("MSET", "a", "1", "b", "2") == [[b"MSET", b"a", b"1", b"b", b"2"]]
    assert local.effects("MSETNX", "a", "1", "c", "2") == []
    assert local.effects("APPEND", "a", "x") == [[b"APPEND", b"a", b"x"]]
    assert local.effects("SETRANGE", "a", 0, "") == []
    assert local.effects("INCR", "i") == [[b"INCR", b"i"]]
    assert local.effects("INCR", "a") == []


def test_propagation_of_getex(local):
    local("SET", "k", "v")
    assert local.effects("GETEX", "k") == []
    assert local.effects("GETEX", "k", "PERSIST") == []
    (op,) = local.effects("GETEX", "k", "EX", "100")
    assert op[:2] == [b"PEXPIREAT", b"k"] and len(op) == 3
    assert local.effects("GETEX", "k", "PXAT", FAR_MS) == [[b"PEXPIREAT", b"k", str(FAR_MS).encode()]]
    assert local.effects("GETEX", "k", "PERSIST") == [[b"PERSIST", b"k"]]
    assert local.effects("GETEX", "k", "EXAT", "1") == [[b"DEL", b"k"]]
    local("CONFIG", "SET", "lazyfree-lazy-expire", "yes")
    local("SET", "k", "v")
    assert local.effects("GETEX", "k", "PXAT", "1") == [[b"UNLINK", b"k"]]
    local("CONFIG", "SET", "lazyfree-lazy-user-del", "yes")
    local("SET", "k", "v")
    assert local.effects("GETDEL", "k") == [[b"UNLINK", b"k"]]


def test_lazy_expiry_propagates_del_before_the_write(local):
    local("SET", "k", "v", "PX", "1")
    time.sleep(0.01)
    ops = local.effects("SET", "k", "w")
    assert ops == [[b"MULTI"], [b"DEL", b"k"], [b"SET", b"k", b"w"], [b"EXEC"]]
    local("SET", "g", "v", "PX", "1")
    time.sleep(0.01)
    assert local.effects("GET", "g") == [[b"DEL", b"g"]]
    assert local.server.keyspace.expired_keys == 2


def test_dirty_counts(local):
    server = local.server

    def dirty(*cmd) -> int:
        d = server.dirty
        local(*cmd)
        return server.dirty - d

    assert dirty("SET", "k", "v") == 1
    assert dirty("MSET", "a", "1", "b", "2", "c", "3") == 3
    assert dirty("MSETNX", "x", "1", "y", "2") == 2
    assert dirty("MSETNX", "x", "1", "z", "2") == 0
    assert dirty("SET", "k", "v", "NX") == 0
    assert dirty("GET", "k") == 0
    assert dirty("APPEND", "k", "") == 1
    assert dirty("SETRANGE", "k", 0, "") == 0
    assert dirty("SETRANGE", "k", 0, "x") == 1
    assert dirty("INCR", "n") == 1
    assert dirty("INCR", "k") == 0
    assert dirty("GETEX", "k") == 0
    assert dirty("GETDEL", "missing") == 0


# -- WATCH ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "cmd",
    [
        ("SET", "w", "x"), ("SET", "w", "x", "EX", "100"), ("SETNX", "new", "x"),
        ("SETEX", "w", 100, "x"), ("PSETEX", "w", 100000, "x"), ("GETSET", "w", "x"),
        ("GETDEL", "w"), ("GETEX", "w", "EX", "100"), ("GETEX", "w", "PERSIST"),
        ("MSET", "a", "1", "w", "2"), ("MSETNX", "new", "1", "b", "2"), ("APPEND", "w", "x"),
        ("SETRANGE", "w", 1, "x"), ("INCR", "n"), ("DECR", "n"), ("INCRBY", "n", 5),
        ("DECRBY", "n", 5), ("INCRBYFLOAT", "n", "1.5"),
    ],
)
def test_writes_touch_watched_keys(rill_server, cmd):
    a = redis.Redis(port=rill_server.port)
    b = redis.Redis(port=rill_server.port)
    try:
        a.flushall()
        a.set("w", "1", ex=1000)
        a.set("n", "1")
        watched = "new" if "new" in cmd else "n" if "n" in cmd else "w"
        pipe = a.pipeline()
        pipe.watch(watched)
        b.execute_command(*cmd)
        pipe.multi()
        pipe.get(watched)
        with pytest.raises(redis.WatchError):
            pipe.execute()
    finally:
        a.close()
        b.close()


def test_failed_writes_do_not_touch_watched_keys(rill_server):
    a = redis.Redis(port=rill_server.port)
    b = redis.Redis(port=rill_server.port)
    try:
        a.flushall()
        a.set("w", "abc")
        pipe = a.pipeline()
        pipe.watch("w")
        b.set("w", "x", nx=True)
        b.getex("w")
        b.setrange("w", 1, "")
        with pytest.raises(redis.ResponseError):
            b.incr("w")
        pipe.multi()
        pipe.get("w")
        assert pipe.execute() == [b"abc"]
    finally:
        a.close()
        b.close()


# -- expiry, lazy and active --------------------------------------------------------------------
def test_short_ttls_expire_lazily(r):
    r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    try:
        r.set("a", "1", px=30)
        r.psetex("b", 30, "1")
        r.set("c", "1")
        r.pexpire("c", 30)
        time.sleep(0.1)
        assert r.dbsize() == 3  # nobody deleted them yet
        assert r.ttl("a") == -2
        assert r.pttl("b") == -2
        assert r.get("c") is None
        assert r.dbsize() == 0
    finally:
        r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "1")


def test_short_ttls_expire_actively(r):
    for i in range(50):
        r.set(f"k{i}", "v", px=50)
    r.set("keep", "v")
    deadline = time.time() + 3
    while r.dbsize() > 1 and time.time() < deadline:
        time.sleep(0.05)
    assert r.dbsize() == 1
    assert r.keys("*") == [b"keep"]


# -- redis-py, sync and asyncio ----------------------------------------------------------------
def test_redis_py_sync(r):
    assert r.set("k", "v", ex=100) is True
    assert r.get("k") == b"v"
    assert r.ttl("k") == 100
    assert r.incr("n", 5) == 5
    assert r.incrbyfloat("f", 2.5) == 2.5
    assert r.mset({"a": "1", "b": "2"}) is True
    assert r.mget("a", "b", "c") == [b"1", b"2", None]
    assert r.getdel("a") == b"1"
    assert r.append("b", "3") == 2
    assert r.getrange("b", 0, 0) == b"2"
    assert r.setrange("b", 3, "x") == 4
    assert r.get("b") == b"23\x00x"
    assert r.set("k", "w", get=True) == b"v"
    assert r.getex("k", persist=True) == b"w"
    assert r.ttl("k") == -1


async def test_redis_py_asyncio(rill_server):
    client = redis.asyncio.Redis(port=rill_server.port)
    try:
        await client.flushall()
        assert await client.set("k", "v", nx=True) is True
        assert await client.set("k", "v", nx=True) is None
        results = await asyncio.gather(*(client.incr("counter") for _ in range(50)))
        assert sorted(results) == list(range(1, 51))
        assert await client.get("counter") == b"50"
        assert await client.decrby("counter", 8) == 42
        assert await client.strlen("counter") == 2
    finally:
        await client.aclose()


@HYPO
@given(st.lists(st.one_of(
    st.tuples(st.sampled_from(["INCRBY", "DECRBY"]), st.integers(-(2**63), 2**63 - 1).map(str)),
    st.tuples(st.just("SET"), st.one_of(st.integers(-(2**64), 2**64).map(str), st.sampled_from(["01", "-0", "x", ""]))),
    st.tuples(st.sampled_from(["INCR", "DECR", "GET"])),
    st.tuples(st.just("APPEND"), st.sampled_from(["0", "1", "a"])),
), max_size=12))
def test_counter_sequences_match_redis(sbs, script):
    sbs.check("DEL", "n")
    for op, *args in script:
        sbs.check(op, "n", *args)
