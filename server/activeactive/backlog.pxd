# Cython declarations for backlog.py (its "augmenting" .pxd): types for the compiled
# build; the .py stays the reference and runs unchanged without them. See docs/hot-core.md.
# The two classes become extension types, so their fields are C reads and writes, not
# slot descriptors found by a generic attribute lookup; append (once per effect made)
# reads its chunk's as C integers.
cimport cython

cdef class _Chunk:
    cdef public object buf, meta
    cdef public Py_ssize_t size, top, seq, count, used, head

cdef class Backlog:
    cdef public object limit, nbytes, first_seq, _count, _chunks, _deletions

    @cython.locals(c=_Chunk, n=Py_ssize_t, count=Py_ssize_t, used=Py_ssize_t, end=Py_ssize_t,
                   at=Py_ssize_t, need=Py_ssize_t)
    cpdef append(self, seq, wire, ts_ms)
