# Cython declarations for evict.py (its "augmenting" .pxd): types for the compiled
# build; the .py stays the reference and runs unchanged without them. See docs/hot-core.md.

cdef class Evictor:
    # The evictor's state as C fields: perform runs before every command while maxmemory
    # is set, and _evict_pooled once per write of a full cache; each self.<field> they
    # read is then a struct read, not the generic attribute lookup (~100 instructions).
    cdef public object server, figure, dirty, policy, kind, untimed_down, evict_down
    cdef public list pool, snaps, snap_renew, snap_limit, snap_empty
    cdef public Py_ssize_t next_db, samples
    cdef public long long evicted_keys
    cdef public bint running, volatile, lru, timed, lazy, replica_ignores, pooled
    cdef public double exceeded_since, exceeded_total, limit_s
