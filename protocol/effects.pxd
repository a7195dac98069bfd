# Cython declarations for effects.py (its "augmenting" .pxd): types for the compiled
# build; the .py stays the reference and runs unchanged without them. See docs/hot-core.md.
cimport cython
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.string cimport memcpy

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

# A record's header and clock, written at dst: version, origin, seq and ts (8 bytes each,
# little-endian), the clock's entry count, then the clock itself (19 + clen bytes). The
# callers have checked every range.
cdef inline void _c_put_header(unsigned char* dst, object origin, unsigned long long s,
                               unsigned long long t, bytes clock, Py_ssize_t clen) noexcept:
    cdef int k
    dst[0] = 2  # RECORD_VERSION
    dst[1] = <unsigned char>(<int>origin)
    for k in range(8):
        dst[2 + k] = <unsigned char>(s & 0xFF)
        s >>= 8
        dst[10 + k] = <unsigned char>(t & 0xFF)
        t >>= 8
    dst[18] = <unsigned char>(clen // 9)
    memcpy(dst + 19, PyBytes_AS_STRING(clock), clen)


# encode_compact's usual record, compiled: the size worked out first, then the header, the
# clock and every op written into one new bytes (no parts list, no join). None when anything
# is unusual (a count or length of 255 or more, a number out of the header's range, an op
# that is not a (db, list of bytes) pair): the .py's general form then makes it, or raises
# what struct raises.
cdef inline object _c_encode_compact(object origin, object seq, object ts, object clock, object ops):
    cdef Py_ssize_t size, nops, argc, n, clen
    cdef object pair, op, a, db
    cdef unsigned char* dst
    cdef bytes out
    if (type(clock) is not bytes or type(ops) is not list or type(origin) is not int
            or type(seq) is not int or type(ts) is not int):
        return None
    if not (0 <= origin < 256 and 0 <= seq <= 0xFFFFFFFFFFFFFFFF and 0 <= ts <= 0xFFFFFFFFFFFFFFFF):
        return None
    clen = PyBytes_GET_SIZE(clock)
    nops = len(<list>ops)
    if clen // 9 >= 256 or nops >= 255:
        return None
    size = 19 + clen + 1
    for pair in <list>ops:
        if type(pair) is not tuple or len(<tuple>pair) != 2:
            return None
        db = (<tuple>pair)[0]
        op = (<tuple>pair)[1]
        if type(op) is not list or type(db) is not int or not 0 <= db < 255:
            return None
        argc = len(<list>op)
        if argc >= 255:
            return None
        size += 2
        for a in <list>op:
            if type(a) is not bytes:
                return None
            n = PyBytes_GET_SIZE(a)
            if n >= 255:
                return None
            size += 1 + n
    out = PyBytes_FromStringAndSize(NULL, size)
    dst = <unsigned char*>PyBytes_AS_STRING(out)
    _c_put_header(dst, origin, seq, ts, <bytes>clock, clen)
    dst += 19 + clen
    dst[0] = <unsigned char>nops
    dst += 1
    for pair in <list>ops:
        op = (<tuple>pair)[1]
        dst[0] = <unsigned char>(<int>(<tuple>pair)[0])
        dst[1] = <unsigned char>len(<list>op)
        dst += 2
        for a in <list>op:
            n = PyBytes_GET_SIZE(a)
            dst[0] = <unsigned char>n
            memcpy(dst + 1, PyBytes_AS_STRING(a), n)
            dst += 1 + n
    return out


# The writer's side (effects.py's put_op, clear_section, encode_record): module functions
# the engine cimports, so an effect's op and record are C calls.
cpdef put_op(bytearray out, object db, tuple head, list tail, Py_ssize_t start)
cpdef clear_section(bytearray out)
cpdef bytes encode_record(object origin, object seq, object ts, object clock, object nops, object section)

cdef extern from "Python.h":
    void Py_SET_SIZE(object o, Py_ssize_t size)

# put_op's usual op: the size worked out first, one resize, then each argument's length
# byte and bytes. False (nothing written) when anything is unusual (a count or length of
# 255 or more, an argument not bytes): the .py's general form then writes it.
cdef inline bint _c_put_op(bytearray out, object db, tuple head, list tail, Py_ssize_t start) except -1:
    cdef Py_ssize_t size = 2, argc, n, i, old, nhead, ntail
    cdef object a
    cdef unsigned char* dst
    if type(db) is not int or not 0 <= db < 255:
        return False
    nhead = len(head)
    ntail = len(tail)
    argc = nhead + ntail - start
    if argc >= 255 or start > ntail or start < 0:
        return False
    for i in range(nhead):
        a = head[i]
        if type(a) is not bytes:
            return False
        n = PyBytes_GET_SIZE(a)
        if n >= 255:
            return False
        size += 1 + n
    for i in range(start, ntail):
        a = tail[i]
        if type(a) is not bytes:
            return False
        n = PyBytes_GET_SIZE(a)
        if n >= 255:
            return False
        size += 1 + n
    old = PyByteArray_GET_SIZE(out)
    PyByteArray_Resize(out, old + size)
    dst = <unsigned char*>PyByteArray_AS_STRING(out) + old
    dst[0] = <unsigned char>(<int>db)
    dst[1] = <unsigned char>argc
    dst += 2
    for i in range(nhead):
        a = head[i]
        n = PyBytes_GET_SIZE(a)
        dst[0] = <unsigned char>n
        memcpy(dst + 1, PyBytes_AS_STRING(a), n)
        dst += 1 + n
    for i in range(start, ntail):
        a = tail[i]
        n = PyBytes_GET_SIZE(a)
        dst[0] = <unsigned char>n
        memcpy(dst + 1, PyBytes_AS_STRING(a), n)
        dst += 1 + n
    return True

# An emptied section keeps its allocation: the size set to 0 as a bytearray's own small
# shrink does (its trailing NUL written), with no reallocation.
cdef inline void _c_clear(bytearray out) noexcept:
    if PyByteArray_GET_SIZE(out):
        Py_SET_SIZE(out, 0)
        PyByteArray_AS_STRING(out)[0] = 0

# encode_record's usual record: the header, the clock, a one-byte op count and the section
# written into one new bytes of their size. None when anything is unusual (as
# _c_encode_compact).
cdef inline object _c_encode_record(object origin, object seq, object ts, object clock, object nops, object section):
    cdef Py_ssize_t clen, slen, size
    cdef unsigned char* dst
    cdef const char* src
    cdef bytes out
    if (type(clock) is not bytes or type(origin) is not int or type(seq) is not int
            or type(ts) is not int or type(nops) is not int):
        return None
    if not (0 <= origin < 256 and 0 <= seq <= 0xFFFFFFFFFFFFFFFF and 0 <= ts <= 0xFFFFFFFFFFFFFFFF
            and 0 <= nops < 255):
        return None
    if type(section) is bytearray:
        slen = PyByteArray_GET_SIZE(section)
        src = PyByteArray_AS_STRING(section)
    elif type(section) is bytes:
        slen = PyBytes_GET_SIZE(section)
        src = PyBytes_AS_STRING(section)
    else:
        return None
    clen = PyBytes_GET_SIZE(clock)
    if clen // 9 >= 256:
        return None
    size = 19 + clen + 1 + slen
    out = PyBytes_FromStringAndSize(NULL, size)
    dst = <unsigned char*>PyBytes_AS_STRING(out)
    _c_put_header(dst, origin, seq, ts, <bytes>clock, clen)
    dst[19 + clen] = <unsigned char>(<int>nops)
    memcpy(dst + 20 + clen, src, slen)
    return out
