"""Redis's partial quicksort (pqsort), reproduced step by step.

SORT with LIMIT and GEO searches with COUNT sort only the part of the result they return,
with Bentley-McIlroy's quicksort (median-of-three or ninther pivot, three-way partition,
insertion sort below seven elements) recursing only into partitions that overlap the
wanted window. Elements that compare equal end up wherever its swaps leave them, and
replies show that order, so the algorithm is followed exactly rather than replaced by a
stable sort.
"""

from __future__ import annotations

from collections.abc import Callable


def pqsort(a: list, cmp: Callable, lrange: int, rrange: int) -> None:
    """Sort ``a`` in place enough that positions ``lrange``..``rrange`` hold what a full
    sort would put there, visiting elements exactly as Redis's pqsort does."""
    _part(a, 0, len(a), cmp, lrange, rrange)


def _med3(a: list, i: int, j: int, k: int, cmp: Callable) -> int:
    if cmp(a[i], a[j]) < 0:
        return j if cmp(a[j], a[k]) < 0 else (k if cmp(a[i], a[k]) < 0 else i)
    return j if cmp(a[j], a[k]) > 0 else (i if cmp(a[i], a[k]) < 0 else k)


def _part(a: list, base: int, n: int, cmp: Callable, lrange: int, rrange: int) -> None:
    """Sort ``a[base:base + n]`` as far as positions ``lrange``..``rrange`` need."""
    while True:
        if n < 7:
            for m in range(base + 1, base + n):
                p = m
                while p > base and cmp(a[p - 1], a[p]) > 0:
                    a[p], a[p - 1] = a[p - 1], a[p]
                    p -= 1
            return
        pm = base + n // 2
        if n > 7:
            pl = base
            pn = base + n - 1
            if n > 40:
                d = n // 8
                pl = _med3(a, pl, pl + d, pl + 2 * d, cmp)
                pm = _med3(a, pm - d, pm, pm + d, cmp)
                pn = _med3(a, pn - 2 * d, pn - d, pn, cmp)
            pm = _med3(a, pl, pm, pn, cmp)
        a[base], a[pm] = a[pm], a[base]
        pa = pb = base + 1
        pc = pd = base + n - 1
        while True:
            while pb <= pc:
                r = cmp(a[pb], a[base])
                if r > 0:
                    break
                if r == 0:
                    a[pa], a[pb] = a[pb], a[pa]
                    pa += 1
                pb += 1
            while pb <= pc:
                r = cmp(a[pc], a[base])
                if r < 0:
                    break
                if r == 0:
                    a[pc], a[pd] = a[pd], a[pc]
                    pd -= 1
                pc -= 1
            if pb > pc:
                break
            a[pb], a[pc] = a[pc], a[pb]
            pb += 1
            pc -= 1
        pn = base + n
        r = min(pa - base, pb - pa)
        for i in range(r):
            a[base + i], a[pb - r + i] = a[pb - r + i], a[base + i]
        r = min(pd - pc, pn - pd - 1)
        for i in range(r):
            a[pb + i], a[pn - r + i] = a[pn - r + i], a[pb + i]
        r = pb - pa
        if r > 1 and not ((lrange < base and rrange < base) or (lrange >= base + r and rrange >= base + r)):
            _part(a, base, r, cmp, lrange, rrange)
        r = pd - pc
        if r <= 1:
            return
        base, n = pn - r, r
        if (lrange < base and rrange < base) or (lrange >= base + r and rrange >= base + r):
            return
