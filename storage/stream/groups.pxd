# Cython declarations for groups.py (its "augmenting" .pxd): types for the compiled build;
# the .py stays the reference and runs unchanged without them. See docs/hot-core.md.
#
# The PEL entry, the consumer and the group are extension types: their fields are C slots
# the delivery and XACK paths read and write without an attribute lookup, and a NACK is
# made by the type's own allocator (ten per XREADGROUP COUNT 10). Fields stay Python
# objects: IDs are 128-bit ints, times are read back by interpreted code (XPENDING, XINFO,
# persistence), and a typed field would make a new int at every such read.
cimport cython
from rill.storage.rax cimport Rax

cdef class NACK:
    cdef public object delivery_time, delivery_count, consumer

cdef class Consumer:
    cdef public object name, seen_time, active_time
    cdef public Rax pel

cdef class ConsumerGroup:
    cdef public object name, last_id, entries_read, consumers, nacked
    cdef public Rax pel

    @cython.locals(c=Consumer)
    cpdef tuple get_or_create_consumer(self, name, now_ms)

    @cython.locals(nack=NACK, nacks=list, n=Py_ssize_t, i=Py_ssize_t)
    cpdef deliver_new(self, list sids, Consumer consumer, now_ms)

    @cython.locals(nacks=list, nack=NACK, owner=Consumer, c=Consumer, mine=list, acked=Py_ssize_t,
                   n=Py_ssize_t, i=Py_ssize_t)
    cpdef Py_ssize_t ack_many(self, list sids) except -1
