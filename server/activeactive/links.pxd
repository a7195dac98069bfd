# Cython declarations for links.py (its "augmenting" .pxd): types for the compiled
# build; the .py stays the reference and runs unchanged without them. See docs/hot-core.md.
# Peer and PeerLinks become extension types: a writer's flush (once per loop turn) and each
# acknowledgement read a peer's fields (sent, acked, state, conn, expect, ...) as C reads
# where each was a slot descriptor found by a generic attribute lookup, and the flush's
# _send and the acknowledgements' _wake/_release are C calls, not Python method calls
# through the instance. Fields stay objects: their values are whatever the peer and the
# clock give (a typed int would refuse a value the .py takes, and make an int per read).
cimport cython

cdef class Peer:
    cdef public object host, port, name, id, state, conn, gen, sync, sent, acked, expect
    cdef public object backoff, next_attempt, last_write, last_read, full
    cdef public bint paused

cdef class PeerLinks:
    # Kept, so a test or a caller may still set an attribute not declared here.
    cdef dict __dict__
    cdef public object server, engine, _timer
    cdef public list peers, waiters
    cdef public bint _flush_pending, _closed

    # The loop turn's flush (the loop calls it) and a peer's acknowledgements in a row
    # (its connection calls it): cpdef so that the peer in hand is typed.
    @cython.locals(p=Peer)
    cpdef object _flush(self)
    @cython.locals(p=Peer, head=list)
    cpdef object _integers(self, object conn, list replies)
    # Private, called only from this class: C calls.
    @cython.locals(p=Peer)
    cdef object _release(self)
    cdef object _wake(self)
    @cython.locals(expect=object, framed=object, applies=list, pieces=object)
    cdef object _send(self, Peer p, dict shared=*)
