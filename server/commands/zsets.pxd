# Cython declarations for zsets.py (its "augmenting" .pxd): types for the compiled build;
# the .py stays the reference and runs unchanged without them. See docs/hot-core.md.
cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE

from rill.protocol.reply cimport _c_bulk_size, _c_integral_score, _c_ndigits, _c_put_bulk, _c_put_int_bulk, _c_put_line
from rill.server.fastpath cimport ClientCore
from rill.server.commands.table cimport Command, _c_set_entry
from rill.storage.keyspace cimport Database

cdef bint _COMPILED

# ZPOPMIN, the hot path of sorted-set consumers, with the client typed so that the
# dispatcher calls it through a C entry (table.pxd's Command.centry) in place of a Python
# call; registered after its definition (a .pxd cannot type a decorated def).
cpdef zpopmin(ClientCore c, argv)

# ZPOPMIN/ZPOPMAX key's one pop, with the client and its database typed: the key's lookup,
# db.watched and c.server.dirty are C calls and reads where they were generic ones.
@cython.locals(db=Database)
cpdef _zpop_one(ClientCore c, key, bint from_max)

# The RESP2 reply of one popped (member, score) whose score is written as its digits
# (reply.pxd's _c_integral_score: a nonzero integral float under 2**53 in magnitude, where
# %.17g prints exactly those digits): "*2", the member and the score as bulk strings, sized
# first and written into one new Raw through a char*. None for any other score or member,
# which the caller formats as before. In place of _format's b"%d" and a bytes % tuple.
cdef inline object _c_pair_reply(object raw, object member, object score):
    cdef long long v = 0
    cdef Py_ssize_t nm, size
    cdef object r
    cdef char* p
    if type(member) is not bytes or not _c_integral_score(score, &v):
        return None
    nm = PyBytes_GET_SIZE(member)
    size = 4 + _c_bulk_size(nm) + _c_bulk_size(_c_ndigits(<unsigned long long>(-v) if v < 0 else <unsigned long long>v) + (v < 0))
    r = raw(size)
    p = _c_put_line(PyBytes_AS_STRING(r), 42, 2)
    p = _c_put_bulk(p, PyBytes_AS_STRING(member), nm)
    _c_put_int_bulk(p, v)
    return r

cdef inline object _e_zpopmin(object c, object argv):
    return zpopmin(<ClientCore>c, argv)
