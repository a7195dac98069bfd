"""Redis's rule for an inclusive index range over a sequence of ``n`` items."""

from __future__ import annotations


def index_span(start: int, end: int, n: int) -> tuple[int, int] | None:
    """``start..end`` (negatives count from the end) clamped to ``0..n-1``; None if empty.

    The rule LRANGE, LTRIM, ZRANGE and ZREMRANGEBYRANK share: a start past the end
    or after ``end`` selects nothing, an end past the last item stops at it.
    """
    if start < 0:
        start += n
    if end < 0:
        end += n
    if start < 0:
        start = 0
    if start > end or start >= n:
        return None
    return start, (end if end < n else n - 1)
