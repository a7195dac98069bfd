# Cython declarations for fastpath.py (its "augmenting" .pxd): types for the compiled
# build; the .py stays the reference and runs unchanged without them. See docs/hot-core.md.
cimport cython
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

from rill.server.commands.table cimport Command
from rill.server.commandstats cimport CommandStats
from rill.storage.keyspace cimport Database
# The reply encoder called in C (its cpdef entry), not through its Python wrapper: a
# generic call, argument parsing and a bool made per reply.
from rill.protocol.reply cimport encode_into

# The engine a write is handed to (the Active-Active engine subclasses it): run_write is
# a C method, so the loop's call goes through the vtable, not a bound method looked up
# and called with a tuple of arguments.
cdef class WriteEngine:
    cdef object run_write(self, object client, Command cmd, object argv)

cdef class ServerCore:
    cdef public object _special, propagating, _also, _rewritten, _prevent_propagation
    cdef public bint _gated, _gated_beyond_memory
    cdef public object dirty, dispatch, blocking, cmdstats, slow_ns, latency_tracking, monitors
    cdef public object stats, client_mem, obuf_floor, query_buffer_limit, aa_seal
    cdef public WriteEngine _active_active

cdef class ClientCore:
    cdef public object out, resp3, blocked, close_after_reply, kill_requested, last_cmd, cur_cmd, argv
    cdef public object reply_mode, multi, authenticated, subscriptions
    cdef public object last_interaction, querybuf_len, querybuf_peak, querybuf_room, pending, rbp, rbs
    # Typed, so that a handler whose c is a ClientCore reads c.db's fields and bumps
    # c.server.dirty in C: a Database, the Server (a ServerCore) or None.
    cdef public Database db
    cdef public ServerCore server

cdef bint _plain(ServerCore server, ClientCore client)

# The client's core, the command and its counters typed (their fields are C reads), the durations and the
# threshold they are compared with as C integers (slow_ns is at most 2**63 - 1). The batch, each argv
# (the parser makes lists), the command table, the counters by command and the histogram's bucket
# table are typed containers: their lookups are C calls, not the generic protocol.
# The previous command (last) is typed too: "is it the same command" is a pointer test.
@cython.locals(n=Py_ssize_t, cmd=Command, last=Command, last_found=Command, st=CommandStats, start="long long", end="long long",
               duration="long long", slow_ns="long long", latency_on=bint, plain=bint, fresh=bint,
               c_clock=bint, dirty=object, ready=dict, waiters=dict, argv=list, dispatch=dict, by_cmd=dict, hdr_of=list,
               hist=list, idx=Py_ssize_t, table_ns="long long", write="long long", noscript="long long")
cpdef tuple execute_all(ServerCore server, ClientCore client, list commands, Py_ssize_t i=*)

# The handler called in C when its module gave the command a C entry for it (table.pxd's
# Command.centry, a typed handler: strings.pxd, ...) and the handler is still that one;
# otherwise the Python call it always was. The client is a ClientCore (execute_all's type),
# which the entries cast to without a check.
cdef inline object _c_call(Command cmd, object client, object argv):
    if cmd.centry is not NULL and cmd.centry_of is cmd.handler:
        return cmd.centry(client, argv)
    return cmd.handler(client, argv)

# Whether this module runs compiled, and the clock the loop reads when it does: CLOCK_MONOTONIC
# (what perf_counter_ns reads on Linux) read in C, with no int object made and unboxed per reading.
cdef bint _COMPILED

cdef inline long long _c_monotonic_ns() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec * 1000000000LL + ts.tv_nsec
