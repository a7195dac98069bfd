"""Redis RDB files and DUMP payloads: a writer for ``REDIS0010`` and a reader for versions 1..12.

Facts: shared/reference/redis-formats.md section 3 (restated from rdb.c, rdb.h).

Writing (``RdbWriter``) emits what Redis 7.0 emits so that every Redis from 7.0 on
loads the file: the ``REDIS0010`` header, aux fields, per non-empty database a
SELECTDB and RESIZEDB, each key with its ms expiry, EOF and the CRC-64.  Each
value type is one writer function in ``WRITERS`` keyed by the value's
``type_name``; streams are type 19 with their nodes copied verbatim (they already
are Redis listpacks), lists are quicklist 2 with listpack nodes packed as Redis
packs them.  Strings are int-encoded or LZF-compressed exactly where Redis would
(LZF only when the C module is available; raw is always valid).

Reading (``RdbReader`` / ``load``) accepts every string form, every type Redis
wrote from 2.x to 7.4 except modules and 7.4's hash-field TTLs, verifies the
CRC, and builds the whole dataset off to the side: a file that fails a check
raises ``RdbError`` naming the offset, and the caller installs nothing.  Each
type is one reader function in ``READERS`` keyed by the RDB type byte.

Streams carrying state newer than Redis 7 (Redis 8.6 IDMP settings and producer
history, Redis 8.8 XNACK's released-entry order) keep their ordinary type-19 record
and add, right after it, one AUX field ``rill-stream-ext`` -- written only when such
state exists. redis-server skips unknown AUX fields, so the file still loads there
(without that state); rill's loader applies it to the key just read.  Its value::

    version (1 byte, = 1) | key (string)
    has-idmp (1 byte) [duration | maxsize | configured | iids-added | iids-duplicates
                       | producers n | n x (pid | iids m | m x (iid | 16-byte ID | int64 ms))]
    groups-with-released k | k x (group name | m | m x (16-byte ID | int64 delivery ms
                                                          | delivery count))  (release order)

(lengths and strings in RDB length/string encoding).  Released entries have no owner,
which Redis's deep check refuses in a group PEL, so the type-19 record leaves them out
and only the AUX field has them.  DUMP payloads carry only the type-19 record.

Hashes, sets and sorted sets are decoded into plain pairs/members and handed to
the builder in ``BUILDERS`` (the storage module's ``from_rdb_*``), which picks the
encoding Redis would for that content.  They are written in the encoding they
have, as Redis 7.0 writes them: a listpack hash or sorted set as type 16/17 (the
listpack Redis would hold), an intset set as type 11, the others as types 4, 2
and 5 (a skiplist highest score first) -- so DUMP payloads match Redis's bytes.
"""

from __future__ import annotations

import gc
import math
import random
import struct
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from rill.storage import hash as hashmod
from rill.storage import listpack as lpmod
from rill.storage import set as setmod
from rill.storage import zset as zsetmod
from rill.storage.list import ListValue, compress_node, compressed_nodes, packed_threshold
from rill.storage.stream import MASK64, IdmpState, Stream, validate_node
from rill.storage.stream.active import ActiveStream, _GroupState

from . import lzf
from . import nodes as _nodes
from .crc64 import crc64

__all__ = [
    "RDB_VERSION",
    "MAX_LOADABLE_VERSION",
    "RdbError",
    "SaveOptions",
    "RdbWriter",
    "RdbReader",
    "LoadResult",
    "load",
    "load_file",
    "save_file",
    "dump_payload",
    "restore_payload",
    "verify_payload",
    "WRITERS",
    "READERS",
    "BUILDERS",
]

RDB_VERSION = 10
MAX_LOADABLE_VERSION = 12

# Object types (rdb.h).
T_STRING = 0
T_LIST = 1
T_SET = 2
T_ZSET = 3
T_HASH = 4
T_ZSET_2 = 5
T_MODULE = 6
T_MODULE_2 = 7
T_HASH_ZIPMAP = 9
T_LIST_ZIPLIST = 10
T_SET_INTSET = 11
T_ZSET_ZIPLIST = 12
T_HASH_ZIPLIST = 13
T_LIST_QUICKLIST = 14
T_STREAM_LISTPACKS = 15
T_HASH_LISTPACK = 16
T_ZSET_LISTPACK = 17
T_LIST_QUICKLIST_2 = 18
T_STREAM_LISTPACKS_2 = 19
T_SET_LISTPACK = 20
T_STREAM_LISTPACKS_3 = 21

# Opcodes.
OP_SLOT_INFO = 244
OP_FUNCTION2 = 245
OP_FUNCTION = 246
OP_MODULE_AUX = 247
OP_IDLE = 248
OP_FREQ = 249
OP_AUX = 250
OP_RESIZEDB = 251
OP_EXPIRETIME_MS = 252
OP_EXPIRETIME = 253
OP_SELECTDB = 254
OP_EOF = 255

QUICKLIST_PLAIN = 1
QUICKLIST_PACKED = 2

_I64 = struct.Struct("<q")
_U64 = struct.Struct("<Q")
_I32 = struct.Struct("<i")
_U32 = struct.Struct("<I")
_F64 = struct.Struct("<d")
_SPILL = 1 << 20  # bytes buffered before a write to the file
_NUMSTART = lpmod._NUMSTART  # first bytes that may start an integer ("-" and digits)
_lzf_compress = lzf.compress_bytes
_QL_LIMITS = (4096, 8192, 16384, 32768, 65536)  # quicklist node bytes for fill -1..-5


class RdbError(Exception):
    """A file or payload that cannot be loaded; ``offset`` is where the problem is."""

    def __init__(self, message: str, offset: int | None = None) -> None:
        self.reason = message
        self.offset = offset
        super().__init__(message if offset is None else f"{message} (at offset {offset})")


class RdbChecksumError(RdbError):
    """The CRC64 at the end of the file is not that of its contents: ``computed`` is the
    contents', ``stored`` the file's (Redis's log names both)."""

    def __init__(self, computed: int, stored: int, offset: int) -> None:
        super().__init__(f"wrong RDB checksum, expected {stored:016x} got {computed:016x}", offset)
        self.computed = computed
        self.stored = stored


# --------------------------------------------------------------------------------------------
# Encoding primitives
# --------------------------------------------------------------------------------------------

_LEN6 = tuple(bytes((i,)) for i in range(64))
_STRING_KEY6 = tuple(bytes((T_STRING, i)) for i in range(64))  # type byte + 6-bit key length


def encode_len(n: int) -> bytes:
    """rdbSaveLen: the smallest of the 6-bit, 14-bit, 32-bit and 64-bit forms."""
    if n < 64:
        return _LEN6[n]
    if n < 16384:
        return bytes(((n >> 8) | 0x40, n & 0xFF))
    if n <= 0xFFFFFFFF:
        return b"\x80" + n.to_bytes(4, "big")
    return b"\x81" + (n & MASK64).to_bytes(8, "big")


def _int_encoding(s: bytes) -> bytes | None:
    """rdbTryIntegerEncoding: ``s`` as 0xC0/0xC1/0xC2 if it is a canonical int32."""
    v = lpmod.string_to_int64(s)
    if v is None:
        return None
    if -128 <= v <= 127:
        return b"\xc0" + (v & 0xFF).to_bytes(1, "little")
    if -32768 <= v <= 32767:
        return b"\xc1" + (v & 0xFFFF).to_bytes(2, "little")
    if -(1 << 31) <= v < (1 << 31):
        return b"\xc2" + (v & 0xFFFFFFFF).to_bytes(4, "little")
    return None


def encode_string(s: bytes | bytearray, compress: bool = False) -> bytes:
    """rdbSaveRawString: int-encoded if it can be, LZF if asked and it saves 4+ bytes, else raw."""
    n = len(s)
    if n <= 11:
        if n and _NUMSTART[s[0]]:
            enc = _int_encoding(s)
            if enc is not None:
                return enc
    elif compress and n > 20:
        z = _lzf_compress(s if type(s) is bytes else bytes(s), n - 4)
        if z:
            return b"\xc3" + encode_len(len(z)) + encode_len(n) + z
    if n < 64:
        return _LEN6[n] + s
    return encode_len(n) + s


def key_delay(usec: int) -> None:
    """Redis's debugDelay: sleep ``usec`` microseconds, or for a negative value 1 us
    once in ``-usec`` calls (rdb-key-save-delay / key-load-delay, for tests)."""
    if usec < 0:
        usec = 1 if random.randrange(-usec) == 0 else 0
    if usec:
        time.sleep(usec / 1e6)


def _delayed(items: Iterable[tuple[bytes, Any]], usec: int) -> Iterator[tuple[bytes, Any]]:
    for item in items:
        key_delay(usec)
        yield item


def _counted(items: Iterable[tuple[bytes, Any]], on_key: Callable[[], None]) -> Iterator[tuple[bytes, Any]]:
    for item in items:
        on_key()
        yield item


# --------------------------------------------------------------------------------------------
# Writer
# --------------------------------------------------------------------------------------------


