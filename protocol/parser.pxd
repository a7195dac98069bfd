# Cython declarations for parser.py (its "augmenting" .pxd): types for the compiled
# build; the .py stays the reference and runs unchanged without them. See docs/hot-core.md.
cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize

cdef bint _COMPILED

@cython.locals(size=Py_ssize_t, n=Py_ssize_t, cmd=list)
cdef Py_ssize_t _wire_size(list commands) except -1

@cython.locals(d=Py_ssize_t)
cdef Py_ssize_t _digits(Py_ssize_t n)

cdef class RequestParser:
    cdef public bytearray _buf
    cdef public list _argv
    cdef public Py_ssize_t _argv_bytes, _remaining, _bulklen
    cdef public object _reader
    cdef public long long max_bulk_len
    cdef public bint auth_required, failed

    @cython.locals(out=list)
    cpdef list feed(self, data)

    @cython.locals(n=Py_ssize_t, pos=Py_ssize_t, buf=bytearray, rest=bytes)
    cdef list _feed_compiled(self, data, list out)

    @cython.locals(buf=bytearray, pos=Py_ssize_t, n=Py_ssize_t, nl=Py_ssize_t,
                   end=Py_ssize_t, bulklen=Py_ssize_t, argv=list, ll=cython.longlong)
    cpdef _parse(self, list out, bint one=*)

@cython.locals(n=Py_ssize_t, i=Py_ssize_t, c=int, neg=bint, v=cython.ulonglong)
cdef long long _header_int(bytearray buf, Py_ssize_t start, Py_ssize_t end)

# ``n`` bytes of ``data`` from ``pos`` as a new bytes object: what ``data[pos:pos + n]``
# gives, without the slice object and two ints Cython's slice of a typed bytes goes through
# (PySequence_GetSlice: about 400 instructions an argument). The caller checks the range.
cdef inline bytes _c_take(bytes data, Py_ssize_t pos, Py_ssize_t n):
    return PyBytes_FromStringAndSize(PyBytes_AS_STRING(data) + pos, n)

# The bytes read as C chars (typed bytes indexed by a C integer).
@cython.locals(n=Py_ssize_t, start=Py_ssize_t, first=Py_ssize_t, count=Py_ssize_t,
               digits=Py_ssize_t, c=cython.uchar, ll=cython.longlong,
               argv=list, s=cython.p_uchar)
cpdef Py_ssize_t _scan(bytes data, Py_ssize_t pos, long long max_bulk, list out) except -1

