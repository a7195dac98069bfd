# Cython declarations for fastread.py (its "augmenting" .pxd): types for the compiled
# build; the .py stays the reference and runs unchanged without them. See docs/hot-core.md.
cimport cython

# The read-side notes (cache.py): C calls from here.
from rill.storage.stream.cache cimport _note_resume

# The one-pass walk of a node (XRANGE, XREAD, XREADGROUP): offsets and element bytes as
# C ints, the node as bytes. IDs stay Python ints (deltas may leave the uint64 range
# before they are masked).
@cython.locals(lp=bytes, p=Py_ssize_t, p0=Py_ssize_t, endp=Py_ssize_t, b=Py_ssize_t,
               u=Py_ssize_t, q=Py_ssize_t, k=Py_ssize_t, n=Py_ssize_t, nf=Py_ssize_t,
               flags=Py_ssize_t, fast=bint, wrap=bint, check_start=bint, check_end=bint)
cpdef tuple _fwd_node_enc(key, node, start, end, limit, out, enc, marks=*, sids=*)