@dataclass
class SaveOptions:
    """What a save needs from the configuration."""

    compression: bool = True  # rdbcompression
    checksum: bool = True  # rdbchecksum
    list_fill: int = -2  # list-max-listpack-size
    list_compress_depth: int = 0  # list-compress-depth: interior list nodes are written LZF'd
    aof_base: bool = False  # written as the AOF base (aux aof-base 1)
    redis_version: str = "7.0.15"
    used_mem: int = 0
    extra_aux: list[tuple[bytes, bytes]] = field(default_factory=list)
    functions: list[bytes] = field(default_factory=list)  # function libraries' code
    key_delay_us: int = 0  # rdb-key-save-delay: a pause per key, for tests that need a slow save
    # called before each key is written: a forked child's progress report to its parent
    on_key: Callable[[], None] | None = None
    # Active-Active streams as ordinary type-19 streams (their merged view): what a plain
    # replica's full sync and DUMP carry; files on disk keep rill's module value.
    plain: bool = False


class RdbWriter:
    """Streams an RDB (or a DUMP payload) into a buffer that spills to ``sink``.

    The CRC is computed on every spilled chunk, so memory stays bounded however
    large the dataset is; with no sink everything stays in ``out``.
    """

    def __init__(self, sink: BinaryIO | None = None, options: SaveOptions | None = None) -> None:
        self.sink = sink
        self.options = options or SaveOptions()
        self.compress = self.options.compression and lzf.HAVE_C
        self.out = bytearray()
        self.crc = 0
        self.written = 0
        self.keys = 0

    # -- plumbing --------------------------------------------------------
    def spill(self) -> None:
        """Hand the buffered bytes to the sink (checksumming them on the way)."""
        if self.sink is None or not self.out:
            return
        data = self.out
        if self.options.checksum:
            self.crc = crc64(data, self.crc)
        self.sink.write(data)
        self.written += len(data)
        self.out = bytearray()

    def string(self, s: bytes | bytearray) -> None:
        n = len(s)
        if n and n <= 20 and not _NUMSTART[s[0]]:
            # Neither an integer nor long enough to compress: length byte and bytes.
            self.out += _LEN6[n] + s
        else:
            self.out += encode_string(s, self.compress)

    # -- file structure ----------------------------------------------------
    def header(self) -> None:
        o = self.options
        self.out += b"REDIS%04d" % RDB_VERSION
        self.aux(b"redis-ver", o.redis_version.encode())
        self.aux(b"redis-bits", b"64")
        self.aux(b"ctime", b"%d" % int(time.time()))
        self.aux(b"used-mem", b"%d" % o.used_mem)
        for k, v in o.extra_aux:
            self.aux(k, v)
        self.aux(b"aof-base", b"1" if o.aof_base else b"0")
        self.functions(o.functions)

    def functions(self, codes: Iterable[bytes]) -> None:
        """One FUNCTION2 record per library: its code (rdbSaveFunctions; before the keys)."""
        for code in codes:
            self.out.append(OP_FUNCTION2)
            self.string(code)

    def aux(self, key: bytes, value: bytes) -> None:
        self.out.append(OP_AUX)
        self.string(key)
        self.string(value)

    def database(self, db_id: int, data: dict[bytes, Any], expires: dict[bytes, int]) -> None:
        """One non-empty database: SELECTDB, RESIZEDB, then every key."""
        if not data:
            return
        self.db_header(db_id, len(data), len(expires))
        self.write_keys(data.items(), expires)

    def db_header(self, db_id: int, nkeys: int, nexpires: int) -> None:
        """SELECTDB and RESIZEDB: what precedes a database's keys."""
        out = self.out
        out.append(OP_SELECTDB)
        out += encode_len(db_id)
        out.append(OP_RESIZEDB)
        out += encode_len(nkeys)
        out += encode_len(nexpires)

    def write_keys(self, items: Iterable[tuple[bytes, Any]], expires: dict[bytes, int]) -> None:
        """Every ``(key, value)`` of ``items``, each preceded by its expiry if it has one.

        Strings (most keys) are encoded inline: a short key or value that cannot be
        an integer is just its 6-bit length and bytes, the rest go through
        ``encode_string``.
        """
        if self.options.key_delay_us:
            items = _delayed(items, self.options.key_delay_us)
        if self.options.on_key is not None:
            items = _counted(items, self.options.on_key)
        out = self.out
        compress = self.compress
        writers = WRITERS
        pack_ms = _I64.pack
        len6 = _LEN6
        string_key6 = _STRING_KEY6
        numstart = _NUMSTART
        enc = encode_string
        n = 0
        for key, value in items:
            if expires:
                when = expires.get(key)
                if when is not None:
                    out.append(OP_EXPIRETIME_MS)
                    out += pack_ms(when)
            t = type(value)
            if t is bytes or t is bytearray:
                k = len(key)
                if k and k <= 20 and not numstart[key[0]]:
                    out += string_key6[k]
                    out += key
                else:
                    out.append(T_STRING)
                    out += enc(key, compress)
                k = len(value)
                if k and k <= 20 and not numstart[value[0]]:
                    out += len6[k]
                    out += value
                else:
                    out += enc(value, compress)
            else:
                writer = writers.get(value.type_name)
                if writer is None:
                    raise RdbError(f"no RDB writer for type {value.type_name.decode()}")
                # The type byte comes from the writer (it knows the encoding chosen).
                writer(self, value, key)
                out = self.out
            n += 1
            if not n & 1023 and len(out) > _SPILL:
                self.spill()
                out = self.out
        self.keys += n

    def raw(self, data: bytes) -> None:
        """Bytes already in RDB form (a section another writer encoded)."""
        self.out += data
        if len(self.out) > _SPILL:
            self.spill()

    def value(self, value: Any) -> None:
        """Type byte and object, without a key (DUMP)."""
        t = type(value)
        if t is bytes or t is bytearray:
            self.out.append(T_STRING)
            self.string(value)
        else:
            WRITERS[value.type_name](self, value, None)

    def finish(self) -> None:
        """EOF opcode and checksum (0 when rdbchecksum is off), then a last spill."""
        self.out.append(OP_EOF)
        if self.options.checksum:
            if self.sink is None:
                crc = crc64(self.out, self.crc)
            else:
                self.spill()
                crc = self.crc
        else:
            crc = 0
        self.out += _U64.pack(crc)
        if self.sink is not None:
            data = self.out
            self.sink.write(data)
            self.written += len(data)
            self.out = bytearray()


# A writer emits the type byte, then the key (when ``key`` is not None), then the object.
Writer = Callable[[RdbWriter, Any, "bytes | None"], None]


def _single_node_lp(value: ListValue, fill: int, threshold: int) -> bytes | None:
    """The one listpack quicklist would keep ``value`` in, or None if it may need more.

    A conservative test: each element costs at most its length plus 12 bytes of
    encoding, backlen and quicklist's insert estimate, so staying under the node size
    limit for the sum means no insert was ever refused.
    """
    count = len(value)
    if fill >= 0 or fill < -5 or count >= 65535:
        return None
    budget = _QL_LIMITS[-fill - 1] - 7 - 12 * count
    if budget < 0:
        return None
    return lpmod.pack(value, budget, threshold)


def _write_list(w: RdbWriter, value: ListValue, key: bytes | None) -> None:
    out = w.out
    out.append(T_LIST_QUICKLIST_2)
    if key is not None:
        w.string(key)
    fill = w.options.list_fill
    threshold = packed_threshold()
    lp = _single_node_lp(value, fill, threshold)
    if lp is not None:
        out += b"\x01\x02"  # one node, PACKED
        w.string(lp)
        return
    nodes = list(value.nodes(fill, threshold))
    out += encode_len(len(nodes))
    # Nodes Redis keeps compressed are written as the LZF blob it holds (whatever
    # rdbcompression says); the rest go through the usual string encoding.
    squeezed = compressed_nodes(len(nodes), w.options.list_compress_depth)
    for i, node in enumerate(nodes):
        if len(node) == 1 and len(node[0]) >= threshold:
            out += b"\x01"
            raw = node[0]
        else:
            out += b"\x02"
            raw = lpmod.pack(node)
        z = compress_node(raw, lzf.compress) if i in squeezed else None
        if z is None:
            w.string(raw)
        else:
            out += b"\xc3" + encode_len(len(z)) + encode_len(len(raw)) + z


