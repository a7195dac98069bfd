# Cython declarations for table.py (its "augmenting" .pxd): types for the compiled build;
# the .py stays the reference and runs unchanged without them. See docs/hot-core.md.

cdef class Command:
    # What the dispatcher reads per command, as C fields (fastpath.pxd cimports this):
    # the arity bounds and the flags. The rest stays objects, read by name.
    cdef public Py_ssize_t min_argc, max_argc
    cdef public long long flags
    cdef public object name, fullname, handler, arity, flag_names, first_key, last_key, key_step
    cdef public object categories, key_specs, key_access, has_keys, getkeys, key_flags, flags_for
    cdef public object docs, subcommands, parent, _walk, _info_tagged
