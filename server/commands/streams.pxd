# Cython declarations for streams.py (its "augmenting" .pxd): types for the compiled
# build; the .py stays the reference and runs unchanged without them. See docs/hot-core.md.
cimport cython

from rill.storage.stream.stream cimport _StreamCore

# XADD's common form: the stream as its typed core (last_id and add() are C-level).
@cython.locals(argc=Py_ssize_t, s=_StreamCore)
cpdef xadd(c, argv)
