"""The dispatcher's loop over one read's commands (``Server.execute_all``), and the
part of a client it reads and writes per command (``ClientCore``).

They live in a module of their own so that the build can compile them typed
(fastpath.pxd, docs/hot-core.md): the command's facts (``Command``), its counters
(``CommandStats``) and the server's and client's cores are then C fields, and the durations C
integers. ``Server`` binds this function as its method and subclasses ``ServerCore``,
``Client`` subclasses ``ClientCore``: under CPython all are what they were.
"""

from __future__ import annotations

from time import perf_counter_ns
from typing import TYPE_CHECKING

from rill.protocol.reply import Raw, ReplyError, encode_into

from .commands.table import NOSCRIPT, WRITE
from .latency import HDR_OF, TABLE_NS, record_long
from .outcomes import NO_REPLY, Block

# evict.EVICT_FAIL, perform's refusal. Not imported from evict: evict.pxd cimports this
# module's ServerCore (perform and the eviction read the write counter, propagating and
# blocking as C fields), so evict's module init imports this one, and an import of evict
# here would be a cycle. tests/server/test_evict.py checks the two agree.
EVICT_FAIL = 2

if TYPE_CHECKING:
    from .client import Client
    from .commands.table import Command
    from .server import Server


def _probe() -> None:
    """Only its type matters: see _COMPILED."""


# Whether this module runs compiled (what ``cython.compiled`` says, without importing
# Cython): where the fastest form differs between the modes, this picks it.
_COMPILED = type(_probe).__name__ != "function"
_SYSTEM_CLOCK = perf_counter_ns
# Compiled, the loop reads the clock through fastpath.pxd's ``_c_monotonic_ns``: CLOCK_MONOTONIC
# (what perf_counter_ns reads on Linux) read in C, with no int object made and unboxed again
# per reading, two per command. The name exists only in the compiled module, so the
# interpreter never reaches it (``_COMPILED`` guards it).


class WriteEngine:
    """What the loop below hands a write to instead of its handler while one is set
    (``ServerCore._active_active``: the Active-Active engine, engine.py's ActiveActive,
    which subclasses this). A base class here so that the loop, compiled, calls
    ``run_write`` as a C method through fastpath.pxd's type: the engine's module
    cimports this one, so this one cannot cimport it. Before, the call was a Python
    method call on an attribute found through the Server's instance dict."""

    __slots__ = ()

    def run_write(self, client: ClientCore, cmd: Command, argv: list[bytes]) -> object:
        """Run the write command's handler, recording what it changed; its reply."""
        raise NotImplementedError


class ServerCore:
    """The server state the dispatcher and the connection read on every command, batch,
    read or write (Server adds the rest), as C fields when compiled: whether the server is
    special at all (Active-Active, maxmemory, a gate), whether writes are propagated at
    all (AOF, replicas, Active-Active), what a command left to propagate (extra ops, a
    rewrite, propagation prevented), the write counter, and the tables, thresholds and
    limits the loop and the connection consult. A subclass must not give these names
    class attributes: they would shadow the fields, and the compiled code reads the
    fields."""

    __slots__ = (
        "_special", "propagating", "_also", "_rewritten", "_prevent_propagation",
        # the gate's two flags (Server._update_special): read per command while _special
        # (maxmemory) holds, so C fields rather than attributes found through the class
        "_gated", "_gated_beyond_memory",
        # read around every command (dirty, which every write bumps) or once per batch
        # (the rest: set at start-up, by CONFIG SET and by MONITOR)
        "dirty", "dispatch", "blocking", "cmdstats", "slow_ns", "latency_tracking", "monitors",
        # read by the connection once per read and per write (connection.pxd)
        "stats", "client_mem", "obuf_floor", "query_buffer_limit",
        # Active-Active's feed while it is the only one (server/propagation.py): what a
        # write leaves to propagate is then its seal alone, called from the loop below
        "aa_seal",
        # the Active-Active engine while the mode is on (a WriteEngine, else None): read
        # per write, and its run_write called in C (Server.active_active sets it)
        "_active_active",
    )

    def prevent_propagation(self) -> None:
        """Keep the running command out of every feed: its effects went out as other
        commands (XREADGROUP's as XCLAIMs, a script's not at all). Here, not on Server,
        so that the call compiled command handlers make on every XREADGROUP is a C method,
        not an interpreted frame."""
        self._prevent_propagation = True


