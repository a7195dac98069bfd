# Cython declarations for strings.py (its "augmenting" .pxd): the compiled build's forms of
# a few helpers; the .py stays the reference and runs unchanged without them. See
# docs/hot-core.md. The handlers themselves stay untyped (a .pxd cannot type a decorated def).
cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject
from cpython.ref cimport Py_REFCNT
from libc.limits cimport LLONG_MAX, LLONG_MIN
from libc.string cimport memcpy

from rill.protocol.reply cimport _c_digits, _c_read_plain

cdef bint _COMPILED
# notify.py's namespace (strings.py's _NOTIFY_NS): the notifier read as one dict lookup.
cdef dict _NOTIFY_NS

# A counter's value (INCR/DECR/INCRBY/DECRBY check it is within int64 first) written as its
# decimal digits into a C buffer: one bytes object, no str.
cdef inline bytes _c_counter_bytes(long long v):
    cdef char buf[20]
    cdef char* start = _c_digits(v, buf + 20)
    return PyBytes_FromStringAndSize(start, buf + 20 - start)

# PyBytesObject's cached hash (deprecated for readers since 3.11, still in the struct):
# a bytes object changed in place must forget the hash of its old contents.
cdef extern from "Python.h":
    ctypedef struct PyBytesObject:
        Py_hash_t ob_shash

# INCR's in-place bump (Redis also increments a counter's own object in place when nothing
# else shares it): overwrite the stored bytes ``s`` with the digits of ``v`` when that is
# invisible. Only when ``s`` has exactly ``refs`` references (the database dict's and the
# caller's local), so nothing else can ever observe the change: every holder of a value
# (a reply not yet written, AOF/replication buffers, MULTI's queue, a COPY under another
# key, a memoryview, the interned one-byte singletons) owns a reference. And only when the
# new number has the same length, since a bytes object cannot be resized where it stands.
# False means nothing was touched: the caller stores a new object as before. ``s`` must be
# an exact bytes (the caller checked) and is typed object so that Cython passes the
# caller's own reference, not a cast temporary holding one more.
cdef inline bint _c_bump_in_place(object s, long long v, Py_ssize_t refs):
    cdef char buf[20]
    cdef char* start
    if Py_REFCNT(s) != refs:
        return False
    start = _c_digits(v, buf + 20)
    if buf + 20 - start != PyBytes_GET_SIZE(s):
        return False
    memcpy(PyBytes_AS_STRING(s), start, buf + 20 - start)
    (<PyBytesObject*>s).ob_shash = -1
    return True

# INCR's LRU stamp, skipped when the key already holds this very clock object (the clock
# changes about once a second, so a busy counter mostly does): a dict read instead of a store.
cdef inline void _c_stamp(dict access, object key, object clock) except *:
    if PyDict_GetItem(access, key) != <PyObject*>clock:
        access[key] = clock

# A counter's stored value plus ``by``, when the value is the common canonical integer
# string (reply.pxd's _c_read_plain: every such string is one Redis's string2ll accepts)
# and the sum stays within int64. None for anything else (longer numbers, non-numbers, an
# overflowing sum): the caller then takes the general path, which answers each case as
# Redis does. Read in C, INCR needs no cache from written strings to their values.
cdef inline object _c_incremented(bytes s, long long by):
    cdef long long v = 0
    if not _c_read_plain(<const unsigned char*>PyBytes_AS_STRING(s), PyBytes_GET_SIZE(s), &v):
        return None
    # LLONG_MAX/LLONG_MIN, C constants: the literals 9223372036854775807 and -9223372036854775807 - 1
    # made Cython box v and by and compare Python ints (two PyLongs, a subtraction, a rich
    # compare and three deallocs a call). In-process callgrind, INCR -P16, execute_all + feed:
    # 3404 -> 3033 Ir a command.
    if (by > 0 and v > LLONG_MAX - by) or (by < 0 and v < LLONG_MIN - by):
        return None
    return v + by

from rill.server.fastpath cimport ClientCore

from rill.storage.keyspace cimport Database, Keyspace, _c_data_get

# GET, SET, INCR and MSET with the client and the database typed (fastpath.pxd's ClientCore,
# keyspace.pxd's Database): c.db, the database's dicts and flags and c.server.dirty are C
# reads and writes, its lookups C calls. The handlers are registered after their
# definition (a .pxd cannot type a decorated def).
@cython.locals(db=Database, ks=Keyspace)
cpdef get(ClientCore c, argv)

@cython.locals(db=Database)
cpdef set_(ClientCore c, argv)

@cython.locals(db=Database, expires=dict, n=Py_ssize_t, j=Py_ssize_t)
cpdef mset(ClientCore c, argv)

@cython.locals(db=Database)
cpdef incr(ClientCore c, argv)

@cython.locals(db=Database)
cpdef _incr(ClientCore c, key, incr)

cpdef _expire_if_needed(Database db, key)

# The handlers' C entries for the dispatcher (table.pxd's Command.centry): a C call in
# place of a Python one, bound by the module after registering them, when compiled.
from rill.server.commands.table cimport Command, _c_set_entry

cdef inline object _e_get(object c, object argv):
    return get(<ClientCore>c, argv)

cdef inline object _e_set(object c, object argv):
    return set_(<ClientCore>c, argv)

cdef inline object _e_mset(object c, object argv):
    return mset(<ClientCore>c, argv)

cdef inline object _e_incr(object c, object argv):
    return incr(<ClientCore>c, argv)
