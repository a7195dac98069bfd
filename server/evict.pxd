# Cython declarations for evict.py (its "augmenting" .pxd): types for the compiled
# build; the .py stays the reference and runs unchanged without them. See docs/hot-core.md.

cimport cython

from rill.storage.keyspace cimport Database
# The Server's per-command fields (its base class's): the write counter perform compares,
# propagating and blocking the eviction reads, as C reads rather than generic lookups
# (fastpath.py takes EVICT_FAIL as a constant of its own, so that this is no import cycle).
from rill.server.fastpath cimport ServerCore

cdef class Evictor:
    # The evictor's state as C fields: perform runs before every command while maxmemory
    # is set, and _evict_pooled once per write of a full cache; each self.<field> they
    # read is then a struct read, not the generic attribute lookup (~100 instructions).
    # suspended, maxmemory and tracking are perform's copies of Server states
    # (gates_changed keeps them), and engine the Active-Active engine (None while off).
    # base_f is the figure's evict_base + clients_normal as a double, kept by the figure
    # (MemoryFigure._base_changed) where either changes: perform read both, two generic
    # lookups, an int addition and a conversion per command.
    cdef public ServerCore server
    cdef public object figure, dirty, policy, kind, untimed_down, evict_down, maxmemory, engine
    cdef public list pool, snaps, snap_stamps, snap_access, snap_renew, snap_limit, snap_empty, dbs, per_key, per_key_table, active
    cdef public dict waiters
    cdef public Py_ssize_t next_db, samples
    cdef public long long evicted_keys
    cdef public bint running, volatile, lru, timed, lazy, replica_ignores, pooled, suspended, tracking
    cdef public double exceeded_since, exceeded_total, limit_s, maxmemory_f, under_f, base_f

    # perform: before every command while maxmemory is set. cpdef, so that _time_proc's
    # call is a C call; the memory figure it adds up is C doubles (the Python floats'
    # operations, in the same order; maxmemory stays a Python int: it goes up to 2**64 - 1).
    # The databases are typed (keyspace.pxd): their fields are C reads here.
    @cython.locals(used=double, coef=list, per_key=double, per_stamp=double, empty=double, d=Database, s=ServerCore)
    cpdef int perform(self, Database db=*) except? -1

    # _evict_pooled: cpdef, so that perform calls it in C. Its containers typed, so that
    # the samples' lookups (access.get, the pool's and the snapshot's indexing and
    # slices) are C calls, and its counters C integers. A database's data stays untyped:
    # a dict subclass is allowed there (a typed dict must be exactly one).
    @cython.locals(pool=list, dbs=list, candidates=list, snaps=list, snap=list, slots=list,
                   access=dict, stamps=list, n=Py_ssize_t, i=Py_ssize_t, freed=Py_ssize_t,
                   dead=Py_ssize_t, db_id=Py_ssize_t, k=Py_ssize_t, j=Py_ssize_t, end=Py_ssize_t,
                   lru=bint, populated=bint, s=ServerCore, plain=dict,
                   db=Database, idle="long long", now="long long", st="long long", worst=double,
                   score=double, per_key=double)
    # used and maxmemory as C doubles: the figure is the Python float perform summed
    # (its int() exact in a double), and maxmemory is below it here, so under 2**53
    # and exact too; used's decrements are the same float operations.
    cpdef int _evict_pooled(self, double used, double maxmemory) except? -1

    # _dead_slots: after a sample that met deleted keys' slots (a quarter of the
    # evictions or so: evicted keys cluster in the snapshot), called in C.
    @cython.locals(db_id=Py_ssize_t, empty=Py_ssize_t)
    cpdef _dead_slots(self, Database db, Py_ssize_t dead, bint all_dead)

cdef bint _COMPILED

# The figure's per-key constants as C doubles (see evict.py): read by perform before every
# command and by _evict_pooled per eviction, each was a module-dict lookup and a conversion.
cdef double _EMPTY_TABLES, _KEY_TABLES, _LRU_STAMP, _LFU_STAMP, _EXACT_BELOW, _UNBOUNDED
cdef int _OK, _RUNNING, _FAIL
cdef Py_ssize_t _POOL_MAX, _SAMPLES
# read once per eviction: the sample's random start, and keyspace events' notifier
cdef object _getrandbits
cdef dict _NOTIFY_NS

# A sample's keys requested from memory together, before its loop reads them one by one:
# on a cache of 300k keys each key object is a cache miss, and taken in turn (the reference
# count, the hash, then the access lookup) those misses were most of the loop's own time;
# prefetched, they overlap. No reference is taken: a prefetch only reads ahead.
cdef extern from *:
    """
    static inline void rill_evict_prefetch_run(PyObject *slots, Py_ssize_t i, Py_ssize_t end) {
        for (; i < end; i++)
            __builtin_prefetch(PyList_GET_ITEM(slots, i));
    }
    """
    void _prefetch_run "rill_evict_prefetch_run" (list slots, Py_ssize_t i, Py_ssize_t end)

