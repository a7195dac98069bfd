"""``format("rill-rdb")``: an RDB snapshot read straight into a DataFrame, no server needed.

The driver walks the file once with rill's own RDB codec (``rill.persistence.rdb``):
for a stream it only steps over the node strings (no LZF, no listpack decoding) and
records where each node starts; other values are decoded once to find where they end.
The nodes of every stream and the other keys are then dealt to partitions by size, so
one huge stream is read by several tasks.  Each task maps the file and decodes its
share: stream nodes through ``rill.storage.stream.Stream`` (tombstones skipped, exactly
what XRANGE returns), other values through the codec's readers.

Rows (one schema for every type)::

    db int, key string, type string, expire_at long,            -- every row
    id string, ms long, seq long, fields map<string,string>,    -- stream entries (one row each), hashes
    value string, members array<string>, scores map<string,double>  -- strings; lists/sets; zsets

Options: ``path`` (or ``load(path)``), ``partitions``, ``streams`` (only these keys,
comma-separated), ``types`` (e.g. ``stream,hash``), ``db``, ``progress`` (``true``: the scan
prints a line to stderr at every 5% of the file).  The file must be readable at
the same path by every executor (a shared or copied file on a cluster).
Expired keys are kept with their ``expire_at`` (ms); filter on it if needed.
"""

from __future__ import annotations

import mmap
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from rill.persistence import rdb as codec
from rill.storage.stream import Stream

from .source import _opt

RDB_SCHEMA = ("db int, key string, type string, expire_at long, id string, ms long, seq long, "
              "fields map<string,string>, value string, members array<string>, scores map<string,double>")

STREAM_TYPES = {codec.T_STREAM_LISTPACKS, codec.T_STREAM_LISTPACKS_2, codec.T_STREAM_LISTPACKS_3}
TYPE_NAMES = {codec.T_STRING: "string", codec.T_LIST: "list", codec.T_LIST_ZIPLIST: "list",
              codec.T_LIST_QUICKLIST: "list", codec.T_LIST_QUICKLIST_2: "list",
              codec.T_SET: "set", codec.T_SET_INTSET: "set", codec.T_SET_LISTPACK: "set",
              codec.T_ZSET: "zset", codec.T_ZSET_2: "zset", codec.T_ZSET_ZIPLIST: "zset",
              codec.T_ZSET_LISTPACK: "zset", codec.T_HASH: "hash", codec.T_HASH_ZIPMAP: "hash",
              codec.T_HASH_ZIPLIST: "hash", codec.T_HASH_LISTPACK: "hash",
              **{t: "stream" for t in STREAM_TYPES}}


def _skip_string(r: codec.RdbReader) -> None:
    """Step over an RDB string without materialising it (LZF payloads stay compressed)."""
    b = r.buf[r.pos] if r.pos < r.end else None
    if b is None:
        raise r.fail("unexpected end of data")
    if b >= 0xC0:
        enc = b & 0x3F
        if enc in (0, 1, 2):
            r.pos += 1 + (1, 2, 4)[enc]
            r.need(0)
            return
        if enc == 3:
            r.pos += 1
            clen = r.length()
            r.length()
            r.need(clen)
            r.pos += clen
            return
        raise r.fail(f"unknown string encoding {enc}")
    n = r.length()
    r.need(n)
    r.pos += n


def _skip_stream_tail(r: codec.RdbReader, t: int) -> None:
    """Metadata and consumer groups after a stream's nodes (not needed for entry rows)."""
    r.lengths(3 if t == codec.T_STREAM_LISTPACKS else 8)
    for _ in range(r.length()):
        _skip_string(r)  # group name
        r.length()
        r.length()  # last id
        if t != codec.T_STREAM_LISTPACKS:
            r.length()  # entries_read
        npel = r.length()
        r.need(npel * 16)
        for _ in range(npel):
            r.pos += 16
            r.ms_time()
            r.length()
        for _ in range(r.length()):
            _skip_string(r)
            r.ms_time()
            if t == codec.T_STREAM_LISTPACKS_3:
                r.ms_time()
            nown = r.length()
            r.need(nown * 16)
            r.pos += nown * 16


@dataclass
class Item:
    """One unit of work: a run of a stream's nodes, or one other key."""

    db: int
    key: bytes
    rdbtype: int
    expire_at: int | None
    offsets: list[int]  # stream: node offsets; other: [value offset]
    size: int


