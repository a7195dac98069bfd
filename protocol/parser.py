"""Request parsing: RESP multibulk and inline commands, with Redis's limits and errors.

The pure-Python parser below is the reference: it follows Redis's
``processMultibulkBuffer``/``processInlineBuffer`` rules to the byte, including
the exact protocol error texts. hiredis accelerates the common case: a chunk
that starts at a command boundary with ``*`` is handed to ``hiredis.Reader``,
and whatever hiredis cannot vouch for (an incomplete tail, an odd element type,
a chunk that might hide a ``+`` or ``=`` line it would accept but Redis would
not) is handed back to the reference parser at the exact byte where it starts.
"""

from __future__ import annotations

try:  # pragma: no cover - exercised implicitly when hiredis is installed
    import hiredis
except ImportError:  # pragma: no cover
    hiredis = None

import re

INLINE_MAX_SIZE = 64 * 1024  # PROTO_INLINE_MAX_SIZE
# What hiredis must not see: a header claiming millions of elements (it
# allocates the reply list as soon as it reads the header; the reference
# parser, like Redis, grows argv as elements arrive), and verbatim lines, which
# it returns as bytes indistinguishable from bulk strings. Simple-string lines
# ('+') it returns as bytes too, but shorter on the wire than a bulk string of
# the same bytes, so those are told apart after the parse (_wire_size): a bulk
# argument "+" (XRANGE - +, ZRANGEBYSCORE +inf) starts a line with '+' as well.
# Separate patterns, not one alternation: each starts with a literal, which the
# re engine scans for quickly; the alternation tried a match at every byte and
# cost ~0.45 us per pipelined SET. The line checks only run when a '+' or '='
# is in the chunk at all, which ordinary requests rarely contain; that test
# looks for the byte as an int (a bare memchr: searching for a one-byte bytes
# object costs several times more).
_HUGE_HEADER = re.compile(rb"\*\d{7}")
_VERBATIM_LINE = re.compile(rb"\n=")
_PLUS_LINE = re.compile(rb"\n\+")
INT_MAX = 2**31 - 1
UNAUTH_MAX_MULTIBULK = 10
UNAUTH_MAX_BULK = 16384


_JOIN_CHECK_MAX = 64 * 1024
# A chunk bigger than this that continues a command goes back to hiredis after that command
# (below it, parsing the rest in place costs less than the copy and the second pass).
_RESUME_MIN = 4096


def _probe() -> None:
    """Only its type matters: see _COMPILED."""


# Whether this module runs compiled (what ``cython.compiled`` says, without importing
# Cython): where the fastest form differs between the modes, this picks it.
_COMPILED = type(_probe).__name__ != "function"


def _wire_size(commands: list) -> int:
    """The bytes these commands take as multibulks of bulk strings. hiredis accepts only
    canonical lengths (Redis's own integer rules), so a chunk it parsed whole has exactly
    this size unless some element was a simple string, which is shorter."""
    size = 0
    for cmd in commands:
        size += 3 + _digits(len(cmd))
        for arg in cmd:
            n = len(arg)
            size += 5 + _digits(n) + n
    return size


def _digits(n: int) -> int:
    """The decimal digits of ``n`` >= 0: len(str(n)) without the string (compiled, a C
    loop; it runs for every argument of a chunk that hiredis parsed only in part)."""
    d = 1
    while n >= 10:
        n //= 10
        d += 1
    return d


def _join_by_type(cmd: list) -> None:
    """Raise TypeError unless every element is bytes, without copying them."""
    if list(map(type, cmd)).count(bytes) != len(cmd):
        raise TypeError("not a command")


class ProtocolError:
    """A protocol error found in the stream: reply with it, then close the connection.

    It is returned in place of a command (after the commands that preceded it),
    not raised, so those earlier commands still run as they do in Redis.
    """

    __slots__ = ("message",)

    def __init__(self, message: bytes) -> None:
        self.message = message

    def __repr__(self) -> str:
        return f"ProtocolError({self.message!r})"


