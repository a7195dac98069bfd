# Cython declarations for keyspace.py (its "augmenting" .pxd): types for the compiled
# build; the .py stays the reference and runs unchanged without them. See docs/hot-core.md.
#
# Database is an extension type: its fields are C slots, read directly by the typed
# handlers that cimport it (strings.pxd, ...) and by its own methods, where a slotted
# Python class costs a generic attribute lookup per read. The lookups every command makes
# are cpdef: a typed caller calls them in C, anyone else as before.

# A key's value in a database's data dict: PyDict_GetItem when it is exactly a dict (always,
# but for tests that swap in a subclass that refuses walks), its get() otherwise. As a
# method call on an untyped object, data.get(key) costs ~580 instructions a lookup. Shared
# by Database's lookups and the string handlers that read the dict themselves (strings.pxd).
cdef inline object _c_data_get(object data, object key):
    if type(data) is dict:
        return (<dict>data).get(key)
    return data.get(key)

cdef bint _COMPILED

# The keyspace's counters and hooks as C fields: every read command counts a hit or a miss
# (keyspace_hits/misses), which on the interpreted class was an instance-dict attribute read,
# an int addition and an attribute store, ~300 instructions a GET. Database.keyspace is typed
# with it, so a typed caller reaches them in C. Its other attributes are C fields too (an
# extension type has no instance dict), all public: the server, INFO and tests read and set
# them as before.
cdef class Keyspace:
    cdef public object lru_clock, dbs, lfu_log_factor, lfu_decay_time
    cdef public object on_modified, on_expired, on_new, on_set_expire, on_miss
    cdef public long long hits, misses, expired_keys, lazyfreed_objects
    cdef public bint expire_allowed, expire_paused, lfu, shared_integers, signal_all

cdef class Database:
    cdef public object id, watched, scan_log, clock, access_base, avg_ttl
    cdef public Keyspace keyspace
    # data stays an object: a dict subclass may stand in for it (tests/server/test_evict.py
    # swaps in one that fails any walk of the keys); a typed dict field must be exactly one.
    cdef public object data
    cdef public dict expires, access, unshared
    cdef public list volatile_log
    cdef public bint lfu

    cpdef object lookup(self, object key)
    cpdef object peek(self, object key)
    cpdef object lookup_read(self, object key)
    cpdef object touch(self, object key)
    # set's stamp for a new key: a C call (it was a Python method call from set, a bound
    # method made and called through the interpreter's vectorcall, ~500 instructions a
    # new key; whole rill-server, SET of new keys at maxmemory, callgrind)
    cpdef object _stamp_new(self, object key)
    cpdef object set(self, object key, object value, bint keep_ttl=*)
    cpdef bint delete(self, object key)
    cpdef object modified(self, object key)
