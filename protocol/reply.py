"""Reply values and their RESP2/RESP3 encodings, without I/O.

Command handlers return plain Python values and the encoder picks the wire
form for the client's protocol version:

=====================  ==========================  ==========================
value                  RESP2                       RESP3
=====================  ==========================  ==========================
bytes / str            bulk string                 bulk string
int                    integer                     integer
None                   null bulk ``$-1``           null ``_``
NULL_ARRAY             null array ``*-1``          null ``_``
list / tuple           array                       array
Status                 simple string ``+``         simple string ``+``
ReplyError             error ``-``                 error ``-``
bool                   integer 1/0                 boolean ``#t``/``#f``
Double                 bulk string ``%.17g``       double ``,``
Map                    flat array of k, v          map ``%``
Set                    array                       set ``~``
Push                   array                       push ``>``
Verbatim               bulk string                 verbatim ``=``
BigNumber              bulk string                 big number ``(``
Raw                    sent as is                  sent as is
=====================  ==========================  ==========================
"""

from __future__ import annotations

import math
from typing import Any


class Status(bytes):
    """A simple string reply (``+OK``)."""

    __slots__ = ()


class Raw(bytes):
    """Bytes that are already a complete RESP reply, identical in both protocols."""

    __slots__ = ()


class Double(float):
    """A floating point reply: a bulk string in RESP2, a ``,`` double in RESP3."""

    __slots__ = ()


class Map(dict):
    """A map reply: flattened to key, value, ... in RESP2."""

    __slots__ = ()


class Set(list):
    """A set reply: a plain array in RESP2."""

    __slots__ = ()


class Push(list):
    """An out-of-band push message (pub/sub, MONITOR in RESP3)."""

    __slots__ = ()


class Verbatim(bytes):
    """A verbatim string (``=len\\r\\ntxt:...``) in RESP3, a bulk string in RESP2."""

    fmt: bytes

    def __new__(cls, data: bytes, fmt: bytes = b"txt") -> Verbatim:
        self = super().__new__(cls, data)
        self.fmt = fmt
        return self


class BigNumber(bytes):
    """A big number (``(``) in RESP3, a bulk string in RESP2."""

    __slots__ = ()


class _NullArray:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NULL_ARRAY"


NULL_ARRAY = _NullArray()


class ReplyError(Exception):
    """An error reply; handlers raise it, and arrays may carry it (EXEC results).

    ``message`` holds the full text after the ``-``, including the error code
    ("ERR ...", "WRONGTYPE ...").
    """

    __slots__ = ("message",)

    def __init__(self, message: str | bytes) -> None:
        if isinstance(message, str):
            message = message.encode()
        # Redis never lets a newline into an error line: it would desync the protocol.
        if b"\r" in message or b"\n" in message:
            message = message.replace(b"\r", b" ").replace(b"\n", b" ")
        self.message = message
        super().__init__(message)

    @property
    def code(self) -> bytes:
        """The error code (first word), as INFO errorstats counts it."""
        return self.message.split(b" ", 1)[0]


OK = Raw(b"+OK\r\n")
QUEUED = Raw(b"+QUEUED\r\n")
PONG = Raw(b"+PONG\r\n")
EMPTY_ARRAY = Raw(b"*0\r\n")


# Ready-made encodings for the short bulk strings and small integers most
# replies are: a table lookup and one concatenation cost less than formatting.
# Longer values keep the one-copy formatting path.
SMALL = 1024
BULK_HEADERS = tuple(b"$%d\r\n" % n for n in range(SMALL))
SMALL_INTS = tuple(b":%d\r\n" % n for n in range(SMALL))


def _probe() -> None:
    """Only its type matters: see _COMPILED."""


# Whether this module runs compiled (what ``cython.compiled`` says, without importing
# Cython): where the fastest form differs between the modes, this picks it.
_COMPILED = type(_probe).__name__ != "function"
# Compiled, an integer reply's line comes from reply.pxd's ``_c_integer_line``, which writes
# the digits into a C buffer: bytes' ``%d`` makes a str first, about 1k instructions. The
# name exists only in the compiled module; ``_COMPILED`` guards it.


# Whether this module's array writers (``bulk_array``, ``ranged_array``) run compiled: callers
# test it first, so pure mode keeps its own joins and pays no call that returns None.
C_ARRAYS = _COMPILED


def bulk_array(values: list[bytes]) -> Raw | None:
    """Compiled: an array of bulk strings as one Raw reply (identical in RESP2 and
    RESP3), every header and value written into it through a C pointer. None when a
    value is not ``bytes`` (the caller's general path then builds it), and always in
    pure mode (test ``C_ARRAYS`` first). A reply of 100 elements joined in the
    interpreter's way cost ~50k instructions: a table lookup per header, then a join
    that walks its pieces twice."""
    if _COMPILED:
        return _c_bulk_array(Raw, values)  # noqa: F821 (see _COMPILED)
    return None