_SPACE = b" \t\n\r\v\f"  # isspace(): skipped between arguments, and may follow a closing quote
_TOKEN_END = b" \t\n\r\0"  # but an unquoted argument ends only at these (\v and \f are kept)
_HEX = b"0123456789abcdefABCDEF"
_ESCAPES = {ord("n"): 10, ord("r"): 13, ord("t"): 9, ord("b"): 8, ord("a"): 7}


def repr_body(data: bytes) -> bytes:
    """The inside of Redis's quoted form of ``data`` (sdscatrepr, split_args's inverse):
    quote and backslash escaped, \\n \\r \\t \\a \\b, printable ASCII as is, any other
    byte as \\xHH. MONITOR lines, AOF manifest names and config lines use it."""
    out = bytearray()
    for c in data:
        if c == 92 or c == 34:
            out += b"\\" + bytes((c,))
        elif c in _REPR_ESCAPES:
            out += _REPR_ESCAPES[c]
        elif 32 <= c < 127:
            out.append(c)
        else:
            out += b"\\x%02x" % c
    return bytes(out)


_REPR_ESCAPES = {10: b"\\n", 13: b"\\r", 9: b"\\t", 7: b"\\a", 8: b"\\b"}


def split_args(line: bytes) -> list[bytes] | None:
    """Split an inline command line like Redis's sdssplitargs; None on unbalanced quotes."""
    args: list[bytes] = []
    i = 0
    n = len(line)
    while True:
        while i < n and line[i] in _SPACE:
            i += 1
        if i >= n:
            return args
        cur = bytearray()
        inq = insq = False
        while True:
            if inq:
                if i >= n:
                    return None
                c = line[i]
                if (
                    c == 92  # backslash
                    and i + 3 < n
                    and line[i + 1] == 120  # x
                    and line[i + 2] in _HEX
                    and line[i + 3] in _HEX
                ):
                    cur.append(int(line[i + 2 : i + 4], 16))
                    i += 3
                elif c == 92 and i + 1 < n:
                    i += 1
                    cur.append(_ESCAPES.get(line[i], line[i]))
                elif c == 34:  # closing quote must be followed by a space or the end
                    if i + 1 < n and line[i + 1] not in _SPACE:
                        return None
                    i += 1
                    break
                else:
                    cur.append(c)
            elif insq:
                if i >= n:
                    return None
                c = line[i]
                if c == 92 and i + 1 < n and line[i + 1] == 39:
                    i += 1
                    cur.append(39)
                elif c == 39:
                    if i + 1 < n and line[i + 1] not in _SPACE:
                        return None
                    i += 1
                    break
                else:
                    cur.append(c)
            else:
                if i >= n:
                    break
                c = line[i]
                if c in _TOKEN_END:
                    break
                if c == 34:
                    inq = True
                elif c == 39:
                    insq = True
                else:
                    cur.append(c)
            i += 1
        args.append(bytes(cur))


def _header_int(buf: bytearray, start: int, end: int) -> int:
    """Redis's string2ll (protocol/numbers.py) over a length header ``buf[start:end]``,
    read in place: the value when it is 0 or more, -1 for any negative value (no header
    means more by it), -2 when it is not an int64. Inline rather than a call to
    string2ll on a copy: it runs for every header of the reference path, and compiled
    it is a C loop."""
    n = end - start
    if n <= 0 or n > 20:
        return -2
    i = start
    neg = buf[i] == 45  # '-'
    if neg:
        i += 1
        if i == end:
            return -2
    if end - i > 19:
        return -2  # 20 digits: past every int64
    c = buf[i]
    if c == 48:  # '0': only "0" itself
        return 0 if i + 1 == end and not neg else -2
    v = 0
    while i < end:
        c = buf[i]
        if c < 48 or c > 57:
            return -2
        v = v * 10 + (c - 48)
        i += 1
    if neg:
        return -1 if v - 1 <= 9223372036854775807 else -2  # down to -2**63
    return v if v <= 9223372036854775807 else -2