def _write_stream(w: RdbWriter, s: Stream, key: bytes | None) -> None:
    if s.__class__ is ActiveStream:
        # An Active-Active stream: rill's module value on disk, the merged ordinary
        # stream for a plain replica or a DUMP.
        if w.options.plain:
            s = s.to_plain()
        else:
            _write_active_stream(w, s, key)
            return
    out = w.out
    out.append(T_STREAM_LISTPACKS_2)
    if key is not None:
        w.string(key)
    out += encode_len(s.node_count())
    compress = w.compress
    spill = w.sink is not None
    i = 0
    for master, lp in s.raw_nodes():
        out += b"\x10"  # the 16-byte node key is always stored raw
        out += master.to_bytes(16, "big")
        out += encode_string(lp, compress)
        i += 1
        if spill and not i & 255 and len(out) > _SPILL:
            w.spill()
            out = w.out
    ln = encode_len
    last, first, maxdel = s.last_id, s.first_id, s.max_deleted_entry_id
    out += (ln(s.length) + ln(last >> 64) + ln(last & MASK64) + ln(first >> 64) + ln(first & MASK64)
            + ln(maxdel >> 64) + ln(maxdel & MASK64) + ln(s.entries_added))
    groups = s.groups()
    out += encode_len(len(groups))
    if not groups:
        if key is not None and s.idmp is not None:
            w.aux(STREAM_EXT_AUX, stream_ext(s, key))
        return
    pack_ms = _I64.pack
    for g in groups:
        w.string(g.name)
        out += ln(g.last_id >> 64) + ln(g.last_id & MASK64)
        out += ln(g.entries_read & MASK64)
        if g.nacked:
            # Owner-less (XNACKed) entries travel in the rill-stream-ext AUX field only:
            # Redis's deep check rejects a PEL entry without a consumer.
            owned = [(sid, nack) for sid, nack in g.pel.items() if nack.consumer is not None]
            out += ln(len(owned))
            pel_items = iter(owned)
        else:
            out += ln(len(g.pel))
            pel_items = g.pel.items()
        for sid, nack in pel_items:
            out += sid.to_bytes(16, "big")
            out += pack_ms(nack.delivery_time)
            out += ln(nack.delivery_count)
        consumers = g.consumers_sorted()
        out += ln(len(consumers))
        for c in consumers:
            w.string(c.name)
            out += pack_ms(c.seen_time)
            out += ln(len(c.pel))
            for sid in c.pel.keys():
                out += sid.to_bytes(16, "big")
        if spill and len(out) > _SPILL:
            w.spill()
            out = w.out
    if key is not None:
        ext = stream_ext(s, key)
        if ext is not None:
            w.aux(STREAM_EXT_AUX, ext)


STREAM_EXT_AUX = b"rill-stream-ext"
# The Active-Active engine's state (clock, sequence, tombstones) in a file that holds
# Active-Active data; opaque here (the engine's export_state/import_state).
AA_STATE_AUX = b"aa-state"
AA_BACKLOG_AUX = b"aa-backlog"  # its backlog of own effect records, likewise opaque here


def stream_ext(s: Stream, key: bytes) -> bytes | None:
    """The ``rill-stream-ext`` AUX value of a stream, None when it has no such state."""
    st = s.idmp
    released = [(g, [sid for sid in g.nacked if sid in g.pel]) for g in s.groups() if g.nacked]
    if st is None and not released:
        return None
    ln = encode_len
    out = bytearray(b"\x01")
    out += encode_string(key)
    if st is None:
        out.append(0)
    else:
        out.append(1)
        out += _idmp_bytes(st)
    out += ln(len(released))
    pack_ms = _I64.pack
    for g, ids in released:
        out += encode_string(g.name) + ln(len(ids))
        for sid in ids:
            nack = g.pel[sid]
            out += sid.to_bytes(16, "big") + pack_ms(nack.delivery_time) + ln(nack.delivery_count)
    return bytes(out)


def _idmp_bytes(st: IdmpState) -> bytes:
    """A stream's IDMP settings, counters and producer history (rill-stream-ext's part)."""
    ln = encode_len
    out = bytearray()
    out += ln(st.duration) + ln(st.maxsize) + ln(1 if st.configured else 0)
    out += ln(st.iids_added) + ln(st.iids_duplicates) + ln(len(st.producers))
    for pid, iids in st.producers.items():
        out += encode_string(pid) + ln(len(iids))
        for iid, (sid, at) in iids.items():
            out += encode_string(iid) + sid.to_bytes(16, "big") + _I64.pack(at)
    return bytes(out)


def _read_idmp(r: RdbReader) -> IdmpState:
    st = IdmpState(r.length(), r.length())
    st.configured = bool(r.length())
    st.iids_added = r.length()
    st.iids_duplicates = r.length()
    for _ in range(r.length()):
        pid = r.string()
        for _ in range(r.length()):
            iid = r.string()
            sid = int.from_bytes(r.raw(16), "big")
            st.restore(pid, iid, sid, _I64.unpack(r.raw(8))[0])
    return st


def apply_stream_ext(db: dict[bytes, Any], blob: bytes) -> None:
    """Install a ``rill-stream-ext`` value on its key (ignored if the key was skipped)."""
    r = RdbReader(blob)
    try:
        if r.byte() != 1:
            raise RdbError("unknown rill-stream-ext version")
        key = r.string()
        s = db.get(key)
        if not isinstance(s, Stream):
            return
        if r.byte():
            s.idmp = _read_idmp(r)
        for _ in range(r.length()):
            g = s.get_group(r.string())
            for _ in range(r.length()):
                sid = int.from_bytes(r.raw(16), "big")
                at = _I64.unpack(r.raw(8))[0]
                count = r.length()
                if g is not None and g.load_nack(sid, at, 0):
                    g.release(sid, count)
                    g.pel[sid].delivery_time = at
    except (IndexError, struct.error) as e:
        raise RdbError(f"corrupt rill-stream-ext: {e}") from None


# -- Active-Active streams: a module value of rill's own ---------------------------------------
#
# An ActiveStream (storage/stream/active.py) is several append-only sub-streams plus group and
# causality metadata that no Redis type can hold. On disk (RDB files, AOF bases, full-sync
# payloads) it is an RDB_TYPE_MODULE_2 value (7), the framing Redis keeps for module types:
#
#     7 <key> <len module-id> (<len opcode> <field>)* <len 0>
#
# The module id packs a 9-character type name, each character as its 6-bit index in
# ``A-Za-z0-9-_``, then a 10-bit encoding version (moduleTypeEncodeId). Field opcodes: 1 a
# signed and 2 an unsigned integer (each an RDB length), 3 a binary float, 4 a binary double,
# 5 an RDB string, 0 the end (rdb.h RDB_MODULE_OPCODE_*). redis-check-rdb walks such a value
# field by field without knowing the module, so it still accepts the file; a real
# redis-server refuses to load it (it has no such module type), which is right: the data is
# rill's. Replicas and DUMP get the merged ordinary stream instead (SaveOptions.plain).
#
# The fields of ``rill-aast`` encoding version 1, in order (u = unsigned, i = signed, s =
# string, an ID a 16-byte big-endian string like a node key):
#
#     u region | u subs | subs x (u region | stream)           sub-streams, regions ascending
#     stream-meta | u groups | groups x group                  the merged stream and its groups
#     aa-meta                                                  see _write_aa_meta
#     s ext                                                    rill-stream-ext of the merged
#                                                              stream (IDMP, XNACK order) or ""
#
#     stream      = u nodes | nodes x (s node-key | s listpack) | stream-meta
#     stream-meta = u length | s last-id | s first-id | s max-deleted-id | u entries-added
#     group       = s name | s last-id | i entries-read
#                   | u pel | pel x (s id | i delivery-ms | u delivery-count)
#                   | u consumers | consumers x (s name | i seen-ms | i active-ms
#                                                | u owned | owned x s id)
#                   | u released | released x s id             XNACKed IDs in release order

_MODULE_CHARSET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
MOP_EOF = 0
MOP_SINT = 1
MOP_UINT = 2
MOP_FLOAT = 3
MOP_DOUBLE = 4
MOP_STRING = 5


def module_type_id(name: bytes, encver: int) -> int:
    """moduleTypeEncodeId: a 9-character type name and a 10-bit encoding version as one
    64-bit id (name[0] in the top 6 bits)."""
    if len(name) != 9 or not 0 <= encver <= 1023:
        raise ValueError("a module type name has 9 characters and a version 0..1023")
    mid = 0
    for ch in name:
        pos = _MODULE_CHARSET.find(bytes((ch,)))
        if pos < 0:
            raise ValueError(f"character {chr(ch)!r} is not allowed in a module type name")
        mid = (mid << 6) | pos
    return (mid << 10) | encver


def module_type_name(mid: int) -> bytes:
    """moduleTypeNameByID: the 9-character name an id was made from."""
    mid >>= 10
    out = bytearray(9)
    for j in range(8, -1, -1):
        out[j] = _MODULE_CHARSET[mid & 63]
        mid >>= 6
    return bytes(out)


AA_STREAM_TYPE = b"rill-aast"
AA_STREAM_ENCVER = 1
AA_STREAM_ID = module_type_id(AA_STREAM_TYPE, AA_STREAM_ENCVER)
_AA_STREAM_ID_BASE = AA_STREAM_ID >> 10
_OP_U = bytes((MOP_UINT,))
_OP_I = bytes((MOP_SINT,))
_OP_S = bytes((MOP_STRING,))
_OP_ID = bytes((MOP_STRING, 16))  # string opcode + the 6-bit length of a 16-byte ID


