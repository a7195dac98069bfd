# Cython declarations for zsets.py (its "augmenting" .pxd): types for the compiled build;
# the .py stays the reference and runs unchanged without them. See docs/hot-core.md.
from rill.server.fastpath cimport ClientCore
from rill.server.commands.table cimport Command, _c_set_entry

cdef bint _COMPILED

# ZPOPMIN, the hot path of sorted-set consumers, with the client typed so that the
# dispatcher calls it through a C entry (table.pxd's Command.centry) in place of a Python
# call; registered after its definition (a .pxd cannot type a decorated def).
cpdef zpopmin(ClientCore c, argv)

cdef inline object _e_zpopmin(object c, object argv):
    return zpopmin(<ClientCore>c, argv)
