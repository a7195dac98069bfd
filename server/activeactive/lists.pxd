# Cython declarations for lists.py (its "augmenting" .pxd): types for the compiled build;
# the .py stays the reference and runs unchanged without them. See docs/hot-core.md.
# Lists becomes an extension type so that the engine (engine.pxd types its ``lists``) reads
# ``keys`` in C: every keyed write's fast path asks whether its key is a list (once or
# twice), a generic attribute lookup in an instance dict before. It keeps a __dict__, so
# anything not declared here still works; its methods stay ``def``.

cdef class Lists:
    cdef dict __dict__
    cdef public object engine, _made
    cdef public dict keys
