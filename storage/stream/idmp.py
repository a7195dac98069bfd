"""Idempotent producers (Redis 8.6's IDMP): per stream, the recent idempotent IDs of each
producer and the entry each one added."""

from __future__ import annotations

from collections import OrderedDict

# IDMP defaults and bounds (Redis 8.6 docs: XCFGSET).
IDMP_DURATION_DEFAULT = 100
IDMP_MAXSIZE_DEFAULT = 100
IDMP_DURATION_MAX = 86400
IDMP_MAXSIZE_MAX = 10000


class IdmpState:
    """Idempotent-producer bookkeeping of one stream (Redis 8.6's IDMP map).

    Per producer ID, its recent idempotent IDs in insertion order with the entry ID each
    produced and when (ms). An iid is forgotten after ``duration`` seconds or when the
    producer holds more than ``maxsize`` of them (oldest first).  ``configured`` records
    that XCFGSET was used (XINFO shows the IDMP fields once there is any IDMP state).
    """

    __slots__ = ("duration", "maxsize", "configured", "producers", "iids_added", "iids_duplicates")

    def __init__(
        self, duration: int = IDMP_DURATION_DEFAULT, maxsize: int = IDMP_MAXSIZE_DEFAULT
    ) -> None:
        self.duration = duration
        self.maxsize = maxsize
        self.configured = False
        self.producers: dict[bytes, OrderedDict[bytes, tuple[int, int]]] = {}
        self.iids_added = 0
        self.iids_duplicates = 0

    def _expire(self, pid: bytes, now_ms: int) -> OrderedDict[bytes, tuple[int, int]] | None:
        iids = self.producers.get(pid)
        if iids is None:
            return None
        horizon = now_ms - self.duration * 1000
        while iids:
            _iid, (_sid, at) = next(iter(iids.items()))
            if at > horizon:
                break
            iids.popitem(last=False)
        if not iids:
            del self.producers[pid]
            return None
        return iids

    def expire_all(self, now_ms: int) -> None:
        for pid in list(self.producers):
            self._expire(pid, now_ms)

    def lookup(self, pid: bytes, iid: bytes, now_ms: int) -> int | None:
        """The entry ID recorded for (pid, iid), or None (expired iids are dropped first)."""
        iids = self._expire(pid, now_ms)
        if iids is None:
            return None
        hit = iids.get(iid)
        return None if hit is None else hit[0]

    def record(self, pid: bytes, iid: bytes, sid: int, now_ms: int) -> None:
        """Remember that (pid, iid) produced entry ``sid``; evict past ``maxsize``."""
        iids = self.producers.get(pid)
        if iids is None:
            iids = self.producers[pid] = OrderedDict()
        iids.pop(iid, None)
        iids[iid] = (sid, now_ms)
        while len(iids) > self.maxsize:
            iids.popitem(last=False)
        self.iids_added += 1

    def restore(self, pid: bytes, iid: bytes, sid: int, at_ms: int) -> None:
        """Re-insert a tracked iid as persisted (no counters, no eviction)."""
        iids = self.producers.get(pid)
        if iids is None:
            iids = self.producers[pid] = OrderedDict()
        iids[iid] = (sid, at_ms)

    def pids_tracked(self) -> int:
        return len(self.producers)

    def iids_tracked(self) -> int:
        return sum(len(v) for v in self.producers.values())

    def copy(self) -> IdmpState:
        n = IdmpState(self.duration, self.maxsize)
        n.configured = self.configured
        n.iids_added = self.iids_added
        n.iids_duplicates = self.iids_duplicates
        n.producers = {k: OrderedDict(v) for k, v in self.producers.items()}
        return n
