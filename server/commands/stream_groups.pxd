# Cython declarations for stream_groups.py (its "augmenting" .pxd): types for the compiled
# build; the .py stays the reference and runs unchanged without them. See docs/hot-core.md.
cimport cython

from rill.server.commands.stream_args cimport ReadArgs, parse_read_args
from rill.server.commands.streams cimport now_ms
from rill.server.commands.table cimport Command, _c_set_entry
from rill.server.fastpath cimport ClientCore, ServerCore
from rill.storage.keyspace cimport Database
# (ConsumerGroup as _Group: the .py imports the name itself, from the stream package.)
from rill.storage.stream.groups cimport Consumer, ConsumerGroup as _Group

cdef bint _COMPILED

# XREADGROUP and XACK, a consumer's two commands a batch (the XREADGROUP COUNT 10 + XACK
# loop): the client, server, database, options and group typed (fastpath.pxd's ClientCore
# and ServerCore, keyspace.pxd's Database, stream_args.pxd's ReadArgs, groups.pxd's
# ConsumerGroup), so their fields are C reads and parse_read_args, now_ms, lookup_read,
# _deliver and ack_many C calls where each was a Python call.
@cython.locals(server=ServerCore, r=ReadArgs, first=Py_ssize_t, n=Py_ssize_t, k=Py_ssize_t,
               db=Database, g=_Group, groups=list, ids=list, served=list)
cpdef xreadgroup(ClientCore c, argv)

@cython.locals(consumer=Consumer, server=ServerCore, sids=list)
cpdef tuple _deliver(ClientCore c, key, s, _Group g, group_name, consumer_name, count,
                     noack, now, claim=*, budget=*)

@cython.locals(g=_Group, acked=Py_ssize_t)
cpdef xack(ClientCore c, argv)

# Their C entries for the dispatcher (table.pxd's Command.centry), bound by the module
# after registering them: a C call from fastpath's loop in place of a Python one.
cdef inline object _e_xreadgroup(object c, object argv):
    return xreadgroup(<ClientCore>c, argv)

cdef inline object _e_xack(object c, object argv):
    return xack(<ClientCore>c, argv)
