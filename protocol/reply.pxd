# Cython declarations for reply.py (its "augmenting" .pxd): types for the compiled build;
# the .py stays the reference and runs unchanged without them. See docs/hot-core.md.
cimport cython

# The tables every small reply reads, as C-level variables (no dictionary lookup); not
# visible as module attributes when compiled, so only names no other module imports.
cdef Py_ssize_t SMALL
cdef tuple BULK_HEADERS, SMALL_INTS

@cython.locals(n=Py_ssize_t)
cpdef encode_into(value, out, bint resp3)
