# Cython declarations for hashes.py (its "augmenting" .pxd): types for the compiled build;
# the .py stays the reference and runs unchanged without them. See docs/hot-core.md.
cimport cython

from rill.storage.keyspace cimport Database

# HSET with the database typed (keyspace.pxd): its lookup, set and watched dict are C
# calls and reads. Registered after its definition (a .pxd cannot type a decorated def).
@cython.locals(db=Database)
cpdef hset(c, argv)