# A snapshot list taken out of the cyclic collector's lists (see _snapshot): only for a
# list that holds objects referring to nothing (bytes, ints), so never part of a cycle.
# Its dealloc untracks it again only if tracked, so this is safe at any later point.
cdef extern from *:
    """
    static inline void rill_evict_untrack(PyObject *op) {
        if (PyObject_GC_IsTracked(op))
            PyObject_GC_UnTrack(op);
    }
    """
    void _untrack "rill_evict_untrack" (list op)

# _snapshot's two lists from the stamp dict in one C walk (PyDict_Next: the order list()
# gives): its keys and, beside them, its values, each list followed by its first ``pad``
# items again (at most its length), as ``list(d)``, ``list(d.values())`` and their
# ``+= x[:pad]`` made them. Those were two generic iterations and two extends,
# ~80 instructions a key each: a snapshot is taken once per eighth of the keys evicted,
# so ~1.3k instructions an eviction (whole rill-server, callgrind). ``d`` is exactly a
# dict (a typed field); no Python code runs while the lists are filled.
cdef extern from *:
    """
    static PyObject *rill_evict_pairs(PyObject *d, Py_ssize_t pad) {
        Py_ssize_t n = PyDict_GET_SIZE(d), pos = 0, i = 0, j;
        PyObject *keys, *values, *k, *v, *pair;
        if (pad > n) pad = n;
        if (pad < 0) pad = 0;
        keys = PyList_New(n + pad);
        if (keys == NULL) return NULL;
        values = PyList_New(n + pad);
        if (values == NULL) { Py_DECREF(keys); return NULL; }
        while (i < n && PyDict_Next(d, &pos, &k, &v)) {
            Py_INCREF(k); PyList_SET_ITEM(keys, i, k);
            Py_INCREF(v); PyList_SET_ITEM(values, i, v);
            i++;
        }
        for (j = 0; j < pad; j++) {
            k = PyList_GET_ITEM(keys, j); Py_INCREF(k); PyList_SET_ITEM(keys, n + j, k);
            v = PyList_GET_ITEM(values, j); Py_INCREF(v); PyList_SET_ITEM(values, n + j, v);
        }
        pair = PyTuple_New(2);
        if (pair == NULL) { Py_DECREF(keys); Py_DECREF(values); return NULL; }
        PyTuple_SET_ITEM(pair, 0, keys);
        PyTuple_SET_ITEM(pair, 1, values);
        return pair;
    }
    """
    tuple _keys_and_values "rill_evict_pairs" (dict d, Py_ssize_t pad)

# The pool's insertion, as _pool_insert and _evict_pooled's interpreted path make it
# (bisect_left by (score,), then, when full, ``del pool[0]`` and ``pool.insert(k - 1, e)``),
# in C: a bisect over the entries' scores as doubles (every score in the pool is a float,
# made from a C double; any other number is converted) and, when full, the worst entry
# dropped and the entries below the insertion point moved down one slot by one memmove,
# where the del and the insert moved the whole pool twice and made and freed a slice.
# The caller has checked that the score beats the worst of a full pool (so the insertion
# point is at least 1). Whole rill-server, SET of new keys at maxmemory, callgrind: the
# Cython bisect (a typed tuple read and a float conversion call per probe), the del and
# the insert were ~600 instructions an insertion, ~2.3 insertions a SET.
cdef extern from *:
    """
    static int rill_evict_pool_put(PyObject *pool, double score, PyObject *entry, Py_ssize_t max) {
        PyObject **items = ((PyListObject *)pool)->ob_item, *old;
        Py_ssize_t lo = 0, hi = PyList_GET_SIZE(pool), mid;
        double at;
        while (lo < hi) {
            mid = (lo + hi) >> 1;
            old = PyTuple_GET_ITEM(items[mid], 0);
            at = PyFloat_CheckExact(old) ? PyFloat_AS_DOUBLE(old) : PyFloat_AsDouble(old);
            if (at == -1.0 && PyErr_Occurred()) return -1;
            if (at < score) lo = mid + 1; else hi = mid;
        }
        if (PyList_GET_SIZE(pool) < max)
            return PyList_Insert(pool, lo, entry);
        if (lo < 1) return 0;  /* no better than the worst: the caller's check */
        old = items[0];
        lo -= 1;
        memmove(&items[0], &items[1], lo * sizeof(PyObject *));
        Py_INCREF(entry);
        items[lo] = entry;
        Py_DECREF(old);
        return 0;
    }
    static double rill_evict_pool_head(PyObject *pool) {
        PyObject *at = PyTuple_GET_ITEM(PyList_GET_ITEM(pool, 0), 0);
        return PyFloat_CheckExact(at) ? PyFloat_AS_DOUBLE(at) : PyFloat_AsDouble(at);
    }
    """
    int _pool_put "rill_evict_pool_put" (list pool, double score, tuple entry, Py_ssize_t max) except -1
    # the worst score of a non-empty pool (its first entry's)
    double _pool_head "rill_evict_pool_head" (list pool) except? -1.0

# A sample scored outside _evict_pooled (_populate, _score_into_pool) into the pool: the
# score a C double, so that the pool's entries all hold floats, read in place by
# _pool_put (cpdef: the tests call it).
@cython.locals(k=Py_ssize_t, full=bint)
cpdef object _pool_insert(list pool, double score, object db_id, object key)
