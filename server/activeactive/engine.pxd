# Cython declarations for engine.py (its "augmenting" .pxd): types for the compiled
# build; the .py stays the reference and runs unchanged without them. See docs/hot-core.md.
# ActiveActive becomes an extension type: its fields are C reads and writes in its own
# methods, not generic attribute lookups in an instance dict (a tenth of a writer's
# instructions per XADD with two peers, most of them the engine's self.<field> reads in
# run, seal and a peer's receive/_apply). It keeps a __dict__, so an attribute not
# declared here still works (slower), and its public methods stay ``def``: a test or a
# caller may replace one on an instance. Fields the engine always holds as dicts or lists are
# typed so; the rest stay objects (a typed int would make a new int at every read by
# the links and INFO).
cimport cython

from rill.protocol.effects cimport Effect, clear_section, encode_record, put_op
from rill.server.activeactive.backlog cimport Backlog
# kind_of too: _run_fast and _keyed_made ask it of the value before and after every
# keyed write, a C call where it was a Python call through the module's globals.
from rill.server.activeactive.keyed cimport Keyed, kind_of, now_ms
from rill.server.commands.table cimport Command
# A created counter's digits read in C (_keyed_made).
from rill.server.commands.strings cimport _c_incremented
from rill.server.fastpath cimport ClientCore, ServerCore, WriteEngine
from rill.server.activeactive.lists cimport Lists
from rill.storage.keyspace cimport Database, _c_data_get
from rill.storage.stream.active cimport _insert_op, own_add
from rill.storage.stream.stream cimport _StreamCore

cdef class ActiveActive(WriteEngine):
    cdef dict __dict__
    cdef public object region, seq, links, recovering, replaying, applied_effects
    # Typed, so a keyed write's ``server.dirty`` (_run_fast, _sealed_now) and ``lists.keys``
    # (_run_fast) are C reads: the Server is a ServerCore, Lists an extension type.
    cdef public ServerCore server
    cdef public Lists lists
    cdef public object hlls, reply_override, _moves, _clock_parts, want_full_sync
    cdef public dict vc, known, pending, _deferred_known, tombstones, ttl, _kinds
    cdef public list unit, on_sealed
    cdef public Backlog backlog
    # Typed, so a keyed write's collect_known (a cpdef method) is a C call and its
    # ``keys`` a C read.
    cdef public Keyed keyed
    cdef public bint fast_writes, quiet_seals
    # The effect's ops its writers encoded (put_op), and how many.
    cdef public bytearray pre
    cdef public Py_ssize_t pre_n
    cdef public object _xadd

    # The dispatcher's entry for every write (fastpath.pxd's WriteEngine), a C method.
    cdef object run_write(self, object client, Command cmd, object argv)
    # A keyed write's steps (run -> _run_fast -> _collect_fast -> _collect_ttl,
    # _sealed_now): private, called only from this class, so C calls instead of a
    # bound-method lookup through the instance dict and a Python call each, with the
    # Database and the command typed so their fields are C reads. (The test that judges
    # _run_fast against the generic path turns ``fast_writes`` off rather than replace it.)
    @cython.locals(db=Database, keyed=dict, where=tuple)
    cdef object _run_fast(self, object client, Command cmd, object argv, object kind)
    @cython.locals(server=ServerCore)
    cdef object _sealed_now(self, object dirty)
    @cython.locals(held=object, keys=dict, keyed=Keyed, counter=bint)
    cdef bint _keyed_made(self, Database db, object key, tuple where, object before, object kind,
                          object name, object argv) except -1
    # A stream write's one-key path (run -> _run_one, every XADD at a writer): a C call,
    # its Database typed so data, expires and id are C reads.
    @cython.locals(db=Database, expires=dict)
    cdef object _run_one(self, object client, object cmd, object argv, object key)
    # An own XADD's op written from its argv and reply (_run_one's usual case): the stream
    # typed as its core, so last_id and _cgroups are C reads.
    @cython.locals(db=Database, expires=dict)
    cdef object _xadd_own(self, object client, Command cmd, list argv, object key, _StreamCore s, object ttl_before)
    cdef object _put_xadd(self, object db_id, object key, object s, object sid, list argv)
    cdef object _collect_fast(self, Database db, object key, object before, object ttl_before,
                              object name, object argv, object kind)
    cdef object _collect_ttl(self, list ops, Database db, object key, object before,
                             object ttl_before)
    # A peer's effect applied (receive/receive_all/_drain_pending -> _apply -> _apply_op,
    # then _settle): private, so C calls where each was a Python call through the
    # instance (once per effect and per op), with the effect, its ops and the Database
    # typed so ``e.ops``/``e.origin``/``e.seq``/``e.vc`` and ``db.data``/``db.id`` are C
    # reads. Every caller passes an Effect (decode_records makes them).
    @cython.locals(ops=list, keyspace=list, db=Database, feeds=object, mirror=bint, plain=list)
    cdef object _apply(self, Effect e, dict touched=*)
    # The batch's loop: each effect's fields read in C (public: the APPLY command calls it).
    @cython.locals(e=Effect, vc=dict, touched=dict, last=dict)
    cpdef object receive_all(self, list effects)
    @cython.locals(e=Effect, known=dict, mine=dict, keyspace=list)
    cdef object _settle(self, dict last, dict touched, object nops, object count)
    cdef object _apply_op(self, Database db, Effect e, list op)

# The keyed fast path's tables (_keyed_made): typed, so ``name in _INT_COUNTERS`` and
# ``_ONE_ELEMENT.get`` are C set and dict lookups, not a generic ``in`` and a bound
# method made and called per write.
cdef frozenset _INT_COUNTERS
cdef dict _ONE_ELEMENT
# Whether the module runs compiled (see engine.py): guards _c_data_get.
cdef bint _COMPILED

# A received effect's causal check (receive, _ready): dict iteration and lookups in C.
cdef bint _causes_here(dict vc, dict seen, object origin) except -1

# A handler called through its C entry while its module gave it one and it is still the
# command's handler (table.pxd's Command.centry; fastpath.pxd's _c_call for the
# dispatcher), else as the Python object it is. The entry casts the client to a
# ClientCore unchecked, so anything else (a test's stand-in) takes the Python call, whose
# wrapper checks it.
cdef inline object _c_handler(Command cmd, object client, object argv):
    if cmd.centry is not NULL and cmd.centry_of is cmd.handler and isinstance(client, ClientCore):
        return cmd.centry(client, argv)
    return cmd.handler(client, argv)

# The client's database: a C field read when the client is a ClientCore (every real
# client: _run_fast's per write), the attribute otherwise (a test's stand-in).
cdef inline object _c_db_of(object client):
    if isinstance(client, ClientCore):
        return (<ClientCore>client).db
    return client.db
