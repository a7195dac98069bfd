# Cython declarations for connection.py (its "augmenting" .pxd): types for the compiled
# build; the .py stays the reference and runs unchanged without them. See docs/hot-core.md.
#
# A read's work around the dispatcher (data_received, _run, flush, the batch's write_out)
# read the connection's own fields a dozen times a read, each a generic attribute lookup on
# an ordinary object, and called each other through bound methods. Here the connection and
# the reply batch are extension types: their fields are C reads, the client's core
# (fastpath's ClientCore: out, blocked, close_after_reply, kill_requested) and the parser's
# state are C fields too, and the calls between these methods and into the parser and the
# dispatcher's loop are C calls.
cimport cython
from posix.time cimport CLOCK_REALTIME, clock_gettime, timespec

from rill.protocol.parser cimport RequestParser
from rill.server.fastpath cimport ClientCore, ServerCore, execute_all
from rill.server.iostats cimport IOStats

@cython.final
cdef class ReplyBatch:
    cdef public object server
    cdef public list queue, inbox

    cpdef add(self, Connection conn)

    @cython.locals(queue=list, inbox=list, conn=Connection)
    cpdef run(self, keep=*)

@cython.final
cdef class Connection:
    cdef public object server, transport, tls
    cdef public ClientCore client
    cdef public RequestParser parser
    cdef public bint closed, _backlogged, _flush_scheduled, _write_queued, _unix, _repl
    cdef public ReplyBatch _batch

    @cython.locals(client=ClientCore, server=ServerCore, parser=RequestParser, n=Py_ssize_t, qlen=Py_ssize_t,
                   held=Py_ssize_t, bulk=Py_ssize_t, commands=list, stats=IOStats)
    cpdef data_received(self, data)

    @cython.locals(client=ClientCore, n=Py_ssize_t, i=Py_ssize_t, postponed=bint)
    cpdef _run(self, list commands)

    @cython.locals(client=ClientCore)
    cpdef flush(self)

    @cython.locals(client=ClientCore, server=ServerCore, out=list, n=Py_ssize_t, stats=IOStats)
    cpdef write_out(self)

cdef bint _COMPILED

# The wall clock time.time() reads (CLOCK_REALTIME), read in C: a client's last interaction,
# set on every read.
cdef inline double _c_wall() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_REALTIME, &ts)
    return <double>ts.tv_sec + <double>ts.tv_nsec * 1e-9
