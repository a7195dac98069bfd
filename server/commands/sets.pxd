# Cython declarations for sets.py (its "augmenting" .pxd): types for the compiled build;
# the .py stays the reference and runs unchanged without them. See docs/hot-core.md.
cimport cython

cdef bint _COMPILED

from rill.server.fastpath cimport ClientCore
from rill.storage.keyspace cimport Database

# SADD, the hot path of every set producer, with the client and the database typed
# (fastpath.pxd's ClientCore, keyspace.pxd): c.db, c.server.dirty, the database's lookup,
# set and watched dict are C reads, writes and calls. Registered after its definition (a
# .pxd cannot type a decorated def).
@cython.locals(db=Database)
cpdef sadd(ClientCore c, argv)

# The handlers' C entries for the dispatcher (table.pxd's Command.centry): a C call in
# place of a Python one, bound by the module after registering them, when compiled.
from rill.server.commands.table cimport Command, _c_set_entry

cdef inline object _e_sadd(object c, object argv):
    return sadd(<ClientCore>c, argv)
