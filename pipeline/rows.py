"""Stream entries -> Arrow record batches in the shape Spark asked for.

The default row is ``(stream, id, ms, seq, fields map<string,string>)``.  With a
user schema, the columns named ``stream``, ``id``, ``ms``, ``seq`` and ``fields`` keep
those meanings and every other column is the entry field of the same name, cast from
its string form to the column's type (a value that does not parse becomes null).
Values are UTF-8 text; bytes that are not UTF-8 are replaced (U+FFFD) rather than failing the read.
"""

from __future__ import annotations

from itertools import chain
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_type

from .ids import LONG_MAX

DEFAULT_SCHEMA = "stream string, id string, ms long, seq long, fields map<string,string>"
META = ("stream", "id", "ms", "seq", "fields")


def _arrow_type(spark_type: Any) -> pa.DataType:
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
        self.extra = [n for n in self.names if n not in META]
        self.reset()

    def reset(self) -> None:
        self.pages: list[tuple[str, list[Any]]] = []
        self.n = 0

    def __len__(self) -> int:
        return self.n

    def add(self, stream: str, entries: list[Any]) -> None:
        """One page of ``[id, [f1, v1, ...]]`` entries (no nil bodies: the caller drops those)."""
        self.pages.append((stream, entries))
        self.n += len(entries)

    def flush(self) -> pa.RecordBatch:
        """Everything added so far as one record batch; the per-entry work stays in C where it can."""
        streams: list[str] = []
        entries: list[Any] = []
        for stream, page in self.pages:
            streams += [stream] * len(page)
            entries += page
        self.reset()
        ids = [e[0] for e in entries]
        fvs = [e[1] for e in entries]
        id_text = _text(ids)
        ms_arr = seq_arr = None
        if "ms" in self.names or "seq" in self.names:
            ms_arr, seq_arr = _split_ids(id_text, ids)
        arrays = []
        for name in self.names:
            typ = self.types[name]
            if name == "stream":
                arr = pa.array(streams, pa.string())
            elif name == "id":
                arr = id_text
            elif name == "ms":
                arr = ms_arr
            elif name == "seq":
                arr = seq_arr
            elif name == "fields":
                flat = list(chain.from_iterable(fvs))
                lens = pa.array(list(map(len, fvs)), pa.int32())
                ends = pc.divide(pc.cumulative_sum(lens), 2) if len(lens) else pa.array([], pa.int32())
                offsets = pa.concat_arrays([pa.array([0], pa.int32()), ends.cast(pa.int32())])
                arr = pa.MapArray.from_arrays(offsets, _text(flat[0::2]), _text(flat[1::2]))
            else:
                nb = name.encode()
                arr = _cast([_field(fv, nb) for fv in fvs], typ)
            if arr.type != typ:
                arr = arr.cast(typ)
            arrays.append(arr)
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema)


def _field(fv: list[bytes], name: bytes) -> bytes | None:
    for i in range(0, len(fv), 2):
        if fv[i] == name:
            return fv[i + 1]
    return None


def _split_ids(id_text: pa.Array, ids: list[bytes]) -> tuple[pa.Array, pa.Array]:
    """``ms`` and ``seq`` as int64 columns; a part beyond a signed long becomes null."""
    parts = pc.split_pattern(id_text, "-")
    ms = pc.cast(pc.list_element(parts, 0), pa.uint64())
    seq = pc.cast(pc.list_element(parts, 1), pa.uint64())
    limit = pa.scalar(LONG_MAX, pa.uint64())
    out = []
    for col in (ms, seq):
        big = pc.greater(col, limit)
        if len(col) and pc.any(big).as_py():
            col = pc.if_else(big, pa.scalar(None, pa.uint64()), col)
        out.append(col.cast(pa.int64()))
    return out[0], out[1]
