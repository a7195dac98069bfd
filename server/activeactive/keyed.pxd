# Cython declarations for keyed.py (its "augmenting" .pxd): types for the compiled build;
# the .py stays the reference and runs unchanged without them. See docs/hot-core.md.
# Keyed becomes an extension type: its fields, which every keyed write and every op a
# peer sends reads several of (keys, engine, created), are C reads instead of a generic
# attribute lookup through an instance dict each.
# The cells' helpers and the Database are cimported: a write's or a peer's op calls
# reg/inflate/settle and reads db.data and db.id in C, not through a Python call or a
# generic attribute lookup each.
cimport cython
from posix.time cimport CLOCK_REALTIME, clock_gettime, timespec

from rill.storage.cells cimport Cell, inflate, num_bytes, num_in, reg, settle
from rill.storage.keyspace cimport Database


cdef class Keyed:
    cdef public object engine, _fired_origin, _fired_seq, _fired_first
    cdef public dict keys, removed
    cdef public set _fired
    cdef public list created
    cdef public object _stamp_ms
    cdef public bytes _stamp

    # The methods one keyed write or one peer's op calls on the way (collect_known ->
    # _reassign_packed/_compare/_assign_op, apply -> _assign_plain/_incr_plain/_once/_settle/
    # _render): cpdef, so those calls are C calls instead of a bound-method lookup and a
    # Python call each. Still callable from Python as before.
    cpdef object _kinds_at(self, object where)
    cpdef object _local(self)
    cpdef bytes _stamp_of(self, object ts)
    cpdef object collect_known(self, object db, object key, object name, object argv, object kind,
                               object now)
    @cython.locals(cell=Cell)
    cpdef object created_counter(self, tuple where, object delta, object ts, object origin, object seq)
    @cython.locals(cells=dict, elems=list, kinds=dict)
    cpdef object assigned_one(self, tuple where, object key, object kind, object elem, object now,
                              object before, object origin, object seq)
    @cython.locals(cell=Cell, cells=dict)
    cpdef object counted(self, Database db, object key, object held, object now, object before,
                         object origin, object seq)
    cpdef object _reassign_packed(self, object key, object where, object packed, object kind,
                                  object name, object argv, object now)
    @cython.locals(cell=Cell)  # a counter its increment created: Cell.incr a C call
    cpdef object _create(self, list ops, object kinds, object key, object kind, object now,
                         object name, object argv, object ts, object origin, object seq,
                         object seen, object deltas=*)
    cpdef object _compare(self, list ops, object db, object key, object kind, object cells,
                          object now, object elems, object name, object argv, object ts,
                          object origin, object seq, object seen, object counters=*)
    cpdef object _assign_op(self, object cells, object key, object kind, object elem, object v,
                            object ts, object origin, object seq, object seen)
    cpdef object apply(self, Database db, object origin, object seq, object vc, list op)
    cpdef object _assign_plain(self, Database db, object origin, object seq, object vc, list op,
                               object where)
    cpdef object _incr_plain(self, Database db, object origin, object seq, list op, object where)
    cpdef object pack_created(self)
    cpdef object _settle(self, Database db, object key)
    cpdef tuple _once(self, object origin, object seq, object db_id, object key, object event)
    cpdef object _render(self, Database db, object key, object shown, object touched)

# The module's helpers on the same paths: C calls from the methods above.
cpdef object kind_of(object value)
cpdef object visible(dict kinds)  # always a full-form state (never a Packed)
cpdef object render_bytes(object cell)
cpdef object render_score(object cell)
cpdef object _element_now(object value, object kind, object elem)
cpdef object _element_rendered(object kind, object cell)
cpdef object _new_value(object kind)
cpdef object _put(object value, object kind, object elem, object v)
cpdef bint _empty(object value) except -1
cpdef object _reasserts(object name, object argv)
cpdef dict _deltas(object name, object argv, object kind)
cpdef object _stored(object kind, object v)
cpdef bytes _value_arg(object kind, object v)
cpdef object _value_in(object kind, object raw)
cpdef list _obs_args(object observed)

# The write's clock (now_ms): a C call for keyed's stamps and the engine's seal, which
# cimports it. _c_now_ms is CLOCK_REALTIME in milliseconds, read in C with no float made.
cdef bint _COMPILED
cdef dict _TIME_VARS
cpdef object now_ms()

cdef inline long long _c_now_ms() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_REALTIME, &ts)
    return ts.tv_sec * 1000LL + ts.tv_nsec // 1000000
