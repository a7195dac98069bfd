"""Splitting a stream's ID range into partitions of about equal entry counts.

A stream has no "entry at rank k" query, and slicing its milliseconds evenly skews
badly when writes come in bursts.  The planner samples the real distribution instead:
it probes a range with ``XRANGE lo hi COUNT m``; fewer than ``m`` entries back means
the count is exact, otherwise the ``m`` entries give a local density, the probed part
is known exactly and the rest is split and probed again.  A few pipelined rounds give
counts (exact or estimated) for a set of adjacent leaves; the cuts fall at equal
shares of the cumulative count.  The ranges always tile ``[lo, hi]``, so an estimate
can only unbalance partitions, never lose or repeat an entry.
"""

from __future__ import annotations

from dataclasses import dataclass

from .conn import Conn
from .ids import fast_parse, format_id

PROBE = 64
ROUNDS = 12
FANOUT = 8


@dataclass
class _Leaf:
    lo: int
    hi: int
    count: float | None = None  # None: not probed yet
    exact: bool = False


def plan_ranges(conn: Conn, key: str, lo: int, hi: int, parts: int, *,
                probe: int = PROBE, rounds: int = ROUNDS) -> list[tuple[int, int]]:
    """Adjacent inclusive ``(lo, hi)`` ID ranges covering ``[lo, hi]``, at most ``parts`` of them,
    each holding about the same number of entries; ``[]`` when the range is empty."""
    if lo > hi:
        return []
    # Sample only between the first and last entries actually present: the ID space
    # around them is astronomically larger than the stream and would waste the rounds.
    head, tail = conn.pipeline([("XRANGE", key, format_id(lo), format_id(hi), "COUNT", 1),
                                ("XREVRANGE", key, format_id(hi), format_id(lo), "COUNT", 1)])
    for reply in (head, tail):
        if isinstance(reply, Exception):
            raise reply
    if not head:
        return []
    first, last_id = fast_parse(head[0][0]), fast_parse(tail[0][0])
    if parts <= 1:
        return [(lo, hi)]
    leaves = [_Leaf(first, last_id)]
    max_probes = max(64, 32 * parts)
    for _ in range(rounds):
        # Every estimate is suspect (a burst hides behind a sparse neighbour's density),
        # so all open leaves are probed, the largest estimates first within the budget.
        todo = [lf for lf in leaves if not lf.exact]
        if not todo:
            break
        todo.sort(key=lambda lf: -(lf.count if lf.count is not None else float("inf")))
        todo = todo[:max_probes]
        replies = conn.pipeline([("XRANGE", key, format_id(lf.lo), format_id(lf.hi), "COUNT", probe)
                                 for lf in todo])
        out: list[_Leaf] = []
        fresh = {id(lf): reply for lf, reply in zip(todo, replies, strict=True)}
        for lf in leaves:
            reply = fresh.get(id(lf))
            if reply is None:
                out.append(lf)
                continue
            if isinstance(reply, Exception):
                raise reply
            n = len(reply)
            if n < probe:
                out.append(_Leaf(lf.lo, lf.hi, n, True))
                continue
            last = fast_parse(reply[-1][0])
            out.append(_Leaf(lf.lo, last, n, True))
            if last >= lf.hi:
                continue
            density = n / (last - lf.lo + 1)
            rest_lo, width = last + 1, lf.hi - last
            step = max(1, width // FANOUT)
            a = rest_lo
            while a <= lf.hi:
                b = lf.hi if a + step > lf.hi or lf.hi - (a + step) < step // 2 else a + step - 1
                out.append(_Leaf(a, b, density * (b - a + 1)))
                a = b + 1
        leaves = out
    leaves = [lf for lf in leaves if lf.count != 0 or not lf.exact]
    if not leaves:
        return []
    counts = [lf.count if lf.count is not None else 0.0 for lf in leaves]
    total = sum(counts)
    if parts <= 1 or total <= 0:
        return [(lo, hi)]
    share = total / parts
    cuts: list[int] = []
    acc = 0.0
    k = 1
    for lf, c in zip(leaves, counts, strict=True):
        while k < parts and acc + c >= k * share and c > 0:
            frac = (k * share - acc) / c
            cut = lf.lo + int(frac * (lf.hi - lf.lo))
            if not cuts or cut > cuts[-1]:
                cuts.append(cut)
            k += 1
        acc += c
    ranges = []
    a = lo
    for cut in cuts:
        cut = max(cut, first)
        if a <= cut < hi:
            ranges.append((a, cut))
            a = cut + 1
    ranges.append((a, hi))
    return ranges
