# Cython declarations for effects.py (its "augmenting" .pxd): types for the compiled
# build; the .py stays the reference and runs unchanged without them. See docs/hot-core.md.
cimport cython

cdef bint _COMPILED

# Fields stay Python objects: the engine (interpreted) reads them, and a typed field
# would make a new int at every read.
cdef class Effect:
    cdef public object origin, seq, ts, vc, ops, raw

@cython.locals(v=cython.ulonglong, k=Py_ssize_t)
cdef unsigned long long _uint(const unsigned char* p, Py_ssize_t i, Py_ssize_t width) except? 0xffffffffffffffff

# p points into blob (bytes): the decoder checks every bound itself.
@cython.locals(out=list, p=cython.p_const_uchar, end=Py_ssize_t, i=Py_ssize_t, start=Py_ssize_t,
               version=int, origin=int, n=Py_ssize_t, r=int, seq=cython.ulonglong, ts=cython.ulonglong,
               nops=Py_ssize_t, db=Py_ssize_t, argc=Py_ssize_t, k=Py_ssize_t,
               op=list, ops=list, vc=dict, e=Effect)
cpdef list decode_records(bytes blob, bint keep_raw=*)