class ModuleOut:
    """Appends opcode-framed module fields to an RdbWriter's buffer."""

    __slots__ = ("w",)

    def __init__(self, w: RdbWriter) -> None:
        self.w = w

    def u(self, n: int) -> None:
        self.w.out += _OP_U + encode_len(n)

    def i(self, n: int) -> None:
        self.w.out += _OP_I + encode_len(n & MASK64)

    def s(self, b: bytes | bytearray) -> None:
        self.w.out += _OP_S + encode_string(b, self.w.compress)

    def sid(self, sid: int) -> None:
        self.w.out += _OP_ID + sid.to_bytes(16, "big")

    def eof(self) -> None:
        self.w.out.append(MOP_EOF)


class ModuleIn:
    """Reads opcode-framed module fields, each checked against the opcode expected."""

    __slots__ = ("r",)

    def __init__(self, r: RdbReader) -> None:
        self.r = r

    def _op(self, want: int) -> None:
        at = self.r.pos
        op = self.r.length()
        if op != want:
            raise self.r.fail(f"module value field has opcode {op}, expected {want}", at)

    def u(self) -> int:
        self._op(MOP_UINT)
        return self.r.length()

    def i(self) -> int:
        self._op(MOP_SINT)
        return self.r.signed_length()

    def s(self) -> bytes:
        self._op(MOP_STRING)
        return self.r.string()

    def sid(self) -> int:
        at = self.r.pos
        b = self.s()
        if len(b) != 16:
            raise self.r.fail("a stream ID field is not 16 bytes", at)
        return int.from_bytes(b, "big")

    def eof(self) -> None:
        self._op(MOP_EOF)


def _aa_stream_meta(m: ModuleOut, s: Stream) -> None:
    m.u(s.length)
    m.sid(s.last_id)
    m.sid(s.first_id)
    m.sid(s.max_deleted_entry_id)
    m.u(s.entries_added)


def _aa_sub_stream(m: ModuleOut, s: Stream) -> None:
    w = m.w
    m.u(s.node_count())
    compress = w.compress
    spill = w.sink is not None
    i = 0
    for master, lp in s.raw_nodes():
        out = w.out
        out += _OP_ID + master.to_bytes(16, "big")
        out += _OP_S + encode_string(lp, compress)
        i += 1
        if spill and not i & 255 and len(out) > _SPILL:
            w.spill()
    _aa_stream_meta(m, s)


def _aa_group(m: ModuleOut, g: Any) -> None:
    m.s(g.name)
    m.sid(g.last_id)
    m.i(g.entries_read)
    m.u(len(g.pel))
    for sid, nack in g.pel.items():
        m.sid(sid)
        m.i(nack.delivery_time)
        m.u(nack.delivery_count)
    consumers = g.consumers_sorted()
    m.u(len(consumers))
    for c in consumers:
        m.s(c.name)
        m.i(c.seen_time)
        m.i(c.active_time)
        m.u(len(c.pel))
        for sid in c.pel.keys():
            m.sid(sid)
    released = list(g.nacked) if g.nacked else []
    m.u(len(released))
    for sid in released:
        m.sid(sid)


def _clock(m: ModuleOut, vc: dict[int, int]) -> None:
    items = sorted(vc.items())
    m.u(len(items))
    for region, n in items:
        m.u(region)
        m.u(n)


def _read_clock(m: ModuleIn) -> dict[int, int]:
    return {m.u(): m.u() for _ in range(m.u())}


def _write_aa_meta(m: ModuleOut, s: Any) -> None:
    """What only an Active-Active stream has, per group (storage/stream/active.py):

        u clocks | clocks x (s group | clock)        the clock of the effect that created it
        u states | states x (s group | s base | u cursors | cursors x (u region | s id)
                             | s ack-base | u acked | acked x (u region | s id) | s seen)
                                                     its delivery cursor per sub-stream and
                                                     the acknowledged prefix per sub-stream
                                                     already announced or learnt
        clock = u n | n x (u region | u count)
    """
    group_vc = sorted(s.group_vc.items())
    m.u(len(group_vc))
    for name, vc in group_vc:
        m.s(name)
        _clock(m, vc)
    states = sorted(s._gs.items())
    m.u(len(states))
    for name, st in states:
        m.s(name)
        m.sid(st.base)
        _id_map(m, st.cur)
        m.sid(st.abase)
        _id_map(m, st.acked)
        m.sid(st.seen)


def _id_map(m: ModuleOut, ids: dict[int, int]) -> None:
    items = sorted(ids.items())
    m.u(len(items))
    for region, sid in items:
        m.u(region)
        m.sid(sid)


def _read_id_map(m: ModuleIn) -> dict[int, int]:
    return {m.u(): m.sid() for _ in range(m.u())}


def _read_aa_meta(m: ModuleIn, s: Any) -> None:
    r = m.r
    for _ in range(m.u()):
        name = m.s()
        s.group_vc[name] = _read_clock(m)
    for _ in range(m.u()):
        at = r.pos
        name = m.s()
        if s.get_group(name) is None:
            raise r.fail("delivery state of a consumer group the stream does not have", at)
        base = m.sid()
        st = _GroupState(base, _read_id_map(m), 0)
        st.abase = m.sid()
        st.acked = _read_id_map(m)
        st.seen = m.sid()
        s._gs[name] = st


def _write_active_stream(w: RdbWriter, s: Any, key: bytes | None) -> None:
    """An ActiveStream as module type ``rill-aast`` (layout above)."""
    w.out.append(T_MODULE_2)
    if key is not None:
        w.string(key)
    w.out += encode_len(AA_STREAM_ID)
    m = ModuleOut(w)
    m.u(s.region)
    subs = s.sub_streams()
    m.u(len(subs))
    for region, sub in subs:
        m.u(region)
        _aa_sub_stream(m, sub)
    _aa_stream_meta(m, s)
    groups = s.groups()
    m.u(len(groups))
    for g in groups:
        _aa_group(m, g)
    _write_aa_meta(m, s)
    m.s(_idmp_bytes(s.idmp) if s.idmp is not None else b"")
    m.eof()
    if w.sink is not None and len(w.out) > _SPILL:
        w.spill()


def _write_hash(w: RdbWriter, value: Any, key: bytes | None) -> None:
    out = w.out
    if value.encoding() == b"listpack":
        out.append(T_HASH_LISTPACK)
        if key is not None:
            w.string(key)
        w.string(lpmod.pack([x for pair in value.rdb_items() for x in pair]))
        return
    out.append(T_HASH)
    if key is not None:
        w.string(key)
    out += encode_len(len(value))
    for f, v in value.rdb_items():
        w.string(f)
        w.string(v)


def _intset_blob(members: list[bytes]) -> bytes:
    """An intset: width (2, 4 or 8), count, then the values ascending, little-endian."""
    values = sorted(int(m) for m in members)
    lo, hi = values[0], values[-1]
    width = 2 if -(1 << 15) <= lo and hi < (1 << 15) else 4 if -(1 << 31) <= lo and hi < (1 << 31) else 8
    body = b"".join(v.to_bytes(width, "little", signed=True) for v in values)
    return _U32.pack(width) + _U32.pack(len(values)) + body


def _write_set(w: RdbWriter, value: Any, key: bytes | None) -> None:
    out = w.out
    members = value.rdb_items()
    if value.encoding() == b"intset":
        out.append(T_SET_INTSET)
        if key is not None:
            w.string(key)
        w.string(_intset_blob(members))
        return
    out.append(T_SET)
    if key is not None:
        w.string(key)
    out += encode_len(len(members))
    for m in members:
        w.string(m)


def _write_zset(w: RdbWriter, value: Any, key: bytes | None) -> None:
    out = w.out
    if value.encoding() == b"listpack":
        # The listpack Redis holds: member, score (an integer when the score is one).
        out.append(T_ZSET_LISTPACK)
        if key is not None:
            w.string(key)
        d2s = zsetmod.d2string
        w.string(lpmod.pack([x for m, sc in value.items() for x in (m, d2s(sc))]))
        return
    out.append(T_ZSET_2)
    if key is not None:
        w.string(key)
    out += encode_len(len(value))
    pack = _F64.pack
    for m, score in value.rdb_items():  # highest score first, as Redis walks its skiplist
        w.string(m)
        out += pack(score)


WRITERS: dict[bytes, Writer] = {
    b"list": _write_list,
    b"stream": _write_stream,
    b"hash": _write_hash,
    b"set": _write_set,
    b"zset": _write_zset,
}


# --------------------------------------------------------------------------------------------
# Reader
# --------------------------------------------------------------------------------------------

_EMPTY = object()  # a reader's "this key is an empty collection: skip it"


