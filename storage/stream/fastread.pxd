# Cython declarations for fastread.py (its "augmenting" .pxd): types for the compiled
# build; the .py stays the reference and runs unchanged without them. See docs/hot-core.md.
cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize

# The read-side notes (cache.py): C calls from here.
from rill.storage.stream.cache cimport _note_resume

cdef extern from "Python.h":
    object _PyLong_FromByteArray(const unsigned char *bytes, size_t n, int little_endian, int is_signed)

cdef bint _COMPILED
cdef Py_ssize_t _F_DELETED, _F_SAME
cdef unsigned long long _M64

# An entry's ID as the 128-bit int from its two halves, in one call (a shift and an or of
# Python ints make three objects).
cdef inline object _c_sid(unsigned long long ms, unsigned long long seq):
    cdef unsigned char buf[16]
    cdef int j
    for j in range(8):
        buf[j] = <unsigned char>(seq >> (8 * j))
        buf[8 + j] = <unsigned char>(ms >> (8 * j))
    return _PyLong_FromByteArray(buf, 16, 1, 0)

# ``data[start:stop]`` as a new bytes object, without the slice object and two ints
# Cython's slice of a typed bytes goes through (PySequence_GetSlice, about 400
# instructions). The caller checks 0 <= start <= stop <= len(data).
cdef inline bytes _c_take(bytes data, Py_ssize_t start, Py_ssize_t stop):
    return PyBytes_FromStringAndSize(PyBytes_AS_STRING(data) + start, stop - start)

# ``ms-seq``: the digits written backwards into a C buffer, then one new bytes (bytes'
# ``%d`` goes through a str per number). XADD's reply uses it too (streams.pxd).
@cython.cdivision(True)
cdef inline bytes _id_bytes(unsigned long long ms, unsigned long long seq):
    cdef char buf[41]  # 20 digits, "-", 20 digits
    cdef Py_ssize_t p = 41
    while True:
        p -= 1
        buf[p] = <char>(48 + seq % 10)
        seq //= 10
        if seq == 0:
            break
    p -= 1
    buf[p] = 45  # "-"
    while True:
        p -= 1
        buf[p] = <char>(48 + ms % 10)
        ms //= 10
        if ms == 0:
            break
    return PyBytes_FromStringAndSize(buf + p, 41 - p)

# The one-pass walk of a node (XRANGE, XREAD, XREADGROUP): offsets and element bytes as
# C ints, the node as bytes, the entry IDs as two C halves (deltas wrap as the uint64
# masks say), the pieces appended to typed lists.
@cython.locals(lp=bytes, p=Py_ssize_t, p0=Py_ssize_t, endp=Py_ssize_t, b=Py_ssize_t,
               u=Py_ssize_t, q=Py_ssize_t, k=Py_ssize_t, n=Py_ssize_t, nf=Py_ssize_t,
               flags=Py_ssize_t, fast=bint, wrap=bint, check_start=bint, check_end=bint, compiled=bint,
               mms="unsigned long long", mseq="unsigned long long", ms="unsigned long long",
               seq="unsigned long long", d="long long", pre=list, rshdr=tuple, rint=tuple,
               rent=tuple)
cpdef tuple _fwd_node_enc(key, node, start, end, Py_ssize_t limit, list out, enc, list marks=*,
                          list sids=*)
