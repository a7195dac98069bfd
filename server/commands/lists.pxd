# Cython declarations for lists.py (its "augmenting" .pxd): types for the compiled build;
# the .py stays the reference and runs unchanged without them. See docs/hot-core.md.
cimport cython

from rill.storage.keyspace cimport Database

# The push and the count-less pop every producer and consumer makes, with the database
# typed (keyspace.pxd): its lookups and its watched dict are C calls and reads. Both are
# plain helpers (no decorator), so they are typed where they stand.
@cython.locals(db=Database)
cpdef _push(c, argv, bint left, bint xx)

@cython.locals(db=Database)
cpdef _pop_one(c, key, bint left)
