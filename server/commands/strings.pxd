# Cython declarations for strings.py (its "augmenting" .pxd): the compiled build's forms of
# a few helpers; the .py stays the reference and runs unchanged without them. See
# docs/hot-core.md. The handlers themselves stay untyped (a .pxd cannot type a decorated def).
cimport cython
from cpython.bytes cimport PyBytes_FromStringAndSize

cdef bint _COMPILED

# A counter's value (INCR/DECR/INCRBY/DECRBY check it is within int64 first) written as its
# decimal digits into a C buffer: one bytes object, no str.
@cython.cdivision(True)
cdef inline bytes _c_counter_bytes(long long v):
    cdef unsigned long long u
    cdef char buf[20]
    cdef Py_ssize_t pos = 20
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
    return PyBytes_FromStringAndSize(buf + pos, 20 - pos)

from rill.storage.keyspace cimport Database

# GET, SET, INCR and MSET with the database typed (keyspace.pxd): its dicts, flags and
# lookups are C reads and calls. The handlers are registered after their definition (a .pxd
# cannot type a decorated def).
@cython.locals(db=Database)
cpdef get(c, argv)

@cython.locals(db=Database)
cpdef set_(c, argv)

@cython.locals(db=Database, expires=dict, n=Py_ssize_t, j=Py_ssize_t)
cpdef mset(c, argv)

@cython.locals(db=Database)
cpdef incr(c, argv)

@cython.locals(db=Database)
cpdef _incr(c, key, incr)

cpdef _expire_if_needed(Database db, key)
