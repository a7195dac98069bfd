# Cython declarations for effects.py (its "augmenting" .pxd): types for the compiled
# build; the .py stays the reference and runs unchanged without them. See docs/hot-core.md.
cimport cython

@cython.locals(out=list, end=Py_ssize_t, i=Py_ssize_t, start=Py_ssize_t, n=Py_ssize_t,
               nops=Py_ssize_t, db=Py_ssize_t, argc=Py_ssize_t, k=Py_ssize_t, r=Py_ssize_t,
               op=list, ops=list, vc=dict, flat=tuple)
cpdef list decode_records(bytes blob)