def ranged_array(items: list[tuple[float, bytes]], withscores: bool, fmt: Any) -> Raw | None:
    """Compiled: a RESP2 range reply from (score, member) items, the members only or
    member and score flat (ZRANGE ... WITHSCORES), written as ``bulk_array`` does. A
    float score with an integral value under 2**53 in magnitude is written as its digits
    (what ``%.17g`` prints for it); any other score (zero, which may be -0.0, fractions,
    infinities) is ``fmt(score)``. None as ``bulk_array`` (a member not ``bytes``, an
    item not a 2-tuple), and always in pure mode."""
    if _COMPILED:
        return _c_ranged_array(Raw, items, withscores, fmt)  # noqa: F821 (see _COMPILED)
    return None


def format_double(d: float) -> bytes:
    """Redis 7.0's ``%.17g`` rendering of a double (``inf``/``-inf`` spelled out)."""
    if math.isinf(d):
        return b"inf" if d > 0 else b"-inf"
    return b"%.17g" % d


def encode(value: Any, resp3: bool = False) -> bytes:
    """Encode one reply value for a RESP2 or RESP3 client."""
    out: list[bytes] = []
    _encode_into(value, out, resp3)
    return b"".join(out)


def encode_into(value: Any, out: list[bytes], resp3: bool) -> None:
    """Append the encoding of ``value`` to ``out`` (the client's output chunks)."""
    t = type(value)
    if t is bytes:
        if _COMPILED:
            # reply.pxd's _c_bulk_reply: one object written in C. In-process callgrind, GET
            # -P16 (a 3-byte hit), execute_all + feed: 3202 -> 2732 Ir a command.
            out.append(_c_bulk_reply(value))  # noqa: F821 (see _COMPILED)
            return
        n = len(value)
        if n < SMALL:
            out.append(BULK_HEADERS[n] + value + b"\r\n")
        else:
            out.append(b"$%d\r\n%b\r\n" % (n, value))
    elif t is Raw:
        out.append(value)
    elif t is int:
        if _COMPILED:
            out.append(_c_int_reply(value, SMALL_INTS))  # noqa: F821 (see _COMPILED)
        elif 0 <= value < SMALL:
            out.append(SMALL_INTS[value])
        else:
            out.append(b":%d\r\n" % value)
    elif value is None:
        out.append(b"_\r\n" if resp3 else b"$-1\r\n")
    else:
        _encode_into(value, out, resp3)


def _encode_into(value: Any, out: list[bytes], resp3: bool) -> None:
    t = type(value)
    if t is bytes or t is bytearray or t is memoryview:
        out.append(b"$%d\r\n%b\r\n" % (len(value), value))
    elif t is Raw:
        out.append(value)
    elif t is bool:
        if resp3:
            out.append(b"#t\r\n" if value else b"#f\r\n")
        else:
            out.append(b":1\r\n" if value else b":0\r\n")
    elif t is int:
        out.append(b":%d\r\n" % value)
    elif value is None:
        out.append(b"_\r\n" if resp3 else b"$-1\r\n")
    elif t is list or t is tuple:
        out.append(b"*%d\r\n" % len(value))
        for item in value:
            ti = type(item)
            if ti is bytes:
                out.append(b"$%d\r\n%b\r\n" % (len(item), item))
            elif ti is int:
                out.append(b":%d\r\n" % item)
            else:
                _encode_into(item, out, resp3)
    elif t is Status:
        out.append(b"+%b\r\n" % value)
    elif t is str:
        data = value.encode()
        out.append(b"$%d\r\n%b\r\n" % (len(data), data))
    elif t is Map:
        if resp3:
            out.append(b"%%%d\r\n" % len(value))
        else:
            out.append(b"*%d\r\n" % (len(value) * 2))
        for k, v in value.items():
            _encode_into(k, out, resp3)
            _encode_into(v, out, resp3)
    elif t is Double:
        if resp3:
            if math.isnan(value):
                out.append(b",nan\r\n")
            else:
                out.append(b",%b\r\n" % format_double(value))
        else:
            data = format_double(value)
            out.append(b"$%d\r\n%b\r\n" % (len(data), data))
    elif t is Set:
        out.append(b"%c%d\r\n" % (126 if resp3 else 42, len(value)))
        for item in value:
            _encode_into(item, out, resp3)
    elif t is Push:
        out.append(b"%c%d\r\n" % (62 if resp3 else 42, len(value)))
        for item in value:
            _encode_into(item, out, resp3)
    elif isinstance(value, ReplyError):
        out.append(b"-%b\r\n" % value.message)
    elif value is NULL_ARRAY:
        out.append(b"_\r\n" if resp3 else b"*-1\r\n")
    elif t is Verbatim:
        if resp3:
            fmt = (value.fmt + b"   ")[:3]
            out.append(b"=%d\r\n%b:%b\r\n" % (len(value) + 4, fmt, value))
        else:
            out.append(b"$%d\r\n%b\r\n" % (len(value), value))
    elif t is BigNumber:
        if resp3:
            out.append(b"(%b\r\n" % value)
        else:
            out.append(b"$%d\r\n%b\r\n" % (len(value), value))
    elif t is float:
        _encode_into(Double(value), out, resp3)
    elif isinstance(value, (bytes, bytearray)):
        out.append(b"$%d\r\n%b\r\n" % (len(value), bytes(value)))
    elif isinstance(value, int):
        out.append(b":%d\r\n" % value)
    else:
        raise TypeError(f"cannot encode reply of type {t.__name__}")
