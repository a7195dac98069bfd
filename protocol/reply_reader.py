"""Reading RESP2 replies: what a server's outgoing links (Active-Active peer links) get back.

The request parser (parser.py) reads what clients send; this reads what a server answers,
for the few places where rill is itself the client. Pure data: bytes in, replies out.
hiredis's Reader does the same, but hiredis is optional here, and the links' replies are
few and small (integers, ``+OK``, a two-element array), so this stays in Python.
"""

from __future__ import annotations

from typing import Any


class ErrorReply(bytes):
    """A ``-ERR ...`` reply (its text without the ``-``): returned, not raised, so a caller
    matching replies to requests keeps its place."""


class ReplyProtocolError(Exception):
    """The bytes are not RESP: the connection cannot be trusted any further."""


INCOMPLETE: Any = object()  # gets()'s answer while no whole reply is buffered

_MAX_DEPTH = 8


class ReplyReader:
    """Feed bytes as they arrive; ``gets()`` returns each whole reply in order, then
    INCOMPLETE. Simple strings come back as bytes, errors as ErrorReply, integers as int,
    nulls as None, arrays as lists."""

    __slots__ = ("buf", "pos")

    def __init__(self) -> None:
        self.buf = bytearray()
        self.pos = 0

    def feed(self, data: bytes) -> None:
        if self.pos:
            del self.buf[: self.pos]
            self.pos = 0
        self.buf += data

    def gets(self) -> Any:
        if self.pos >= len(self.buf):
            # Nothing buffered (a link's read, its acknowledgements taken by integers(),
            # usually ends here): answered without _parse's _Short raised and caught,
            # which cost an interpreted exception per read.
            return INCOMPLETE
        try:
            value, end = self._parse(self.pos, 0)
        except _Short:
            return INCOMPLETE
        self.pos = end
        return value

    def integers(self) -> list[int]:
        """The whole integer replies buffered next, taken at once (maybe none): what a
        link mostly reads, acknowledgements, without a parse per reply. ``gets()`` goes
        on after them."""
        buf = self.buf
        pos = self.pos
        end = len(buf)
        out: list[int] = []
        while pos < end and buf[pos] == 58:  # ':'
            i = buf.find(b"\r\n", pos)
            if i < 0:
                break
            out.append(_number(bytes(buf[pos + 1 : i])))
            pos = i + 2
        self.pos = pos
        return out

    def _line(self, start: int) -> tuple[bytes, int]:
        i = self.buf.find(b"\r\n", start)
        if i < 0:
            raise _Short
        return bytes(self.buf[start:i]), i + 2

    def _parse(self, start: int, depth: int) -> tuple[Any, int]:
        if start >= len(self.buf):
            raise _Short
        kind = self.buf[start]
        line, pos = self._line(start + 1)
        if kind == 43:  # '+'
            return line, pos
        if kind == 45:  # '-'
            return ErrorReply(line), pos
        if kind == 58:  # ':'
            return _number(line), pos
        if kind == 36:  # '$'
            n = _number(line)
            if n < 0:
                return None, pos
            if len(self.buf) < pos + n + 2:
                raise _Short
            if self.buf[pos + n : pos + n + 2] != b"\r\n":
                raise ReplyProtocolError("bulk string not terminated by CRLF")
            return bytes(self.buf[pos : pos + n]), pos + n + 2
        if kind == 42:  # '*'
            n = _number(line)
            if n < 0:
                return None, pos
            if depth >= _MAX_DEPTH:
                raise ReplyProtocolError("replies nested too deeply")
            items = []
            for _ in range(n):
                item, pos = self._parse(pos, depth + 1)
                items.append(item)
            return items, pos
        raise ReplyProtocolError(f"unexpected reply type byte {kind!r}")


class _Short(Exception):
    """Not all of the reply has arrived yet."""


def _number(line: bytes) -> int:
    try:
        return int(line)
    except ValueError:
        raise ReplyProtocolError(f"bad number in reply: {line[:32]!r}") from None
