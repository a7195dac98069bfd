# Cython declarations for streams.py (its "augmenting" .pxd): types for the compiled
# build; the .py stays the reference and runs unchanged without them. See docs/hot-core.md.
cimport cython

from rill.storage.keyspace cimport Database
from rill.storage.stream.stream cimport _StreamCore

# XADD's common form: the stream as its typed core (last_id, add() and the halves add()
# keeps of the ID it made are C-level), the database typed (its lookup a C call, its
# watched keys a C read). The new ID's halves are C integers, formatted without a str per
# number.
@cython.locals(argc=Py_ssize_t, s=_StreamCore, db=Database)
cpdef xadd(c, argv)

# The reply's ID, its digits written through a pointer into a new bytes (fastread's, which
# the stream reads use too).
from rill.storage.stream.fastread cimport _id_bytes

cdef bint _COMPILED