def _scan(data: bytes, pos: int, max_bulk: int, out: list) -> int:
    """Append to ``out`` the commands at ``data[pos:]`` that are complete multibulks of
    bulk strings with canonical lengths within the limits; return where the first
    other one starts (``len(data)`` when none does).

    It decides nothing the reference parser would decide otherwise: whatever it
    declines (an incomplete command, inline, an empty or negative multibulk, a
    non-canonical or out-of-range length, any protocol error) is left, from the start
    of its command, to ``RequestParser._parse``, which then gives Redis's exact answer. Compiled it
    is a C loop over the bytes (fast mode); interpreted, hiredis is cheaper."""
    n = len(data)
    # Compiled, ``s`` is the bytes' C buffer (parser.pxd): every read below is of an index
    # already checked against ``n`` (``s[start + 1]`` once a digit was read there), so it
    # needs no per-read bounds check. Interpreted it is ``data`` itself.
    s = data
    while pos < n:
        start = pos
        if s[pos] != 42:  # '*'
            return start
        pos += 1
        # The count: 1 to 9999999, canonical (no sign, no leading zero).
        count = 0
        digits = 0
        while pos < n:
            c = s[pos]
            if c < 48 or c > 57:
                break
            count = count * 10 + (c - 48)
            digits += 1
            pos += 1
        if digits == 0 or digits > 7 or s[start + 1] == 48 or pos + 1 >= n:
            return start
        if s[pos] != 13 or s[pos + 1] != 10:
            return start
        pos += 2
        argv = []
        while count:
            if pos >= n or s[pos] != 36:  # '$'
                return start
            pos += 1
            first = pos
            ll = 0
            while pos < n:
                c = s[pos]
                if c < 48 or c > 57:
                    break
                ll = ll * 10 + (c - 48)
                pos += 1
            digits = pos - first
            if digits == 0 or digits > 18 or (digits > 1 and s[first] == 48):
                return start
            if ll > max_bulk or pos + 1 >= n or s[pos] != 13 or s[pos + 1] != 10:
                return start
            pos += 2
            if n - pos < ll + 2:
                return start
            # Compiled: parser.pxd's _c_take, the same bytes without a slice object.
            argv.append(_c_take(data, pos, ll) if _COMPILED else data[pos:pos + ll])  # noqa: F821 (see _COMPILED)
            pos += ll + 2  # the two bytes after the data go unchecked, as in Redis
            count -= 1
        out.append(argv)
    return pos


