"""Latency: the latency monitor (LATENCY LATEST/HISTORY/GRAPH/DOCTOR) and the
per-command latency histograms (LATENCY HISTOGRAM, INFO latencystats).

The monitor keeps, per event name ("command", "fast-command", "fork", ...), the
last 160 seconds in which that event took at least ``latency-monitor-threshold``
milliseconds: one sample per second (the worst of that second) and the worst
ever, as Redis 7.0's latency.c does.

The histograms are Redis's own: HDR histograms from 1 ns to 1 s with two
significant digits, one counter per value below 256 ns, then 128 counters per
octave. Recording is one list lookup and one list increment on the dispatcher's
hot path (``HDR_OF`` holds the counter of every duration below 65.5 us). A longer
duration, tested for because raising an IndexError costs more than a command (~1.2k
instructions; under valgrind every command takes that long), is recorded by
:func:`record_long`, capped at the histogram's highest value as Redis caps it; so is
a command's first sample (its histogram is still the empty ``NO_HIST``, which the
dispatcher tests for; the counters are allocated then).
Where Redis rounds each duration to whole microseconds first, rill keeps the
nanoseconds.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .commandstats import CommandStats

# -- per-command histograms ------------------------------------------------------------

# The HDR layout Redis configures (lowest 1, highest 1e9, 2 significant digits):
# 256 sub-buckets, so values below 256 ns have a counter each and every octave
# above is cut into 128 equal counters; 3072 counters reach past 1e9.
_SUB_BITS = 8
_HALF_BITS = _SUB_BITS - 1
_SUB_MASK = (1 << _SUB_BITS) - 1
HDR_COUNTS = 3072

# Redis records between 1 ns and 1 s (LATENCY_HISTOGRAM_MIN_VALUE / _MAX_VALUE).
HIST_MAX_NS = 1_000_000_000

NO_HIST: tuple = ()  # a command that recorded nothing yet: any index is an IndexError


def hdr_index(value: int) -> int:
    """The HDR counter a value falls in."""
    shift = (value | _SUB_MASK).bit_length() - _SUB_BITS
    return (shift << _HALF_BITS) + (value >> shift)


def hdr_lowest(index: int) -> int:
    """The smallest value of an HDR counter."""
    if index < (2 << _HALF_BITS):
        return index
    shift = (index >> _HALF_BITS) - 1
    return ((index & ((1 << _HALF_BITS) - 1)) + (1 << _HALF_BITS)) << shift


def hdr_highest(index: int) -> int:
    """The largest value of an HDR counter."""
    shift = max((index >> _HALF_BITS) - 1, 0)
    return hdr_lowest(index) + (1 << shift) - 1


def _hdr_table(limit: int) -> list[int]:
    table: list[int] = []
    index = 0
    while len(table) < limit:
        table.extend([index] * (hdr_highest(index) - hdr_lowest(index) + 1))
        index += 1
    del table[limit:]
    return table


# HDR_OF[ns] is the counter of a duration below TABLE_NS (65.5 us): the dispatcher
# finds it with one list lookup (a bit_length() call and shifts cost three times
# as much per command). The table is shared by every command.
TABLE_NS = 1 << 16
HDR_OF = _hdr_table(TABLE_NS)


def record_long(st: CommandStats, duration: int) -> None:
    """The hot path's rare case: a command's first sample (its counters are
    allocated now) or a duration past HDR_OF, whose counter is worked out here."""
    if not st.hist:
        st.hist = [0] * HDR_COUNTS
    st.hist[HDR_OF[duration] if duration < TABLE_NS else hdr_index(min(duration, HIST_MAX_NS))] += 1
    st.hist_nsec = -1


def record(st: CommandStats, duration: int) -> None:
    """Record one sample off the hot path (a blocked command when it is served)."""
    if duration < TABLE_NS and st.hist:
        st.hist[HDR_OF[duration]] += 1
        st.hist_nsec = -1
    else:
        record_long(st, duration)


def unrecord(st: CommandStats, duration: int) -> None:
    """Take back the sample just recorded for a command that blocked: Redis
    records a blocked command's latency when it is served, not when it parks."""
    st.hist[HDR_OF[duration] if duration < TABLE_NS else hdr_index(min(duration, HIST_MAX_NS))] -= 1
    st.hist_nsec = -1


