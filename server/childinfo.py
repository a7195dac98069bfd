"""What a forked child (BGSAVE, BGREWRITEAOF, a replica's snapshot) tells its parent
while it works, as Redis's child info pipe does: how many keys it has written and how
much memory copy-on-write has given it. INFO persistence shows them
(current_save_keys_processed, current_fork_perc, current_cow_size...).

The child writes fixed-size records to a pipe; the parent drains it from the cron and
once more when it reaps the child (so the final report is never lost).
"""

from __future__ import annotations

import logging
import os
import struct
import time

log = logging.getLogger("rill")
VERBOSE, NOTICE = logging.INFO, 25  # Redis's levels as server/main.py maps them

CURRENT, AOF_COW, RDB_COW = 0, 1, 2  # record kinds, as Redis's childInfoType
_RECORD = struct.Struct("=BQQd")  # kind, keys written, cow bytes, when cow was measured (monotonic)
_COW_DUTY_CYCLE = 100  # measure cow no more than 1/100 of the time (it reads /proc)


def private_dirty() -> int:
    """Bytes this process holds alone and has written: in a fresh fork, the pages
    copy-on-write has copied (Redis's zmalloc_get_private_dirty, from smaps)."""
    try:
        with open("/proc/self/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Private_Dirty:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


class ChildInfo:
    """One child's pipe, and what the parent has learned from it."""

    def __init__(self) -> None:
        self.rfd, self.wfd = os.pipe()
        os.set_blocking(self.rfd, False)
        self.keys_processed = 0
        self.cow = 0
        self.cow_peak = 0
        self.cow_updated = 0.0  # monotonic seconds; 0: never measured
        self.last_cow = 0  # the peak, once the child's final report came
        # the child's side
        self._keys = 0
        self._sent_at = -1.0
        self._cow_cost = 0.0
        self._cow_sum = 0
        self._cow_count = 0

    # -- in the child -----------------------------------------------------------
    def child_side(self) -> None:
        os.close(self.rfd)
        self.rfd = -1

    def key_written(self) -> None:
        """Per key saved: a report at most once a second, checked every 1024 keys."""
        keys = self._keys
        self._keys = keys + 1
        if keys & 1023 == 0:
            now = time.monotonic()
            if self._sent_at < 0 or now - self._sent_at >= 1.0:
                self._send(CURRENT)
                self._sent_at = now

    def finished(self, kind: int) -> None:
        """The child's last word: its copy-on-write size (RDB_COW or AOF_COW)."""
        self._send(kind)

    def _send(self, kind: int) -> None:
        now = time.monotonic()
        if kind != CURRENT or not self.cow_updated or now - self.cow_updated > self._cow_cost * _COW_DUTY_CYCLE:
            self.cow = private_dirty()
            self.cow_updated = time.monotonic()
            self._cow_cost = self.cow_updated - now
            self.cow_peak = max(self.cow_peak, self.cow)
            self._cow_sum += self.cow
            self._cow_count += 1
            if self.cow or kind != CURRENT:  # Redis's line: verbose while working, notice at the end
                log.log(VERBOSE if kind == CURRENT else NOTICE,
                        "Fork CoW for %s: current %d MB, peak %d MB, average %d MB",
                        "AOF" if kind == AOF_COW else "RDB", self.cow >> 20, self.cow_peak >> 20,
                        (self._cow_sum // self._cow_count) >> 20)
        os.write(self.wfd, _RECORD.pack(kind, self._keys, self.cow, self.cow_updated))

    # -- in the parent ------------------------------------------------------------
    def parent_side(self) -> None:
        os.close(self.wfd)
        self.wfd = -1

    def receive(self) -> None:
        """Drain the pipe: the latest report wins, the peak is kept."""
        if self.rfd < 0:
            return
        size = _RECORD.size
        while True:
            try:
                data = os.read(self.rfd, size * 64)
            except BlockingIOError:
                return
            if not data:
                return
            for pos in range(0, len(data) - len(data) % size, size):
                kind, keys, cow, updated = _RECORD.unpack_from(data, pos)
                self.cow_peak = max(self.cow_peak, cow)
                if kind == CURRENT:
                    self.keys_processed, self.cow, self.cow_updated = keys, cow, updated
                else:
                    self.last_cow = self.cow_peak

    def close(self) -> None:
        for fd in (self.rfd, self.wfd):
            if fd >= 0:
                os.close(fd)
        self.rfd = self.wfd = -1
