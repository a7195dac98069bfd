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
