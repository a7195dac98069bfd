# Cython declarations for streams.py (its "augmenting" .pxd): types for the compiled
# build; the .py stays the reference and runs unchanged without them. See docs/hot-core.md.
cimport cython
from posix.time cimport CLOCK_REALTIME, clock_gettime, timespec

from rill.server.fastpath cimport ClientCore, ServerCore
from rill.storage.keyspace cimport Database
from rill.storage.stream.stream cimport _StreamCore

# XADD's common form: the stream as its typed core (last_id, add() and the halves add()
# keeps of the ID it made are C-level), the database typed (its lookup a C call, its
# watched keys a C read). The new ID's halves are C integers, formatted without a str per
# number. The client and server typed (fastpath.pxd's ClientCore, ServerCore, as HSET's):
# c.db, c.server, server.blocking and server.dirty are C reads, not attribute lookups.
@cython.locals(argc=Py_ssize_t, s=_StreamCore, db=Database, server=ServerCore)
cpdef xadd(ClientCore c, argv)

# XADD's C entry for the dispatcher (table.pxd's Command.centry), bound by the module
# after registering it: a C call in place of a Python one.
from rill.server.commands.table cimport Command, _c_set_entry

cdef inline object _e_xadd(object c, object argv):
    return xadd(<ClientCore>c, argv)

# The reply's ID, its digits written through a pointer into a new bytes (fastread's, which
# the stream reads use too).
from rill.storage.stream.fastread cimport _id_bytes

# An Active-Active stream's own XADD (active.pxd), a C call from xadd.
from rill.storage.stream.active cimport _add_own

cdef bint _COMPILED

# The server whose stream-node-max-* Stream's class attributes hold (None: none, or its
# limits changed since): a C global, so XADD's check is one pointer compare.
cdef object _limits_of

# The wall clock in milliseconds as Redis's mstime() has it (CLOCK_REALTIME, whole ms),
# read in C: time.time() was a module lookup, a Python call and a float to int.
cdef inline long long _c_wall_ms() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_REALTIME, &ts)
    return <long long>ts.tv_sec * 1000 + ts.tv_nsec // 1000000

# cpdef, so that XADD's call of it is a C call (the clock hook, then _c_wall_ms).
cpdef object now_ms()

# XRANGE and XREVRANGE (the bench's XRANGE COUNT 10 and COUNT 100 rows) with the client and
# its database typed and C entries: the dispatcher's call of the handler, the handler's of
# _xrange and the key's lookup are C calls (stream_read's check written in _xrange), where
# each was a Python call.
@cython.locals(argc=Py_ssize_t, j=Py_ssize_t, db=Database)
cpdef _xrange(ClientCore c, argv, bint rev)
cpdef xrange_(ClientCore c, argv)
cpdef xrevrange(ClientCore c, argv)

cdef inline object _e_xrange(object c, object argv):
    return xrange_(<ClientCore>c, argv)

cdef inline object _e_xrevrange(object c, object argv):
    return xrevrange(<ClientCore>c, argv)
