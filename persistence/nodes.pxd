# Cython declarations for nodes.py (its "augmenting" .pxd): types for the compiled
# build; the .py stays the reference and runs unchanged without them. See docs/hot-core.md.
cimport cython

@cython.locals(b=cython.uchar, n=Py_ssize_t)
cdef Py_ssize_t _len_size(unsigned char* buf, Py_ssize_t p, Py_ssize_t end)

@cython.locals(b=cython.uchar, i=Py_ssize_t, v=cython.ulonglong)
cdef long long _len_at(unsigned char* buf, Py_ssize_t p, Py_ssize_t n)

@cython.locals(out=bytearray, dst=cython.p_uchar, ip=Py_ssize_t, iend=Py_ssize_t, op=Py_ssize_t,
               ctrl=Py_ssize_t, n=Py_ssize_t, ref=Py_ssize_t, k=Py_ssize_t)
cdef object _expand(unsigned char* buf, Py_ssize_t p, Py_ssize_t clen, Py_ssize_t ulen)

@cython.locals(buf=cython.p_uchar, end=Py_ssize_t, taken=Py_ssize_t, p=Py_ssize_t, s=Py_ssize_t,
               clen=Py_ssize_t, ulen=Py_ssize_t, n=Py_ssize_t, lp=bytes, q=cython.p_uchar)
cpdef Py_ssize_t read_nodes(bytes data, Py_ssize_t pos, Py_ssize_t count, object prev, list keys, list lps)
