"""The ``rill`` PySpark data source: batch and streaming reads of streams, and a stream sink.

Works against rill and any Redis >= 7.0 (it needs exclusive ``(id`` ranges and XAUTOCLAIM).
Options (all strings, as Spark passes them):

* ``url``: ``redis://host:port/db`` (default ``redis://127.0.0.1:6379``).
* ``streams``: comma-separated stream keys to read (``stream`` for the sink's default key).
* batch: ``start``/``end`` IDs (default the whole stream as it is when the query is planned),
  ``partitions`` (total, default the driver's CPU count, at least 2), ``pageSize`` (XRANGE COUNT, 1000).
* streaming: ``startingOffsets`` = ``earliest`` (default) | ``latest`` | JSON ``{"key": "id"}``
  where the ID is the last one considered consumed (``"0-0"`` = everything, ``"$"`` = latest);
  ``maxEntriesPerTrigger``; ``Trigger.AvailableNow`` on Spark >= 4.2.
* consumer group (streaming only): ``group``, ``consumer`` (default ``rill-spark``),
  ``claimMinIdleMs`` (60000): see :class:`RillStreamReader` for the at-least-once contract.
* sink (see :mod:`rill.pipeline.sink`): ``stream`` (only when rows have no ``stream`` column),
  ``maxlen``/``minid`` with ``approximate`` (``true``), ``batchSize`` (XADDs per pipeline, 1000),
  ``idempotent`` (``auto``: XADD IDMP for rows without an ``id`` where the server has it).

Offsets are ``{"streams": {key: "ms-seq"}}`` (plus ``"recover": n`` in group mode): the
last entry ID of each stream that the batch covers.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)

from .conn import Conn
from .ids import ID_MAX, fast_parse, format_id, parse_id
from .plan import plan_ranges
from .rows import DEFAULT_SCHEMA, BatchBuilder
from .sink import RillStreamWriter, RillWriter

try:  # Spark >= 4.2: admission control and Trigger.AvailableNow
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # Spark 4.0/4.1
    ReadAllAvailable = ReadMaxRows = None  # type: ignore[assignment,misc]

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Stand-in so the reader class is defined the same way on every version."""


DEFAULT_URL = "redis://127.0.0.1:6379"
ROWS_PER_BATCH = 8192


def _opt(options: Any, name: str, default: str | None = None) -> str | None:
    """Options arrive case-insensitive from Spark; be tolerant of plain dicts too."""
    if name in options:
        return options[name]
    low = name.lower()
    for k, v in options.items():
        if k.lower() == low:
            return v
    return default


def _streams(options: Any, required: bool = True) -> list[str]:
    raw = _opt(options, "streams") or _opt(options, "stream") or ""
    keys = [s.strip() for s in raw.split(",") if s.strip()]
    if required and not keys:
        raise ValueError("the rill data source needs option 'streams' (comma-separated stream keys)")
    return keys


def _partitions(options: Any) -> int:
    return max(1, int(_opt(options, "partitions") or max(2, os.cpu_count() or 2)))


@dataclass
class StreamRange(InputPartition):
    """One task's share: entries of ``key`` with ``lo <= id <= hi``.

    ``group``/``consumer`` set: read that consumer's pending entries (its PEL) in the range
    instead of the stream itself, so a replayed batch sees exactly what was delivered.
    """

    url: str
    key: str
    lo: int
    hi: int
    page: int = 1000
    group: str | None = None
    consumer: str | None = None

    def __init__(self, url: str, key: str, lo: int, hi: int, page: int = 1000,
                 group: str | None = None, consumer: str | None = None) -> None:
        super().__init__((key, lo, hi))
        self.url, self.key, self.lo, self.hi = url, key, lo, hi
        self.page, self.group, self.consumer = page, group, consumer


def iter_pages(conn: Conn, part: StreamRange) -> Iterator[list[Any]]:
    """XRANGE (or XREADGROUP history) pages of one partition, in ID order."""
    if part.group is None:
        # The next page is requested as soon as this one's last ID is known, so the server
        # produces it while this task turns the current page into Arrow columns.
        end = format_id(part.hi)
        c = conn.conn
        c.send_command("XRANGE", part.key, format_id(part.lo), end, "COUNT", part.page)
        while True:
            entries = c.read_response()
            more = len(entries) >= part.page
            if more:
                c.send_command("XRANGE", part.key, "(" + entries[-1][0].decode(), end, "COUNT", part.page)
            if entries:
                yield entries
            if not more:
                return
    else:
        after = part.lo - 1 if part.lo > 0 else 0
        cursor = format_id(after)
        while True:
            reply = conn.call("XREADGROUP", "GROUP", part.group, part.consumer, "COUNT", part.page,
                              "STREAMS", part.key, cursor)
            entries = reply[0][1] if reply else []  # RESP2 (Conn pins protocol 2)
            if not entries:
                return
            last = fast_parse(entries[-1][0])
            full = len(entries)
            # A pending entry deleted from the stream comes back with a nil body: skip it
            # (commit still acks it).
            live = [e for e in entries if e[1] is not None and (last <= part.hi or fast_parse(e[0]) <= part.hi)]
            if live:
                yield live
            if last > part.hi:
                return
            if full < part.page:
                return
            cursor = format_id(last)


