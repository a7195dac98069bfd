"""RESP2/RESP3 replies as values, for the few comparisons that cannot be byte for byte
(orderless replies, idle times) and for printing a redis-cli transcript."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Reply:
    """One reply: its RESP type byte (``+ - : $ * _ # , ( = % ~ > |``) and its value.

    Aggregates hold a tuple of Replies (a map or attribute holds keys and values
    alternately); scalars hold the bytes after the type byte (a bulk its payload;
    a null bulk or array ``None``)."""

    kind: str
    value: object


def parse(data: bytes) -> Reply:
    """The first reply in ``data`` (which must hold one complete reply)."""
    reply, _ = _parse(data, 0)
    return reply


def _parse(data: bytes, pos: int) -> tuple[Reply, int]:
    end = data.index(b"\r\n", pos)
    kind = chr(data[pos])
    head = data[pos + 1:end]
    pos = end + 2
    if kind in "$=!":
        n = int(head)
        if n < 0:
            return Reply(kind, None), pos
        return Reply(kind, data[pos:pos + n]), pos + n + 2
    if kind in "*~>%|":
        n = int(head)
        if n < 0:
            return Reply(kind, None), pos
        if kind in "%|":
            n *= 2
        items = []
        for _ in range(n):
            item, pos = _parse(data, pos)
            items.append(item)
        if kind == "|":  # an attribute precedes the reply it describes
            inner, pos = _parse(data, pos)
            items.append(inner)
        return Reply(kind, tuple(items)), pos
    return Reply(kind, head), pos


def split_replies(data: bytes) -> list[bytes]:
    """Every complete reply in ``data``, as its own bytes; a torn tail is dropped."""
    out = []
    pos = 0
    while pos < len(data):
        try:
            _, end = _parse(data, pos)
        except (ValueError, IndexError):
            break
        out.append(data[pos:end])
        pos = end
    return out


def _quote(b: bytes) -> str:
    """A bulk string as redis-cli prints it: quoted, with non-printable bytes escaped."""
    out = []
    for c in b:
        ch = chr(c)
        if ch == '"' or ch == "\\":
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif 32 <= c < 127:
            out.append(ch)
        else:
            out.append(f"\\x{c:02x}")
    return '"' + "".join(out) + '"'


def format_cli(reply: Reply, indent: int = 0) -> str:
    """``reply`` as redis-cli prints it (close enough to read a reproduction)."""
    k, v = reply.kind, reply.value
    if k == "+":
        return v.decode(errors="replace")
    if k in "-!":
        return "(error) " + v.decode(errors="replace")
    if k == ":":
        return "(integer) " + v.decode()
    if k == ",":
        return "(double) " + v.decode()
    if k == "(":
        return "(big number) " + v.decode()
    if k == "#":
        return "(true)" if v == b"t" else "(false)"
    if k in "_" or v is None:
        return "(nil)"
    if k in "$=":
        return _quote(v)
    items = list(v)
    if k == "|":
        items = items[-1:]
        return format_cli(items[0], indent)
    if not items:
        return "(empty array)" if k != "%" else "(empty hash)"
    lines = []
    if k == "%":
        pairs = [(items[i], items[i + 1]) for i in range(0, len(items), 2)]
        width = len(str(len(pairs)))
        for i, (key, val) in enumerate(pairs, 1):
            prefix = f"{i:>{width}}# "
            lines.append(prefix + format_cli(key) + " => "
                         + format_cli(val, indent + len(prefix)).lstrip())
    else:
        mark = {"*": ")", "~": "~", ">": ")"}[k]
        width = len(str(len(items)))
        for i, item in enumerate(items, 1):
            prefix = f"{i:>{width}}{mark} "
            lines.append(prefix + format_cli(item, indent + len(prefix)))
    pad = " " * indent
    return ("\n" + pad).join(lines)


def format_bytes(data: bytes) -> str:
    """Every reply in ``data`` formatted; raw leftovers shown escaped."""
    replies = split_replies(data)
    text = "\n".join(format_cli(parse(r)) for r in replies)
    rest = data[sum(map(len, replies)):]
    if rest:
        text += ("\n" if text else "") + "(torn) " + _quote(rest)
    return text or "(no reply)"


def quote_arg(arg: bytes) -> str:
    """A command argument as typed at redis-cli's prompt."""
    if arg and all(33 <= c < 127 and c not in b'"\'\\' for c in arg):
        return arg.decode()
    return _quote(arg)
