# Cython declarations for keyed.py (its "augmenting" .pxd): types for the compiled build;
# the .py stays the reference and runs unchanged without them. See docs/hot-core.md.
# Keyed becomes an extension type: its fields, which every keyed write and every op a
# peer sends reads several of (keys, engine, created), are C reads instead of a generic
# attribute lookup through an instance dict each.

cdef class Keyed:
    cdef public object engine, _fired_by
    cdef public dict keys, removed
    cdef public set _fired
    cdef public list created