class RdbPartition(InputPartition):
    def __init__(self, path: str, version: int, items: list[Item]) -> None:
        super().__init__(len(items))
        self.path, self.version, self.items = path, version, items


Progress = Callable[[int, int, int], None]


def print_progress(path: str, out: Any = None) -> Progress:
    """A ``scan`` progress callback printing one line per step (to stderr by default)."""
    def report(pos: int, size: int, keys: int) -> None:
        print(f"[rill-rdb] {os.path.basename(path)}: scanned {pos / 1e6:,.1f} of {size / 1e6:,.1f} MB "
              f"({100 * pos // max(1, size)}%), {keys:,} keys", file=out or sys.stderr, flush=True)
    return report


def scan(path: str, *, streams: set[bytes] | None = None, types: set[str] | None = None,
         db: int | None = None, chunk_bytes: int = 1 << 20, progress: Progress | None = None,
         steps: int = 20) -> tuple[int, list[Item]]:
    """Walk the file: (RDB version, items), a stream's nodes cut into runs of about ``chunk_bytes``.

    ``progress(pos, size, keys)`` is called each time the walk passes another ``1/steps`` of
    the file (so a big file reports while it is scanned, not only when done) and at the end."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        buf = mm
        size = len(buf)
        step = max(1, size // max(1, steps))
        mark = step
        nkeys = 0
        if len(buf) < 9 or buf[:5] != b"REDIS" or not buf[5:9].isdigit():
            raise codec.RdbError("wrong signature trying to load DB from file", 0)
        version = int(buf[5:9])
        if not 1 <= version <= codec.MAX_LOADABLE_VERSION:
            raise codec.RdbError(f"can't handle RDB format version {version}", 5)
        r = codec.RdbReader(buf, 9, False, version)
        items: list[Item] = []
        cur_db, expire_at = 0, None
        while True:
            op = r.byte()
            if op == codec.OP_EOF:
                break
            if op == codec.OP_EXPIRETIME_MS:
                expire_at = r.ms_time()
            elif op == codec.OP_EXPIRETIME:
                expire_at = int.from_bytes(r.raw(4), "little", signed=True) * 1000
            elif op == codec.OP_SELECTDB:
                cur_db = r.length()
            elif op == codec.OP_RESIZEDB:
                r.length()
                r.length()
            elif op == codec.OP_AUX:
                r.string()
                r.string()
            elif op == codec.OP_IDLE:
                r.length()
            elif op == codec.OP_FREQ:
                r.byte()
            elif op == codec.OP_FUNCTION2:
                _skip_string(r)
            elif op == codec.OP_SLOT_INFO:
                r.length()
                r.length()
                r.length()
            elif op < codec.OP_SLOT_INFO:
                key = r.string()
                start = r.pos
                wanted = ((db is None or db == cur_db)
                          and (types is None or TYPE_NAMES.get(op) in types)
                          and (streams is None or (op in STREAM_TYPES and key in streams)))
                if op in STREAM_TYPES:
                    nodes = r.length()
                    run: list[int] = []
                    run_size = 0
                    for _ in range(nodes):
                        at = r.pos
                        _skip_string(r)
                        _skip_string(r)
                        if wanted:
                            run.append(at)
                            run_size += r.pos - at
                            if run_size >= chunk_bytes:
                                items.append(Item(cur_db, key, op, expire_at, run, run_size))
                                run, run_size = [], 0
                        if progress is not None and r.pos >= mark:  # one huge stream reports too
                            progress(r.pos, size, nkeys)
                            mark = r.pos + step
                    if wanted and run:
                        items.append(Item(cur_db, key, op, expire_at, run, run_size))
                    _skip_stream_tail(r, op)
                else:
                    r.object(op) if op != codec.T_STRING else r.string()
                    if wanted:
                        items.append(Item(cur_db, key, op, expire_at, [start], r.pos - start))
                expire_at = None
                nkeys += 1
                if progress is not None and r.pos >= mark:
                    progress(r.pos, size, nkeys)
                    mark = r.pos + step
            else:
                raise r.fail(f"unsupported RDB opcode {op}")
        if progress is not None:
            progress(size, size, nkeys)
        return version, items


def deal(items: list[Item], parts: int) -> list[list[Item]]:
    """Contiguous runs of items of about equal byte size (file order kept, so rows stay ordered)."""
    total = sum(it.size for it in items) or 1
    share = total / max(1, parts)
    out: list[list[Item]] = [[]]
    acc = 0
    for it in items:
        if out[-1] and acc + it.size / 2 > share * len(out) and len(out) < parts:
            out.append([])
        out[-1].append(it)
        acc += it.size
    return [p for p in out if p]


class _Raw:
    """What the codec's builders return while a task reads: the decoded items themselves."""

    def __init__(self, items: Any) -> None:
        self.items = items


