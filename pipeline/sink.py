"""The ``rill`` sink: pipelined XADD that never loses a row and never writes one twice when it can tell.

Which stream a row goes to: the row's ``stream`` column, or the ``stream`` option when the
rows have no such column.  Both at once is refused before anything is written (a column
that a read left behind would otherwise silently send the rows back where they came from).

Rows with an ``id`` are written with that ID, in the order they arrive (nothing is sorted or
held back, so a partition streams through in ``batchSize`` pipelines).  The server refuses an
ID equal to or smaller than the stream's last one; such a row counts as already written only
when the stream holds an entry with that ID and the same fields (a replay).  Any other refusal
(an out-of-order row, or two different rows with one ID) fails the write with an error that
names the stream and the ID.

Rows without an ``id`` (or with a null one) get auto IDs.  When the server has idempotent
XADD (``IDMP``: rill, Redis >= 8.6; probed, not assumed) each such row carries a producer ID
and an idempotent ID derived from the query, the micro-batch, the Spark partition and the
row's position, so a retried task or a replayed micro-batch re-sends the same pairs and the
server drops what it already has: exactly-once within the stream's IDMP window
(``idmp-duration``, 100 s unless ``XCFGSET`` says otherwise).  Producer IDs change every
``idmpChunk`` rows (100, Redis's default ``idmp-maxsize``) so the per-producer size limit never
evicts a pair a retry could still need.  Without IDMP the sink is at-least-once for these rows.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import redis
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage

from .conn import Conn
from .ids import format_id, parse_id

DEFAULT_URL = "redis://127.0.0.1:6379"
META = ("stream", "id", "fields", "ms", "seq")
IDMP_CHUNK = 100


def _opt(options: Any, name: str, default: str | None = None) -> str | None:
    low = name.lower()
    for k, v in options.items():
        if k.lower() == low:
            return v
    return default


def supports_idmp(conn: Conn) -> bool:
    """Whether XADD takes ``IDMP``: a NOMKSTREAM XADD on a key that does not exist is a no-op
    (nil) where IDMP parses, and a syntax/ID error where it does not."""
    probe = f"rill-spark:idmp-probe:{uuid.uuid4().hex}"
    try:
        reply = conn.call("XADD", probe, "NOMKSTREAM", "IDMP", "probe", "probe", "*", "f", "v")
    except redis.ResponseError:
        return False
    return reply is None


class SinkError(RuntimeError):
    """A row the sink refuses to write (or to count as written)."""


@dataclass
class WriteResult(WriterCommitMessage):
    written: int = 0
    duplicates: int = 0
    streams: dict[str, int] = field(default_factory=dict)


def _pairs(fv: list[Any]) -> list[tuple[bytes, bytes]]:
    """Field/value pairs as bytes, sorted: the same entry whatever order a map column kept."""
    b = [x if isinstance(x, bytes) else str(x).encode() for x in fv]
    return sorted(zip(b[0::2], b[1::2], strict=True))


class StreamSink:
    """One task's writer: rows -> pipelined XADDs, ``batchSize`` at a time."""

    def __init__(self, options: Any, schema: Any, overwrite: bool = False) -> None:
        if overwrite:
            raise ValueError(
                "the rill sink only appends: mode('overwrite') would have to delete streams it cannot "
                "name in advance. Delete the target streams first (DEL key), then use mode('append')")
        self.url = _opt(options, "url", DEFAULT_URL)
        self.names = [f.name for f in schema.fields]
        opt = _opt(options, "stream") or _opt(options, "streams")
        if opt is not None and "," in opt:
            raise ValueError(f"the rill sink writes to one stream per row; option 'stream' is {opt!r}")
        if "stream" in self.names and opt:
            raise ValueError(
                f"the rows have a 'stream' column and option 'stream' is {opt!r}: give one, not both "
                "(df.drop('stream') to write every row to the option's stream)")
        if "stream" not in self.names and not opt:
            raise ValueError("the rill sink needs a 'stream' column or option 'stream'")
        self.default_key = opt
        self.batch = max(1, int(_opt(options, "batchSize", "1000") or 1000))
        approx = (_opt(options, "approximate", "true") or "true").lower() in ("1", "true", "yes")
        trim: list[str] = []
        if _opt(options, "maxlen"):
            trim = ["MAXLEN", "~" if approx else "=", str(_opt(options, "maxlen"))]
        elif _opt(options, "minid"):
            trim = ["MINID", "~" if approx else "=", str(_opt(options, "minid"))]
        self.trim = trim
        self.value_cols = [n for n in self.names if n not in META]
        if "fields" not in self.names and not self.value_cols:
            raise ValueError("the rill sink needs a 'fields' map column or value columns to write")
        # Idempotent XADD for rows without an ID: decided here (the driver) once per query.
        mode = (_opt(options, "idempotent", "auto") or "auto").lower()
        if mode not in ("auto", "true", "false"):
            raise ValueError(f"option 'idempotent' is 'auto', 'true' or 'false', not {mode!r}")
        self.chunk = int(_opt(options, "idmpChunk", str(IDMP_CHUNK)) or IDMP_CHUNK)
        self.idmp = False
        if mode != "false" and not ("id" in self.names and self._id_never_null(schema)):
            with Conn(self.url) as conn:
                self.idmp = supports_idmp(conn)
            if mode == "true" and not self.idmp:
                raise ValueError(f"option idempotent=true, but the server at {self.url} has no XADD IDMP")
        # Fixed here and shipped to every task: a retried task or stage uses the same producer IDs.
        self.run_id = uuid.uuid4().hex

    @staticmethod
    def _id_never_null(schema: Any) -> bool:
        f = next(f for f in schema.fields if f.name == "id")
        return not f.nullable

    def _command(self, d: dict[str, Any]) -> tuple[str, str | None, list[Any]]:
        key = d["stream"] if "stream" in d else self.default_key
        if not key:
            raise SinkError(f"row with a null 'stream': {d!r}")
        sid = d.get("id")
        fv: list[Any] = []
        fields = d.get("fields")
        if fields:
            for f, v in (fields.items() if isinstance(fields, dict) else fields):
                fv += [f, "" if v is None else v]
        for n in self.value_cols:
            v = d[n]
            if v is not None:
                fv += [n, v if isinstance(v, (str, bytes)) else str(v)]
        if not fv:
            raise SinkError(f"row without fields for stream {key!r}: {d!r}")
        return key, sid, fv

    def _producer(self) -> str:
        """This task's producer prefix: query (stable across restarts for a streaming query),
        micro-batch and partition; the same on every attempt of the task."""
        ctx = TaskContext.get()
        if ctx is None:
            return f"rill-spark:{self.run_id}:0:0"
        query = ctx.getLocalProperty("sql.streaming.queryId") or self.run_id
        batch = ctx.getLocalProperty("streaming.sql.batchId") or "0"
        return f"rill-spark:{query}:{batch}:{ctx.partitionId()}"

    def write(self, rows: Iterator[Any]) -> WriteResult:
        result = WriteResult()
        producer = self._producer() if self.idmp else ""
        checked: set[str] = set()
        with Conn(self.url) as conn:
            items: list[tuple[str, str | None, list[Any], list[Any]]] = []
            n = 0  # position among this task's auto-ID rows: the idempotent ID
            for row in rows:
                d = row.asDict() if hasattr(row, "asDict") else dict(row)
                key, sid, fv = self._command(d)
                extra: list[Any] = []
                if sid is None and self.idmp:
                    if key not in checked:
                        self._check_window(conn, key)
                        checked.add(key)
                    extra = ["IDMP", f"{producer}:{n // self.chunk}", str(n % self.chunk)]
                    n += 1
                items.append((key, sid, fv, extra))
                if len(items) >= self.batch:
                    self._flush(conn, items, result)
                    items = []
            if items:
                self._flush(conn, items, result)
        return result

    def _check_window(self, conn: Conn, key: str) -> None:
        """A stream configured (XCFGSET) to keep fewer idempotent IDs per producer than a chunk
        would forget pairs a retry needs: refuse rather than degrade silently."""
        try:
            reply = conn.call("XINFO", "STREAM", key)
        except redis.ResponseError:
            return  # no such stream yet: it gets the server's defaults
        info = dict(zip(reply[0::2], reply[1::2], strict=True))
        size = info.get(b"idmp-maxsize")
        if size is not None and int(size) < self.chunk:
            raise SinkError(
                f"stream {key!r} keeps {int(size)} idempotent IDs per producer (idmp-maxsize); the sink "
                f"needs {self.chunk}: raise it (XCFGSET {key} IDMP-MAXSIZE {self.chunk}) or lower option "
                "idmpChunk")

    def _flush(self, conn: Conn, items: list[tuple[str, str | None, list[Any], list[Any]]],
               result: WriteResult) -> None:
        cmds = [("XADD", key, *extra, *self.trim, sid if sid is not None else "*", *fv)
                for key, sid, fv, extra in items]
        replies = conn.pipeline(cmds)
        suspects = []
        for (key, sid, fv, _extra), reply in zip(items, replies, strict=True):
            if isinstance(reply, Exception):
                if sid is not None and "equal or smaller" in str(reply):
                    suspects.append((key, sid, fv))
                    continue
                raise SinkError(f"XADD to stream {key!r} (ID {sid or '*'}) failed: {reply}") from reply
            result.written += 1
            result.streams[key] = result.streams.get(key, 0) + 1
        if suspects:
            stored = self._stored(conn, suspects)
            for key, sid, fv in suspects:
                found = stored.get((key, _exact(sid)))
                if found is None:
                    raise SinkError(
                        f"stream {key!r}: ID {sid} is not after the stream's last ID and no entry has it, "
                        "so the row arrived out of order; write each stream from one task in ID order "
                        "(rill.pipeline.write_streams does)")
                if _pairs(found) != _pairs(fv):
                    raise SinkError(
                        f"stream {key!r}: an entry with ID {sid} already exists with different fields; "
                        "refusing to drop this row as a duplicate (two different rows for one ID? "
                        "write_streams(..., ids='renumber') merges streams whose IDs collide)")
                result.duplicates += 1

    @staticmethod
    def _stored(conn: Conn, suspects: list[tuple[str, str, list[Any]]]) -> dict[tuple[str, str], list[Any]]:
        """The stored fields of each refused ID.  A replay refuses a run of consecutive entries,
        so one XRANGE per stream over the run's span (COUNT = the run's length) usually finds
        them all; any ID it did not reach is looked up on its own."""
        spans: dict[str, list[str]] = {}
        for key, sid, _fv in suspects:
            spans.setdefault(key, []).append(_exact(sid))
        keys = list(spans)
        cmds = []
        for key in keys:
            ids = sorted(spans[key], key=_order)
            cmds.append(("XRANGE", key, ids[0], ids[-1], "COUNT", len(ids)))
        out: dict[tuple[str, str], list[Any]] = {}
        for key, reply in zip(keys, conn.pipeline(cmds), strict=True):
            if isinstance(reply, Exception):
                raise SinkError(f"stream {key!r}: reading back refused IDs failed: {reply}") from reply
            for eid, fv in reply:
                out[(key, eid.decode())] = fv
        missing = [(key, sid) for key in keys for sid in spans[key] if (key, sid) not in out]
        for (key, sid), reply in zip(missing, conn.pipeline([("XRANGE", k, i, i) for k, i in missing]),
                                     strict=True):
            if isinstance(reply, Exception):
                raise SinkError(f"stream {key!r}: reading back ID {sid} failed: {reply}") from reply
            if reply:
                out[(key, sid)] = reply[0][1]
        return out


def _order(sid: str) -> int:
    try:
        return parse_id(sid)
    except ValueError:
        return -1


def _exact(sid: str) -> str:
    """The full ``ms-seq`` of an explicit XADD ID (``ms`` alone means seq 0), for an exact XRANGE."""
    try:
        return format_id(parse_id(sid))
    except ValueError:
        return str(sid)  # not a plain ID (e.g. "5-*"): the XRANGE finds nothing and the row is refused


class RillWriter(DataSourceWriter):
    def __init__(self, options: Any, schema: Any, overwrite: bool = False) -> None:
        self.sink = StreamSink(options, schema, overwrite)

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return self.sink.write(iterator)


class RillStreamWriter(DataSourceStreamWriter):
    """Each micro-batch is XADDed as it arrives.  A replayed batch is idempotent with an ``id``
    column and, where the server has IDMP, without one too (see the module docstring)."""

    def __init__(self, options: Any, schema: Any, overwrite: bool = False) -> None:
        self.sink = StreamSink(options, schema, overwrite)

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return self.sink.write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass
