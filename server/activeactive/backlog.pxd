# Cython declarations for backlog.py (its "augmenting" .pxd): types for the compiled
# build; the .py stays the reference and runs unchanged without them. See docs/hot-core.md.
# The two classes become extension types, so their fields are C reads and writes, not
# slot descriptors found by a generic attribute lookup; append (once per effect made)
# reads its chunk's as C integers.
cimport cython
from cpython.bytes cimport PyBytes_AS_STRING
from libc.string cimport memcpy

cdef bint _COMPILED

# meta and view are typed views of the chunk's mapping: a record's end and time are
# stored as C words, and its bytes copied by _c_put.
cdef class _Chunk:
    cdef public object buf
    cdef long long[::1] meta
    cdef unsigned char[::1] view
    cdef public Py_ssize_t size, top, seq, count, used, head, dels

# Record wire (n bytes) into chunk c at offset used, its end and time at meta[at] and
# meta[at - 1] (append checked that it fits). Bytes are memcpy'd; any other buffer goes
# through the mapping's slice assignment, as in the .py.
cdef inline void _c_put(_Chunk c, Py_ssize_t used, object wire, Py_ssize_t n, Py_ssize_t at,
                        long long end, long long ts) except *:
    if type(wire) is bytes:
        memcpy(&c.view[used], PyBytes_AS_STRING(wire), n)
    else:
        c.buf[used:used + n] = wire
    c.meta[at] = end
    c.meta[at - 1] = ts

# The byte counts and the sequence numbers are C integers (sequences and sizes stay far
# below 2**63): append, once per effect made, was Python int arithmetic on each of them
# (in-process callgrind of a writer's XADD: see docs/hot-core.md, backlog.py's row).
cdef class Backlog:
    cdef public long long limit, nbytes, first_seq, _count
    cdef public object _chunks, _deletions

    @cython.locals(c=_Chunk, n=Py_ssize_t, count=Py_ssize_t, used=Py_ssize_t, end=Py_ssize_t,
                   at=Py_ssize_t, need=Py_ssize_t)
    cpdef append(self, long long seq, wire, long long ts_ms, bint may_delete=*)