class ClientCore:
    """The client state the dispatcher touches on every command or batch, and the
    connection on every read and write (Client adds the rest).

    Compiled, these are C fields that the loop below and the connection read and write
    directly; code elsewhere reads them as attributes, as any other of Client's.
    """

    __slots__ = (
        "out", "resp3", "blocked", "close_after_reply", "kill_requested", "last_cmd", "cur_cmd", "argv",
        # the selected database and the server: every handler reads c.db, and every write
        # bumps c.server.dirty; typed handlers (strings.pxd, ...) read them in C
        "db", "server",
        # what _plain() tests once per batch
        "reply_mode", "multi", "authenticated", "subscriptions",
        # the query and reply buffers' figures, kept by the connection on every read and write
        "last_interaction", "querybuf_len", "querybuf_peak", "querybuf_room", "pending", "rbp", "rbs",
    )


def _plain(server: ServerCore, client: ClientCore) -> bool:
    """Whether ``client`` is in no state that execute()'s checks must see (and no
    MONITOR is listening): its commands may take execute_all()'s fast path."""
    return not (
        server.monitors
        or client.reply_mode
        or client.multi is not None
        or not client.authenticated
        or client.subscriptions
    )


def execute_all(server: Server, client: Client, commands: list[list[bytes]], i: int = 0) -> tuple[int, bool]:
    """:meth:`Server.execute` ``commands[i:]`` in order for ``client``.

    Stops after a command that blocked the client, asked for it to be closed,
    or was postponed by CLIENT PAUSE. Returns the index of the first command
    not run and whether the last one run was postponed (it runs again).

    A pipeline is mostly commands that need nothing but their handler, and for
    those this loop does itself what execute() and call() would, with the
    lookups they repeat taken once per batch: those two frames per command
    were a third of a pipelined GET. Anything else (an unknown command or one
    with subcommands, a wrong arity, a client or server in a special state)
    goes through execute().

    The client's own gating state (and whether anyone MONITORs) is tested once
    per batch, and again after any command that may have changed it: whatever
    went through execute(), and the commands Redis forbids in scripts
    (``noscript``: MULTI, AUTH, HELLO, SUBSCRIBE, MONITOR, RESET, EVAL, ...),
    which are the ones that change a connection's state. The server's gating
    state can change inside any command (a failed AOF write, a script's
    CONFIG SET), so it is still tested per command: it is one flag.
    """
    n = len(commands)
    dispatch = server.dispatch
    blocking = server.blocking
    ready = blocking.ready  # the keys signalled ready: emptied in place, never replaced
    waiters = blocking.waiters  # the blocked clients by key: likewise never replaced
    # Read once per batch, and again after any command that goes through
    # execute(): only those (CONFIG SET, EXEC, ...) can change them.
    slow_ns = server.slow_ns
    latency_on = server.latency_tracking
    hdr_of = HDR_OF
    table_ns = TABLE_NS
    by_cmd = server.cmdstats.by_cmd
    write = WRITE
    noscript = NOSCRIPT
    plain = _plain(server, client)
    # Compiled, the clock is read in C, unless a test replaced this module's
    # perf_counter_ns (it then reads that, as the interpreter always does).
    c_clock = _COMPILED and perf_counter_ns is _SYSTEM_CLOCK
    # One clock reading per command, not two: a command's duration ends where the next
    # one's begins. So a duration is the command's handler and reply (what Redis times
    # too: its replies are written inside the handler) plus this loop's own few steps
    # between two commands (its counters, the next command's lookup): tens of ns.
    # Whatever can take longer (execute(), propagation, serving blocked clients, a
    # slowlog entry) is followed by a fresh reading, so its time is no other command's.
    if c_clock:
        start = _c_monotonic_ns()  # noqa: F821 (see _SYSTEM_CLOCK)
    else:
        start = perf_counter_ns()
    last = None  # the previous fast-path command, whose counters are st: pipelines repeat one
    st = None
    # The previous command's name as sent and what the table gave for it: a pipeline of
    # one command compares its name's bytes instead of hashing each new name object.
    # Forgotten after execute(), which may change the table.
    last_name = None
    last_found = None
    while i < n:
        argv = commands[i]
        i += 1
        name = argv[0]
        if last_name is not None and name == last_name:
            cmd = last_found
        else:
            cmd = last_found = dispatch.get(name)
            last_name = name
        if (
            cmd is None  # unknown, a container (it resolves a subcommand) or protected
            or not plain
            or not cmd.min_argc <= len(argv) <= cmd.max_argc  # the arity check
            # maxmemory alone evicts here, and only a refusal takes execute();
            # Active-Active's writes stay here, run by its engine (below).
            or server._special and server._gated and (
                server._gated_beyond_memory or server.evictor.perform(client.db) == EVICT_FAIL)
        ):
            if server._tracking_active:
                # Its own invalidations follow its reply; CLIENT CACHING lapses.
                tracker = server.tracking
                tracker.begin(client)
                postponed = server.execute(client, argv)
                tracker.end(client, argv[0])
                if postponed:
                    return i - 1, True
            elif server.execute(client, argv):
                return i - 1, True
            if client.reply_mode > 1:
                # CLIENT REPLY SKIP silences exactly the command after it.
                client.reply_mode = 3 if client.reply_mode == 2 and argv[0].lower() == b"client" else 0
            slow_ns = server.slow_ns
            latency_on = server.latency_tracking
            plain = _plain(server, client)
            last_name = None
            if c_clock:  # execute() timed its command itself
                start = _c_monotonic_ns()  # noqa: F821
            else:
                start = perf_counter_ns()
        else:
            # call(), with its rare branches left to the helpers it uses too.
            client.last_cmd = client.cur_cmd = cmd
            client.argv = argv
            dirty = server.dirty
            try:
                if server._special and cmd.flags & write and server._active_active is not None:
                    # What call() does for an Active-Active write: the engine runs the
                    # handler and collects its ops (the interpreted call() frame was a
                    # sixth of an XADD's cost there).
                    # Compiled, a C method call (fastpath.pxd's WriteEngine).
                    reply = server._active_active.run_write(client, cmd, argv)
                else:
                    # Compiled, a typed handler is called through its C entry (fastpath.pxd's
                    # _c_call), not as a Python object with its arguments checked and unpacked.
                    reply = _c_call(cmd, client, argv) if _COMPILED else cmd.handler(client, argv)  # noqa: F821
            except ReplyError as err:
                reply = err
            t = type(reply)
            if t is Raw:
                client.out.append(reply)
            elif t is Block or t is ReplyError or reply is NO_REPLY:
                server._reply(client, cmd, argv, reply)
            else:
                encode_into(reply, client.out, client.resp3)
            if c_clock:
                end = _c_monotonic_ns()  # noqa: F821
            else:
                end = perf_counter_ns()
            duration = end - start
            start = end
            if cmd is not last:
                try:
                    st = by_cmd[cmd]
                except KeyError:
                    st = server.cmdstats.of(cmd)
                last = cmd
            st.nsec += duration
            # The call is counted as its latency sample (see CommandStats.calls).
            if latency_on:
                # Past the table (a slow command, or every command under valgrind), the
                # counter is worked out rather than met as an IndexError: raising and
                # catching one cost more than the command itself. A command's first
                # sample, whose histogram is still the empty NO_HIST, is recorded
                # there too (its histogram is allocated then).
                if duration < table_ns and type(st.hist) is list:
                    hist = st.hist
                    idx = hdr_of[duration]
                    hist[idx] += 1
                else:
                    record_long(st, duration)
            else:
                st.untracked += 1
            if t is Block and client.blocked is not None:
                blocking.sample_when_served(client.blocked, duration, latency_on)
            if duration >= slow_ns:
                server.slow_command(client, cmd, argv, duration)
                fresh = True
            else:
                fresh = False
            # Whether anyone waits or records comes first: without either, what the
            # command changed needs nothing more (and dirty is not read again).
            if server._also or ((waiters or server.propagating) and server.dirty != dirty):
                seal = server.aa_seal
                if seal is not None and not waiters and not server._also:
                    # Active-Active's feed alone, nobody blocked, no extra ops: all that
                    # _after_write would do is seal the engine's unit (an empty one makes
                    # no effect) and forget the command's rewrite, and its interpreted
                    # frame cost more than the seal. No EXEC or script is open here
                    # (their commands take server.call, not this loop).
                    seal(server._also, False)
                    server._rewritten = None
                    server._prevent_propagation = False
                else:
                    server._after_write(client, cmd, argv, server.dirty != dirty)
                fresh = True
            elif server._rewritten is not None or server._prevent_propagation:
                server._rewritten = None
                server._prevent_propagation = False
            if ready:
                blocking.serve_ready()
                fresh = True
            if cmd.flags & noscript:
                plain = _plain(server, client)
            if fresh:
                if c_clock:
                    start = _c_monotonic_ns()  # noqa: F821
                else:
                    start = perf_counter_ns()
        if client.blocked is not None or client.close_after_reply or client.kill_requested:
            return i, False
    return i, False
