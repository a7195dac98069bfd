# Cython declarations for stream.py (its "augmenting" .pxd): types for the compiled build;
# the .py stays the reference and runs unchanged without them. See docs/hot-core.md.
cimport cython

# The read-side notes (cache.py): C calls from here.
from rill.storage.stream.cache cimport _nc_get, _nc_served

cdef class _StreamCore:
    # Public metadata (IDs are 128-bit ints, beyond any C type) and the parts other
    # modules read: persistence (_rax), footprint (_t_fields, _ghost, _cgroups).
    cdef public Py_ssize_t length
    cdef public object last_id, first_id, max_deleted_entry_id, entries_added
    cdef public object _rax, _cgroups, idmp, _ghost, _lv_key, _lv
    # The tail-node cache: the master ID as its two 64-bit halves, the counters as C ints.
    cdef public bytearray _t_lp
    cdef public object _t_key
    cdef public unsigned long long _t_ms, _t_seq
    cdef public list _t_fields
    cdef public Py_ssize_t _t_nf, _t_count, _t_deleted, _t_xbytes, _t_nele, _t_res
    # The last ID add() made, kept with its two halves: they describe last_id exactly while
    # last_id is this very object (ints are immutable), so XADD's next ID and its reply are
    # C arithmetic on them. Whatever sets last_id otherwise (XSETID, a load, an
    # Active-Active merge) makes it another object and the halves are simply not used:
    # nothing else has to keep them. Only add() writes them; None at first (no ID is None).
    cdef readonly object _l_id
    cdef readonly unsigned long long _l_ms, _l_seq

    @cython.locals(fv=list, ms="unsigned long long", seq="unsigned long long",
                   nm="unsigned long long")
    cpdef add(self, fields_values, sid=*, now_ms=*)
    # add()'s append, the ID's halves given (an Active-Active stream's own add calls it on
    # its sub-stream: no 128-bit compare or split of the ID again).
    @cython.locals(lp=bytearray, d="long long", tot=Py_ssize_t, nfv=Py_ssize_t, nf=Py_ssize_t,
                   i=Py_ssize_t, n=Py_ssize_t, count=Py_ssize_t, nele=Py_ssize_t, mb="long long",
                   me="long long", same=bint, tf=list, cached=tuple, e=bytearray)
    cdef object _append(self, list fv, object sid, unsigned long long ms, unsigned long long seq)

cdef extern from "Python.h":
    int _PyLong_Sign(object)
    size_t _PyLong_NumBits(object) except? -1

# Whether add()'s clock reading is an int that a C unsigned 64-bit integer holds (anything
# else takes the general path, which computes with Python ints as before).
cdef inline bint _fits_u64(object x) except -1:
    return type(x) is int and _PyLong_Sign(x) >= 0 and _PyLong_NumBits(x) <= 64

from cpython.bytearray cimport PyByteArray_Resize

from libc.string cimport memcpy

cdef extern from "Python.h":
    ctypedef struct PyByteArrayObject:
        Py_ssize_t ob_alloc
        char *ob_bytes
        char *ob_start
    void Py_SET_SIZE(object, Py_ssize_t)

# The tail node's growth to n bytes, the new ones the caller's to write. Within the room
# the buffer has, only its size changes: PyByteArray_Resize would give a buffer less than
# half full back to the allocator (shrunk to fit), and a new tail is given its whole node's
# room at once (_c_room), which the appends must keep so that the tail never moves.
cdef inline int _c_grow(bytearray lp, Py_ssize_t n) except -1:
    cdef PyByteArrayObject *o = <PyByteArrayObject *>lp
    if o.ob_bytes != NULL and n >= len(lp) and n + (o.ob_start - o.ob_bytes) < o.ob_alloc:
        Py_SET_SIZE(lp, n)
        o.ob_start[n] = 0  # the trailing NUL every bytearray keeps
        return 0
    return PyByteArray_Resize(lp, n)

# Room for cap bytes in the tail's buffer, its length unchanged (stream.py's _reserve,
# without the half-full rule: _c_grow keeps the room).
cdef inline int _c_room(bytearray lp, Py_ssize_t cap) except -1:
    cdef PyByteArrayObject *o = <PyByteArrayObject *>lp
    cdef Py_ssize_t n = len(lp)
    if o.ob_bytes != NULL and cap > o.ob_alloc - (o.ob_start - o.ob_bytes):
        PyByteArray_Resize(lp, cap - 1)
        Py_SET_SIZE(lp, n)
        (<PyByteArrayObject *>lp).ob_start[n] = 0
    return 0

# add()'s general entry, written apart as e, copied over the tail's EOF byte, EOF after it.
cdef inline int _c_put_entry(bytearray lp, bytearray e) except -1:
    cdef Py_ssize_t n = len(lp) - 1
    cdef Py_ssize_t k = len(e)
    _c_grow(lp, n + k + 1)
    cdef char *dst = (<PyByteArrayObject *>lp).ob_start
    memcpy(dst + n, (<PyByteArrayObject *>e).ob_start, k)
    dst[n + k] = <char>0xFF
    return 0

# The common appended entry in one pre-sized write: C offsets, the bytes read and written
# through pointers.
@cython.locals(need=Py_ssize_t, i=Py_ssize_t, n=Py_ssize_t, start=Py_ssize_t, p=Py_ssize_t,
               k=Py_ssize_t, dst=cython.p_uchar, sp=cython.p_uchar, v=bytes, e1=bytes, e2=bytes,
               e3=bytes, src=bytes)
cdef Py_ssize_t _append_same(bytearray lp, list fv, Py_ssize_t nfv, Py_ssize_t nf, long long dms,
                             long long dseq) except -1

# Module globals read on every append, as C-level variables (no dictionary lookup). Not
# visible as module attributes when compiled: only names no other module reads from here.
cdef bint _COMPILED
cdef tuple _SMALL_INT_ELEM, _STR6_HDR, _STR6_BL, _NUMSTART
cdef bytes _E_FLAGS_SAME, _E_FLAGS_NONE
cdef Py_ssize_t LP_HDR_NUMELE_UNKNOWN
