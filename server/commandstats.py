"""Per-server command counters: INFO commandstats, LATENCY HISTOGRAM, INFO latencystats.

The command table (commands/table.py) holds facts shared by every Server in the
process; what each command cost and how often it ran belongs to one server, so it
lives here, in ``server.cmdstats``. The dispatcher reaches a command's counters
with one dict lookup by Command (identity hash).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .latency import NO_HIST, hist_total

if TYPE_CHECKING:
    from .commands.table import Command


class CommandStats:
    """One command's counters on one server, zeroed by CONFIG RESETSTAT."""

    __slots__ = ("nsec", "untracked", "hist", "hist_nsec", "hist_count", "rejected_calls", "failed_calls")

    def __init__(self) -> None:
        self.nsec = 0  # time in the handler, summed (INFO shows microseconds)
        self.rejected_calls = 0
        self.failed_calls = 0
        # Calls are counted once, in one of two places: while latency-tracking is on,
        # each call is a sample in ``hist``, the latency histogram (HDR counters, see
        # rill.server.latency); while it is off, in ``untracked``. The dispatcher
        # pays for one increment per call either way.
        self.untracked = 0
        self.hist: list[int] | tuple = NO_HIST
        # The histogram's sample count, cached while ``nsec`` (which every call
        # moves) stays what it was when counted; -1 forces a recount.
        self.hist_nsec = -1
        self.hist_count = 0

    @property
    def calls(self) -> int:
        """Calls since the last CONFIG RESETSTAT (INFO commandstats)."""
        return self.untracked + self.samples()

    @calls.setter
    def calls(self, value: int) -> None:
        self.untracked = value - self.samples()

    def samples(self) -> int:
        """How many latency samples the histogram holds (LATENCY HISTOGRAM's calls)."""
        if not self.hist:
            return 0
        if self.hist_nsec != self.nsec:
            self.hist_count = hist_total(self)
            self.hist_nsec = self.nsec
        return self.hist_count

    def snapshot(self) -> tuple:
        """The counters as they are, for restore (work that must not count)."""
        hist = self.hist
        return (self.untracked, self.nsec, self.rejected_calls, self.failed_calls,
                list(hist) if type(hist) is list else hist)

    def restore(self, snapshot: tuple) -> None:
        self.untracked, self.nsec, self.rejected_calls, self.failed_calls, self.hist = snapshot
        self.hist_nsec = -1  # the cached count is recomputed

    def reset(self) -> None:
        """CONFIG RESETSTAT: counters to zero, the histogram dropped."""
        self.untracked = self.nsec = self.rejected_calls = self.failed_calls = 0
        self.hist = NO_HIST
        self.hist_nsec = -1


class CommandStatsTable:
    """Every command's counters on one server, made when a command first needs them."""

    __slots__ = ("by_cmd",)

    def __init__(self) -> None:
        # Read directly by the dispatcher's fast path (one lookup per command).
        self.by_cmd: dict[Command, CommandStats] = {}

    def of(self, cmd: Command) -> CommandStats:
        """``cmd``'s counters, made (zero) if it has none yet."""
        st = self.by_cmd.get(cmd)
        if st is None:
            st = self.by_cmd[cmd] = CommandStats()
        return st

    def get(self, cmd: Command) -> CommandStats | None:
        """``cmd``'s counters, or None when it never counted anything here."""
        return self.by_cmd.get(cmd)

    def total_calls(self) -> int:
        """Commands run since the last CONFIG RESETSTAT (INFO's total_commands_processed)."""
        return sum(st.calls for st in self.by_cmd.values())

    def reset(self) -> None:
        for st in self.by_cmd.values():
            st.reset()

    def snapshot(self) -> dict[Command, tuple]:
        """Every counter as it is, for restore (the AOF loader's replayed commands)."""
        return {cmd: st.snapshot() for cmd, st in self.by_cmd.items()}

    def restore(self, snapshot: dict[Command, tuple]) -> None:
        """Back to ``snapshot``, in place (a running batch holds ``by_cmd``)."""
        for cmd, st in self.by_cmd.items():
            saved = snapshot.get(cmd)
            if saved is None:
                st.reset()
            else:
                st.restore(saved)
