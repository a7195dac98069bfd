# Cython declarations for stream_args.py (its "augmenting" .pxd): the compiled build's form
# of the ID parser's common case; the .py stays the reference and runs unchanged without
# it. See docs/hot-core.md.
cimport cython

cdef extern from "Python.h":
    object _PyLong_FromByteArray(const unsigned char *bytes, size_t n, int little_endian, int is_signed)

cdef bint _COMPILED

# parse_id's fast path: ``ms-seq`` or ``ms``, ASCII digits only, each within uint64, under
# 128 bytes, read in one C loop; the ID made from 16 little-endian bytes in one call.
# None for anything else (the .py's general path decides, and raises).
@cython.cdivision(True)
cdef inline object _c_parse_id(bytes arg, unsigned long long missing):
    cdef const unsigned char *s = arg
    cdef Py_ssize_t n = len(arg)
    cdef Py_ssize_t i = 0
    cdef Py_ssize_t j
    cdef unsigned long long ms = 0
    cdef unsigned long long seq = 0
    cdef unsigned long long d
    cdef unsigned char buf[16]
    if n >= 128:
        return None
    while i < n and 48 <= s[i] <= 57:
        d = s[i] - 48
        # 19 digits always fit in 64 bits: only a 20th can overflow, so only from there is
        # the check made (a multiply-high, a subtraction and a compare a digit).
        if i >= 19 and ms > (18446744073709551615ULL - d) // 10:
            return None
        ms = ms * 10 + d
        i += 1
    if i == 0:
        return None
    if i == n:
        seq = missing
    else:
        if s[i] != 45:
            return None
        i += 1
        j = i
        while i < n and 48 <= s[i] <= 57:
            d = s[i] - 48
            if i - j >= 19 and seq > (18446744073709551615ULL - d) // 10:
                return None
            seq = seq * 10 + d
            i += 1
        if i == j or i != n:
            return None
    for j in range(8):
        buf[j] = <unsigned char>(seq >> (8 * j))
        buf[8 + j] = <unsigned char>(ms >> (8 * j))
    return _PyLong_FromByteArray(buf, 16, 1, 0)


# XREAD / XREADGROUP's options, parsed once a call (every XREADGROUP of the consumer loop):
# an extension type, so the parser's ten default stores and its option stores are C slot
# writes, not generic attribute sets; the fields stay Python objects, as the handlers
# (interpreted or untyped) read them.
cdef class ReadArgs:
    cdef public object timeout, count, streams_arg, nstreams, group, consumer, noack
    cdef public object claim, maxcount, maxsize
    cpdef budget(self)

# A C call from parse_read_args (and XADD's/XTRIM's option loops) where it was a Python one.
cpdef count_arg(a)

@cython.locals(r=ReadArgs, argc=Py_ssize_t, i=Py_ssize_t, more=Py_ssize_t, n=Py_ssize_t)
cpdef ReadArgs parse_read_args(argv, bint xreadgroup, bint serving, bint script=*)
