"""GEO commands side by side with redis-server 7.0.15 (RESP2 and RESP3)."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import inproc_keyevents, keyevents
from tests.support import run_inproc as _run


@pytest.fixture(params=["resp2", "resp3"])
def oracle(request):
    """The side-by-side checker, once per protocol version."""
    return request.getfixturevalue("sbs" if request.param == "resp2" else "sbs3")


SICILY = ("GEOADD", "Sicily", "13.361389", "38.115556", "Palermo", "15.087269", "37.502669", "Catania",
          "12.758489", "38.788135", "edge1", "17.241510", "38.788135", "edge2")


def test_geoadd_options_and_replies(oracle):
    oracle.run([
        ("GEOADD", "g", "1", "1", "x", "2", "2", "y"),
        ("GEOADD", "g", "1", "1", "x"),
        ("GEOADD", "g", "CH", "1.5", "1", "x", "3", "3", "z"),
        ("GEOADD", "g", "NX", "9", "9", "x", "4", "4", "w"),
        ("GEOADD", "g", "XX", "8", "8", "x", "5", "5", "v"),
        ("GEOADD", "g", "XX", "CH", "7", "7", "x", "5", "5", "v"),
        ("GEOADD", "g", "ch", "nx", "6", "6", "u"),
        ("GEOADD", "g", "180", "85.05112878", "ne", "-180", "-85.05112878", "sw"),
        ("GEOADD", "nokey", "XX", "1", "1", "x"),
        ("EXISTS", "nokey"),
        ("ZRANGE", "g", "0", "-1", "WITHSCORES"),
        ("OBJECT", "ENCODING", "g"),
    ])


def test_geoadd_errors(oracle):
    oracle.run([
        ("GEOADD", "g", "200", "100", "x"),
        ("GEOADD", "g", "1", "1", "ok", "-180.5", "0", "x"),
        ("GEOADD", "g", "0", "85.06", "x"),
        ("GEOADD", "g", "0", "-85.06", "x"),
        ("EXISTS", "g"),
        ("GEOADD", "g", "1", "1"),
        ("GEOADD", "g", "1", "x"),
        ("GEOADD", "g", "a", "1", "x"),
        ("GEOADD", "g", "1", "nan", "x"),
        ("GEOADD", "g", "NX", "XX", "1", "1", "x"),
        ("GEOADD", "g", "GT", "1", "1", "x"),
        ("GEOADD", "g", "CH", "NX", "CH"),
        ("GEOADD", "g"),
        ("GEOADD", "g", "1", "1"),
        ("SET", "s", "x"),
        ("GEOADD", "s", "1", "1", "x"),
    ])


def test_geopos_geohash_geodist(oracle):
    oracle.check(*SICILY)
    oracle.run([
        ("GEOADD", "Sicily", "0", "0", "origin", "-122.4194", "37.7749", "sf"),
        ("GEOPOS", "Sicily", "Palermo", "nope", "Catania", "origin", "sf"),
        ("GEOPOS", "nokey", "a", "b"),
        ("GEOHASH", "Sicily", "Palermo", "nope", "Catania", "origin", "sf"),
        ("GEOHASH", "nokey", "a"),
        ("GEODIST", "Sicily", "Palermo", "Catania"),
        ("GEODIST", "Sicily", "Palermo", "Catania", "km"),
        ("GEODIST", "Sicily", "Palermo", "Catania", "KM"),
        ("GEODIST", "Sicily", "Palermo", "Catania", "mi"),
        ("GEODIST", "Sicily", "Palermo", "Catania", "ft"),
        ("GEODIST", "Sicily", "Palermo", "Catania", "m"),
        ("GEODIST", "Sicily", "Palermo", "Palermo"),
        ("GEODIST", "Sicily", "origin", "sf"),
        ("GEODIST", "Sicily", "Palermo", "nope"),
        ("GEODIST", "nokey", "a", "b"),
        ("GEODIST", "nokey", "a", "b", "parsec"),
        ("GEODIST", "Sicily", "Palermo", "Catania", "parsec"),
        ("GEODIST", "Sicily", "Palermo", "Catania", "km", "extra"),
        ("GEODIST", "Sicily", "Palermo"),
        ("GEOPOS", "Sicily"),
        ("GEOHASH", "Sicily"),
        ("SET", "s", "x"),
        ("GEOPOS", "s", "a"),
        ("GEOHASH", "s", "a"),
        ("GEODIST", "s", "a", "b"),
    ])


def test_plain_sorted_set_scores_decode_like_c(oracle):
    # scores GEOADD never writes: negative, fractional, huge, infinite
    oracle.run([
        ("ZADD", "w", "-5", "a", "1e20", "b", "inf", "c", "-inf", "d", "1.5", "e", "4503599627370496", "f"),
        ("GEOPOS", "w", "a", "b", "c", "d", "e", "f"),
        ("GEOHASH", "w", "a", "b", "c", "d", "e", "f"),
        ("GEODIST", "w", "a", "f"),
        ("GEORADIUS", "w", "0", "0", "20000", "km", "WITHCOORD", "WITHHASH", "WITHDIST"),
    ])


def test_georadius_forms(oracle):
    oracle.check(*SICILY)
    for cmd in (
        ("GEORADIUS", "Sicily", "15", "37", "200", "km"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "WITHDIST", "WITHCOORD", "WITHHASH"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "withcoord", "ASC"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "WITHDIST", "DESC"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "WITHHASH", "COUNT", "1"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "COUNT", "2", "DESC"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "COUNT", "3", "ANY"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "COUNT", "1", "ANY", "ASC"),
        ("GEORADIUS", "Sicily", "15", "37", "200000", "m"),
        ("GEORADIUS", "Sicily", "15", "37", "124.27", "mi"),
        ("GEORADIUS", "Sicily", "15", "37", "656168", "ft", "WITHDIST"),
        ("GEORADIUS", "Sicily", "15", "37", "1", "m"),
        ("GEORADIUS", "Sicily", "15", "37", "0", "km"),
        ("GEORADIUS", "Sicily", "15", "37", "inf", "km", "WITHDIST"),
        ("GEORADIUS", "Sicily", "15", "37", "1e300", "km"),
        ("GEORADIUS", "nokey", "15", "37", "200", "km"),
        ("GEORADIUS_RO", "Sicily", "15", "37", "200", "km", "WITHDIST", "ASC"),
        ("GEORADIUSBYMEMBER", "Sicily", "Palermo", "200", "km", "WITHDIST", "WITHCOORD"),
        ("GEORADIUSBYMEMBER", "Sicily", "Palermo", "200", "km", "COUNT", "2", "DESC"),
        ("GEORADIUSBYMEMBER_RO", "Sicily", "Catania", "100", "km", "WITHHASH"),
        ("GEORADIUSBYMEMBER", "nokey", "Palermo", "200", "km"),
    ):
        oracle.check(*cmd)


def test_georadius_errors(oracle):
    oracle.check(*SICILY)
    for cmd in (
        ("GEORADIUS", "Sicily", "200", "37", "200", "km"),
        ("GEORADIUS", "Sicily", "x", "37", "200", "km"),
        ("GEORADIUS", "Sicily", "15", "x", "200", "km"),
        ("GEORADIUS", "Sicily", "15", "37", "x", "km"),
        ("GEORADIUS", "Sicily", "15", "37", "-1", "km"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "parsec"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "COUNT"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "COUNT", "0"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "COUNT", "-3"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "COUNT", "x"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "ANY"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "STORE"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "STORE", "d", "WITHDIST"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "WITHHASH", "STOREDIST", "d"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "STOREDIST"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "bogus"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "FROMMEMBER", "Palermo"),
        ("GEORADIUS_RO", "Sicily", "15", "37", "200", "km", "STORE", "d"),
        ("GEORADIUSBYMEMBER_RO", "Sicily", "Palermo", "200", "km", "STOREDIST", "d"),
        ("GEORADIUSBYMEMBER", "Sicily", "nope", "200", "km"),
        ("GEORADIUSBYMEMBER", "Sicily", "nope", "x", "km"),
        ("GEORADIUSBYMEMBER", "Sicily", "Palermo", "x", "km"),
        ("GEORADIUSBYMEMBER", "Sicily", "Palermo", "200", "parsec"),
        # without the key neither the member nor the radius is looked at
        ("GEORADIUSBYMEMBER", "nokey", "nope", "x", "parsec"),
        ("GEORADIUSBYMEMBER", "nokey", "nope", "x", "parsec", "bogus"),
        ("GEORADIUSBYMEMBER", "nokey", "nope", "x", "parsec", "ANY"),
        ("GEORADIUS", "Sicily", "15", "37"),
        ("GEORADIUSBYMEMBER", "Sicily", "Palermo", "200"),
    ):
        oracle.check(*cmd)
    oracle.check("SET", "s", "x")
    oracle.check("GEORADIUS", "s", "200", "37", "200", "km")
    oracle.check("GEORADIUSBYMEMBER", "s", "a", "200", "km")


def test_geosearch_forms(oracle):
    oracle.check(*SICILY)
    for cmd in (
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "ASC"),
        ("GEOSEARCH", "Sicily", "FROMMEMBER", "Palermo", "BYRADIUS", "200", "km", "WITHDIST", "WITHCOORD", "WITHHASH"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "400", "400", "km", "ASC", "WITHDIST"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "400", "400", "km", "DESC", "COUNT", "2"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "400", "400", "km", "COUNT", "2", "ANY"),
        ("GEOSEARCH", "Sicily", "FROMMEMBER", "Catania", "BYBOX", "1", "1", "m", "WITHCOORD"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "0", "0", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "inf", "inf", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "248.55", "248.55", "mi", "ASC"),
        ("GEOSEARCH", "Sicily", "FROMMEMBER", "Palermo", "FROMMEMBER", "Catania", "BYRADIUS", "1", "km"),
        ("geosearch", "Sicily", "frommember", "Palermo", "byradius", "100", "KM", "withdist"),
        ("GEOSEARCH", "nokey", "FROMMEMBER", "Palermo", "BYRADIUS", "200", "km"),
        ("GEOSEARCH", "nokey", "FROMLONLAT", "15", "37", "BYBOX", "1", "1", "km"),
    ):
        oracle.check(*cmd)


def test_geosearch_errors(oracle):
    oracle.check(*SICILY)
    for cmd in (
        ("GEOSEARCH", "Sicily", "BYRADIUS", "200", "km"),
        ("geosearch", "Sicily", "BYRADIUS", "200", "km", "ASC"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "ASC"),
        ("GeoSearch", "Sicily", "FROMLONLAT", "15", "37", "ASC"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "FROMMEMBER", "Palermo", "BYRADIUS", "1", "km"),
        ("GEOSEARCH", "Sicily", "FROMMEMBER", "Palermo", "FROMLONLAT", "15", "37", "BYRADIUS", "1", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "1", "km", "BYBOX", "1", "1", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "1", "1", "km", "BYRADIUS", "1", "km"),
        ("GEOSEARCH", "Sicily", "FROMMEMBER", "nope", "BYRADIUS", "1", "km"),
        ("GEOSEARCH", "Sicily", "FROMMEMBER", "nope", "bogus"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "200", "37", "BYRADIUS", "1", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "-1", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "x", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "1", "parsec"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "-1", "1", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "1", "-1", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "x", "1", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "1", "x", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "1", "1", "parsec"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "1", "1"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "BYRADIUS", "1", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "1", "km", "ANY"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "1", "km", "COUNT", "0"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "1", "km", "STORE", "d"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "1", "km", "STOREDIST"),
        ("GEOSEARCH", "nokey", "FROMLONLAT", "15", "37"),
        ("GEOSEARCH", "nokey", "FROMMEMBER", "x", "BYRADIUS", "1", "km", "COUNT", "1", "ANY", "WITHDIST"),
        ("GEOSEARCH", "Sicily"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT"),
        ("GEOSEARCHSTORE", "d", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "1", "km", "WITHDIST"),
        ("GEOSEARCHSTORE", "d", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "1", "km", "WITHCOORD"),
        ("GEOSEARCHSTORE", "d", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "1", "km", "STORE", "x"),
        ("GEOSEARCHSTORE", "d", "Sicily", "BYRADIUS", "1", "km"),
        ("GEOSEARCHSTORE", "d", "Sicily", "FROMLONLAT", "15", "37"),
    ):
        oracle.check(*cmd)
    oracle.check("SET", "s", "x")
    oracle.check("GEOSEARCH", "s", "FROMLONLAT", "15", "37", "BYRADIUS", "1", "km")
    oracle.check("GEOSEARCHSTORE", "d", "s", "FROMLONLAT", "15", "37", "BYRADIUS", "1", "km")


def test_store_forms(oracle):
    oracle.check(*SICILY)
    oracle.run([
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "STORE", "dst"),
        ("ZRANGE", "dst", "0", "-1", "WITHSCORES"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "STOREDIST", "dst"),
        ("ZRANGE", "dst", "0", "-1", "WITHSCORES"),
        ("OBJECT", "ENCODING", "dst"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "STORE", "dst", "COUNT", "1", "DESC"),
        ("ZRANGE", "dst", "0", "-1", "WITHSCORES"),
        ("GEORADIUS", "Sicily", "15", "37", "500", "km", "STOREDIST", "dst", "STORE", "dst2"),
        ("ZRANGE", "dst2", "0", "-1", "WITHSCORES"),
        ("GEORADIUSBYMEMBER", "Sicily", "Palermo", "100", "km", "STOREDIST", "dst", "ASC"),
        ("ZRANGE", "dst", "0", "-1", "WITHSCORES"),
        ("SET", "str", "x"),
        ("EXPIRE", "dst", "100"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "STORE", "dst"),
        ("TTL", "dst"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "STORE", "str"),
        ("TYPE", "str"),
        # nothing found: the destination goes
        ("GEORADIUS", "Sicily", "0", "0", "1", "km", "STORE", "dst"),
        ("EXISTS", "dst"),
        ("GEORADIUS", "Sicily", "0", "0", "1", "km", "STORE", "dst"),
        ("GEOSEARCHSTORE", "dst", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "400", "400", "km"),
        ("ZRANGE", "dst", "0", "-1", "WITHSCORES"),
        ("GEOSEARCHSTORE", "dst", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "400", "400", "km", "STOREDIST", "COUNT", "2"),
        ("ZRANGE", "dst", "0", "-1", "WITHSCORES"),
        ("GEOSEARCHSTORE", "dst", "Sicily", "FROMMEMBER", "Palermo", "BYRADIUS", "1", "m", "STOREDIST"),
        ("ZRANGE", "dst", "0", "-1", "WITHSCORES"),
        ("GEOSEARCHSTORE", "dst", "nokey", "FROMMEMBER", "Palermo", "BYRADIUS", "1", "m"),
        ("EXISTS", "dst"),
        ("GEORADIUS", "nokey", "15", "37", "200", "km", "STORE", "str"),
        ("EXISTS", "str"),
        ("GEOSEARCHSTORE", "Sicily", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "100", "km"),
        ("ZRANGE", "Sicily", "0", "-1", "WITHSCORES"),
    ])


def test_equal_distances_keep_redis_order(oracle):
    # many members on few points: the order of ties comes from glibc's merge sort
    # (full sorts) or Redis's pqsort (COUNT below the number found)
    rnd = random.Random(5)
    args = []
    for k in range(70):
        args += [rnd.choice(["10", "10.001", "10.002"]), rnd.choice(["20", "20.001"]), f"m{k}"]
    oracle.check("GEOADD", "t", *args)
    for count in ("1", "2", "5", "7", "8", "13", "41", "69", "70", "100"):
        for order in (("ASC",), ("DESC",), ()):
            oracle.check("GEORADIUS", "t", "10", "20", "100", "km", "COUNT", count, *order)
            oracle.check("GEOSEARCH", "t", "FROMLONLAT", "10.001", "20", "BYBOX", "300", "300", "km",
                         "COUNT", count, *order, "WITHDIST")
    oracle.check("GEORADIUS", "t", "10", "20", "100", "km", "DESC")
    oracle.check("GEORADIUS", "t", "10", "20", "100", "km", "ASC", "STORE", "d")
    oracle.check("ZRANGE", "d", "0", "-1", "WITHSCORES")


def test_poles_and_antimeridian(oracle):
    oracle.run([
        ("GEOADD", "p", "179.9", "0", "e1", "-179.9", "0", "w1", "0", "85", "n1", "180", "85", "n2",
         "-180", "-85", "s1", "90", "-84.9", "s2", "0", "0", "o"),
        ("GEORADIUS", "p", "180", "0", "50", "km", "WITHDIST", "ASC"),
        ("GEORADIUS", "p", "-180", "0", "50", "km", "WITHDIST", "ASC"),
        ("GEORADIUS", "p", "0", "85.05112878", "2000", "km", "WITHDIST", "ASC"),
        ("GEORADIUS", "p", "0", "-85.05112878", "3000", "km", "WITHDIST", "ASC"),
        ("GEORADIUS", "p", "0", "0", "20000", "km", "WITHDIST", "ASC"),
        ("GEOSEARCH", "p", "FROMLONLAT", "180", "0", "BYBOX", "100", "100", "km", "WITHDIST", "ASC"),
        ("GEOSEARCH", "p", "FROMLONLAT", "0", "84", "BYBOX", "5000", "500", "km", "WITHDIST", "ASC"),
        ("GEOSEARCH", "p", "FROMLONLAT", "0", "-84", "BYBOX", "40000", "40000", "km", "WITHDIST", "ASC"),
    ])


def test_command_getkeys(oracle):
    for cmd in (
        ("GEORADIUS", "g", "0", "0", "1", "km", "STORE", "d"),
        ("GEORADIUS", "g", "0", "0", "1", "km", "STOREDIST", "d"),
        ("GEORADIUSBYMEMBER", "g", "m", "1", "km", "STORE", "d"),
        ("GEOSEARCHSTORE", "d", "g", "FROMLONLAT", "0", "0", "BYRADIUS", "1", "km"),
        ("GEOADD", "g", "1", "1", "x"),
        ("GEOSEARCH", "g", "FROMLONLAT", "0", "0", "BYRADIUS", "1", "km"),
    ):
        oracle.check("COMMAND", "GETKEYS", *cmd)
    oracle.check("COMMAND", "INFO", "geoadd", "geodist", "geohash", "geopos", "georadius", "georadius_ro",
                 "georadiusbymember", "georadiusbymember_ro", "geosearch", "geosearchstore")


# -- random searches ---------------------------------------------------------------------------
_lon = st.floats(-180, 180, allow_nan=False)
_lat = st.floats(-85.05112878, 85.05112878, allow_nan=False)
_centre = st.tuples(_lon, _lat)
# clustered points exercise the neighbour cells; spread ones the coarse steps
_point = st.one_of(
    st.tuples(_lon, _lat),
    st.tuples(st.floats(-1, 1), st.floats(-1, 1)),
    st.tuples(st.floats(179, 180), st.floats(-1, 1)),
    st.tuples(st.floats(-10, 10), st.floats(80, 85.05112878)),
)
_size = st.one_of(st.floats(0, 50, allow_nan=False), st.floats(0, 25000, allow_nan=False),
                  st.sampled_from([0.0, 1.0, 100.0, 5000.0, 20000.0]))
_unit = st.sampled_from(["m", "km", "mi", "ft"])
_opts = st.lists(st.sampled_from([("WITHDIST",), ("WITHCOORD",), ("WITHHASH",), ("ASC",), ("DESC",),
                                  ("COUNT", "1"), ("COUNT", "3"), ("COUNT", "2", "ANY")]), max_size=3)


def _num(x: float) -> str:
    return repr(float(x))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    points=st.lists(_point, min_size=1, max_size=40),
    searches=st.lists(
        st.tuples(st.one_of(_centre, st.integers(0, 39)), st.booleans(), _size, _size, _unit, _opts),
        min_size=1, max_size=6,
    ),
)
def test_random_searches_match_redis(sbs, points, searches):
    sbs.both("DEL", "g")
    args = []
    for i, (lon, lat) in enumerate(points):
        args += [_num(lon), _num(lat), f"p{i}"]
    sbs.check("GEOADD", "g", *args)
    for centre, box, a, b, unit, opts in searches:
        extra = [x for o in opts for x in o]
        if isinstance(centre, int):
            member = f"p{centre % len(points)}"
            frm = ["FROMMEMBER", member]
            sbs.check("GEORADIUSBYMEMBER", "g", member, _num(a), unit, *extra)
        else:
            frm = ["FROMLONLAT", _num(centre[0]), _num(centre[1])]
            sbs.check("GEORADIUS", "g", _num(centre[0]), _num(centre[1]), _num(a), unit, *extra)
        by = ["BYBOX", _num(a), _num(b), unit] if box else ["BYRADIUS", _num(a), unit]
        sbs.check("GEOSEARCH", "g", *frm, *by, *extra)
    sbs.check("GEOPOS", "g", *(f"p{i}" for i in range(len(points))))
    sbs.check("GEOHASH", "g", *(f"p{i}" for i in range(len(points))))
    sbs.check("GEODIST", "g", "p0", f"p{len(points) - 1}", "km")


# -- keyspace events and propagation -------------------------------------------------------------
NOTIFY_SCRIPT = [
    SICILY,
    ("GEOADD", "Sicily", "13.361389", "38.115556", "Palermo"),
    ("GEOADD", "Sicily", "XX", "1", "1", "nope"),
    ("GEORADIUS", "Sicily", "15", "37", "200", "km", "STORE", "dst"),
    ("GEORADIUS", "Sicily", "15", "37", "200", "km", "STOREDIST", "dst"),
    ("GEOSEARCHSTORE", "dst2", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km"),
    ("GEORADIUS", "Sicily", "0", "0", "1", "km", "STORE", "dst"),
    ("GEOSEARCHSTORE", "dst2", "nokey", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km"),
    ("GEORADIUS", "nokey", "0", "0", "1", "km", "STORE", "dst"),
]


def _events(port: int, script) -> list[tuple[bytes, bytes]]:
    return keyevents(port, script, "Ezg")


def test_keyspace_events_match_redis(rill_server, oracle_server):
    theirs = _events(oracle_server.port, NOTIFY_SCRIPT)
    assert theirs and _events(rill_server.port, NOTIFY_SCRIPT) == theirs


def test_keyspace_events_inproc(oracle_server, inproc, monkeypatch):
    server, c, _ = inproc
    theirs = _events(oracle_server.port, NOTIFY_SCRIPT)
    assert theirs and inproc_keyevents(server, c, NOTIFY_SCRIPT, monkeypatch) == theirs


def test_propagation(inproc):
    server, c, effects = inproc
    _run(server, c, "GEOADD", "g", "CH", "13.361389", "38.115556", "Palermo", "15.087269", "37.502669", "Catania")
    _run(server, c, "GEOADD", "g", "13.361389", "38.115556", "Palermo")  # no change: nothing propagated
    _run(server, c, "GEOADD", "g", "200", "0", "bad")
    _run(server, c, "GEORADIUS", "g", "15", "37", "200", "km", "STORE", "dst")
    _run(server, c, "GEORADIUS", "g", "15", "37", "200", "km")
    _run(server, c, "GEOSEARCHSTORE", "dst", "g", "FROMLONLAT", "0", "0", "BYRADIUS", "1", "km")
    _run(server, c, "GEOSEARCHSTORE", "dst", "g", "FROMLONLAT", "0", "0", "BYRADIUS", "1", "km")  # nothing to delete
    assert [argv for _, argv in effects] == [
        [b"zadd", b"g", b"CH", b"3479099956230698", b"Palermo", b"3479447370796909", b"Catania"],
        [b"GEORADIUS", b"g", b"15", b"37", b"200", b"km", b"STORE", b"dst"],
        [b"GEOSEARCHSTORE", b"dst", b"g", b"FROMLONLAT", b"0", b"0", b"BYRADIUS", b"1", b"km"],
    ]
