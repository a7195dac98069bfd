# Cython declarations for lists.py (its "augmenting" .pxd): types for the compiled build;
# the .py stays the reference and runs unchanged without them. See docs/hot-core.md.
cimport cython

from rill.server.fastpath cimport ClientCore
from rill.storage.keyspace cimport Database

# The push and the count-less pop every producer and consumer makes, with the client and
# the database typed (fastpath.pxd's ClientCore, keyspace.pxd): c.db, c.server.dirty, the
# database's lookups and its watched dict are C reads, writes and calls. Both are plain
# helpers (no decorator), so they are typed where they stand.
@cython.locals(db=Database)
cpdef _push(ClientCore c, argv, bint left, bint xx)

@cython.locals(db=Database)
cpdef _pop_one(ClientCore c, key, bint left)

cdef bint _COMPILED

# The push and count-less pop commands typed too, so that their calls of _push and _pop_one
# are C calls; registered after their definition (a .pxd cannot type a decorated def).
cpdef lpush(ClientCore c, argv)
cpdef rpush(ClientCore c, argv)
cpdef lpop(ClientCore c, argv)
cpdef rpop(ClientCore c, argv)

# The handlers' C entries for the dispatcher (table.pxd's Command.centry): a C call in
# place of a Python one, bound by the module after registering them, when compiled.
from rill.server.commands.table cimport Command, _c_set_entry

cdef inline object _e_lpush(object c, object argv):
    return lpush(<ClientCore>c, argv)

cdef inline object _e_rpush(object c, object argv):
    return rpush(<ClientCore>c, argv)

cdef inline object _e_lpop(object c, object argv):
    return lpop(<ClientCore>c, argv)

cdef inline object _e_rpop(object c, object argv):
    return rpop(<ClientCore>c, argv)

# LRANGE (the LRANGE_100 row: a 100-element reply from a list), typed so that the dispatcher
# calls it through its C entry and its common case runs in C (_c_lrange below); registered
# after its definition like the pushes.
cpdef lrange(ClientCore c, argv)

cdef inline object _e_lrange(object c, object argv):
    return lrange(<ClientCore>c, argv)

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.ref cimport Py_INCREF
from rill.protocol.reply cimport _c_bulk_array, _c_read_plain

# An index argument in string2ll's plain form (reply.pxd's _c_read_plain). False for
# anything else, or not bytes: the caller then reads it with _long, which accepts or refuses
# it exactly as Redis does.
cdef inline bint _c_index(object arg, long long* out) noexcept:
    if type(arg) is not bytes:
        return False
    return _c_read_plain(<const unsigned char*>PyBytes_AS_STRING(arg), PyBytes_GET_SIZE(arg), out)

# LRANGE's common case: both indices plain (_c_index), else None before anything is looked
# up, and the .py's general path reads them (and replies their error, which Redis gives
# before it looks the key up). Then the key's lookup through the typed database, the span
# clamped as storage/ranges.py's index_span does, the elements taken from the deque by its
# iterator from the nearer end (what ListValue.range does, without islice and reverse: a
# span read from the tail is stored from the last slot down) and the reply written into one
# Raw by reply.pxd's _c_bulk_array. Its arguments are lists.py's own objects (a .pxd's inline
# code does not read the module's globals): the list type, Raw, EMPTY_ARRAY, WRONGTYPE and
# _bulk_array (the general reply writer, for what the C writer leaves).
cdef inline object _c_lrange(ClientCore c, object argv, object list_type, object raw, object empty,
                             object wrongtype, object bulk_array):
    cdef long long start = 0, end = 0
    cdef Py_ssize_t n, k, count
    cdef Database db
    cdef list items
    cdef object lst, it, v, r
    if not _c_index(argv[2], &start) or not _c_index(argv[3], &end):
        return None
    db = c.db
    lst = db.lookup_read(argv[1])
    if lst is None:
        return empty
    if type(lst) is not list_type:
        raise wrongtype
    n = len(lst)
    if start < 0:
        start += n
    if end < 0:
        end += n
    if start < 0:
        start = 0
    if start > end or start >= n:
        return empty
    if end >= n:
        end = n - 1
    count = <Py_ssize_t>(end - start + 1)
    items = PyList_New(count)
    if start <= n - 1 - end:
        it = iter(lst)
        for k in range(<Py_ssize_t>start):
            next(it)
        for k in range(count):
            v = next(it)
            Py_INCREF(v)
            PyList_SET_ITEM(items, k, v)
    else:
        it = reversed(lst)
        for k in range(<Py_ssize_t>(n - 1 - end)):
            next(it)
        for k in range(count - 1, -1, -1):
            v = next(it)
            Py_INCREF(v)
            PyList_SET_ITEM(items, k, v)
    r = _c_bulk_array(raw, items)
    if r is None:  # an element not bytes: lists.py's _bulk_array writes it
        r = bulk_array(items)
    return r
