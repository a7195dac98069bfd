# Cython declarations for rax.py (its "augmenting" .pxd): the compiled build's types; the
# .py stays the reference and runs unchanged without them. See docs/hot-core.md.
#
# Every PEL and every stream's node index is a Rax. As an extension type its block lists
# are C fields (no attribute lookup each time a method reads one) and typed locals make
# their lengths, items and slices C-API calls; the PEL's bulk operations (XREADGROUP's
# extend, XACK's pop_many, last_key) are cpdef, so groups.pxd, which types the PELs as
# Rax, calls them in C. Keys and values stay Python objects (128-bit ints, NACKs, nodes).
cimport cython
from cpython.object cimport PyObject_RichCompareBool, Py_EQ, Py_LT

cdef bint _COMPILED


cdef class Rax:
    cdef public list _kb, _vb, _mx
    cdef public Py_ssize_t _n

    @cython.locals(mx=list, kb=list, vb=list, bi=Py_ssize_t, i=Py_ssize_t)
    cpdef get(self, key, default=*)

    @cython.locals(mx=list, kb=list, vb=list, bi=Py_ssize_t, i=Py_ssize_t, half=Py_ssize_t)
    cpdef bint insert(self, key, value) except -1

    @cython.locals(n=Py_ssize_t, mx=list, kbs=list, vbs=list, kb=list, i=Py_ssize_t,
                   j=Py_ssize_t, room=Py_ssize_t)
    cpdef extend(self, list keys, list values)

    @cython.locals(out=list, kbs=list, vbs=list, mx=list, kb=list, vb=list, removed=Py_ssize_t,
                   n=Py_ssize_t, j=Py_ssize_t, bi=Py_ssize_t, i=Py_ssize_t, nb=Py_ssize_t,
                   m=Py_ssize_t, k=Py_ssize_t)
    cpdef list pop_many(self, list keys, default=*)

    cpdef last_key(self)


# bisect_left(a, x) over a block or the block maxes, in C: the same loop as the bisect
# module's, without a Python call around it (the module function's argument parsing and
# result int were most of a short block's bisect).
cdef inline Py_ssize_t _c_bisect_left(list a, object x) except -1:
    cdef Py_ssize_t lo = 0
    cdef Py_ssize_t hi = len(a)
    cdef Py_ssize_t mid
    cdef int r
    while lo < hi:
        mid = (lo + hi) >> 1
        r = PyObject_RichCompareBool(a[mid], x, Py_LT)
        if r < 0:
            return -1
        if r:
            lo = mid + 1
        else:
            hi = mid
    return lo


# pop_many's run: how many of keys[j:j+m] equal kb[i:i+m] pair by pair from the start (the
# first pair is known equal), compared in place where the .py compares two slices.
cdef inline Py_ssize_t _c_run(list keys, Py_ssize_t j, list kb, Py_ssize_t i, Py_ssize_t m) except -1:
    cdef Py_ssize_t k = 1
    cdef int r
    while k < m:
        r = PyObject_RichCompareBool(keys[j + k], kb[i + k], Py_EQ)
        if r < 0:
            return -1
        if not r:
            break
        k += 1
    return k
