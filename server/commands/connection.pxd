# Cython declarations for commands/connection.py (its "augmenting" .pxd): types for the
# compiled build; the .py stays the reference and runs unchanged without them. See
# docs/hot-core.md.
from rill.server.fastpath cimport ClientCore
from rill.server.commands.table cimport Command, _c_set_entry

cdef bint _COMPILED

# PING, with the client typed (its subscriptions and resp3 are ClientCore's C fields) so
# that the dispatcher calls it through a C entry (table.pxd's Command.centry) in place of a
# Python call into an interpreted frame; registered after its definition (a .pxd cannot
# type a decorated def).
cpdef ping(ClientCore c, argv)

cdef inline object _e_ping(object c, object argv):
    return ping(<ClientCore>c, argv)
