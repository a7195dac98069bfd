"""Regenerate server/commands/specs.json from a running redis-server 7.0.x.

COMMAND INFO and COMMAND DOCS describe Redis's public interface (arity, flags,
key positions, ACL categories, argument docs); rill serves the same facts so
clients and redis-cli hints behave the same. The replies are read in RESP3 and
stored with their types tagged:  {"m": [[k, v], ...]} map, {"s": [...]} set,
{"t": "..."} simple string, a JSON string for a bulk string, numbers as is.

    python tools/gen_command_specs.py [port]
"""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path


class Reader:
    def __init__(self, sock: socket.socket) -> None:
        self.f = sock.makefile("rb")

    def read(self):
        line = self.f.readline()[:-2]
        t, rest = chr(line[0]), line[1:]
        if t == "$":
            n = int(rest)
            data = self.f.read(n + 2)[:-2]
            return data.decode()
        if t == "+":
            return {"t": rest.decode()}
        if t == ":":
            return int(rest)
        if t == "_":
            return None
        if t == "*":
            return [self.read() for _ in range(int(rest))]
        if t == "~":
            return {"s": [self.read() for _ in range(int(rest))]}
        if t == "%":
            return {"m": [[self.read(), self.read()] for _ in range(int(rest))]}
        if t == "-":
            raise RuntimeError(rest.decode())
        raise ValueError(f"unexpected RESP3 type {t!r}")


def command(sock: socket.socket, reader: Reader, *args: str):
    out = b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a.encode()) for a in args)
    sock.sendall(out)
    return reader.read()


def main() -> None:
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 6379
    sock = socket.create_connection(("127.0.0.1", port))
    reader = Reader(sock)
    command(sock, reader, "HELLO", "3")
    infos = command(sock, reader, "COMMAND", "INFO")
    docs = command(sock, reader, "COMMAND", "DOCS")
    docs_by_name = {k: v for k, v in docs["m"]}
    specs = {}
    for info in infos:
        name = info[0]
        specs[name] = {"info": info, "docs": docs_by_name.get(name)}
    target = Path(__file__).resolve().parent.parent / "server" / "commands" / "specs.json"
    target.write_text(json.dumps(specs, sort_keys=True, separators=(",", ":")) + "\n")
    print(f"wrote {len(specs)} commands to {target}")


if __name__ == "__main__":
    main()