class RdbReader:
    """Decodes RDB structures from an in-memory buffer, tracking the offset for errors."""

    __slots__ = ("buf", "pos", "end", "deep", "version")

    def __init__(self, buf: bytes, pos: int = 0, deep: bool = False, version: int = RDB_VERSION) -> None:
        self.buf = buf
        self.pos = pos
        self.end = len(buf)
        self.deep = deep
        self.version = version

    def fail(self, message: str, at: int | None = None) -> RdbError:
        return RdbError(message, self.pos if at is None else at)

    def need(self, n: int) -> None:
        if self.pos + n > self.end:
            raise self.fail("unexpected end of data")

    def byte(self) -> int:
        p = self.pos
        if p >= self.end:
            raise self.fail("unexpected end of data")
        self.pos = p + 1
        return self.buf[p]

    def raw(self, n: int) -> bytes:
        p = self.pos
        q = p + n
        if q > self.end:
            raise self.fail("unexpected end of data")
        self.pos = q
        return self.buf[p:q]

    def length(self) -> int:
        """rdbLoadLen for contexts where an encoded (string) form is an error."""
        buf = self.buf
        p = self.pos
        if p >= self.end:
            raise self.fail("unexpected end of data")
        b = buf[p]
        if b < 0x40:
            self.pos = p + 1
            return b
        if b < 0x80:
            if p + 2 > self.end:
                raise self.fail("unexpected end of data")
            self.pos = p + 2
            return ((b & 0x3F) << 8) | buf[p + 1]
        if b == 0x80:
            if p + 5 > self.end:
                raise self.fail("unexpected end of data")
            self.pos = p + 5
            return int.from_bytes(buf[p + 1 : p + 5], "big")
        if b == 0x81:
            if p + 9 > self.end:
                raise self.fail("unexpected end of data")
            self.pos = p + 9
            return int.from_bytes(buf[p + 1 : p + 9], "big")
        raise self.fail(f"unknown length encoding 0x{b:02x}")

    def lengths(self, n: int) -> list[int]:
        """``n`` consecutive lengths (stream metadata); 6-bit ones without a method call."""
        buf = self.buf
        end = self.end
        out = []
        for _ in range(n):
            p = self.pos
            if p < end and buf[p] < 0x40:
                out.append(buf[p])
                self.pos = p + 1
            else:
                out.append(self.length())
        return out

    def signed_length(self) -> int:
        """A C long long stored with rdbSaveLen (entries_read: -1 is all ones)."""
        v = self.length()
        return v - (1 << 64) if v >= 1 << 63 else v

    def string(self) -> bytes:
        """rdbGenericLoadStringObject: raw, int-encoded (8/16/32) or LZF."""
        buf = self.buf
        p = self.pos
        end = self.end
        if p >= end:
            raise self.fail("unexpected end of data")
        b = buf[p]
        if b < 0x40:
            n = b
            p += 1
        elif b < 0x80:
            if p + 2 > end:
                raise self.fail("unexpected end of data")
            n = ((b & 0x3F) << 8) | buf[p + 1]
            p += 2
        elif b == 0x80:
            if p + 5 > end:
                raise self.fail("unexpected end of data")
            n = int.from_bytes(buf[p + 1 : p + 5], "big")
            p += 5
        elif b == 0x81:
            if p + 9 > end:
                raise self.fail("unexpected end of data")
            n = int.from_bytes(buf[p + 1 : p + 9], "big")
            p += 9
        elif b >= 0xC0:
            enc = b & 0x3F
            if enc == 0:
                if p + 2 > end:
                    raise self.fail("unexpected end of data")
                self.pos = p + 2
                return b"%d" % int.from_bytes(buf[p + 1 : p + 2], "little", signed=True)
            if enc == 1:
                if p + 3 > end:
                    raise self.fail("unexpected end of data")
                self.pos = p + 3
                return b"%d" % int.from_bytes(buf[p + 1 : p + 3], "little", signed=True)
            if enc == 2:
                if p + 5 > end:
                    raise self.fail("unexpected end of data")
                self.pos = p + 5
                return b"%d" % int.from_bytes(buf[p + 1 : p + 5], "little", signed=True)
            if enc == 3:
                start = p
                self.pos = p + 1
                clen = self.length()
                ulen = self.length()
                data = self.raw(clen)
                try:
                    return lzf.decompress(data, ulen)
                except lzf.LZFError as e:
                    raise self.fail(f"invalid LZF compressed string: {e}", start) from None
            raise self.fail(f"unknown string encoding {enc}")
        else:
            raise self.fail(f"unknown length encoding 0x{b:02x}")
        q = p + n
        if q > end:
            raise self.fail("unexpected end of data")
        self.pos = q
        return buf[p:q]

    def ms_time(self) -> int:
        p = self.pos
        if p + 8 > self.end:
            raise self.fail("unexpected end of data")
        self.pos = p + 8
        return _I64.unpack_from(self.buf, p)[0]

    def double_binary(self) -> float:
        p = self.pos
        if p + 8 > self.end:
            raise self.fail("unexpected end of data")
        self.pos = p + 8
        return _F64.unpack_from(self.buf, p)[0]

    def double_string(self) -> float:
        """The old ZSET score form: u8 length then ASCII; 253/254/255 = nan/+inf/-inf."""
        n = self.byte()
        if n == 253:
            return math.nan
        if n == 254:
            return math.inf
        if n == 255:
            return -math.inf
        at = self.pos
        text = self.raw(n)
        try:
            return float(text)
        except ValueError:
            raise self.fail("invalid double value", at) from None

    def object(self, rdbtype: int) -> Any:
        """One value of type ``rdbtype`` (the type byte already read); _EMPTY to skip."""
        reader = READERS.get(rdbtype)
        if reader is None:
            if rdbtype == T_MODULE:
                raise self.fail("the RDB holds a module value (modules are not supported)")
            if rdbtype in (22, 23, 24, 25):
                raise self.fail(f"RDB type {rdbtype} (hash field expiration) is not supported")
            raise self.fail(f"unknown RDB encoding type {rdbtype}")
        return reader(self, rdbtype)


Reader = Callable[[RdbReader, int], Any]


# -- strings and lists --------------------------------------------------------------------------
def _read_string(r: RdbReader, t: int) -> bytes:
    return r.string()


def _lp_values(r: RdbReader, lp: bytes, at: int, what: str) -> list[bytes]:
    """Decode a listpack blob to bytes values, refusing one that does not walk cleanly."""
    values = lpmod.unpack(lp)
    if values is None:
        raise r.fail(f"{what} listpack integrity check failed", at)
    return values


def _read_list_plain(r: RdbReader, t: int) -> Any:
    n = r.length()
    if n == 0:
        return _EMPTY
    return ListValue(r.string() for _ in range(n))


def _read_quicklist(r: RdbReader, t: int) -> Any:
    nodes = r.length()
    if nodes == 0:
        return _EMPTY
    buf = r.buf
    p = r.pos
    if nodes == 1 and t == T_LIST_QUICKLIST_2 and p + 2 < r.end and buf[p] == QUICKLIST_PACKED:
        # One packed node (every small list): decode its listpack straight into the value.
        r.pos = p + 1
        at = r.pos
        values = lpmod.unpack(r.string())
        if values is None:
            raise r.fail("quicklist listpack integrity check failed", at)
        return ListValue(values) if values else _EMPTY
    out = ListValue()
    for _ in range(nodes):
        container = QUICKLIST_PACKED
        if t == T_LIST_QUICKLIST_2:
            at = r.pos
            container = r.length()
            if container not in (QUICKLIST_PACKED, QUICKLIST_PLAIN):
                raise r.fail("quicklist integrity check failed", at)
        at = r.pos
        blob = r.string()
        if not blob:
            raise r.fail("empty quicklist node", at)
        if container == QUICKLIST_PLAIN:
            out.append(blob)
        elif t == T_LIST_QUICKLIST_2:
            out.extend(_lp_values(r, blob, at, "quicklist"))
        else:
            out.extend(_ziplist_values(r, blob, at))
    return out if out else _EMPTY


def _read_list_ziplist(r: RdbReader, t: int) -> Any:
    at = r.pos
    values = _ziplist_values(r, r.string(), at)
    return ListValue(values) if values else _EMPTY


# -- ziplist / intset / zipmap (files from before 7.0) --------------------------------------------
def _ziplist_values(r: RdbReader, zl: bytes, at: int) -> list[bytes]:
    """Every entry of a ziplist as bytes (ints as their decimal string)."""
    try:
        n = len(zl)
        if n < 11 or int.from_bytes(zl[0:4], "little") != n or zl[-1] != 0xFF:
            raise ValueError
        p = 10
        out: list[bytes] = []
        while zl[p] != 0xFF:
            p += 1 if zl[p] < 254 else 5  # prevlen
            b = zl[p]
            kind = b >> 6
            if kind == 0:
                ln = b & 0x3F
                p += 1
            elif kind == 1:
                ln = ((b & 0x3F) << 8) | zl[p + 1]
                p += 2
            elif kind == 2:
                ln = int.from_bytes(zl[p + 1 : p + 5], "big")
                p += 5
            else:
                p += 1
                if b == 0xC0:
                    v, w = int.from_bytes(zl[p : p + 2], "little", signed=True), 2
                elif b == 0xD0:
                    v, w = int.from_bytes(zl[p : p + 4], "little", signed=True), 4
                elif b == 0xE0:
                    v, w = int.from_bytes(zl[p : p + 8], "little", signed=True), 8
                elif b == 0xF0:
                    v, w = int.from_bytes(zl[p : p + 3], "little", signed=True), 3
                elif b == 0xFE:
                    v, w = int.from_bytes(zl[p : p + 1], "little", signed=True), 1
                elif 0xF1 <= b <= 0xFD:
                    v, w = (b & 0x0F) - 1, 0
                else:
                    raise ValueError
                if p + w > n - 1:
                    raise ValueError
                out.append(b"%d" % v)
                p += w
                continue
            if p + ln > n - 1:
                raise ValueError
            out.append(zl[p : p + ln])
            p += ln
        if p != n - 1:
            raise ValueError
        return out
    except (ValueError, IndexError):
        raise r.fail("ziplist integrity check failed", at) from None


