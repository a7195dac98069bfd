# Cython declarations for active.py (its "augmenting" .pxd): types for the compiled
# build; the .py stays the reference and runs unchanged without them. See docs/hot-core.md.
# Only the numbers of a peer's ops are typed; the classes stay ordinary (untyped) ones.
cimport cython

from rill.storage.stream.stream cimport _StreamCore, _fits_u64

cdef bint _COMPILED

@cython.locals(v=cython.longlong, c=int)
cdef long long _dec(const unsigned char* p, Py_ssize_t start, Py_ssize_t end) noexcept

@cython.locals(v=cython.longlong)
cdef object _num(object b)

@cython.locals(p=cython.p_const_uchar, n=Py_ssize_t, i=Py_ssize_t, a=cython.longlong, z=cython.longlong,
               hi=object)
cpdef object _pid(object b)

# A local XADD (ActiveStream.add's body): the stream's and the sub-stream's cores typed
# (C fields, a C call to the sub-stream's add), XADD *'s next ID worked out on the last
# ID's halves as C integers (lms, ls, nm; hi is the Python int the 128-bit ID is made
# from), the sub-streams a dict (a C lookup).
@cython.locals(core=_StreamCore, sub=_StreamCore, ls="unsigned long long", r="unsigned long long",
               lms="unsigned long long", nm="unsigned long long", hi=object, subs=dict, op=list,
               idb=bytes, journal=list, nms="unsigned long long", ns="unsigned long long",
               halves=bint)
cdef object _add_own(object s, list fv, object sid, object now_ms)

cdef unsigned long long _SEQ_ROOM

# The stream whose adds the engine records itself (own_add): a C global, and its setter a
# C call from the engine (cpdef: the .py engine calls it by name).
cdef object _own_add
cpdef object own_add(object s)

# A peer's XADD op appended to its sub-stream (ActiveStream.insert_op's body): the cores typed.
# cpdef so that the engine's _apply_op cimports it: a C call, not insert_op's method call.
@cython.locals(core=_StreamCore, sub=_StreamCore, fv=list)
cpdef object _insert_op(object s, list op)

# The journal's ID, ``<ms>-<seq>``: fastread's digit writer (XADD's reply uses the same
# one through server/commands/streams.pxd), inlined here by the cimport.
from rill.storage.stream.fastread cimport _id_bytes