def read_partition(part: StreamRange, schema: Any) -> Iterator[Any]:
    """Record batches of about ROWS_PER_BATCH rows for one partition."""
    builder = BatchBuilder(schema)
    with Conn(part.url) as conn:
        for entries in iter_pages(conn, part):
            builder.add(part.key, entries)
            if len(builder) >= ROWS_PER_BATCH:
                yield builder.flush()
    if len(builder):
        yield builder.flush()


def last_ids(conn: Conn, keys: Sequence[str]) -> dict[str, int]:
    """The ID of each stream's last entry (0 when empty or missing)."""
    replies = conn.pipeline([("XREVRANGE", k, "+", "-", "COUNT", 1) for k in keys])
    out = {}
    for k, reply in zip(keys, replies, strict=True):
        if isinstance(reply, Exception):
            raise reply
        out[k] = fast_parse(reply[0][0]) if reply else 0
    return out


def split_streams(conn: Conn, url: str, bounds: dict[str, tuple[int, int]], parts: int, page: int,
                  group: str | None = None, consumer: str | None = None) -> list[StreamRange]:
    """Partitions over several streams: the total shared by stream length, each stream split by
    its sampled distribution."""
    keys = [k for k, (lo, hi) in bounds.items() if lo <= hi]
    if not keys:
        return []
    lens = conn.pipeline([("XLEN", k) for k in keys])
    lens = [0 if isinstance(n, Exception) else n for n in lens]
    total = sum(lens) or 1
    out: list[StreamRange] = []
    for k, n in zip(keys, lens, strict=True):
        if n == 0:
            continue
        share = max(1, round(parts * n / total))
        lo, hi = bounds[k]
        for a, b in plan_ranges(conn, k, lo, hi, share if n > page else 1):
            out.append(StreamRange(url, k, a, b, page, group, consumer))
    return out


# -- batch --------------------------------------------------------------------------------


class RillBatchReader(DataSourceReader):
    def __init__(self, options: Any, schema: Any) -> None:
        self.url = _opt(options, "url", DEFAULT_URL)
        self.keys = _streams(options)
        self.start = parse_id(_opt(options, "start", "-"))
        end = _opt(options, "end")
        self.end = parse_id(end, seq_default=(1 << 64) - 1) if end else None
        self.parts = _partitions(options)
        self.page = int(_opt(options, "pageSize", "1000"))
        self.schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        with Conn(self.url) as conn:
            # Without an explicit end, the batch is the stream as it is now: entries added
            # while tasks run are not half-included.
            ends = last_ids(conn, self.keys) if self.end is None else {k: self.end for k in self.keys}
            bounds = {k: (self.start, ends[k]) for k in self.keys if ends[k]}
            parts = split_streams(conn, self.url, bounds, self.parts, self.page)
        return parts or [StreamRange(self.url, self.keys[0], 1, 0)]

    def read(self, partition: StreamRange) -> Iterator[Any]:
        if partition.lo > partition.hi:
            return iter(())
        return read_partition(partition, self.schema)


# -- streaming ----------------------------------------------------------------------------


def _offset(streams: dict[str, int], recover: int | None = None) -> dict:
    out: dict[str, Any] = {"streams": {k: format_id(v) for k, v in streams.items()}}
    if recover is not None:
        out["recover"] = recover
    return out


def _parse_offset(off: dict) -> tuple[dict[str, int], int]:
    return {k: parse_id(v) for k, v in off.get("streams", {}).items()}, int(off.get("recover", 0))


class RillStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Structured Streaming over streams; offsets are the last covered ID per stream.

    Plain mode reads ``(start, end]`` with XRANGE, so any batch can be replayed from the
    checkpoint: a restarted query neither loses nor repeats entries.

    Consumer-group mode (``group``) makes the group's bookkeeping follow Spark: the driver
    delivers new entries to ``consumer`` with XREADGROUP, tasks read that consumer's pending
    entries (its PEL) in the batch's range, and ``commit`` XACKs what Spark has committed.
    At start-up the reader XACKs what the checkpoint says was processed, claims entries
    other consumers left pending for ``claimMinIdleMs`` (XAUTOCLAIM) and replays its own
    pending entries in a recovery batch.  Spark commits batch N only when it plans N+1, so
    the last batch's entries stay pending until the next run: delivery is at-least-once.
    """

    def __init__(self, options: Any, schema: Any) -> None:
        self.url = _opt(options, "url", DEFAULT_URL)
        self.keys = _streams(options)
        self.schema = schema
        self.parts = _partitions(options)
        self.page = int(_opt(options, "pageSize", "1000"))
        self.starting = _opt(options, "startingOffsets", "earliest").strip()
        mx = _opt(options, "maxEntriesPerTrigger")
        self.max_rows = int(mx) if mx else None
        self.group = _opt(options, "group")
        self.consumer = _opt(options, "consumer", "rill-spark")
        self.min_idle = int(_opt(options, "claimMinIdleMs", "60000"))
        self.target: dict[str, int] | None = None  # Trigger.AvailableNow
        self._conn: Conn | None = None
        self._started = False
        self._last: dict[str, int] | None = None  # for Spark < 4.2, which passes no start
        self._delivered: dict[str, int] = {}

    @property
    def conn(self) -> Conn:
        if self._conn is None:
            self._conn = Conn(self.url)
        return self._conn

    def _start_ids(self) -> dict[str, int]:
        s = self.starting
        if s.lower() == "earliest":
            return {k: 0 for k in self.keys}
        if s.lower() == "latest":
            return last_ids(self.conn, self.keys)
        given = json.loads(s)
        out = {}
        latest = None
        for k in self.keys:
            v = str(given.get(k, "0-0"))
            if v in ("$", "latest"):
                latest = latest or last_ids(self.conn, self.keys)
                out[k] = latest[k]
            else:
                out[k] = 0 if v == "earliest" else parse_id(v)
        return out

    def initialOffset(self) -> dict:
        starts = self._start_ids()
        if self.group is None:
            self._last = starts
            return _offset(starts)
        for k in self.keys:
            try:
                self.conn.call("XGROUP", "CREATE", k, self.group, format_id(starts[k]), "MKSTREAM")
            except Exception as e:  # noqa: BLE001 - BUSYGROUP: the group exists, keep its position
                if "BUSYGROUP" not in str(e):
                    raise
        zero = {k: 0 for k in self.keys}
        self._last = zero
        return _offset(zero, 0)

    def getDefaultReadLimit(self) -> Any:
        if self.max_rows and ReadMaxRows is not None:
            return ReadMaxRows(self.max_rows)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = last_ids(self.conn, self.keys)

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        if start is not None:
            cur, recover = _parse_offset(start)
        elif self._last is not None:
            cur, recover = dict(self._last), 0
        else:
            cur, recover = {}, 0
        for k in self.keys:
            cur.setdefault(k, 0)
        max_rows = None
        if limit is not None and ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            max_rows = limit.max_rows
        elif limit is None and self.max_rows:
            max_rows = self.max_rows
        per_stream = max(1, max_rows // len(self.keys)) if max_rows else None
        if self.group is None:
            end = self._latest_plain(cur, per_stream)
            self._last = end
            return _offset(end)
        if not self._started:
            self._started = True
            if self._recover(cur):
                return _offset(cur, recover + 1)
        end = self._latest_group(cur, per_stream)
        self._last = end
        return _offset(end, recover)

    def _latest_plain(self, cur: dict[str, int], per_stream: int | None) -> dict[str, int]:
        latest = last_ids(self.conn, self.keys)
        if self.target is not None:
            latest = {k: min(latest[k], self.target.get(k, 0)) for k in self.keys}
        end = {k: max(cur[k], latest[k]) for k in self.keys}
        if per_stream:
            todo = [k for k in self.keys if end[k] > cur[k]]
            replies = self.conn.pipeline([("XRANGE", k, "(" + format_id(cur[k]), format_id(end[k]),
                                           "COUNT", per_stream) for k in todo])
            for k, reply in zip(todo, replies, strict=True):
                if isinstance(reply, Exception):
                    raise reply
                if len(reply) >= per_stream:
                    end[k] = fast_parse(reply[-1][0])
        return end

    def _own_pending(self, key: str, lo: str, hi: str, count: int) -> list[int]:
        reply = self.conn.call("XPENDING", key, self.group, lo, hi, count, self.consumer)
        return [fast_parse(r[0]) for r in reply]

    def _recover(self, cur: dict[str, int]) -> bool:
        """Start-up: ack what the checkpoint covers, claim abandoned entries; True when this
        consumer still holds entries at or below the start offsets (they need a recovery batch)."""
        needs = False
        for k in self.keys:
            if cur[k]:
                self._ack_upto(k, cur[k])
            cursor = "0-0"
            while True:
                reply = self.conn.call("XAUTOCLAIM", k, self.group, self.consumer, self.min_idle, cursor,
                                       "COUNT", 1000, "JUSTID")
                cursor = reply[0].decode() if isinstance(reply[0], bytes) else reply[0]
                if cursor == "0-0":
                    break
            pend = self._own_pending(k, "-", "+", 1)
            if pend and pend[0] <= cur[k]:
                needs = True
            # The highest ID this consumer already holds: the end offset must cover it.
            top = 0
            lo = "-"
            while True:
                ids = self._own_pending(k, lo, "+", 10000)
                if ids:
                    top = ids[-1]
                if len(ids) < 10000:
                    break
                lo = "(" + format_id(ids[-1])
            self._delivered[k] = max(self._delivered.get(k, 0), top)
        return needs

    def _latest_group(self, cur: dict[str, int], per_stream: int | None) -> dict[str, int]:
        end = dict(cur)
        for k in self.keys:
            held = self._delivered.get(k, 0)
            target = self.target.get(k, ID_MAX) if self.target is not None else ID_MAX
            if held > cur[k]:
                # Entries delivered earlier (or claimed) but not yet in a batch go first.
                hi = min(held, target)
                if per_stream:
                    ids = self._own_pending(k, "(" + format_id(cur[k]), format_id(hi), per_stream)
                    hi = ids[-1] if len(ids) >= per_stream else hi
                end[k] = max(cur[k], hi)
                continue
            if held >= target:
                continue
            want = per_stream or None
            got = 0
            while True:
                count = min(self.page * 10, want - got) if want else self.page * 10
                reply = self.conn.call("XREADGROUP", "GROUP", self.group, self.consumer, "COUNT", count,
                                       "STREAMS", k, ">")
                entries = reply[0][1] if reply else []
                if not entries:
                    break
                got += len(entries)
                held = fast_parse(entries[-1][0])
                self._delivered[k] = held
                if len(entries) < count or (want and got >= want) or held >= target:
                    break
            end[k] = max(cur[k], min(held, target))
        return end

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        a, ra = _parse_offset(start)
        b, rb = _parse_offset(end)
        self._last = b
        if self.group is not None and rb > ra:
            # Recovery batch: this consumer's pending entries at or below the start offsets.
            return [StreamRange(self.url, k, 0, a.get(k, 0), self.page, self.group, self.consumer)
                    for k in self.keys if a.get(k, 0) > 0 or self._delivered.get(k, 0) > 0]
        bounds = {k: (a.get(k, 0) + 1, b[k]) for k in self.keys if k in b and b[k] > a.get(k, 0)}
        return split_streams(self.conn, self.url, bounds, self.parts, self.page, self.group, self.consumer)

    def read(self, partition: StreamRange) -> Iterator[Any]:
        return read_partition(partition, self.schema)

    def _ack_upto(self, key: str, upto: int) -> int:
        acked = 0
        while True:
            ids = self._own_pending(key, "-", format_id(upto), 10000)
            if not ids:
                return acked
            self.conn.call("XACK", key, self.group, *[format_id(i) for i in ids])
            acked += len(ids)
            if len(ids) < 10000:
                return acked

    def commit(self, end: dict) -> None:
        if self.group is None:
            return
        b, _ = _parse_offset(end)
        for k, upto in b.items():
            if upto:
                self._ack_upto(k, upto)

    def stop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class RillDataSource(DataSource):
    """``spark.read.format("rill")`` / ``readStream`` / ``write`` / ``writeStream``."""

    @classmethod
    def name(cls) -> str:
        return "rill"

    def schema(self) -> str:
        return DEFAULT_SCHEMA

    def reader(self, schema: Any) -> DataSourceReader:
        return RillBatchReader(self.options, schema)

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return RillStreamReader(self.options, schema)

    def writer(self, schema: Any, overwrite: bool) -> DataSourceWriter:
        return RillWriter(self.options, schema, overwrite)

    def streamWriter(self, schema: Any, overwrite: bool) -> DataSourceStreamWriter:
        return RillStreamWriter(self.options, schema, overwrite)