def _intset_values(r: RdbReader, blob: bytes, at: int) -> list[bytes]:
    if len(blob) < 8:
        raise r.fail("intset integrity check failed", at)
    width = int.from_bytes(blob[0:4], "little")
    count = int.from_bytes(blob[4:8], "little")
    if width not in (2, 4, 8) or len(blob) != 8 + width * count:
        raise r.fail("intset integrity check failed", at)
    fmt = {2: "h", 4: "i", 8: "q"}[width]
    values = struct.unpack_from(f"<{count}{fmt}", blob, 8)
    for a, b in zip(values, values[1:], strict=False):
        if a >= b:
            raise r.fail("intset integrity check failed", at)
    return [b"%d" % v for v in values]


def _zipmap_pairs(r: RdbReader, zm: bytes, at: int) -> list[tuple[bytes, bytes]]:
    try:
        p = 1
        out: list[tuple[bytes, bytes]] = []

        def take_len() -> int:
            nonlocal p
            b = zm[p]
            if b < 254:
                p += 1
                return b
            if b == 254:
                v = int.from_bytes(zm[p + 1 : p + 5], "little")
                p += 5
                return v
            raise ValueError

        while zm[p] != 0xFF:
            kl = take_len()
            k = zm[p : p + kl]
            p += kl
            vl = take_len()
            free = zm[p]
            p += 1
            v = zm[p : p + vl]
            if len(k) != kl or len(v) != vl:
                raise ValueError
            p += vl + free
            out.append((k, v))
        if p != len(zm) - 1:
            raise ValueError
        return out
    except (ValueError, IndexError):
        raise r.fail("zipmap integrity check failed", at) from None


# -- hashes, sets, zsets: decoded generically, built by their storage module -----------------------
def _pairs_from(values: list[bytes], r: RdbReader, at: int) -> list[tuple[bytes, bytes]]:
    if len(values) % 2:
        raise r.fail("odd number of elements in a pairs encoding", at)
    return list(zip(values[0::2], values[1::2], strict=True))


def _check_dups(r: RdbReader, names: Iterable[bytes], at: int, what: str) -> None:
    seen: set[bytes] = set()
    for name in names:
        if name in seen:
            raise r.fail(f"duplicate {what} in a {what} collection", at)
        seen.add(name)


def _read_set(r: RdbReader, t: int) -> Any:
    at = r.pos
    if t == T_SET:
        n = r.length()
        if n == 0:
            return _EMPTY
        members = [r.string() for _ in range(n)]
    elif t == T_SET_INTSET:
        members = _intset_values(r, r.string(), at)
    else:  # T_SET_LISTPACK (7.2+)
        members = _lp_values(r, r.string(), at, "set")
    if not members:
        return _EMPTY
    _check_dups(r, members, at, "set member")
    return BUILDERS[b"set"](members)


def _read_hash(r: RdbReader, t: int) -> Any:
    at = r.pos
    if t == T_HASH:
        n = r.length()
        if n == 0:
            return _EMPTY
        pairs = [(r.string(), r.string()) for _ in range(n)]
    elif t == T_HASH_ZIPMAP:
        pairs = _zipmap_pairs(r, r.string(), at)
    elif t == T_HASH_ZIPLIST:
        pairs = _pairs_from(_ziplist_values(r, r.string(), at), r, at)
    else:  # T_HASH_LISTPACK
        pairs = _pairs_from(_lp_values(r, r.string(), at, "hash"), r, at)
    if not pairs:
        return _EMPTY
    _check_dups(r, (f for f, _ in pairs), at, "hash field")
    return BUILDERS[b"hash"](pairs)


def _score(r: RdbReader, s: bytes, at: int) -> float:
    try:
        v = float(s)
    except ValueError:
        raise r.fail("invalid sorted set score", at) from None
    if math.isnan(v):
        raise r.fail("sorted set score is NaN", at)
    return v


def _read_zset(r: RdbReader, t: int) -> Any:
    at = r.pos
    if t in (T_ZSET, T_ZSET_2):
        n = r.length()
        if n == 0:
            return _EMPTY
        pairs = []
        for _ in range(n):
            m = r.string()
            sat = r.pos
            score = r.double_binary() if t == T_ZSET_2 else r.double_string()
            if math.isnan(score):
                raise r.fail("sorted set score is NaN", sat)
            pairs.append((m, score))
    else:
        values = (
            _ziplist_values(r, r.string(), at)
            if t == T_ZSET_ZIPLIST
            else _lp_values(r, r.string(), at, "zset")
        )
        pairs = [(m, _score(r, s, at)) for m, s in _pairs_from(values, r, at)]
    if not pairs:
        return _EMPTY
    _check_dups(r, (m for m, _ in pairs), at, "sorted set member")
    return BUILDERS[b"zset"](pairs)


# -- streams --------------------------------------------------------------------------------------
def _read_stream(r: RdbReader, t: int) -> Stream:
    s = Stream()
    nodes = r.length()
    deep = r.deep
    prev = -1
    rax = s._rax  # bulk load: nodes arrive in key order, appended verbatim
    left = nodes
    if not deep and _nodes.COMPILED and type(r.buf) is bytes and nodes:
        # The common run of nodes in one compiled loop (persistence/nodes.py); it stops
        # before any node it does not take, and the loop below reads (or refuses) the rest.
        keys: list[int] = []
        lps: list[bytes] = []
        r.pos = _nodes.read_nodes(r.buf, r.pos, nodes, prev, keys, lps)
        if keys:
            rax.extend(keys, lps)
            prev = keys[-1]
            left -= len(keys)
    for _ in range(left):
        at = r.pos
        nodekey = r.string()
        if len(nodekey) != 16:
            raise r.fail("stream node key entry is not the size of a stream ID", at)
        at = r.pos
        lp = r.string()
        if deep:
            ok = validate_node(lp, True)
        else:
            n = len(lp)
            ok = n >= 7 and int.from_bytes(lp[0:4], "little") == n and lp[n - 1] == 0xFF
        if not ok:
            raise r.fail("stream listpack integrity check failed", at)
        if lp[6] == 0xFF:
            raise r.fail("empty listpack inside stream", at)
        master = int.from_bytes(nodekey, "big")
        if master > prev:
            rax.insert(master, lp)
            prev = master
        elif master in rax:
            raise r.fail("listpack re-added with existing key", at)
        else:
            rax.insert(master, lp)
    if t == T_STREAM_LISTPACKS:
        s.length, last_ms, last_seq = r.lengths(3)
        s.last_id = (last_ms << 64) | last_seq
        s.max_deleted_entry_id = 0
        s.entries_added = s.length
        s.first_id = s.edge_id(True, True) if s.length else 0
    else:
        length, last_ms, last_seq, first_ms, first_seq, md_ms, md_seq, added = r.lengths(8)
        s.length = length
        s.last_id = (last_ms << 64) | last_seq
        s.first_id = (first_ms << 64) | first_seq
        s.max_deleted_entry_id = (md_ms << 64) | md_seq
        s.entries_added = added
    if s.length and not nodes:
        raise r.fail("stream length inconsistent with rax entries")
    ngroups = r.length()
    if not ngroups:
        return s
    for _ in range(ngroups):
        at = r.pos
        name = r.string()
        g_ms = r.length()
        g_last = (g_ms << 64) | r.length()
        if t == T_STREAM_LISTPACKS:
            entries_read = s.estimate_distance(g_last)
        else:
            entries_read = r.signed_length()
        g = s.create_group(name, g_last, entries_read)
        if g is None:
            raise r.fail("duplicated consumer group name", at)
        npel = r.length()
        for _ in range(npel):
            at = r.pos
            sid = int.from_bytes(r.raw(16), "big")
            delivery_time = r.ms_time()
            delivery_count = r.length()
            if not g.load_nack(sid, delivery_time, delivery_count):
                raise r.fail("duplicated global PEL entry loading stream consumer group", at)
        nconsumers = r.length()
        for _ in range(nconsumers):
            at = r.pos
            cname = r.string()
            seen = r.ms_time()
            active = r.ms_time() if t == T_STREAM_LISTPACKS_3 else seen
            consumer = g.load_consumer(cname, seen, active)
            if consumer is None:
                raise r.fail("duplicate stream consumer detected", at)
            nown = r.length()
            for _ in range(nown):
                at = r.pos
                sid = int.from_bytes(r.raw(16), "big")
                if not g.load_owner(consumer, sid):
                    if sid in g.pel:
                        raise r.fail("duplicated consumer PEL entry loading a stream consumer group", at)
                    raise r.fail("consumer entry not found in group global PEL", at)
        if deep and g.unowned_nacks():
            raise r.fail("stream CG PEL entry without consumer")
    return s


