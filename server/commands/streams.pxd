# Cython declarations for streams.py (its "augmenting" .pxd): types for the compiled
# build; the .py stays the reference and runs unchanged without them. See docs/hot-core.md.
cimport cython

from rill.storage.stream.stream cimport _StreamCore

# XADD's common form: the stream as its typed core (last_id and add() are C-level).
# The new ID's halves are C integers, formatted without a str per number.
@cython.locals(argc=Py_ssize_t, s=_StreamCore, ms="unsigned long long", seq="unsigned long long")
cpdef xadd(c, argv)

cdef bint _COMPILED
