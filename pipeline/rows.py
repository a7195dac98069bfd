"""Stream entries -> Arrow record batches in the shape Spark asked for.

The default row is ``(stream, id, ms, seq, fields map<string,string>)``.  With a
user schema, the columns named ``stream``, ``id``, ``ms``, ``seq`` and ``fields`` keep
those meanings and every other column is the entry field of the same name, cast from
its string form to the column's type (a value that does not parse becomes null).
Values are UTF-8 text; bytes that are not UTF-8 are replaced (U+FFFD) rather than failing the read.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .ids import LONG_MAX

DEFAULT_SCHEMA = "stream string, id string, ms long, seq long, fields map<string,string>"
META = ("stream", "id", "ms", "seq", "fields")


def _arrow_type(spark_type: Any) -> pa.DataType:
    from pyspark.sql.pandas.types import to_arrow_type

    return to_arrow_type(spark_type)


def _text(values: list[Any]) -> pa.Array:
    """bytes (or None) -> an Arrow string array, replacing invalid UTF-8."""
    arr = pa.array(values, pa.binary())
    try:
        return arr.cast(pa.string())
    except pa.ArrowInvalid:
        return pa.array([None if v is None else v.decode("utf-8", "replace") for v in values], pa.string())


def _cast(values: list[Any], typ: pa.DataType) -> pa.Array:
    text = _text(values)
    if typ == pa.string():
        return text
    try:
        return pc.cast(text, typ)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        out = []
        for v in text.to_pylist():
            try:
                out.append(pc.cast(pa.array([v]), typ)[0].as_py() if v is not None else None)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                out.append(None)
        return pa.array(out, typ)


class BatchBuilder:
    """Accumulates ``(stream, id bytes, [f1, v1, ...])`` and emits record batches for a schema."""

    def __init__(self, schema: Any) -> None:
        self.schema = schema
        self.names = [f.name for f in schema.fields]
        self.types = {f.name: _arrow_type(f.dataType) for f in schema.fields}
        self.arrow_schema = pa.schema([pa.field(f.name, self.types[f.name], nullable=True) for f in schema.fields])
        self.want_fields = "fields" in self.names
        self.extra = [n for n in self.names if n not in META]
        self.extra_b = [n.encode() for n in self.extra]
        self.reset()

    def reset(self) -> None:
        self.streams: list[str] = []
        self.ids: list[bytes] = []
        self.offsets: list[int] = [0]
        self.keys: list[bytes] = []
        self.vals: list[bytes] = []
        self.cols: dict[str, list[Any]] = {n: [] for n in self.extra}

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, stream: str, entries: list[Any]) -> None:
        """One XRANGE/XREADGROUP page; entries whose body is nil (deleted while pending) are skipped."""
        ids = self.ids
        self.streams.extend([stream] * len(entries))
        if self.want_fields:
            keys, vals, offsets = self.keys, self.vals, self.offsets
            for eid, fv in entries:
                if fv is None:
                    self.streams.pop()
                    continue
                ids.append(eid)
                keys.extend(fv[0::2])
                vals.extend(fv[1::2])
                offsets.append(len(keys))
        else:
            for eid, fv in entries:
                if fv is None:
                    self.streams.pop()
                    continue
                ids.append(eid)
        if self.extra:
            for eid, fv in entries:
                if fv is None:
                    continue
                d = dict(zip(fv[0::2], fv[1::2], strict=False))
                for n, nb in zip(self.extra, self.extra_b, strict=True):
                    self.cols[n].append(d.get(nb))

    def flush(self) -> pa.RecordBatch:
        arrays = []
        n = len(self.ids)
        ms_list: list[int | None] | None = None
        seq_list: list[int | None] | None = None
        if "ms" in self.names or "seq" in self.names:
            ms_list, seq_list = [], []
            for eid in self.ids:
                a, _, b = eid.partition(b"-")
                m, s = int(a), int(b)
                ms_list.append(m if m <= LONG_MAX else None)
                seq_list.append(s if s <= LONG_MAX else None)
        for name in self.names:
            typ = self.types[name]
            if name == "stream":
                arr = pa.array(self.streams, pa.string())
            elif name == "id":
                arr = _text(self.ids)
            elif name == "ms":
                arr = pa.array(ms_list, pa.int64())
            elif name == "seq":
                arr = pa.array(seq_list, pa.int64())
            elif name == "fields":
                arr = pa.MapArray.from_arrays(pa.array(self.offsets, pa.int32()), _text(self.keys),
                                              _text(self.vals))
            else:
                arr = _cast(self.cols[name], typ)
            if arr.type != typ:
                arr = arr.cast(typ)
            arrays.append(arr)
        batch = pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema) if n or arrays else None
        self.reset()
        return batch