# -- module values: rill's Active-Active streams ---------------------------------------------------
def _read_module(r: RdbReader, t: int) -> Any:
    """A module value: only rill's own types load (a Redis module's data cannot)."""
    at = r.pos
    mid = r.length()
    if t == T_MODULE_2 and mid >> 10 == _AA_STREAM_ID_BASE:
        return _read_active_stream(r, mid & 1023)
    name = module_type_name(mid).decode(errors="replace")
    raise r.fail(f"The RDB file contains module data I can't load: no matching module type '{name}'", at)


def _read_sub_stream(m: ModuleIn, s: Stream) -> None:
    r = m.r
    deep = r.deep
    prev = -1
    for _ in range(m.u()):
        master = m.sid()
        at = r.pos
        lp = m.s()
        if deep:
            ok = validate_node(lp, True)
        else:
            n = len(lp)
            ok = n >= 7 and int.from_bytes(lp[0:4], "little") == n and lp[n - 1] == 0xFF
        if not ok or lp[6] == 0xFF:
            raise r.fail("stream listpack integrity check failed", at)
        if master <= prev:
            raise r.fail("stream nodes out of order", at)
        s._rax.insert(master, lp)
        prev = master
    _read_stream_meta(m, s)


def _read_stream_meta(m: ModuleIn, s: Stream) -> None:
    s.length = m.u()
    s.last_id = m.sid()
    s.first_id = m.sid()
    s.max_deleted_entry_id = m.sid()
    s.entries_added = m.u()


def _read_aa_group(m: ModuleIn, s: Stream) -> Any:
    r = m.r
    at = r.pos
    name = m.s()
    g = Stream.create_group(s, name, m.sid(), m.i())  # not ActiveStream's: that one journals
    if g is None:
        raise r.fail("duplicated consumer group name", at)
    for _ in range(m.u()):
        at = r.pos
        sid = m.sid()
        if not g.load_nack(sid, m.i(), m.u()):
            raise r.fail("duplicated global PEL entry loading stream consumer group", at)
    for _ in range(m.u()):
        at = r.pos
        consumer = g.load_consumer(m.s(), m.i(), m.i())
        if consumer is None:
            raise r.fail("duplicate stream consumer detected", at)
        for _ in range(m.u()):
            at = r.pos
            if not g.load_owner(consumer, m.sid()):
                raise r.fail("consumer entry not found in group global PEL", at)
    for _ in range(m.u()):
        at = r.pos
        sid = m.sid()
        nack = g.pel.get(sid)
        if nack is None or nack.consumer is not None:
            raise r.fail("released entry is not an owner-less PEL entry", at)
        when, count = nack.delivery_time, nack.delivery_count
        g.release(sid, count)
        nack.delivery_time = when
    return g


def _read_active_stream(r: RdbReader, encver: int) -> Any:
    """An ActiveStream from its ``rill-aast`` module value (see _write_active_stream)."""
    if encver != AA_STREAM_ENCVER:
        raise r.fail(f"rill-aast encoding version {encver} is not supported")
    m = ModuleIn(r)
    s = ActiveStream(m.u())
    prev = 0
    for _ in range(m.u()):
        at = r.pos
        region = m.u()
        if region <= prev:
            raise r.fail("Active-Active sub-streams out of order", at)
        prev = region
        _read_sub_stream(m, s._sub(region))
    _read_stream_meta(m, s)
    for _ in range(m.u()):
        _read_aa_group(m, s)
    _read_aa_meta(m, s)
    at = r.pos
    idmp = m.s()
    if idmp:
        s.idmp = _read_idmp(RdbReader(idmp))
    m.eof()
    return s


READERS: dict[int, Reader] = {
    T_STRING: _read_string,
    T_LIST: _read_list_plain,
    T_SET: _read_set,
    T_ZSET: _read_zset,
    T_HASH: _read_hash,
    T_ZSET_2: _read_zset,
    T_HASH_ZIPMAP: _read_hash,
    T_LIST_ZIPLIST: _read_list_ziplist,
    T_SET_INTSET: _read_set,
    T_ZSET_ZIPLIST: _read_zset,
    T_HASH_ZIPLIST: _read_hash,
    T_LIST_QUICKLIST: _read_quicklist,
    T_STREAM_LISTPACKS: _read_stream,
    T_HASH_LISTPACK: _read_hash,
    T_ZSET_LISTPACK: _read_zset,
    T_LIST_QUICKLIST_2: _read_quicklist,
    T_STREAM_LISTPACKS_2: _read_stream,
    T_SET_LISTPACK: _read_set,
    T_STREAM_LISTPACKS_3: _read_stream,
    T_MODULE_2: _read_module,
}

# Type name -> constructor from decoded items: hash: [(field, value)], set: [member],
# zset: [(member, score)].
BUILDERS: dict[bytes, Callable[[Any], Any]] = {
    b"hash": hashmod.from_rdb_pairs,
    b"set": setmod.from_rdb_members,
    b"zset": zsetmod.from_rdb_pairs,
}


# --------------------------------------------------------------------------------------------
# Whole files
# --------------------------------------------------------------------------------------------


@dataclass
class LoadResult:
    """A fully parsed dataset, ready to be installed in place of the current one."""

    dbs: dict[int, dict[bytes, Any]]
    expires: dict[int, dict[bytes, int]]
    aux: dict[bytes, bytes]
    version: int
    end: int  # offset just after the checksum (an AOF preamble continues there)
    keys_loaded: int = 0
    keys_expired: int = 0
    empty_keys_skipped: int = 0
    functions: list[bytes] = field(default_factory=list)  # function libraries' code, in order
    # (db, key) of the keys dropped as expired, in file order: a master restarted from
    # the file tells its replicas of them (DELs in its backlog), as Redis does
    expired_keys: list[tuple[int, bytes]] = field(default_factory=list)


def load(
    data: bytes,
    databases: int = 16,
    *,
    start: int = 0,
    deep: bool = False,
    keep_expired: bool = False,
    allow_dup: bool = False,
    verify_checksum: bool = True,
    now_ms: int | None = None,
    key_delay_us: int = 0,
    progress: Callable[[int], None] | None = None,
    progress_every: int = 2 << 20,
    on_aux: Callable[[bytes, bytes], None] | None = None,
) -> LoadResult:
    """Parse an RDB image from ``data[start:]``; raise RdbError, installing nothing, if bad.

    ``keep_expired`` keeps keys whose expiry has passed (the AOF preamble does);
    otherwise they are dropped as a master drops them.  ``allow_dup`` lets a later
    copy of a key replace an earlier one (DEBUG RELOAD MERGE) instead of failing.
    ``progress(offset)`` is called about every ``progress_every`` bytes parsed (the
    server's loading progress); whatever it raises, other than the decoding errors
    turned into RdbError, stops the parse and propagates. ``on_aux(key, value)`` sees
    each AUX field as it is read (the loading server's used-mem figure).
    """
    if now_ms is None:
        now_ms = int(time.time() * 1000)
    r = RdbReader(data, start, deep)
    # Millions of new containers would trigger collection after collection, each
    # walking everything loaded so far; nothing built here is garbage yet.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _load(r, data, databases, start, keep_expired, allow_dup, verify_checksum, now_ms, key_delay_us,
                     progress, progress_every, on_aux)
    except RdbError:
        raise
    except (ValueError, IndexError, KeyError, TypeError, OverflowError, struct.error) as e:
        # A structure that passed the framing checks but not the decoding of its parts.
        raise RdbError(f"corrupt data: {e}", r.pos) from None
    finally:
        if gc_was_enabled:
            gc.enable()


