# Cython declarations for active.py (its "augmenting" .pxd): types for the compiled
# build; the .py stays the reference and runs unchanged without them. See docs/hot-core.md.
# Only the numbers of a peer's ops are typed; the classes stay ordinary (untyped) ones.
cimport cython

cdef bint _COMPILED

@cython.locals(v=cython.longlong, c=int)
cdef long long _dec(const unsigned char* p, Py_ssize_t start, Py_ssize_t end) noexcept

@cython.locals(v=cython.longlong)
cdef object _num(object b)

@cython.locals(p=cython.p_const_uchar, n=Py_ssize_t, i=Py_ssize_t, a=cython.longlong, z=cython.longlong,
               hi=object)
cpdef object _pid(object b)
