"""The set type: a Python set of byte strings that reports Redis 7.0's encodings.

Redis 7.0 keeps a set of integers as an intset (sorted int64s, so reading it
yields members in ascending numeric order) until a non-integer member arrives
or it grows past ``set-max-intset-entries``; then it becomes a hash table and
never goes back. (Listpack-encoded sets only arrived in 7.2.) The value is a
plain ``set`` plus an ``intset`` flag flipped at those moments; members of an
intset are read back sorted by value, exactly as Redis returns them.

"Integer" means what Redis's string2ll accepts: an optional '-', no leading
zeros or '+', within int64 -- so "01" or "-0" make a set a hash table.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator

from .keyspace import ScanLog, scan_step
from .list import _jemalloc_size
from .listpack import string_to_int64

max_intset_entries = 512



def set_limits(entries: int) -> None:
    """set-max-intset-entries (capped at 2**30 as Redis caps it)."""
    global max_intset_entries
    max_intset_entries = min(entries, 1 << 30)


def is_int(s: bytes) -> bool:
    """Whether an intset may hold ``s`` (Redis's string2ll over the whole string)."""
    return string_to_int64(s) is not None


def all_ints(members: Iterable[bytes]) -> bool:
    for m in members:
        if not is_int(m):
            return False
    return True


_ROBJ = 16
_DICT = 56
_DICT_ENTRY = 24
_SDS_HDR = 3


class SetValue(set):
    """A Redis set; ``intset`` is True while Redis would keep it as an intset.

    ``scan_log`` exists while an SSCAN iteration of the hashtable encoding is open;
    members come and go through ``add_member``/``discard_member(s)`` so that it hears
    of them (see ``storage.keyspace.ScanLog``).
    """

    __slots__ = ("intset", "scan_log")

    type_name = b"set"

    def __init__(self, members: Iterable[bytes] = ()) -> None:
        super().__init__(members)
        self.intset = True
        self.scan_log: ScanLog | None = None

    def encoding(self) -> bytes:
        return b"intset" if self.intset else b"hashtable"

    def add_member(self, member: bytes) -> int:
        """setTypeAdd: 1 when ``member`` is new; converts as Redis does."""
        if member in self:
            return 0
        self.add(member)
        if self.intset:
            if len(self) > max_intset_entries or not is_int(member):
                self.intset = False
        elif self.scan_log is not None and self.scan_log.added(member):
            self.scan_log = None
        return 1

    def discard_member(self, member: bytes) -> None:
        """Remove ``member``, which must be present."""
        self.discard(member)
        if self.scan_log is not None and self.scan_log.removed(member, self):
            self.scan_log = None

    def discard_members(self, members: Iterable[bytes]) -> None:
        """Remove ``members``, each present once."""
        self.difference_update(members)
        log = self.scan_log
        if log is not None:
            for m in members:
                if log.removed(m, self):
                    self.scan_log = None
                    break

    def ordered(self) -> list[bytes]:
        """Members in Redis's iteration order: ascending values for an intset."""
        if self.intset:
            return sorted(self, key=int)
        return list(self)

    def random_member(self) -> bytes:
        return random.choice(tuple(self))

    def scan_page(self, cursor: int, count: int) -> tuple[int, list[bytes]]:
        """SSCAN over a hashtable-encoded set: (next cursor, members)."""
        self.scan_log, cursor, members = scan_step(self.scan_log, self, cursor, count)
        return cursor, members

    def copy(self) -> SetValue:
        s = SetValue(self)
        s.intset = self.intset
        return s

    def digest_parts(self) -> Iterator[bytes]:
        return iter(sorted(self))

    def rdb_items(self) -> list[bytes]:
        return self.ordered()

    def memory_usage(self, samples: int = 5) -> int:
        """MEMORY USAGE's estimate: the intset blob, or dict + entries + sds members."""
        n = len(self)
        if self.intset:
            width = 2
            for m in self:
                v = int(m)
                if v < -(2**31) or v > 2**31 - 1:
                    width = 8
                    break
                if v < -32768 or v > 32767:
                    width = 4
            return _ROBJ + _jemalloc_size(8 + width * n)
        buckets = 1 << max(2, (n - 1).bit_length()) if n else 0
        size = _ROBJ + _DICT + buckets * 8
        if not n:
            return size
        taken = total = 0
        for m in self:
            total += _DICT_ENTRY + _jemalloc_size(len(m) + _SDS_HDR)
            taken += 1
            if samples and taken >= samples:
                break
        return size + total * n // taken


def from_members(members: Iterable[bytes]) -> SetValue:
    """A set holding ``members`` in the encoding a fresh Redis set of them would have."""
    s = SetValue(members)
    if len(s) > max_intset_entries or not all_ints(s):
        s.intset = False
    return s


def from_rdb_members(members: Iterable[bytes]) -> SetValue:
    """A set loaded from RDB/RESTORE (same rule: intset if it fits)."""
    return from_members(members)
