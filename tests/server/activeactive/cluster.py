"""Active-Active test harness: N real ``rill-server`` processes that are peers of each other.

Instance ``i`` (0-based) is region ``i + 1``, started with ``--active-active-id`` and
``--active-active-peers`` naming every other instance (directly, or through a
``ChaosProxy`` per direction when ``proxies=True``). The seed's "— Sync —" rows are
``sync()``: RESUME everywhere, then ``ACTIVEACTIVE WAIT`` everywhere, each of which must
report all N-1 peers caught up. ``pause_all()`` comes before the seed's concurrent steps.
An instance can be killed with SIGKILL and restarted on the same port and data directory.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from hiredis import Reader

from tests.server.activeactive.proxy import ChaosProxy
from tests.support import Backoff, RawClient, ServerProcess, free_port, rill_process, scratch_dir

WAIT_MS = 15000
# Several interpreters starting at once on a loaded machine can take a while to listen.
START_TIMEOUT = 60.0


class ReplyError(Exception):
    """An error reply, its text without the leading ``-``."""


def decode(raw: bytes):
    """One RESP reply as hiredis decodes it (no client library's reply callbacks)."""
    reader = Reader()
    reader.feed(raw)
    value = reader.gets()
    return value


def pairs(flat: list) -> dict:
    """A RESP2 flat field/value array as a dict with str keys."""
    return {flat[i].decode(): flat[i + 1] for i in range(0, len(flat), 2)}


class Node:
    """One instance: its process, its region, and a connection to it."""

    def __init__(self, index: int, proc: ServerProcess) -> None:
        self.index = index
        self.region = index + 1
        self.proc = proc
        self.port = proc.port
        self._client: RawClient | None = None
        self.peer_names: list[str] = []  # as in active-active-peers, index order of the others

    @property
    def client(self) -> RawClient:
        if self._client is None:
            self._client = RawClient(self.port, timeout=30)
        return self._client

    def drop_client(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def raw(self, *args: bytes | str | int) -> bytes:
        """The reply's exact bytes."""
        return self.client.call(*args)

    def call(self, *args: bytes | str | int):
        """The decoded reply; an error reply raises ReplyError."""
        value = decode(self.raw(*args))
        if isinstance(value, Exception):
            raise ReplyError(str(value))
        return value

    def error(self, *args: bytes | str | int) -> str:
        """The text of the error reply the command must get."""
        value = decode(self.raw(*args))
        assert isinstance(value, Exception), f"{args!r} at region {self.region}: {value!r}, not an error"
        return str(value)

    # -- Active-Active figures -----------------------------------------------------------

    def status(self) -> list[dict]:
        """ACTIVEACTIVE STATUS: one dict per peer, in active-active-peers order, counts
        as ints (whether they come as integers or as bulk strings of digits)."""
        out = []
        for p in self.call("ACTIVEACTIVE", "STATUS"):
            fields = pairs(p)
            for name, value in fields.items():
                if isinstance(value, bytes) and value.isdigit():
                    fields[name] = int(value)
            out.append(fields)
        return out

    def info(self) -> dict[str, str]:
        """INFO active_active as name -> value text."""
        out = {}
        for line in self.call("INFO", "active_active").decode().splitlines():
            if ":" in line and not line.startswith("#"):
                name, value = line.split(":", 1)
                out[name] = value
        return out

    def seq(self) -> int:
        """Own effects produced so far (INFO active_active_seq)."""
        return int(self.info()["active_active_seq"])

    def __repr__(self) -> str:
        return f"<region {self.region} :{self.port}>"


class Cluster:
    """N Active-Active instances; see the module doc. Use as a context manager."""

    def __init__(self, n: int, *args: str, proxies: bool = False, seed: int = 0,
                 appendonly: bool = False) -> None:
        self.n = n
        ports = [free_port() for _ in range(n)]
        # proxy[i][j]: what instance i dials to reach instance j.
        self.proxies: dict[tuple[int, int], ChaosProxy] = {}
        if proxies:
            for i in range(n):
                for j in range(n):
                    if i != j:
                        self.proxies[i, j] = ChaosProxy(ports[j], seed=seed * 1000 + i * 32 + j)
        extra = list(args)
        if appendonly:
            extra += ["--appendonly", "yes", "--appendfsync", "always"]
        self.nodes: list[Node] = []
        for i in range(n):
            names = []
            for j in range(n):
                if j != i:
                    port = self.proxies[i, j].port if proxies else ports[j]
                    names.append(f"127.0.0.1:{port}")
            proc = rill_process("--active-active-id", str(i + 1),
                                "--active-active-peers", " ".join(names), *extra,
                                port=ports[i], workdir=scratch_dir(f"rill-aa{i + 1}-"))
            node = Node(i, proc)
            node.peer_names = names
            self.nodes.append(node)

    # -- life cycle ----------------------------------------------------------------------

    def start(self) -> Cluster:
        for proxy in self.proxies.values():
            proxy.start()
        try:
            with ThreadPoolExecutor(self.n) as pool:
                list(pool.map(lambda node: node.proc.start(START_TIMEOUT), self.nodes))
            self.wait_links()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for node in self.nodes:
            node.drop_client()
            node.proc.stop()
        for proxy in self.proxies.values():
            proxy.stop()

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __getitem__(self, i: int) -> Node:
        return self.nodes[i]

    def __iter__(self):
        return iter(self.nodes)

    def kill(self, i: int) -> None:
        """SIGKILL instance i (its data directory stays)."""
        self.nodes[i].drop_client()
        self.nodes[i].proc.kill()

    def restart(self, i: int) -> None:
        """Start instance i again on its port and data directory."""
        node = self.nodes[i]
        node.drop_client()
        node.proc.start(START_TIMEOUT)

    # -- the seed's sync steps -----------------------------------------------------------

    def wait_links(self, timeout: float = 20.0) -> None:
        """Until every instance reports every link up."""
        deadline = time.monotonic() + timeout
        pause = Backoff()
        while True:
            down = [(node.region, p["peer"]) for node in self.nodes for p in node.status()
                    if p["link"] != b"up"]
            if not down:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"links still down: {down}\n{self.describe()}")
            pause()

    def pause_all(self) -> None:
        """Every instance stops sending to every peer (the start of a concurrent step)."""
        for node in self.nodes:
            assert node.call("ACTIVEACTIVE", "PAUSE") == b"OK"

    def resume_all(self) -> None:
        for node in self.nodes:
            assert node.call("ACTIVEACTIVE", "RESUME") == b"OK"

    def sync(self, timeout_ms: int = WAIT_MS) -> None:
        """The seed's "— Sync —": RESUME everywhere, then WAIT everywhere for all peers."""
        self.resume_all()
        for node in self.nodes:
            caught_up = node.call("ACTIVEACTIVE", "WAIT", timeout_ms)
            assert caught_up == self.n - 1, (
                f"ACTIVEACTIVE WAIT at region {node.region}: {caught_up} of {self.n - 1} peers\n"
                f"{self.describe()}")

    def peer_name(self, a: int, b: int) -> str:
        """How instance a names instance b in its active-active-peers."""
        return self.nodes[a].peer_names[b if b < a else b - 1]

    def _caught_up(self, a: int, b: int) -> bool:
        name = self.peer_name(a, b)
        p = next(p for p in self.nodes[a].status() if p["peer"].decode() == name)
        return p["link"] == b"up" and p["lag-effects"] == 0

    def _until(self, done, what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} not done in {timeout:.0f}s\n{self.describe()}")
            time.sleep(0.01)

    def deliver(self, a: int, b: int, timeout: float = WAIT_MS / 1000) -> None:
        """Instance a sends everything it has to b (which must be able to apply it all),
        then stops sending to b again: one direction of a "— Sync —"."""
        assert self.nodes[a].call("ACTIVEACTIVE", "RESUME", self.peer_name(a, b)) == b"OK"
        self._until(lambda: self._caught_up(a, b), f"delivery {a + 1} -> {b + 1}", timeout)
        assert self.nodes[a].call("ACTIVEACTIVE", "PAUSE", self.peer_name(a, b)) == b"OK"

    def sync_pair(self, a: int, b: int, timeout: float = WAIT_MS / 1000) -> None:
        """Only instances a and b exchange what they hold (a "— Sync —" in their columns
        alone); what they send to others stays as it was."""
        assert self.nodes[a].call("ACTIVEACTIVE", "RESUME", self.peer_name(a, b)) == b"OK"
        assert self.nodes[b].call("ACTIVEACTIVE", "RESUME", self.peer_name(b, a)) == b"OK"
        self._until(lambda: self._caught_up(a, b) and self._caught_up(b, a),
                    f"sync of regions {a + 1} and {b + 1}", timeout)

    def describe(self) -> str:
        """Every instance's STATUS (and the proxies' counts), for failure messages."""
        lines = []
        for node in self.nodes:
            try:
                lines.append(f"region {node.region}: {node.status()}")
            except Exception as e:  # a dead or broken instance says so
                lines.append(f"region {node.region}: {e!r}")
        lines += [p.summary() for p in self.proxies.values()]
        return "\n".join(lines)


# -- reading replies -----------------------------------------------------------------------


def ids(entries) -> list[str]:
    """The IDs of an XRANGE-style reply (``[[id, [f, v, ...]], ...]``), as text."""
    return [e[0].decode() for e in entries or []]


def xread_ids(reply, key: str) -> list[str]:
    """The IDs an XREAD/XREADGROUP reply gives for ``key`` (none: nil reply or no key)."""
    for stream, entries in reply or []:
        if stream.decode() == key:
            return ids(entries)
    return []


def group_names(node: Node, key: str) -> list[str]:
    return [pairs(g)["name"].decode() for g in node.call("XINFO", "GROUPS", key)]


def id_parts(stream_id: str) -> tuple[int, int]:
    ms, seq = stream_id.split("-")
    return int(ms), int(seq)


def region_of(stream_id: str) -> int:
    """The region a generated ID carries: its sequence is ``n * 256 + region``."""
    return id_parts(stream_id)[1] % 256
