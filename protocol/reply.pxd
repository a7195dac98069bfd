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

# The array writers (bulk_array, ranged_array): the reply's size is summed first, a Raw of that
# size is made (bytes(n): no copy) and every header and value written through a char*. The
# Raw is new and not yet seen by anyone, so writing into it is safe. Declared here under _c_
# names, reached from the .py only behind _COMPILED.
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.float cimport PyFloat_AS_DOUBLE
from libc.string cimport memcpy

@cython.cdivision(True)
cdef inline Py_ssize_t _c_ndigits(unsigned long long u) noexcept nogil:
    cdef Py_ssize_t d = 1
    while u >= 10:
        u = u // 10
        d += 1
    return d

# Writes the nd digits of u at p; returns p + nd.
@cython.cdivision(True)
cdef inline char* _c_put_digits(char* p, unsigned long long u, Py_ssize_t nd) noexcept nogil:
    cdef char* q = p + nd
    while True:
        q -= 1
        q[0] = <char>(48 + u % 10)
        u = u // 10
        if u == 0:
            break
    return p + nd

# ``v``'s decimal digits (with a '-' when negative) written so that they end just before
# ``end``; returns where they start. At most 20 bytes (INT64_MIN). What the integer lines
# here and the counters strings.pxd stores are written with.
cdef inline char* _c_digits(long long v, char* end) noexcept nogil:
    cdef unsigned long long u = (<unsigned long long>(-(v + 1))) + 1 if v < 0 else <unsigned long long>v
    cdef Py_ssize_t nd = _c_ndigits(u)
    end -= nd
    _c_put_digits(end, u, nd)
    if v < 0:
        end -= 1
        end[0] = 45
    return end

# The reverse of _c_digits for the common case: the n bytes at p in string2ll's plain
# form, "0" or an optional '-' and 1 to 18 digits without a leading zero (always within
# int64, so no overflow check while reading), stored at out. False for anything else ("",
# "-", "-0", "+1", "01", 19 or 20 digits, a non-digit): the caller then takes its general
# path, which accepts or refuses the text exactly as Redis does. LRANGE's indices and
# INCR's stored counters are read with it (lists.pxd, strings.pxd).
cdef inline bint _c_read_plain(const unsigned char* p, Py_ssize_t n, long long* out) noexcept nogil:
    cdef Py_ssize_t i = 0
    cdef long long v = 0
    if n == 1 and p[0] == 48:
        out[0] = 0
        return True
    if n > 0 and p[0] == 45:
        i = 1
    if i == n or n - i > 18 or p[i] == 48:
        return False
    while i < n:
        if p[i] < 48 or p[i] > 57:
            return False
        v = v * 10 + (p[i] - 48)
        i += 1
    out[0] = -v if p[0] == 45 else v
    return True

# An integer reply's line, its digits written into a C buffer (one bytes object, no str);
# an int beyond 64 bits (no command replies one) takes bytes' %d as before.
cdef inline bytes _c_integer_line(value):
    cdef int overflow = 0
    cdef long long v = PyLong_AsLongLongAndOverflow(value, &overflow)
    cdef char buf[24]
    cdef char* start
    if overflow:
        return b":%d\r\n" % value
    buf[22] = 13
    buf[23] = 10
    start = _c_digits(v, buf + 22) - 1
    start[0] = 58
    return PyBytes_FromStringAndSize(start, buf + 24 - start)

# An integer reply: the ready-made line of SMALL_INTS (passed in as small_ints: a module that
# cimports this file cannot read reply's C globals) for 0 <= v < its length, else the digits
# written by _c_integer_line. The int is read once in C, where the range test in the .py
# made SMALL a Python int each time and compared twice.
cdef inline object _c_int_reply(object value, tuple small_ints):
    cdef int overflow = 0
    cdef long long v = PyLong_AsLongLongAndOverflow(value, &overflow)
    if overflow == 0 and 0 <= v < len(small_ints):
        return small_ints[v]
    return _c_integer_line(value)

# "<lead><n>\r\n" at p ('*' for an array, '$' for a bulk header); returns the end.
cdef inline char* _c_put_line(char* p, char lead, Py_ssize_t n) noexcept nogil:
    p[0] = lead
    p = _c_put_digits(p + 1, <unsigned long long>n, _c_ndigits(<unsigned long long>n))
    p[0] = 13
    p[1] = 10
    return p + 2

# A value as a bulk string at p; returns the end.
cdef inline char* _c_put_bulk(char* p, const char* data, Py_ssize_t n) noexcept nogil:
    p = _c_put_line(p, 36, n)
    memcpy(p, data, n)
    p[n] = 13
    p[n + 1] = 10
    return p + n + 2

