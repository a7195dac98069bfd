"""The hash type: a dict of field -> value that reports Redis 7.0's encodings.

Redis keeps a small hash as a listpack (fields and values in insertion order)
and converts it, once and for good, to a hash table when it grows past
``hash-max-listpack-entries`` fields or is given a field or value longer than
``hash-max-listpack-value`` bytes. A Python dict already keeps insertion order
and answers every operation in O(1), so the value *is* a dict; the encoding is
a flag that flips at the same moments Redis converts. Reading order therefore
matches Redis exactly while the hash is a listpack (HGETALL, HSCAN, ...), and is
merely "some order" afterwards, as Redis's is.

The thresholds are module globals (``set_limits``), refreshed by the hashes
command family when the config changes, so the RDB loader and the commands
agree without a server reference here.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from .keyspace import ScanLog, scan_step
from .list import _jemalloc_size, lp_entry_size

max_listpack_entries = 512
max_listpack_value = 64


def set_limits(entries: int, value: int) -> None:
    """hash-max-listpack-entries / hash-max-listpack-value (CONFIG SET refreshes them)."""
    global max_listpack_entries, max_listpack_value
    max_listpack_entries = entries
    max_listpack_value = value


# sizeof() of the C structures MEMORY USAGE counts.
_ROBJ = 16
_DICT = 56
_DICT_ENTRY = 24
_SDS_HDR = 3  # sdshdr8 plus the terminating NUL


class HashValue(dict):
    """A Redis hash. ``listpack`` is True while Redis would keep it compact.

    ``scan_log`` exists while an HSCAN iteration of the hashtable encoding is
    open; fields come and go through ``put``/``delete_field`` so that it hears of
    them and a cursor stays valid (see ``storage.keyspace.ScanLog``).
    """

    __slots__ = ("listpack", "scan_log")

    type_name = b"hash"

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        self.listpack = True
        self.scan_log: ScanLog | None = None

    def encoding(self) -> bytes:
        return b"listpack" if self.listpack else b"hashtable"

    def check_sizes(self, args: Iterable[bytes]) -> None:
        """hashTypeTryConversion: any argument too long for a listpack converts first."""
        if self.listpack:
            limit = max_listpack_value
            for a in args:
                if len(a) > limit:
                    self.listpack = False
                    return

    def put(self, field: bytes, value: bytes) -> int:
        """Set one field (after any size check); 1 when the field is new, else 0."""
        if field in self:
            self[field] = value
            return 0
        self[field] = value
        if self.listpack:
            if len(self) > max_listpack_entries:
                self.listpack = False
        elif self.scan_log is not None and self.scan_log.added(field):
            self.scan_log = None
        return 1

    def delete_field(self, field: bytes) -> bool:
        """Remove ``field``; whether it was there."""
        if self.pop(field, None) is None:
            return False
        if self.scan_log is not None and self.scan_log.removed(field, self):
            self.scan_log = None
        return True

    def put_checked(self, field: bytes, value: bytes) -> int:
        """hashTypeSet with its own size check (HINCRBY*, whose value is computed)."""
        if self.listpack and (len(field) > max_listpack_value or len(value) > max_listpack_value):
            self.listpack = False
        return self.put(field, value)

    def scan_page(self, cursor: int, count: int) -> tuple[int, list[bytes]]:
        """HSCAN over a hashtable-encoded hash: (next cursor, fields)."""
        self.scan_log, cursor, fields = scan_step(self.scan_log, self, cursor, count)
        return cursor, fields

    def copy(self) -> HashValue:
        h = HashValue(self)
        h.listpack = self.listpack
        return h

    def digest_parts(self) -> Iterator[bytes]:
        # Order-independent where Redis's is (it XORs per-field digests).
        for f in sorted(self):
            yield f
            yield self[f]

    def rdb_items(self) -> Iterator[tuple[bytes, bytes]]:
        return iter(self.items())

    def memory_usage(self, samples: int = 5) -> int:
        """MEMORY USAGE's estimate: the listpack bytes, or dict + entries + sds strings."""
        if self.listpack:
            lp = 7 + sum(lp_entry_size(f) + lp_entry_size(v) for f, v in self.items())
            return _ROBJ + _jemalloc_size(lp)
        n = len(self)
        buckets = 1 << max(2, (n - 1).bit_length()) if n else 0
        size = _ROBJ + _DICT + buckets * 8
        if not n:
            return size
        taken = 0
        total = 0
        for f, v in self.items():
            total += _DICT_ENTRY + _jemalloc_size(len(f) + _SDS_HDR) + _jemalloc_size(len(v) + _SDS_HDR)
            taken += 1
            if samples and taken >= samples:
                break
        return size + total * n // taken


def from_rdb_pairs(pairs: Iterable[tuple[bytes, bytes]]) -> HashValue:
    """A hash loaded from RDB/RESTORE, in the encoding Redis 7.0 would give it."""
    h = HashValue(pairs)
    if len(h) > max_listpack_entries:
        h.listpack = False
    else:
        limit = max_listpack_value
        for f, v in h.items():
            if len(f) > limit or len(v) > limit:
                h.listpack = False
                break
    return h
