# Cython declarations for reply.py (its "augmenting" .pxd): types for the compiled build;
# the .py stays the reference and runs unchanged without them. See docs/hot-core.md.
cimport cython
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.long cimport PyLong_AsLongLongAndOverflow

# The tables every small reply reads, as C-level variables (no dictionary lookup); not
# visible as module attributes when compiled, so only names no other module imports.
cdef Py_ssize_t SMALL
cdef tuple BULK_HEADERS, SMALL_INTS

@cython.locals(n=Py_ssize_t)
cpdef encode_into(value, out, bint resp3)

cdef bint _COMPILED

# An integer reply's line, its digits written into a C buffer (one bytes object, no str);
# an int beyond 64 bits (no command replies one) takes bytes' %d as before.
@cython.cdivision(True)
cdef inline bytes _c_integer_line(value):
    cdef int overflow = 0
    cdef long long v = PyLong_AsLongLongAndOverflow(value, &overflow)
    cdef unsigned long long u
    cdef char buf[24]
    cdef Py_ssize_t pos = 22
    if overflow:
        return b":%d\r\n" % value
    buf[22] = 13
    buf[23] = 10
    u = (<unsigned long long>(-(v + 1))) + 1 if v < 0 else <unsigned long long>v
    while True:
        pos -= 1
        buf[pos] = <char>(48 + u % 10)
        u = u // 10
        if u == 0:
            break
    if v < 0:
        pos -= 1
        buf[pos] = 45
    pos -= 1
    buf[pos] = 58
    return PyBytes_FromStringAndSize(buf + pos, 24 - pos)