# A bulk string's size on the wire.
cdef inline Py_ssize_t _c_bulk_size(Py_ssize_t n) noexcept nogil:
    return 5 + _c_ndigits(<unsigned long long>n) + n

# One bytes value as a bulk string reply: a single new bytes object sized up front, the header,
# value and CRLF written through a char*. The .py's BULK_HEADERS[n] + value + b"\r\n" made two
# objects (the first one thrown away) through two generic concatenations.
cdef inline bytes _c_bulk_reply(bytes value):
    cdef Py_ssize_t n = PyBytes_GET_SIZE(value)
    cdef bytes r = PyBytes_FromStringAndSize(NULL, _c_bulk_size(n))
    _c_put_bulk(PyBytes_AS_STRING(r), PyBytes_AS_STRING(value), n)
    return r

@cython.boundscheck(False)
@cython.wraparound(False)
cdef inline object _c_bulk_array(object raw, list values):
    cdef Py_ssize_t n = len(values)
    cdef Py_ssize_t size = 3 + _c_ndigits(<unsigned long long>n)
    cdef Py_ssize_t i
    cdef object v, r
    cdef char* p
    for i in range(n):
        v = values[i]
        if type(v) is not bytes:
            return None
        size += _c_bulk_size(PyBytes_GET_SIZE(v))
    r = raw(size)
    p = _c_put_line(PyBytes_AS_STRING(r), 42, n)
    for i in range(n):
        v = values[i]
        p = _c_put_bulk(p, PyBytes_AS_STRING(v), PyBytes_GET_SIZE(v))
    return r

# Whether a score is written as its integer digits: a float, integral, nonzero (-0.0
# prints "-0"), under 2**53 in magnitude, where %.17g prints exactly those digits.
cdef inline bint _c_integral_score(object score, long long* out) noexcept:
    cdef double d
    cdef long long v = 0
    if type(score) is not float:
        return False
    d = PyFloat_AS_DOUBLE(score)
    if not (-9007199254740992.0 < d < 9007199254740992.0) or d == 0.0:
        return False
    v = <long long>d
    if <double>v != d:
        return False
    out[0] = v
    return True

# A score as a bulk string at p (an integral one, v); returns the end.
cdef inline char* _c_put_int_bulk(char* p, long long v) noexcept nogil:
    cdef unsigned long long u = <unsigned long long>(-v) if v < 0 else <unsigned long long>v
    cdef Py_ssize_t nd = _c_ndigits(u)
    p = _c_put_line(p, 36, nd + (v < 0))
    if v < 0:
        p[0] = 45
        p += 1
    p = _c_put_digits(p, u, nd)
    p[0] = 13
    p[1] = 10
    return p + 2

@cython.boundscheck(False)
@cython.wraparound(False)
cdef inline object _c_ranged_array(object raw, list items, bint withscores, object fmt):
    cdef Py_ssize_t n = len(items)
    cdef Py_ssize_t size = 3 + _c_ndigits(<unsigned long long>(2 * n if withscores else n))
    cdef Py_ssize_t i
    cdef long long v = 0
    cdef object item, m, f, r
    cdef list formatted = None  # fmt's bytes for the scores not written as digits, by index
    cdef char* p
    for i in range(n):
        item = items[i]
        if type(item) is not tuple or len(<tuple>item) != 2:
            return None
        m = (<tuple>item)[1]
        if type(m) is not bytes:
            return None
        size += _c_bulk_size(PyBytes_GET_SIZE(m))
        if withscores:
            if _c_integral_score((<tuple>item)[0], &v):
                size += _c_bulk_size(_c_ndigits(<unsigned long long>(-v) if v < 0 else <unsigned long long>v) + (v < 0))
            else:
                f = fmt((<tuple>item)[0])
                if type(f) is not bytes:
                    return None
                if formatted is None:
                    formatted = [None] * n
                formatted[i] = f
                size += _c_bulk_size(PyBytes_GET_SIZE(f))
    if len(items) != n:  # fmt is the caller's: never trust the list kept its length
        return None
    r = raw(size)
    p = _c_put_line(PyBytes_AS_STRING(r), 42, 2 * n if withscores else n)
    for i in range(n):
        item = items[i]
        m = (<tuple>item)[1]
        p = _c_put_bulk(p, PyBytes_AS_STRING(m), PyBytes_GET_SIZE(m))
        if withscores:
            if formatted is not None and formatted[i] is not None:
                f = formatted[i]
                p = _c_put_bulk(p, PyBytes_AS_STRING(f), PyBytes_GET_SIZE(f))
            else:
                _c_integral_score((<tuple>item)[0], &v)
                p = _c_put_int_bulk(p, v)
    return r
