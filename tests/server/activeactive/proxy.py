"""A chaos TCP proxy of the suite's own, to put between Active-Active instances.

Each ``ChaosProxy`` listens on a free port and forwards every connection to one target.
Calm, it is a plain forwarder. In chaos mode it delays every chunk of data by a random
time (order kept within each direction) and cuts every connection it carries at random
moments; ``partition`` refuses connections outright. All random choices come from one
``random.Random(seed)``, so a run's schedule of decisions is reproducible (when they
land still depends on the machine's timing).

The proxy runs its own asyncio loop in a daemon thread, so synchronous tests drive it
with plain method calls.
"""

from __future__ import annotations

import asyncio
import random
import threading

from tests.support import free_port


class _Link:
    """One proxied connection: the client side and the target side."""

    def __init__(self, client: asyncio.StreamWriter) -> None:
        self.client = client
        self.target: asyncio.StreamWriter | None = None

    def abort(self) -> None:
        """Tear both sides down at once, as a broken network does (no orderly close)."""
        for w in (self.client, self.target):
            if w is not None:
                w.transport.abort()


class ChaosProxy:
    """Forwards ``127.0.0.1:<port>`` to ``target_host:target_port``; see the module doc."""

    def __init__(self, target_port: int, *, seed: int = 0, target_host: str = "127.0.0.1",
                 port: int | None = None) -> None:
        self.target = (target_host, target_port)
        self.port = port or free_port()
        self.rng = random.Random(seed)
        self.max_delay = 0.0  # seconds; each chunk waits uniform(0, max_delay)
        self.cut_every = 0.0  # mean seconds between cuts of every live connection; 0: never
        self.refusing = False
        self.links: set[_Link] = set()
        # What happened, for tests and for reports on a failure.
        self.accepted = 0
        self.refused = 0
        self.cuts = 0
        self.bytes = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name=f"chaos-proxy-{self.port}")
        self._server: asyncio.AbstractServer | None = None
        self._cutter: asyncio.Task | None = None

    # -- life cycle ----------------------------------------------------------------------

    def start(self) -> ChaosProxy:
        self._thread.start()
        self._server = self._run(asyncio.start_server(self._accept, "127.0.0.1", self.port))
        return self

    def stop(self) -> None:
        if not self._thread.is_alive():
            return

        async def shutdown() -> None:
            if self._cutter is not None:
                self._cutter.cancel()
            if self._server is not None:
                self._server.close()
            for link in list(self.links):
                link.abort()
            # Connection handlers end once their sockets are gone; cancel any still waiting.
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in others:
                task.cancel()
            await asyncio.gather(*others, return_exceptions=True)

        self._run(shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    def __enter__(self) -> ChaosProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what a test controls ------------------------------------------------------------

    def chaos(self, *, max_delay: float = 0.05, cut_every: float = 0.5) -> None:
        """Delay every chunk by up to ``max_delay`` seconds and cut every live connection
        at random intervals averaging ``cut_every`` seconds (0: no cuts)."""

        def apply() -> None:
            self.max_delay = max_delay
            self.cut_every = cut_every
            if self._cutter is not None:
                self._cutter.cancel()
                self._cutter = None
            if cut_every > 0:
                self._cutter = self._loop.create_task(self._cut_on_schedule())

        self._loop.call_soon_threadsafe(apply)

    def calm(self) -> None:
        """Back to a plain forwarder (existing and new connections)."""
        self.chaos(max_delay=0.0, cut_every=0.0)

    def partition(self, on: bool = True) -> None:
        """While on, every live connection is cut and new ones are closed at once."""

        def apply() -> None:
            self.refusing = on
            if on:
                self._cut_all()

        self._loop.call_soon_threadsafe(apply)

    def cut(self) -> None:
        """Cut every live connection now (new ones are accepted)."""
        self._loop.call_soon_threadsafe(self._cut_all)

    def summary(self) -> str:
        return (f"proxy :{self.port} -> :{self.target[1]}: {self.accepted} accepted, "
                f"{self.refused} refused, {self.cuts} cut, {self.bytes} bytes")

    # -- inside the loop -----------------------------------------------------------------

    def _run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    def _cut_all(self) -> None:
        for link in list(self.links):
            self.cuts += 1
            link.abort()
        self.links.clear()

    async def _cut_on_schedule(self) -> None:
        while True:
            await asyncio.sleep(self.rng.expovariate(1.0 / self.cut_every))
            self._cut_all()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.refusing:
            self.refused += 1
            writer.transport.abort()
            return
        self.accepted += 1
        link = _Link(writer)
        self.links.add(link)
        try:
            treader, twriter = await asyncio.open_connection(*self.target)
        except OSError:
            self.links.discard(link)
            writer.transport.abort()
            return
        link.target = twriter
        if link not in self.links:  # cut while connecting
            link.abort()
            return
        await asyncio.gather(self._pump(reader, twriter, link), self._pump(treader, writer, link))
        self.links.discard(link)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    link: _Link) -> None:
        """One direction. Sleeping before each write delays the data and keeps its order."""
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                if self.max_delay > 0:
                    await asyncio.sleep(self.rng.uniform(0.0, self.max_delay))
                if writer.transport.is_closing():
                    break
                writer.write(data)
                self.bytes += len(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        # One side ended: end the other too (a half-open RESP link is of no use to anyone).
        link.abort()
