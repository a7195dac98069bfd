#!/usr/bin/env python3
"""The image's HEALTHCHECK (installed as ``rill-healthcheck``): PING rill-server where it
really listens.

The port is not guessed from the command line: it can come from a config file, an
``include``, or a later ``CONFIG SET port``. The kernel knows: ``/proc/<pid>/fd`` names the
server's sockets, and ``/proc/<pid>/net/{tcp,tcp6,unix}`` says which of them listen, and
where. Every rill-server process in the container is checked (or the one ``--pid`` names).

Healthy (exit 0) when each server answers PING with +PONG, or with an error that proves it
is up and serving as configured: -LOADING (still loading its dataset), -NOAUTH and -NOPERM
(a password or ACL keeps this anonymous client out). Anything else, a silent server, or no
listening socket at all is unhealthy (exit 1). One line of output says why.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time

ALIVE = (b"+PONG", b"-LOADING", b"-NOAUTH", b"-NOPERM")
LISTEN_TCP = "0A"  # TCP_LISTEN in /proc/net/tcp's st column
ACCEPTING = 0x10000  # __SO_ACCEPTCON in /proc/net/unix's Flags: a listening socket


def rill_pids(proc: str = "/proc") -> list[int]:
    """Processes running rill-server: the console script, directly or through an interpreter."""
    pids = []
    for name in os.listdir(proc):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"{proc}/{name}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:  # gone meanwhile
            continue
        if b" " in argv[0] and not any(argv[1:]):
            # a process title (set-proc-title, on by default) replaced the command line
            # with one string, "{title} {listen-addr} {server-mode}": the program is its
            # first word (a template without {title} needs --pid)
            argv = argv[0].split()
        base = [os.path.basename(a) for a in argv[:2]]
        if base[:1] == [b"rill-server"] or (base[0].startswith(b"python") and base[1:] == [b"rill-server"]) \
                or b"rill.server.main" in argv[1:3]:
            pids.append(int(name))
    return sorted(pids)


def _socket_inodes(pid: int) -> set[int] | None:
    """The inodes of the process's sockets; None if its fds cannot be read: they belong to
    another user, and even root needs CAP_SYS_PTRACE, which containers do not get."""
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except FileNotFoundError:  # closed meanwhile
                continue
            if target.startswith("socket:["):
                inodes.add(int(target[8:-1]))
    except PermissionError:
        return None
    return inodes


def _euid(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Uid:"):
                return int(line.split()[2])
    raise FileNotFoundError(pid)


def _tcp_address(hexaddr: str) -> tuple[int, str]:
    """/proc/net/tcp{,6}'s ``ADDR:PORT``: the address in 32-bit words of host byte order."""
    addr, port = hexaddr.split(":")
    raw = bytes.fromhex(addr)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    family = socket.AF_INET if len(raw) == 4 else socket.AF_INET6
    return family, f"{socket.inet_ntop(family, words)}:{int(port, 16)}"


def listeners(pid: int) -> list[tuple[int, object]]:
    """(family, address) for each listening socket of ``pid``. When its fds cannot be read,
    the listeners in its network namespace that its user owns (the tables' uid column)."""
    mine = _socket_inodes(pid)
    owner = _euid(pid) if mine is None else None

    def its_own(inode: str, uid: str) -> bool:
        return int(inode) in mine if mine is not None else int(uid) == owner

    out: list[tuple[int, object]] = []
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{table}") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if cols[3] != LISTEN_TCP or not its_own(cols[9], cols[7]):
                continue
            family, hostport = _tcp_address(cols[1])
            host, _, port = hostport.rpartition(":")
            # A wildcard listener is reached on loopback.
            host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
            out.append((family, (host, int(port))))
    try:
        with open(f"/proc/{pid}/net/unix") as f:
            rows = f.read().splitlines()[1:]
    except OSError:
        rows = []
    for row in rows:
        cols = row.split()
        if len(cols) < 8 or not int(cols[3], 16) & ACCEPTING or cols[7].startswith("@"):
            continue
        path = cols[7]
        if not path.startswith("/"):  # bound relative to the server's working directory
            try:
                path = os.path.join(os.readlink(f"/proc/{pid}/cwd"), path)
            except OSError:
                continue
        if mine is not None and int(cols[6]) not in mine:
            continue
        if mine is None:  # no uid column here: the socket file's owner
            try:
                if os.stat(path).st_uid != owner:
                    continue
            except OSError:
                continue
        out.append((socket.AF_UNIX, path))
    return out


def ping(family: int, address: object, timeout: float) -> bytes:
    """The first line of the reply to PING (b"" if the server closed the connection)."""
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(address)
        s.sendall(b"PING\r\n")
        reply = b""
        while b"\r\n" not in reply:
            chunk = s.recv(256)
            if not chunk:
                break
            reply += chunk
        return reply.split(b"\r\n", 1)[0]


def check(pid: int, deadline: float) -> tuple[bool, str]:
    """Whether one server answers on one of its listeners, and what it said."""
    try:
        found = listeners(pid)
    except FileNotFoundError:
        return False, f"pid {pid}: no such process"
    if not found:
        return False, f"pid {pid}: no listening socket"
    said = []
    for family, address in found:
        if isinstance(address, str):
            where = address
        else:
            host, port = address  # type: ignore[misc]
            where = f"[{host}]:{port}" if family == socket.AF_INET6 else f"{host}:{port}"
        left = deadline - time.monotonic()
        if left <= 0:
            said.append(f"{where} not tried (out of time)")
            break
        try:
            reply = ping(family, address, left)
        except OSError as e:
            said.append(f"{where} {e.strerror or str(e) or e.__class__.__name__}")
            continue
        text = reply.decode(errors="replace")
        if reply.startswith(ALIVE):
            return True, f"pid {pid}: {where} {text}"
        said.append(f"{where} {text or 'closed the connection'}")
    return False, f"pid {pid}: " + "; ".join(said)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rill-healthcheck", description=__doc__.splitlines()[0])
    parser.add_argument("--pid", type=int, action="append",
                        help="check this process (default: every rill-server found in /proc)")
    parser.add_argument("--timeout", type=float, default=2.5, help="seconds for the whole check")
    args = parser.parse_args(argv)
    deadline = time.monotonic() + args.timeout
    pids = args.pid or rill_pids()
    if not pids:
        print("no rill-server process")
        return 1
    healthy = True
    for pid in pids:
        ok, why = check(pid, deadline)
        print(why)
        healthy = healthy and ok
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main())