def hist_total(st: CommandStats) -> int:
    """How many samples a command's histogram holds."""
    return sum(st.hist)


def hdr_counts(st: CommandStats) -> list[tuple[int, int]]:
    """(HDR counter index, count) of a command's samples, in increasing order."""
    return [(i, n) for i, n in enumerate(st.hist) if n]


def value_at_percentile(counts: list[tuple[int, int]], total: int, percentile: float) -> int:
    """hdr_value_at_percentile: the highest value of the first counter where the
    samples reach the percentile (its lowest value for the 0th percentile)."""
    wanted = max(int(min(percentile, 100.0) / 100 * total + 0.5), 1)
    seen = 0
    for index, n in counts:
        seen += n
        if seen >= wanted:
            return hdr_lowest(index) if percentile == 0.0 else hdr_highest(index)
    return 0


def cumulative_usec(counts: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """LATENCY HISTOGRAM's ``histogram_usec``: Redis walks the HDR counters with a
    logarithmic iterator whose steps end at 1024 ns, 2048 ns, ... and prints, for
    every step that added samples, the step's upper value in microseconds (the
    highest value of the counter holding 1024 * 2^k ns, so 1, 2, 4, 8, 16, 33,
    66, ...) and the samples counted so far. Samples past the last whole step
    (over 2^29 ns) end the walk at the last counter's highest value."""
    out: list[tuple[int, int]] = []
    seen = 0
    pos = 0
    level = 1024
    while pos < len(counts):
        limit = hdr_index(level)
        if limit >= HDR_COUNTS:
            seen += sum(n for _, n in counts[pos:])
            out.append((hdr_highest(HDR_COUNTS - 1) // 1000, seen))
            break
        before = seen
        while pos < len(counts) and counts[pos][0] <= limit:
            seen += counts[pos][1]
            pos += 1
        if seen > before:
            out.append((hdr_highest(limit) // 1000, seen))
        level <<= 1
    return out


def format_percentile(p: float) -> str:
    """A percentile as Redis prints it: ``%f`` with trailing zeros (and dot) trimmed."""
    text = f"{p:f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def percentiles_line(st: CommandStats, percentiles: list[float]) -> str:
    """INFO latencystats' value for one command: ``p50=1.003,p99=...`` in microseconds."""
    counts = hdr_counts(st)
    total = sum(n for _, n in counts)
    return ",".join(
        f"p{format_percentile(p)}={value_at_percentile(counts, total, p) / 1000:.3f}" for p in percentiles
    )


# -- the latency monitor ---------------------------------------------------------------

SAMPLES = 160  # seconds of history per event (LATENCY_TS_LEN)
GRAPH_COLUMNS = 80


class Series:
    """One event's history: a ring of (unix time, ms) samples, one per second."""

    __slots__ = ("next", "max", "times", "latencies")

    def __init__(self) -> None:
        self.next = 0  # where the next second's sample goes
        self.max = 0  # the worst ever (since the last LATENCY RESET of the event)
        self.times = [0] * SAMPLES  # 0: an empty slot
        self.latencies = [0] * SAMPLES

    def add(self, ms: int, now: int) -> None:
        if ms > self.max:
            self.max = ms
        prev = (self.next - 1) % SAMPLES
        if self.times[prev] == now:  # the same second keeps its worst sample
            if ms > self.latencies[prev]:
                self.latencies[prev] = ms
            return
        self.times[self.next] = now
        self.latencies[self.next] = ms
        self.next = (self.next + 1) % SAMPLES

    def samples(self) -> list[tuple[int, int]]:
        """(time, ms), oldest first."""
        out = []
        for k in range(SAMPLES):
            i = (self.next + k) % SAMPLES
            if self.times[i]:
                out.append((self.times[i], self.latencies[i]))
        return out

    def latest(self) -> tuple[int, int]:
        i = (self.next - 1) % SAMPLES
        return self.times[i], self.latencies[i]


class LatencyMonitor:
    """Event name -> Series, created when an event first passes the threshold."""

    def __init__(self) -> None:
        self.events: dict[str, Series] = {}

    def add(self, event: str, ms: int) -> None:
        series = self.events.get(event)
        if series is None:
            series = self.events[event] = Series()
        series.add(ms, int(time.time()))

    def reset(self, names: Iterable[bytes] | None = None) -> int:
        """Forget the named events (matched without regard to case), or all of them;
        returns how many were forgotten (each name counted on its own)."""
        if names is None:
            n = len(self.events)
            self.events.clear()
            return n
        n = 0
        for name in names:
            wanted = name.decode(errors="surrogateescape").lower()
            for event in [e for e in self.events if e.lower() == wanted]:
                del self.events[event]
                n += 1
        return n


def _label(elapsed: int) -> str:
    if elapsed < 60:
        return f"{elapsed}s"
    if elapsed < 3600:
        return f"{elapsed // 60}m"
    if elapsed < 86400:
        return f"{elapsed // 3600}h"
    return f"{elapsed // 86400}d"


def graph(event: str, series: Series, now: int | None = None) -> str:
    """LATENCY GRAPH: a header, then the samples as a 4-row sparkline labelled with
    how long ago each one was."""
    now = int(time.time()) if now is None else now
    samples = series.samples()
    values = [ms for _, ms in samples]
    high = max(values, default=0)
    low = min(values, default=0)
    head = (f"{event} - high {high} ms, low {low} ms (all time high {series.max} ms)\n"
            + "-" * GRAPH_COLUMNS + "\n")
    return head + sparkline(values, [_label(now - t) for t, _ in samples], GRAPH_COLUMNS, 4)


_FILL = "_o#"  # three heights per row; a full cell under the line is "|"
_LABEL_MARGIN = 1  # empty rows between the graph and the labels


def sparkline(values: list[int], labels: list[str], columns: int, rows: int) -> str:
    """Redis's sparkline in fill mode: each column is a sample scaled between the
    smallest and largest of all of them into rows * 3 steps, drawn bottom-up;
    labels are written vertically below, one character per row; more samples
    than ``columns`` continue in further blocks."""
    if not values:
        return ""
    low, high = min(values), max(values)
    span = (high - low) or 1
    steps = len(_FILL) * rows
    heights = []
    for v in values:
        step = int(int((v - low) * steps) / span)
        heights.append(min(max(step, 0), steps - 1))
    blocks = []
    for start in range(0, len(values), columns):
        part = range(start, min(start + columns, len(values)))
        lines = []
        for row in range(rows):
            base = (rows - row - 1) * len(_FILL)
            line = []
            for j in part:
                k = heights[j] - base
                line.append(_FILL[k] if 0 <= k < len(_FILL) else "|" if k >= len(_FILL) else " ")
            lines.append("".join(line))
        lines.extend(" " * len(part) for _ in range(_LABEL_MARGIN))
        depth = max(len(labels[j]) for j in part)
        for c in range(depth):
            lines.append("".join(labels[j][c] if c < len(labels[j]) else " " for j in part))
        blocks.append("".join(line + "\n" for line in lines))
    return "\n".join(blocks)


# -- LATENCY DOCTOR --------------------------------------------------------------------

_DISABLED = (
    "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis instance. "
    "You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in order to enable it. "
    "If we weren't in a deep space mission I'd suggest to take a look at "
    "https://redis.io/topics/latency-monitor.\n"
)
_INTRO = ("Dave, I have observed latency spikes in this Redis instance. "
          "You don't mind talking about it, do you Dave?\n\n")
_NOTHING = (
    "Dave, no latency spike was observed during the lifetime of this Redis instance, not in the "
    "slightest bit. I honestly think you ought to sit down calmly, take a stress pill, and think "
    "things over.\n"
)
_NO_FIX = (
    "\nWhile there are latency events logged, I'm not able to suggest any easy fix. Please use the "
    "Redis community to get some help, providing this report in your help request.\n"
)

# The advice Redis can give, in the order it prints it. "{ns}" is the threshold in
# microseconds (Redis's slowlog unit).
_ADVICE = {
    "better_vm": (
        "- If you are using a virtual machine, consider upgrading it with a faster one using a "
        "hypervisior that provides less latency during fork() calls. Xen is known to have poor "
        "fork() performance. Even in the context of the same VM provider, certain kinds of "
        "instances can execute fork faster than others.\n"),
    "slowlog_enabled": (
        "- There are latency issues with potentially slow commands you are using. Try to enable "
        "the Slow Log Redis feature using the command 'CONFIG SET slowlog-log-slower-than {us}'. "
        "If the Slow log is disabled Redis is not able to log slow commands execution for you.\n"),
    "slowlog_tuning": (
        "- Your current Slow Log configuration only logs events that are slower than your "
        "configured latency monitor threshold. Please use 'CONFIG SET slowlog-log-slower-than "
        "{us}'.\n"),
    "slowlog_inspect": (
        "- Check your Slow Log to understand what are the commands you are running which are too "
        "slow to execute. Please check https://redis.io/commands/slowlog for more information.\n"),
    "scheduler": (
        "- The system is slow to execute Redis code paths not containing system calls. This "
        "usually means the system does not provide Redis CPU time to run for long periods. You "
        "should try to:\n"
        "  1) Lower the system load.\n"
        "  2) Use a computer / VM just for Redis if you are running other software in the same "
        "system.\n"
        "  3) Check if you have a \"noisy neighbour\" problem.\n"
        "  4) Check with 'redis-cli --intrinsic-latency 100' what is the intrinsic latency in "
        "your system.\n"
        "  5) Check if the problem is allocator-related by recompiling Redis with MALLOC=libc, if "
        "you are using Jemalloc. However this may create fragmentation problems.\n"),
    "local_disk": (
        "- It is strongly advised to use local disks for persistence, especially if you are using "
        "AOF. Remote disks provided by platform-as-a-service providers are known to be slow.\n"),
    "ssd": (
        "- SSD disks are able to reduce fsync latency, and total time needed for snapshotting and "
        "AOF log rewriting (resulting in smaller memory usage). With extremely high write load "
        "SSD disks can be a good option. However Redis should perform reasonably with high load "
        "using normal disks. Use this advice as a last resort.\n"),
    "data_writeback": (
        "- Mounting ext3/4 filesystems with data=writeback can provide a performance boost "
        "compared to data=ordered, however this mode of operation provides less guarantees, and "
        "sometimes it can happen that after a hard crash the AOF file will have a half-written "
        "command at the end and will require to be repaired before Redis restarts.\n"),
    "disk_contention": (
        "- Try to lower the disk contention. This is often caused by other disk intensive "
        "processes running in the same computer (including other Redis instances).\n"),
    "no_appendfsync": (
        "- Assuming from the point of view of data safety this is viable in your environment, you "
        "could try to enable the 'no-appendfsync-on-rewrite' option, so that fsync will not be "
        "performed while there is a child rewriting the AOF file or producing an RDB file (the "
        "moment where there is high disk contention).\n"),
    "relax_fsync_policy": (
        "- Your fsync policy is set to 'always'. It is very hard to get good performances with "
        "such a setup, if possible try to relax the fsync policy to 'onesec'.\n"),
    "write_load_info": (
        "- Latency during the AOF atomic rename operation or when the final difference is flushed "
        "to the AOF file at the end of the rewrite, sometimes is caused by very high write load, "
        "causing the AOF buffer to get very large. If possible try to send less commands to "
        "accomplish the same work, or use Lua scripts to group multiple operations into a single "
        "EVALSHA call.\n"),
    "hz": (
        "- In order to make the Redis keys expiring process more incremental, try to set the 'hz' "
        "configuration parameter to 100 using 'CONFIG SET hz 100'.\n"),
    "large_objects": (
        "- Deleting, expiring or evicting (because of maxmemory policy) large objects is a "
        "blocking operation. If you have very large objects that are often deleted, expired, or "
        "evicted, try to fragment those objects into multiple smaller objects.\n"),
    "mass_eviction": (
        "- Sudden changes to the 'maxmemory' setting via 'CONFIG SET', or allocation of large "
        "objects via sets or sorted sets intersections, STORE option of SORT, Redis Cluster large "
        "keys migrations (RESTORE command), may create sudden memory pressure forcing the server "
        "to block trying to evict keys. \n"),
    "disable_thp": (
        "- I detected a non zero amount of anonymous huge pages used by your process. This "
        "creates very serious latency events in different conditions, especially when Redis is "
        "persisting on disk. To disable THP support use the command 'echo never > "
        "/sys/kernel/mm/transparent_hugepage/enabled', make sure to also add it into "
        "/etc/rc.local so that the command will be executed again after a reboot. Note that even "
        "if you have already disabled THP, you still need to restart the Redis process to get rid "
        "of the huge pages already created.\n"),
}

# What each event (by lower-case name) suggests, besides the per-event remarks
# worked out in doctor(): fork quality and the slowlog configuration.
_EVENT_ADVICE = {
    "fast-command": ("scheduler",),
    "aof-write-pending-fsync": ("local_disk", "disk_contention", "ssd", "data_writeback"),
    "aof-write-active-child": ("no_appendfsync", "data_writeback", "ssd"),
    "aof-write-alone": ("local_disk", "data_writeback", "ssd"),
    "aof-fsync-always": ("relax_fsync_policy",),
    "aof-fstat": ("disk_contention", "local_disk"),
    "rdb-unlink-temp-file": ("disk_contention", "local_disk"),
    "aof-rewrite-diff-write": ("write_load_info", "data_writeback", "ssd", "local_disk"),
    "aof-rename": ("write_load_info", "data_writeback", "ssd", "local_disk"),
    "expire-cycle": ("hz", "large_objects"),
    "eviction-del": ("large_objects",),
    "eviction-cycle": ("mass_eviction",),
}


def analyze(series: Series, now: int) -> tuple[int, int, int, int]:
    """(samples, average ms, mean absolute deviation ms, seconds since the oldest
    sample, at least 1) of an event, in whole numbers as Redis works them out."""
    samples = series.samples()
    if not samples:
        return 0, 0, 0, 0
    lat = [ms for _, ms in samples]
    avg = sum(lat) // len(lat)
    mad = sum(abs(avg - ms) for ms in lat) // len(lat)
    period = now - min(t for t, _ in samples)
    return len(lat), avg, mad, period or 1


def anon_huge_pages() -> int:
    """Bytes of transparent huge pages this process has (smaps' AnonHugePages)."""
    total = 0
    try:
        with open(f"/proc/{os.getpid()}/smaps", "rb") as f:
            for line in f:
                if line.startswith(b"AnonHugePages:"):
                    total += int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return 0
    return total


def doctor(monitor: LatencyMonitor, *, threshold_ms: int, slowlog_us: int, fork_rate: float,
           appendfsync: str, hz: int, now: int | None = None) -> str:
    """LATENCY DOCTOR's report: each event's statistics, then the advice they call for."""
    if not monitor.events and threshold_ms == 0:
        return _DISABLED
    now = int(time.time()) if now is None else now
    report = []
    advice: set[str] = set()
    count = 0  # how much advice was called for, shown or not (Redis decides on it)
    for n, (event, series) in enumerate(monitor.events.items(), 1):
        if n == 1:
            report.append(_INTRO)
        samples, avg, mad, period = analyze(series, now)
        line = (f"{n}. {event}: {samples} latency spikes (average {avg}ms, mean deviation {mad}ms, "
                f"period {period / samples if samples else 0:.2f} sec). Worst all time event {series.max}ms.")
        name = event.lower()
        if name == "fork":
            if fork_rate < 10:
                quality = "terrible"
            elif fork_rate < 25:
                quality = "poor"
            elif fork_rate < 100:
                quality = "good"
            else:
                quality = "excellent"
            if fork_rate < 25:
                advice.add("better_vm")
                count += 1
            line += f" Fork rate is {fork_rate:.2f} GB/sec ({quality})."
        elif name == "command":
            if slowlog_us < 0:
                advice.add("slowlog_enabled")
                count += 1
            elif slowlog_us // 1000 > threshold_ms:
                advice.add("slowlog_tuning")
                count += 1
            advice.update(("slowlog_inspect", "large_objects"))
            count += 2
        for key in _EVENT_ADVICE.get(name, ()):
            advice.add(key)
            count += 1
        report.append(line + "\n")
    if anon_huge_pages() > 0:
        advice.add("disable_thp")
        count += 1
    events = len(monitor.events)
    if not events and not count:
        report.append(_NOTHING)
    elif events and not count:
        report.append(_NO_FIX)
    else:
        report.append("\nI have a few advices for you:\n\n")
        us = threshold_ms * 1000
        for key, text in _ADVICE.items():
            if key not in advice:
                continue
            if key == "relax_fsync_policy" and appendfsync != "always":
                continue
            if key == "hz" and hz >= 100:
                continue
            report.append(text.format(us=us) if "{us}" in text else text)
    return "".join(report)