def _load(
    r: RdbReader,
    data: bytes,
    databases: int,
    start: int,
    keep_expired: bool,
    allow_dup: bool,
    verify_checksum: bool,
    now_ms: int,
    key_delay_us: int = 0,
    progress: Callable[[int], None] | None = None,
    progress_every: int = 2 << 20,
    on_aux: Callable[[bytes, bytes], None] | None = None,
) -> LoadResult:
    if len(data) - start < 9 or data[start : start + 5] != b"REDIS":
        raise RdbError("wrong signature trying to load DB from file", start)
    digits = data[start + 5 : start + 9]
    if not digits.isdigit():
        raise RdbError("wrong signature trying to load DB from file", start)
    version = int(digits)
    if version < 1 or version > MAX_LOADABLE_VERSION:
        raise RdbError(f"can't handle RDB format version {version}", start + 5)
    r.pos = start + 9
    r.version = version
    dbs: dict[int, dict[bytes, Any]] = {}
    expires: dict[int, dict[bytes, int]] = {}
    aux: dict[bytes, bytes] = {}
    result = LoadResult(dbs, expires, aux, version, 0)
    db_id = 0
    data_db = dbs.setdefault(0, {})
    exp_db = expires.setdefault(0, {})
    expire_at = -1
    loaded = expired = empty = 0
    read_object = r.object
    string = r.string
    buf = r.buf
    end = r.end
    unpack_ms = _I64.unpack_from
    pos = r.pos  # kept in a local on the per-key path; synced to r.pos around calls
    # The next offset at which to report progress (never, without a callback): one
    # comparison per key.
    report_at = pos + progress_every if progress is not None else end + 1
    while True:
        at = pos
        if at >= end:
            r.pos = pos
            raise r.fail("unexpected end of data (no EOF marker)")
        op = buf[at]
        pos = at + 1
        if op == OP_EXPIRETIME_MS:
            if pos + 8 > end:
                r.pos = pos
                raise r.fail("unexpected end of data")
            expire_at = unpack_ms(buf, pos)[0]
            pos += 8
            continue
        if op < OP_SLOT_INFO:
            # Short raw strings (most keys and values) are sliced inline.
            b = buf[pos] if pos < end else 0xFF
            q = pos + 1 + b
            if b < 64 and q <= end:
                key = buf[pos + 1 : q]
                pos = q
            else:
                r.pos = pos
                key = string()
                pos = r.pos
            if op == T_STRING:
                b = buf[pos] if pos < end else 0xFF
                q = pos + 1 + b
                if b < 64 and q <= end:
                    value = buf[pos + 1 : q]
                    pos = q
                elif 0xC0 <= b <= 0xC2 and pos + (2, 3, 5)[b - 0xC0] <= end:
                    w = (1, 2, 4)[b - 0xC0]
                    value = b"%d" % int.from_bytes(buf[pos + 1 : pos + 1 + w], "little", signed=True)
                    pos += 1 + w
                else:
                    r.pos = pos
                    value = string()
                    pos = r.pos
            else:
                r.pos = pos
                value = read_object(op)
                pos = r.pos
            if value is _EMPTY:
                empty += 1
                expire_at = -1
                continue
            if expire_at != -1 and not keep_expired and expire_at < now_ms:
                expired += 1
                result.expired_keys.append((db_id, bytes(key)))
                expire_at = -1
                continue
            if key in data_db:
                if not allow_dup:
                    raise RdbError(f"duplicate key {key[:64]!r} found in RDB file", at)
                exp_db.pop(key, None)
            data_db[key] = value
            if expire_at != -1:
                exp_db[key] = expire_at
                expire_at = -1
            loaded += 1
            if key_delay_us:
                key_delay(key_delay_us)
            if pos >= report_at:
                progress(pos)  # type: ignore[misc]
                report_at = pos + progress_every
            continue
        r.pos = pos
        if op == OP_EOF:
            break
        if op == OP_SELECTDB:
            db_id = r.length()
            if db_id >= databases:
                raise RdbError(
                    f"the file was created with a server configured for more than {databases} databases",
                    at,
                )
            data_db = dbs.setdefault(db_id, {})
            exp_db = expires.setdefault(db_id, {})
        elif op == OP_RESIZEDB:
            r.length()
            r.length()
        elif op == OP_AUX:
            k = string()
            if k == STREAM_EXT_AUX:
                apply_stream_ext(data_db, string())
            else:
                aux[k] = string()
                if on_aux is not None:
                    on_aux(k, aux[k])
        elif op == OP_EXPIRETIME:
            expire_at = _I32.unpack(r.raw(4))[0] * 1000
        elif op == OP_IDLE:
            r.length()
        elif op == OP_FREQ:
            r.byte()
        elif op == OP_FUNCTION2 or op == OP_FUNCTION:
            result.functions.append(_function_record(r, op))
        elif op == OP_SLOT_INFO:
            r.length()
            r.length()
            r.length()
        elif op == OP_MODULE_AUX:
            raise r.fail("the RDB holds module aux data (modules are not supported)", at)
        else:
            raise r.fail(f"unknown RDB opcode {op}", at)
        pos = r.pos
    eof_at = r.pos - 1
    if version >= 5:
        at = r.pos
        expected = _U64.unpack(r.raw(8))[0]
        if verify_checksum and expected:
            got = crc64(memoryview(data)[start : eof_at + 1])
            if got != expected:
                raise RdbChecksumError(got, expected, at)
    result.end = r.pos
    result.keys_loaded = loaded
    result.keys_expired = expired
    result.empty_keys_skipped = empty
    return result


def load_file(path: str, databases: int = 16, **kwargs: Any) -> LoadResult:
    """Read and parse a whole RDB file (see ``load``)."""
    with open(path, "rb") as f:
        data = f.read()
    return load(data, databases, **kwargs)


def save_file(
    sink: BinaryIO,
    databases: Iterable[tuple[int, dict[bytes, Any], dict[bytes, int]]],
    options: SaveOptions | None = None,
) -> RdbWriter:
    """Write a complete RDB (header, every non-empty db, EOF, checksum) to ``sink``."""
    w = RdbWriter(sink, options)
    w.header()
    for db_id, data, expires in databases:
        w.database(db_id, data, expires)
    w.finish()
    return w


def iter_dbs(dbs: Iterable[Any]) -> Iterator[tuple[int, dict[bytes, Any], dict[bytes, int]]]:
    """(id, data, expires) of each storage.keyspace.Database, for ``save_file``."""
    for db in dbs:
        yield db.id, db.data, db.expires


# --------------------------------------------------------------------------------------------
# DUMP / RESTORE payloads
# --------------------------------------------------------------------------------------------


def _function_record(r: RdbReader, op: int) -> bytes:
    """A library's code from a FUNCTION2 record, or from the FUNCTION record of Redis
    7.0's release candidates (name, engine, optional description, body), which Redis
    7.0 still loads by rebuilding the code's shebang."""
    if op == OP_FUNCTION2:
        return r.string()
    name = r.string()
    engine = r.string()
    if r.length():
        r.string()  # the description: no longer kept
    return b"#!%s name=%s\n%s" % (engine, name, r.string())


def dump_functions(codes: Iterable[bytes], compression: bool = True) -> bytes:
    """FUNCTION DUMP: a FUNCTION2 record per library, 2-byte RDB version, CRC-64."""
    w = RdbWriter(None, SaveOptions(compression=compression))
    w.functions(codes)
    out = w.out
    out += RDB_VERSION.to_bytes(2, "little")
    out += _U64.pack(crc64(out))
    return bytes(out)


def iter_function_records(payload: bytes) -> Iterator[bytes]:
    """The library codes of a FUNCTION DUMP payload (call ``verify_payload`` first),
    one at a time as FUNCTION RESTORE reads them; RdbError with Redis's message."""
    n = len(payload)
    version = payload[n - 10] | (payload[n - 9] << 8)
    r = RdbReader(payload[: n - 10], 0, False, version)
    while r.pos < r.end:
        op = r.byte()
        if op != OP_FUNCTION2 and op != OP_FUNCTION:
            raise RdbError("given type is not a function")
        try:
            code = _function_record(r, op)
        except (RdbError, ValueError, IndexError, struct.error):
            raise RdbError("Failed loading library payload") from None
        yield code


def dump_payload(value: Any, compression: bool = True, list_fill: int = -2, list_compress_depth: int = 0) -> bytes:
    """DUMP: type byte + object + 2-byte RDB version + CRC-64 of all that, little-endian."""
    w = RdbWriter(None, SaveOptions(compression=compression, list_fill=list_fill,
                                    list_compress_depth=list_compress_depth, plain=True))
    w.value(value)
    out = w.out
    out += RDB_VERSION.to_bytes(2, "little")
    out += _U64.pack(crc64(out))
    return bytes(out)


def verify_payload(payload: bytes, skip_checksum: bool = False) -> bool:
    """verifyDumpPayload: footer present, version loadable, checksum right."""
    n = len(payload)
    if n < 10:
        return False
    version = payload[n - 10] | (payload[n - 9] << 8)
    if version > MAX_LOADABLE_VERSION:
        return False
    if skip_checksum:
        return True
    return crc64(memoryview(payload)[: n - 8]) == _U64.unpack_from(payload, n - 8)[0]


def restore_payload(payload: bytes, deep: bool = False) -> Any:
    """The value a DUMP payload holds; RdbError if it does not parse (RESTORE's "Bad data format").

    Call ``verify_payload`` first.  An empty collection is an error here.
    """
    n = len(payload)
    version = payload[n - 10] | (payload[n - 9] << 8)
    r = RdbReader(payload[: n - 10], 0, deep, version)
    try:
        t = r.byte()
        if t >= OP_SLOT_INFO:
            raise r.fail("not an object type")
        value = r.object(t)
    except RdbError:
        raise
    except (ValueError, IndexError, KeyError, TypeError, OverflowError, struct.error) as e:
        raise RdbError(f"corrupt data: {e}", r.pos) from None
    if value is _EMPTY:
        raise r.fail("empty collection")
    return value
