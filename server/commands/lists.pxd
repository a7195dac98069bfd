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