def _text(b: bytes) -> str:
    return b.decode("utf-8", "replace")


def read_items(path: str, version: int, items: list[Item]) -> Iterator[tuple]:
    saved = dict(codec.BUILDERS)
    for name in (b"hash", b"set", b"zset"):
        codec.BUILDERS[name] = _Raw
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            r = codec.RdbReader(mm, 0, False, version)
            for it in items:
                key = _text(it.key)
                head = (it.db, key, TYPE_NAMES.get(it.rdbtype, str(it.rdbtype)), it.expire_at)
                if it.rdbtype in STREAM_TYPES:
                    s = Stream()
                    for off in it.offsets:
                        r.pos = off
                        master = int.from_bytes(r.string(), "big")
                        s.load_node(master, r.string())
                    for sid, fv in s.iter_range():
                        ms, seq = sid >> 64, sid & ((1 << 64) - 1)
                        fields = {_text(fv[i]): _text(fv[i + 1]) for i in range(0, len(fv), 2)}
                        yield (*head, f"{ms}-{seq}", ms if ms < 1 << 63 else None,
                               seq if seq < 1 << 63 else None, fields, None, None, None)
                    continue
                r.pos = it.offsets[0]
                value = r.string() if it.rdbtype == codec.T_STRING else r.object(it.rdbtype)
                kind = head[2]
                if kind == "string":
                    yield (*head, None, None, None, None, _text(value), None, None)
                elif kind == "list":
                    yield (*head, None, None, None, None, None, [_text(v) for v in value], None)
                elif kind == "set":
                    yield (*head, None, None, None, None, None, [_text(v) for v in value.items], None)
                elif kind == "hash":
                    yield (*head, None, None, None, {_text(k): _text(v) for k, v in value.items},
                           None, None, None)
                elif kind == "zset":
                    yield (*head, None, None, None, None, None, None,
                           {_text(m): float(s) for m, s in value.items})
    finally:
        codec.BUILDERS.clear()
        codec.BUILDERS.update(saved)


class RdbReader(DataSourceReader):
    def __init__(self, options: Any) -> None:
        path = _opt(options, "path")
        if not path:
            raise ValueError("rill-rdb needs a path: spark.read.format('rill-rdb').load('/path/dump.rdb')")
        self.path = os.path.abspath(path)
        self.parts = max(1, int(_opt(options, "partitions") or max(2, os.cpu_count() or 2)))
        streams = _opt(options, "streams")
        self.streams = {s.strip().encode() for s in streams.split(",") if s.strip()} if streams else None
        types = _opt(options, "types")
        self.types = {t.strip() for t in types.split(",") if t.strip()} if types else None
        dbopt = _opt(options, "db")
        self.db = int(dbopt) if dbopt not in (None, "") else None
        self.progress = (_opt(options, "progress") or "true").lower() in ("1", "true", "yes")

    def partitions(self) -> Sequence[InputPartition]:
        version, items = scan(self.path, streams=self.streams, types=self.types, db=self.db,
                              chunk_bytes=max(4096, os.path.getsize(self.path) // (self.parts * 4)),
                              progress=print_progress(self.path) if self.progress else None)
        groups = deal(items, self.parts)
        return [RdbPartition(self.path, version, g) for g in groups] or [RdbPartition(self.path, version, [])]

    def read(self, partition: RdbPartition) -> Iterator[tuple]:
        return read_items(partition.path, partition.version, partition.items)


class RdbDataSource(DataSource):
    """``spark.read.format("rill-rdb").load("dump.rdb")``."""

    @classmethod
    def name(cls) -> str:
        return "rill-rdb"

    def schema(self) -> str:
        return RDB_SCHEMA

    def reader(self, schema: Any) -> DataSourceReader:
        return RdbReader(self.options)
