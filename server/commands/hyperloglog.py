"""HyperLogLog commands (Redis's hyperloglog.c): PFADD, PFCOUNT, PFMERGE, PFDEBUG,
PFSELFTEST.

An HLL is an ordinary string value (see rill.storage.hll for the format), so
GET, SET, DUMP/RESTORE and persistence carry it unchanged. Like Redis's
dbUnshareStringValue, every command that may write an HLL leaves it a
``bytearray`` (OBJECT ENCODING "raw"): dense registers are edited in place, a
sparse HLL is rebuilt and stored under the same key (its TTL kept).

Side effects follow Redis 7.0: PFADD and PFMERGE signal the key, fire "pfadd"
and propagate verbatim; PFCOUNT of one key that refreshes a stale cached
cardinality rewrites the string, so it signals the key, counts as dirty and is
itself propagated (Redis's call() propagates any command that dirtied the
dataset, read-only or not), with no keyspace event; PFDEBUG GETREG/TODENSE
converting a sparse HLL count as dirty and propagate, with no event nor
signal.
"""

from __future__ import annotations

from rill.protocol.reply import OK, ReplyError, Status
from rill.storage import hll
from rill.storage.keyspace import Database

from .. import notify as events
from ..client import Client
from .args import WRONGTYPE
from .table import MAY_REPLICATE, command

NOT_HLL = ReplyError("WRONGTYPE Key is not a valid HyperLogLog string value.")
CORRUPT = ReplyError("INVALIDOBJ Corrupted HLL object detected")


def _hll(value: object) -> bytes | bytearray:
    """isHLLObjectOrReply: the value as an HLL string, or the error Redis replies."""
    t = type(value)
    if t is not bytes and t is not bytearray:
        raise WRONGTYPE
    if not hll.is_hll(value):  # type: ignore[arg-type]
        raise NOT_HLL
    return value  # type: ignore[return-value]


def _unshared(db: Database, key: bytes, value: bytes | bytearray) -> bytearray:
    """dbUnshareStringValue: the stored string as a bytearray this command may edit."""
    if type(value) is bytearray:
        return value
    value = bytearray(value)
    db.data[key] = value
    return value


def _max_bytes(c: Client) -> int:
    return c.server.config.int("hll-sparse-max-bytes")


def _union(c: Client, keys: list[bytes]) -> tuple[bytes, bool]:
    """The registerwise maximum of the HLLs at ``keys`` (missing ones are empty), and
    whether any of them is dense."""
    db = c.db
    registers = bytes(hll.REGISTERS)
    dense = False
    for key in keys:
        value = db.lookup_read(key)
        if value is None:
            continue
        value = _hll(value)
        dense = dense or value[4] == hll.DENSE
        raw = hll.registers(value)
        if raw is None:
            raise CORRUPT
        registers = hll.raw_max(registers, raw)
    return registers, dense


def _written(c: Client, key: bytes, changes: int) -> None:
    db = c.db
    db.modified(key)
    events.notify(db.id, "$", b"pfadd", key)
    c.server.dirty += changes


@command("pfadd")
def pfadd(c: Client, argv: list[bytes]):
    db = c.db
    key = argv[1]
    value = db.lookup(key)
    created = value is None
    if created:
        value = hll.new()
        db.set(key, value)
    else:
        value = _unshared(db, key, _hll(value))
    editor = hll.Editor(value, _max_bytes(c))
    changed, sound = editor.add(argv[2:])
    result = editor.result()
    if result is not value:
        db.data[key] = result  # what was added before a corrupt payload stopped it stays
    if not sound:
        raise CORRUPT
    changed += created
    if changed:
        hll.invalidate(result)
        _written(c, key, changed)
    return 1 if changed else 0


@command("pfcount", hidden_flags=MAY_REPLICATE)  # hidden in 7.0's COMMAND INFO
def pfcount(c: Client, argv: list[bytes]):
    if len(argv) > 2:
        return _signed(hll.estimate(_union(c, argv[1:])[0]))
    db = c.db
    key = argv[1]
    value = db.lookup_read(key)
    if value is None:
        return 0
    value = _unshared(db, key, _hll(value))
    card = hll.cached_count(value)
    if card is None:
        card = hll.count(value)
        if card is None:
            raise CORRUPT
        hll.store_count(value, card)
        db.modified(key)
        server = c.server
        server.dirty += 1
        server.also_propagate(db.id, list(argv))
    return _signed(card)


def _signed(card: int) -> int:
    """addReplyLongLong of the uint64 count (an overflowed estimate is 2**63)."""
    return card - (1 << 64) if card >> 63 else card


@command("pfmerge")
def pfmerge(c: Client, argv: list[bytes]):
    registers, dense = _union(c, argv[1:])  # the destination counts as a source too
    db = c.db
    key = argv[1]
    value = db.lookup(key)
    if value is None:
        value = hll.new()
        db.set(key, value)
    else:
        value = _unshared(db, key, value)  # already checked as a source
    if dense and value[4] == hll.SPARSE:
        value = hll.to_dense(value)
        if value is None:
            raise CORRUPT
    editor = hll.Editor(value, _max_bytes(c))
    editor.merge(registers)
    editor.invalidate()
    db.data[key] = editor.result()
    _written(c, key, 1)
    return OK


@command("pfdebug")
def pfdebug(c: Client, argv: list[bytes]):
    sub = argv[1]
    db = c.db
    key = argv[2]
    value = db.lookup(key)
    if value is None:
        raise ReplyError("ERR The specified key does not exist")
    value = _unshared(db, key, _hll(value))
    name = sub.lower()
    if name in (b"getreg", b"todense"):
        converted = value[4] == hll.SPARSE
        if converted:
            value = hll.to_dense(value)
            if value is None:
                raise CORRUPT
            db.data[key] = value
            c.server.dirty += 1  # Redis forces propagation of the encoding change
        if name == b"todense":
            return 1 if converted else 0
        return list(hll.dense_to_raw(value[hll.HEADER :]))
    if name == b"decode":
        if value[4] != hll.SPARSE:
            raise ReplyError("ERR HLL encoding is not sparse")
        return hll.decode(value)
    if name == b"encoding":
        return Status(b"sparse" if value[4] == hll.SPARSE else b"dense")
    raise ReplyError(b"ERR Unknown PFDEBUG subcommand '" + sub + b"'")


@command("pfselftest")
def pfselftest(c: Client, argv: list[bytes]):
    failure = hll.selftest(_max_bytes(c))
    if failure is not None:
        raise ReplyError(failure)
    return OK
