# Cython declarations for table.py (its "augmenting" .pxd): types for the compiled build;
# the .py stays the reference and runs unchanged without them. See docs/hot-core.md.

# A handler's C entry: what a compiled, typed handler module gives the dispatcher to call
# in C (see Command.centry).
ctypedef object (*CHandler)(object c, object argv)

cdef class Command:
    # What the dispatcher reads per command, as C fields (fastpath.pxd cimports this):
    # the arity bounds and the flags. The rest stays objects, read by name.
    cdef public Py_ssize_t min_argc, max_argc
    cdef public long long flags
    cdef public object name, fullname, handler, arity, flag_names, first_key, last_key, key_step
    cdef public object categories, key_specs, key_access, has_keys, getkeys, key_flags, flags_for
    cdef public object docs, subcommands, parent, _walk, _info_tagged
    # The handler's C entry, set by its module when compiled (strings.pxd, ...), and the
    # handler it stands for: the dispatcher calls the entry only while ``handler`` is still
    # that one (fastpath.pxd's _c_call), so replacing a handler needs no other step.
    cdef CHandler centry
    cdef object centry_of

# Give ``cmd`` the C entry ``entry`` for ``handler`` (its module's typed handler).
cdef inline void _c_set_entry(Command cmd, object handler, CHandler entry):
    cmd.centry = entry
    cmd.centry_of = handler
