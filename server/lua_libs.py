"""The libraries Redis 7.0 preloads into its Lua interpreters besides Lua's own: cjson, cmsgpack, bit.

Redis links C libraries for these (lua-cjson 2.1.0 and LuaBitOp 1.0.2). rill has no
C, so cjson is written here in Lua, running in the same interpreter so tables are
walked in the interpreter's own ``next`` order (object key order in the JSON, as
Redis's output has it); cmsgpack's byte formats and bit's integer arithmetic are
Python (lupa walks tables with the same ``next``). All three keep what scripts can
observe: output bytes, defaults and settings, error messages and where they point
(``user_script:LINE:``).

:func:`install` puts the tables into a runtime's globals before the sandbox runs, so
the sandbox can make them read-only like Redis's.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from importlib.resources import files
from typing import Any

import lupa.lua51 as lua51

# cjson (lua/cjson.lua). Failures raise {msg} tables; install()'s Python entry points catch
# them and raise the message at the script's line, as luaL_error does in the C library.
_CJSON = files(__package__).joinpath("lua/cjson.lua").read_bytes()


def _tobit(args: tuple, i: int, fname: str) -> int:
    """LuaBitOp's normalisation of argument ``i``: round to an integer, keep the low 32
    bits, signed (its 2^52 + 2^51 addition trick, done the same way on the double)."""
    v = args[i] if i < len(args) else None
    if type(v) is bytes:
        try:
            v = float(v) if not v.strip().lower().startswith(b"0x") else int(v.strip(), 16)
        except ValueError:
            v = None
    if type(v) not in (int, float) or type(v) is bool:
        got = "no value" if i >= len(args) else _type_name(args[i])
        raise LuaLibError(f"bad argument #{i + 1} to '{fname}' (number expected, got {got})")
    bits = struct.unpack("<Q", struct.pack("<d", float(v) + 6755399441055744.0))[0] & 0xFFFFFFFF
    return bits - (1 << 32) if bits & 0x80000000 else bits


def _type_name(v: Any) -> str:
    if v is None:
        return "nil"
    if type(v) is bool:
        return "boolean"
    if type(v) is bytes:
        return "string"
    return "table" if hasattr(v, "keys") else "userdata"


def _s32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x & 0x80000000 else x


def _fold(fname: str, op: Any) -> Any:
    def f(*args: Any) -> int:
        acc = _tobit(args, 0, fname)
        for i in range(1, len(args)):
            acc = op(acc, _tobit(args, i, fname))
        return _s32(acc)

    return f


def _shift(fname: str, op: Any) -> Any:
    def f(*args: Any) -> int:
        x = _tobit(args, 0, fname) & 0xFFFFFFFF
        n = _tobit(args, 1, fname) & 31
        return _s32(op(x, n))

    return f


def _tohex(*args: Any) -> bytes:
    x = _tobit(args, 0, "tohex") & 0xFFFFFFFF
    n = _tobit(args, 1, "tohex") if len(args) > 1 and args[1] is not None else 8
    digits = "0123456789abcdef"
    if n < 0:
        n = -n
        digits = digits.upper()
    n = min(n, 8)
    return "".join(digits[(x >> (4 * i)) & 15] for i in reversed(range(n))).encode()


BIT_FUNCTIONS: dict[bytes, Any] = {
    b"tobit": lambda *a: _tobit(a, 0, "tobit"),
    b"bnot": lambda *a: _s32(~_tobit(a, 0, "bnot")),
    b"band": _fold("band", lambda a, b: a & b),
    b"bor": _fold("bor", lambda a, b: a | b),
    b"bxor": _fold("bxor", lambda a, b: a ^ b),
    b"lshift": _shift("lshift", lambda x, n: x << n),
    b"rshift": _shift("rshift", lambda x, n: x >> n),
    b"arshift": _shift("arshift", lambda x, n: _s32(x) >> n),
    b"rol": _shift("rol", lambda x, n: (x << n) | (x >> (32 - n)) if n else x),
    b"ror": _shift("ror", lambda x, n: (x >> n) | (x << (32 - n)) if n else x),
    b"bswap": lambda *a: _s32(int.from_bytes((_tobit(a, 0, "bswap") & 0xFFFFFFFF).to_bytes(4, "little"), "big")),
    b"tohex": _tohex,
}

# -- cmsgpack (lua-cmsgpack 0.4.0) ------------------------------------------------------

_MP_MAX_NESTING = 16  # deeper tables (circular references among them) encode as nil


def _mp_int_equivalent(x: float, bits: int) -> bool:
    return x == x and abs(x) != float("inf") and x == int(x) and -(1 << (bits - 1)) <= x < (1 << (bits - 1))


def _mp_int(n: int, out: bytearray) -> None:
    if n >= 0:
        if n <= 0x7F:
            out.append(n)
        elif n <= 0xFF:
            out += b"\xcc" + bytes((n,))
        elif n <= 0xFFFF:
            out += b"\xcd" + n.to_bytes(2, "big")
        elif n <= 0xFFFFFFFF:
            out += b"\xce" + n.to_bytes(4, "big")
        else:
            out += b"\xcf" + n.to_bytes(8, "big")
    elif n >= -32:
        out.append(n & 0xFF)
    elif n >= -128:
        out += b"\xd0" + (n & 0xFF).to_bytes(1, "big")
    elif n >= -32768:
        out += b"\xd1" + (n & 0xFFFF).to_bytes(2, "big")
    elif n >= -(1 << 31):
        out += b"\xd2" + (n & 0xFFFFFFFF).to_bytes(4, "big")
    else:
        out += b"\xd3" + (n & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "big")


def _mp_header(n: int, small: int, small_max: int, codes: bytes, out: bytearray) -> None:
    """A length header: the fix form up to ``small_max``, then 16- and 32-bit forms."""
    if n <= small_max:
        out.append(small | n)
    elif n <= 0xFFFF:
        out.append(codes[0])
        out += n.to_bytes(2, "big")
    else:
        out.append(codes[1])
        out += n.to_bytes(4, "big")


def _mp_encode(v: Any, level: int, out: bytearray) -> None:
    t = type(v)
    if t is bytes:
        n = len(v)
        if n < 32:
            out.append(0xA0 | n)
        elif n <= 0xFF:
            out += b"\xd9" + bytes((n,))
        elif n <= 0xFFFF:
            out += b"\xda" + n.to_bytes(2, "big")
        else:
            out += b"\xdb" + (n & 0xFFFFFFFF).to_bytes(4, "big")
        out += v
    elif t is bool:
        out.append(0xC3 if v else 0xC2)
    elif t is int or t is float:
        if _mp_int_equivalent(v, 64):
            _mp_int(int(v), out)
        else:
            # A float when the double survives the round trip through one, else a double.
            try:
                single = struct.pack(">f", v)
            except OverflowError:
                single = b""
            if single and struct.unpack(">f", single)[0] == v:
                out += b"\xca" + single
            else:
                out += b"\xcb" + struct.pack(">d", v)
    elif lua51.lua_type(v) == "table" and level < _MP_MAX_NESTING:
        count = top = 0
        array = True
        for k in v.keys():
            if type(k) not in (int, float) or k <= 0 or not _mp_int_equivalent(k, 32):
                array = False
                break
            top = max(top, k)
            count += 1
        if array and top == count:
            n = len(v)  # the # operator, as lua_objlen
            _mp_header(n, 0x90, 15, b"\xdc\xdd", out)
            for j in range(1, n + 1):
                _mp_encode(v[j], level + 1, out)
        else:
            items = list(v.items())
            _mp_header(len(items), 0x80, 15, b"\xde\xdf", out)
            for key, value in items:
                _mp_encode(key, level + 1, out)
                _mp_encode(value, level + 1, out)
    else:
        out.append(0xC0)


class _MpShort(Exception):
    """The input ends inside a value."""


class _MpBad(Exception):
    """A byte that starts no MessagePack value this library knows."""


_MP_FIXED = {
    0xCC: (1, ">B"), 0xCD: (2, ">H"), 0xCE: (4, ">I"), 0xCF: (8, ">Q"),
    0xD0: (1, ">b"), 0xD1: (2, ">h"), 0xD2: (4, ">i"), 0xD3: (8, ">q"),
    0xCA: (4, ">f"), 0xCB: (8, ">d"),
}


class _MpDecoder:
    __slots__ = ("data", "pos", "runtime")

    def __init__(self, runtime: Any, data: bytes, pos: int) -> None:
        self.runtime = runtime
        self.data = data
        self.pos = pos

    def take(self, n: int) -> bytes:
        p = self.pos
        if len(self.data) - p < n:
            raise _MpShort
        self.pos = p + n
        return self.data[p : p + n]

    def value(self) -> Any:
        b = self.take(1)[0]
        fixed = _MP_FIXED.get(b)
        if fixed is not None:
            size, fmt = fixed
            return struct.unpack(fmt, self.take(size))[0]
        if b <= 0x7F:
            return b
        if b >= 0xE0:
            return b - 256
        if b == 0xC0:
            return None
        if b == 0xC2 or b == 0xC3:
            return b == 0xC3
        if 0xA0 <= b <= 0xBF:
            return self.take(b & 0x1F)
        if b in (0xD9, 0xDA, 0xDB):
            n = int.from_bytes(self.take(1 << (b - 0xD9)), "big")
            return self.take(n)
        if 0x90 <= b <= 0x9F or b in (0xDC, 0xDD):
            n = b & 0x0F if b <= 0x9F else int.from_bytes(self.take(2 if b == 0xDC else 4), "big")
            table = self.runtime.table()
            for i in range(1, n + 1):
                table[i] = self.value()
            return table
        if 0x80 <= b <= 0x8F or b in (0xDE, 0xDF):
            n = b & 0x0F if b <= 0x8F else int.from_bytes(self.take(2 if b == 0xDE else 4), "big")
            table = self.runtime.table()
            for _ in range(n):
                key = self.value()
                val = self.value()
                if key is None:
                    raise LuaLibError("table index is nil")
                table[key] = val
            return table
        raise _MpBad


def _mp_unpack(runtime: Any, args: tuple, limit: int, offset: int, fname: str) -> tuple:
    data = args[0] if args else None
    if type(data) in (int, float):
        data = _lua_number_text(data)
    if type(data) is not bytes:
        got = "no value" if not args else _type_name(data)
        raise LuaLibError(f"bad argument #1 to '{fname}' (string expected, got {got})")
    if offset < 0 or limit < 0:
        raise LuaLibError(f"Invalid request to unpack with offset of {offset} and limit of {len(data)}.")
    if offset > len(data):
        raise LuaLibError(f"Start offset {offset} greater than input length {len(data)}.")
    everything = not limit and not offset
    dec = _MpDecoder(runtime, data, offset)
    values: list[Any] = []
    while dec.pos < len(data) and (everything or len(values) < limit):
        try:
            values.append(dec.value())
        except _MpShort:
            raise LuaLibError("Missing bytes in input.") from None
        except _MpBad:
            raise LuaLibError("Bad data format in input.") from None
    if not everything:
        values.insert(0, -1 if dec.pos == len(data) else dec.pos)
    return tuple(values)


def _lua_number_text(n: float) -> bytes:
    """A number as Lua turns it into a string (LUAI_NUMFFORMAT "%.14g")."""
    return b"%.14g" % n


def _int_arg(args: tuple, i: int, fname: str, default: int | None = None) -> int:
    v = args[i] if i < len(args) else None
    if v is None and default is not None:
        return default
    if type(v) is bytes:
        try:
            v = float(v)
        except ValueError:
            v = None
    if type(v) not in (int, float) or type(v) is bool:
        got = "no value" if i >= len(args) else _type_name(args[i])
        raise LuaLibError(f"bad argument #{i + 1} to '{fname}' (number expected, got {got})")
    return int(v)


def _cmsgpack(runtime: Any) -> dict[bytes, Any]:
    def pack(*args: Any) -> bytes:
        if not args:
            raise LuaLibError("bad argument #0 to 'pack' (MessagePack pack needs input.)")
        out = bytearray()
        for a in args:
            _mp_encode(a, 0, out)
        return bytes(out)

    def unpack(*args: Any) -> tuple:
        return _mp_unpack(runtime, args[:1], 0, 0, "unpack")

    def unpack_one(*args: Any) -> tuple:
        return _mp_unpack(runtime, args[:1], 1, _int_arg(args, 1, "unpack_one", 0), "unpack_one")

    def unpack_limit(*args: Any) -> tuple:
        limit = _int_arg(args, 1, "unpack_limit")
        return _mp_unpack(runtime, args[:1], limit, _int_arg(args, 2, "unpack_limit", 0), "unpack_limit")

    return {
        b"pack": pack, b"unpack": unpack, b"unpack_one": unpack_one, b"unpack_limit": unpack_limit,
        b"_NAME": b"cmsgpack", b"_VERSION": b"lua-cmsgpack 0.4.0",
        b"_COPYRIGHT": b"Copyright (C) 2012, Salvatore Sanfilippo",
        b"_DESCRIPTION": b"MessagePack C implementation for Lua",
    }


# The functions lua/cjson.lua's table holds (a test checks the two agree).
CJSON_FUNCTIONS = (
    b"encode", b"decode", b"encode_max_depth", b"decode_max_depth", b"encode_number_precision",
    b"encode_keep_buffer", b"encode_invalid_numbers", b"decode_invalid_numbers", b"encode_sparse_array",
)


def install(runtime: Any, error: Callable[[bytes], Exception]) -> None:
    """Give ``runtime``'s globals Redis's ``cjson``, ``cmsgpack`` and ``bit`` tables, before the sandbox
    locks the globals (cjson.null is made with ``newproxy``, which the sandbox removes).

    Every entry point is a Python callable, so a C function to Lua, as the C libraries'
    are: ``return cjson.decode(x)`` keeps the script's frame, and ``error(message)``
    (the scripting engine's positioned error) names the script's line as luaL_error does.
    The price: arguments cross into Python, where an integral number becomes an int,
    so a bare ``cjson.encode(-0.0)`` gives ``0`` (inside a table it stays ``-0``).
    """
    g = runtime.globals()
    null = g.newproxy(False)
    lua_type = lua51.lua_type
    # cjson's Lua implementation is compiled at its first call, not here: its functions are
    # a third of an idle interpreter's heap (INFO used_memory_lua; Redis's C library costs
    # its heap nothing). It runs in a copy of the globals as they are now, so the sandbox's
    # later replacements (pcall, next, the protected string table) never reach it.
    loadstring, setfenv = g.loadstring, g.setfenv
    env = runtime.table_from(dict(g.items()))
    loaded: list[tuple[Any, Any]] = []

    def lua_entry(name: bytes) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            if not loaded:
                chunk = loadstring(_CJSON, b"=rill")
                setfenv(chunk, env)
                loaded.append(chunk(null))
            impl, pcall = loaded[0]
            result = pcall(impl[name], *args)
            if type(result) is not tuple:
                result = (result,)
            if result[0] is True:
                return result[1:] if len(result) > 2 else (result[1] if len(result) == 2 else None)
            err = result[1] if len(result) > 1 else None
            if lua_type(err) == "table":
                err = err[1]
            raise error(err if isinstance(err, bytes) else str(err).encode())

        return call

    cjson = {name: lua_entry(name) for name in CJSON_FUNCTIONS}
    cjson.update({b"null": null, b"_NAME": b"cjson", b"_VERSION": b"2.1.0"})
    g.cjson = runtime.table_from(cjson)

    def python_entry(f: Any) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            try:
                return f(*args)
            except LuaLibError as e:
                raise error(str(e).encode()) from None

        return call

    g.bit = runtime.table_from({name: python_entry(f) for name, f in BIT_FUNCTIONS.items()})
    g.cmsgpack = runtime.table_from(
        {name: python_entry(f) if callable(f) else f for name, f in _cmsgpack(runtime).items()}
    )


class LuaLibError(Exception):
    """A library argument error, shown as a Lua error at the calling script's line."""
