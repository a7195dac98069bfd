# Cython declarations for cache.py (its "augmenting" .pxd): the compiled build's types; the
# .py stays the reference and runs unchanged without them. See docs/hot-core.md.
#
# The reads (stream.py, fastread.py) consult these notes once or twice per node they serve,
# on every XREADGROUP / XREAD / XRANGE: cpdef, and cimported by their .pxd files, these are
# C calls there instead of an interpreted frame each. IDs stay Python ints (128-bit);
# the module's dicts stay plain globals, which the readers also import by name.
cimport cython

cpdef _note_resume(node, key, start, Py_ssize_t rel, layout)

cpdef _nc_get(key, lp, bint admit, start=*)

cpdef _nc_served(lp, served)
