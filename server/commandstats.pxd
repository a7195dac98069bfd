# Cython declarations for commandstats.py (its "augmenting" .pxd): types for the compiled
# build; the .py stays the reference and runs unchanged without them. See docs/hot-core.md.

cdef class CommandStats:
    # The counters every call moves (nsec, then a histogram counter or untracked), as C
    # fields for the compiled dispatcher (fastpath.pxd cimports this).
    cdef public long long nsec, untracked, hist_nsec, hist_count, rejected_calls, failed_calls
    cdef public object hist