class RequestParser:
    """Turns the bytes a client sends into argv lists (and at most one ProtocolError)."""

    __slots__ = (
        "_buf",
        "_argv",
        "_argv_bytes",
        "_remaining",
        "_bulklen",
        "_reader",
        "max_bulk_len",
        "auth_required",
        "failed",
    )

    def __init__(self, max_bulk_len: int = 512 * 1024 * 1024) -> None:
        self._buf = bytearray()
        self._argv: list[bytes] | None = None
        self._argv_bytes = 0  # the bytes of the arguments in _argv
        self._remaining = 0
        self._bulklen = -1
        # Compiled, feed() never consults hiredis (_scan is cheaper): no Reader to build
        # for every connection.
        self._reader = hiredis.Reader() if hiredis is not None and not _COMPILED else None
        self.max_bulk_len = max_bulk_len
        # Unauthenticated clients get Redis's tighter request limits.
        self.auth_required = False
        self.failed = False

    def pending_bytes(self) -> int:
        """Bytes buffered for a command not yet complete (the query buffer length)."""
        return len(self._buf)

    def pending_args_bytes(self) -> int:
        """The bytes of the arguments already parsed out of a command not yet complete
        (Redis's argv-mem while the rest of a multibulk is on its way)."""
        return self._argv_bytes

    def feed(self, data: bytes) -> list:
        """Parse ``data``; return the complete commands, possibly ending with a ProtocolError.

        The hiredis path is written out here rather than in a helper: it runs
        once per read, and the extra call was a visible share of a lone command.
        hiredis cannot say whether it stopped between commands or inside one
        whose remaining elements have not arrived (``*3\r\n$3\r\nSET\r\n``):
        both leave no unread bytes. A probe tells them apart: ``*0\r\n`` fed
        at a command boundary comes back as an empty command of its own, while
        inside a command it is swallowed as an element.
        """
        if self.failed:
            return []
        out: list = []
        if _COMPILED:
            return self._feed_compiled(data, out)
        reader = self._reader
        if (
            reader is not None
            and not self._buf
            # A command whose bulk length was read but not its data leaves the buffer
            # empty: the next chunk continues it, whatever its first byte.
            and self._argv is None
            and data[:1] == b"*"
            and not self.auth_required
            and len(data) <= self.max_bulk_len
            and _HUGE_HEADER.search(data) is None
            and not (61 in data and _VERBATIM_LINE.search(data))  # '='
        ):
            # A line starting with '+': only a chunk hiredis parses whole, at the size of
            # its commands' bulk strings, had none as an element.
            plus = 43 in data and _PLUS_LINE.search(data) is not None
            reader.feed(data)
            gets = reader.gets
            # Only non-empty lists of bulk strings are commands hiredis may vouch for.
            # Joining them is the cheapest test (it raises TypeError for an integer,
            # a null, a nested array or an error element), but it copies the
            # arguments: big chunks test each element's type instead.
            join = b"".join if len(data) <= _JOIN_CHECK_MAX else _join_by_type
            try:
                cmd = gets()
                while cmd is not False:
                    if type(cmd) is not list or not cmd:
                        break
                    if _COMPILED:
                        # Typed, the type test is a C loop: cheaper than any join.
                        for arg in cmd:
                            if type(arg) is not bytes:
                                raise TypeError("not a command")
                    else:
                        join(cmd)
                    out.append(cmd)
                    cmd = gets()
                else:
                    if not reader.has_data():
                        reader.feed(b"*0\r\n")
                        if gets() == [] and (not plus or _wire_size(out) == len(data)):
                            return out
            except (hiredis.ProtocolError, TypeError):
                pass
            if plus:
                # A '+' element may hide in what hiredis returned: the reference parser
                # takes the whole chunk.
                self._reader = hiredis.Reader()
                del out[:]
            else:
                data = self._fallback(data, out)
        if (
            len(data) > _RESUME_MIN and (self._buf or self._argv is not None)
            and reader is not None and not self.auth_required
        ):
            # A big chunk continuing a command (a read that split one): the reference
            # parser completes that command, and hiredis takes the rest from the next
            # boundary on, as it would have had the split fallen between commands.
            # (The rest starts no command in progress, so this does not recurse again.)
            self._buf += data
            self._parse(out, True)
            buf = self._buf
            if self._argv is None and buf[:1] == b"*":
                rest = bytes(buf)
                buf.clear()
                out += self.feed(rest)
                return out
            self._parse(out)
            return out
        self._buf += data
        self._parse(out)
        return out

    def _feed_compiled(self, data: bytes, out: list) -> list:
        """feed() compiled: :func:`_scan` takes the complete, canonical multibulks at the
        front of a read straight from its bytes, and the reference parser everything from
        the first command it declines on. hiredis is not used: through its Python callbacks
        and the checks its answers need here, it cost more per command than this scan."""
        if type(data) is not bytes:
            data = bytes(data)
        n = len(data)
        if self.auth_required:
            pass  # Redis's tighter unauthenticated limits: the reference parser's alone.
        elif not self._buf and self._argv is None:
            pos = _scan(data, 0, self.max_bulk_len, out)
            if pos == n:
                return out
            if pos:
                data = data[pos:]
        elif n > _RESUME_MIN:
            # A big chunk continuing a command (a read that split one): the reference
            # parser completes that command, and the scan takes the rest from the next
            # boundary on, as it would have had the split fallen between commands.
            buf = self._buf
            buf += data
            self._parse(out, True)
            if self._argv is None and buf[:1] == b"*":
                rest = bytes(buf)
                buf.clear()
                pos = _scan(rest, 0, self.max_bulk_len, out)
                if pos < len(rest):
                    buf += rest[pos:] if pos else rest
                    self._parse(out)
                return out
            self._parse(out)
            return out
        self._buf += data
        self._parse(out)
        return out

    def _fallback(self, data: bytes, out: list) -> bytes:
        """Drop hiredis's state and return ``data`` past the commands it fully parsed.

        hiredis accepted those commands only if their lengths were canonical
        (it applies Redis's own integer rules), so their wire size is computable.
        """
        self._reader = hiredis.Reader()
        return data[_wire_size(out):]

    def _error(self, out: list, message: bytes) -> None:
        out.append(ProtocolError(b"ERR Protocol error: " + message))
        self.failed = True
        self._buf.clear()
        self._argv_bytes = 0

    def _parse(self, out: list, one: bool = False) -> None:
        """Parse the buffer into ``out``; ``one``: stop after the first complete command."""
        buf = self._buf
        pos = 0
        n = len(buf)
        while pos < n:
            if self._argv is None:
                if buf[pos] == 42:  # '*': multibulk header
                    nl = buf.find(b"\r", pos)
                    if nl < 0:
                        if n - pos > INLINE_MAX_SIZE:
                            return self._error(out, b"too big mbulk count string")
                        break
                    if nl > n - 2:
                        break
                    ll = _header_int(buf, pos + 1, nl)
                    if ll < -1 or ll > INT_MAX:  # -2: not an integer
                        return self._error(out, b"invalid multibulk length")
                    if ll > UNAUTH_MAX_MULTIBULK and self.auth_required:
                        return self._error(out, b"unauthenticated multibulk length")
                    pos = nl + 2
                    if ll <= 0:
                        continue
                    self._argv = []
                    self._remaining = ll
                else:
                    nl = buf.find(b"\n", pos)
                    if nl >= 0 and buf.find(b"\0", pos, nl) >= 0:
                        # Redis looks for the newline with strchr, which stops at a NUL:
                        # a line with a NUL before its newline stays incomplete.
                        nl = -1
                    if nl < 0:
                        if n - pos > INLINE_MAX_SIZE:
                            return self._error(out, b"too big inline request")
                        break
                    end = nl
                    if end > pos and buf[end - 1] == 13:
                        end -= 1
                    args = split_args(bytes(buf[pos:end]))
                    if args is None:
                        return self._error(out, b"unbalanced quotes in request")
                    pos = nl + 1
                    if args:
                        out.append(args)
                        if one:
                            break
                    continue
            argv = self._argv
            while self._remaining:
                if self._bulklen < 0:
                    nl = buf.find(b"\r", pos)
                    if nl < 0:
                        if n - pos > INLINE_MAX_SIZE:
                            return self._error(out, b"too big bulk count string")
                        break
                    if nl > n - 2:
                        break
                    if buf[pos] != 36:  # '$'
                        return self._error(out, b"expected '$', got '%c'" % buf[pos])
                    ll = _header_int(buf, pos + 1, nl)
                    if ll < 0 or ll > self.max_bulk_len:
                        return self._error(out, b"invalid bulk length")
                    if ll > UNAUTH_MAX_BULK and self.auth_required:
                        return self._error(out, b"unauthenticated bulk length")
                    pos = nl + 2
                    self._bulklen = ll
                bulklen = self._bulklen
                if n - pos < bulklen + 2:
                    break
                argv.append(bytes(buf[pos : pos + bulklen]))
                self._argv_bytes += bulklen
                pos += bulklen + 2  # Redis skips the two bytes after the data unchecked
                self._bulklen = -1
                self._remaining -= 1
            if self._remaining:
                break
            out.append(argv)
            self._argv = None
            self._argv_bytes = 0
            if one:
                break
        if pos:
            del buf[:pos]
