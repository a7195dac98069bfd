"""cjson, cmsgpack and bit inside scripts, side by side with redis-server 7.0.15.

Scripts run with EVAL on both servers and the reply bytes (values, errors with
their ``user_script:LINE:`` positions) must be identical. cjson's settings are
per interpreter and survive between scripts, so every test that changes one
puts the default back, on both servers alike.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

HEX = 'local h = "" for i = 1, #e do h = h .. string.format("%02x", string.byte(e, i)) end return h'


def E(body: str, *args: str) -> tuple:
    return ("EVAL", body, "0", *args)


CJSON = [
    "return cjson.encode({1,2,nil,4})",
    "return cjson.encode({a={b={}},c='x/y\\1\\127\\31'})",
    "return cjson.encode('he said \"hi\"\\n\\t\\\\ \\b\\f\\r')",
    "return cjson.encode({1, 2, {a = 'b'}, true, false})",
    "return cjson.encode({[1]='a', x='b'})",
    "return cjson.encode({})",
    "return cjson.encode({{}, {{}}})",
    "return cjson.encode({[0.5]=1, [2]=3})",
    "return cjson.encode(cjson.decode('{\"a\":1,\"b\":2,\"c\":3,\"d\":4,\"e\":5}'))",
    "return cjson.encode({cjson.null, 1})",
    "return {cjson.encode(0.1), cjson.encode(3.14159265358979), cjson.encode(1e300)}",
    # Inside a table: a bare -0.0 argument crosses into Python, where an integral
    # number becomes an int and loses its sign (cjson.encode(-0.0) gives "0", not "-0").
    "return cjson.encode({-0.0, 0})",
    "return {cjson.encode(123456789012345), cjson.encode(2^53)}",
    "return cjson.encode({[1]=1,[20]=2})",
    "return cjson.encode(function() end)",
    "return cjson.encode({[true]=1})",
    "return cjson.encode(1/0)",
    "return cjson.encode()",
    "return pcall(cjson.encode, function() end)",
    "local ok, e = pcall(cjson.decode, '[') return e",
    "return cjson.decode('[1,')",
    "return cjson.decode('[tru]')",
    "return cjson.decode('{1:2}')",
    "return cjson.decode('')",
    "return cjson.decode(' {\"a\" 1}')",
    "return cjson.decode('\"abc')",
    "return cjson.decode('\"a\\\\qb\"')",
    "return cjson.decode('\"\\\\ud800\"')",
    "return cjson.decode('\"\\\\ud83d\\\\ude00 \\\\u00e9 \\\\u20ac \\\\u0041\"')",
    "return cjson.decode('\"\\\\u0000x\"')",
    "return cjson.decode('[1,2,3] x')",
    "return cjson.decode('[1,2,3]   ')",
    "return cjson.decode({})",
    "return cjson.decode(12)",
    "return cjson.decode('{\"a\":1}', 2)",
    "return cjson.decode()",
    "return cjson.decode('01')",
    "return cjson.decode('[0x10, -Infinity, 1e2, +1]')[1]",
    "return table.concat(cjson.decode('[0.0, -5e3, -1, 0.3e-3, 1023.2, 0e10]'), ' ')",
    "return {tostring(cjson.decode('[nan]')[1]), tostring(cjson.decode('[-nan]')[1])}",
    "return cjson.decode('[1, 2.5e3, -0.0, 1e400]')[4] == math.huge",
    "return cjson.decode('{\"a\":[1,{\"b\":null}]}').a[2].b == cjson.null",
    "return {type(cjson.null), cjson.null == cjson.null, cjson._NAME, cjson._VERSION}",
    "return {cjson.encode_max_depth(), cjson.encode_number_precision(), cjson.encode_keep_buffer(),"
    " cjson.encode_invalid_numbers(), cjson.decode_max_depth(), cjson.decode_invalid_numbers()}",
    "return {cjson.encode_sparse_array()}",
    "return cjson.encode_max_depth(0)",
    "return cjson.encode_max_depth('x')",
    "return cjson.encode_max_depth(1, 2)",
    "return cjson.encode_keep_buffer('maybe')",
    "cjson.encode = 1",
]

# Settings changed and put back within one script, so each case leaves the defaults.
CJSON_SETTINGS = [
    "cjson.encode_max_depth(3) local ok, e = pcall(cjson.encode, {{{{1}}}})"
    " cjson.encode_max_depth(1000) return {ok, e}",
    "cjson.decode_max_depth(2) local ok, e = pcall(cjson.decode, '[[[1]]]')"
    " cjson.decode_max_depth(1000) return {ok, e}",
    "local r = {cjson.encode_invalid_numbers(true), cjson.encode({0/0, 1/0, -1/0}),"
    " cjson.encode_invalid_numbers('null'), cjson.encode({0/0, 1/0})}"
    " cjson.encode_invalid_numbers(false) return r",
    "local r = {cjson.encode_number_precision(3), cjson.encode(3.14159)}"
    " cjson.encode_number_precision(14) return r",
    "local r = {cjson.encode_sparse_array(true, 3, 20)} local e = cjson.encode({[1]=1, [30]=2})"
    " cjson.encode_sparse_array(false, 2, 10) return {r[1], r[2], r[3], e}",
    "local r = cjson.decode_invalid_numbers(false) local ok, e = pcall(cjson.decode, '[01]')"
    " cjson.decode_invalid_numbers(true) return {r, ok, e}",
]

CMSGPACK = [
    f"local e = cmsgpack.pack(0.1) {HEX}",
    f"local e = cmsgpack.pack(-1099511627776) {HEX}",
    "local e = cmsgpack.pack(1, -1, 127, 128, 255, 256, 65535, 65536, 2^32, -32, -33, -128, -129, -32768,"
    f" -32769, -2^31, -2^31-1, 0.5, 1e300, 1/0, true, false, 'x', {{}}, {{1,2}}, {{a=1}}) {HEX}",
    f"local e = cmsgpack.pack({{[1]=1,[3]=3}}, {{[0]=1}}, {{1.5}}, string.rep('y', 40), string.rep('z', 300)) {HEX}",
    f"local a = {{x=nil,y=5}} local b = {{x=a}} a['x'] = b local e = cmsgpack.pack(a) {HEX}",
    "return {cmsgpack.unpack(cmsgpack.pack(1, 'a', {1, 2, {3}}, true))}",
    "return cmsgpack.unpack(cmsgpack.pack({a = 1, b = {c = 'd'}})).b.c",
    "return {cmsgpack.unpack_one(cmsgpack.pack(1, 2, 3), 0)}",
    "return {cmsgpack.unpack_one(cmsgpack.pack(1, 2, 3), 2)}",
    "return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 2, 0)}",
    "return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 5, 1)}",
    "return {cmsgpack.unpack('\\202\\63\\192\\0\\0', '\\203\\63\\185\\153\\153\\153\\153\\153\\154',"
    " '\\208\\255', '\\209\\255\\254', '\\206\\0\\1\\0\\0', '\\211\\255\\255\\255\\255\\255\\255\\255\\255')}",
    "return tostring(cmsgpack.unpack('\\203\\63\\185\\153\\153\\153\\153\\153\\154'))",
    "return cmsgpack.unpack('\\145')",
    "return cmsgpack.unpack('\\193')",
    "return cmsgpack.unpack('')",
    "return cmsgpack.unpack(12)",
    "return cmsgpack.pack()",
    "return cmsgpack.unpack()",
    "return cmsgpack.unpack({})",
    "return cmsgpack.unpack_one('\\1', 5)",
    "return cmsgpack.unpack_one('\\1', -1)",
    "return cmsgpack.unpack_limit('\\1')",
    "return cmsgpack._VERSION .. cmsgpack._NAME",
    "cmsgpack.pack = 1",
]

BIT = [
    "return {bit.tobit(1), bit.band(1), bit.bxor(1, 2), bit.bor(1, 2, 4, 8, 16, 32, 64, 128)}",
    "return {bit.tobit(0xffffffff + 1), bit.tobit(2^31), bit.tobit(1.5), bit.tobit(2.5), bit.tobit(-1.5)}",
    "return {bit.bnot(0), bit.band(0xffffffff, 5), bit.band('12', 4)}",
    "return {bit.lshift(1, 31), bit.rshift(-1, 28), bit.arshift(-256, 4), bit.lshift(1, 33)}",
    "return {bit.rol(0x12345678, 12), bit.ror(0x12345678, 12), bit.bswap(0x12345678)}",
    "return {bit.tohex(65535), bit.tohex(-1, -4), bit.tohex(255, 2), bit.tohex(255, 20)}",
    "return bit.band()",
    "return bit.band('x')",
    "bit.band = 1",
]


@pytest.mark.parametrize("body", CJSON + CJSON_SETTINGS, ids=range(len(CJSON) + len(CJSON_SETTINGS)))
def test_cjson(sbs, body):
    sbs.check(*E(body))


@pytest.mark.parametrize("body", CMSGPACK, ids=range(len(CMSGPACK)))
def test_cmsgpack(sbs, body):
    sbs.check(*E(body))


@pytest.mark.parametrize("body", BIT, ids=range(len(BIT)))
def test_bit(sbs, body):
    sbs.check(*E(body))


def test_settings_survive_between_scripts(sbs):
    """cjson's settings belong to the interpreter, as Redis's do, until SCRIPT FLUSH."""
    sbs.run([
        E("return cjson.encode_max_depth(7)"),
        E("return cjson.encode_max_depth()"),
        E("return cjson.encode_max_depth(1000)"),
    ])


def test_large_values(sbs):
    sbs.run([
        E("local t = {} for i = 1, 70000 do t[i] = i end local d = cmsgpack.unpack(cmsgpack.pack(t))"
          " return {#d, d[70000], #cmsgpack.pack(t)}"),
        E("local t = {} for i = 1, 2000 do t['k' .. i] = {i, 'v' .. i} end"
          " return #cjson.encode(cjson.decode(cjson.encode(t)))"),
        E("return #cmsgpack.pack(string.rep('x', 100000))"),
    ])


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False, width=64) | st.text(max_size=12),
    lambda inner: st.lists(inner, min_size=1, max_size=5)
    | st.dictionaries(st.text(min_size=1, max_size=6), inner, max_size=5),
    max_leaves=15,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=json_values)
def test_cjson_round_trip_matches(sbs, value):
    """Whatever JSON goes in, both servers decode and re-encode it to the same bytes."""
    sbs.check(*E("return cjson.encode(cjson.decode(ARGV[1]))", json.dumps(value)))
    sbs.check(*E("local e = cmsgpack.pack(cjson.decode(ARGV[1])) " + HEX, json.dumps(value)))
