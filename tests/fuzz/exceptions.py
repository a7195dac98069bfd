"""What the fuzzer deliberately does not compare, in one place.

NEWER_REDIS is the one allowed kind of difference: behaviour rill takes from a Redis newer
than the 7.0 oracle. Each item names the Redis version it comes from and says how the
fuzzer keeps it out of the comparison (the generator never sends the command or option, or
the runner drops the newer field from both replies).

PENDING_FIXES lists divergences other branches are fixing (issue 20); the generator avoids
them until those branches merge. The lead removes each item when its branch is in main.
"""

from __future__ import annotations

# (what, Redis version it comes from, how the fuzzer keeps it out)
NEWER_REDIS: list[tuple[str, str, str]] = [
    ("XDELEX, XACKDEL, KEEPREF/DELREF/ACKED on XADD/XTRIM", "8.2", "never generated"),
    ("XREADGROUP CLAIM", "8.4", "never generated"),
    ("XADD IDMP/IDMPAUTO, XCFGSET", "8.6", "never generated"),
    ("XNACK", "8.8", "never generated"),
    ("XREAD/XREADGROUP MAXCOUNT/MAXSIZE", "8.10", "never generated"),
]

# TODO(issue 20, lead): remove each item once the named branch is merged, and the
# generator/runner code that consults it.
PENDING_FIXES: dict[str, str] = {
    "scan": "SCAN/SSCAN/HSCAN/ZSCAN stale entries (storage/keyspace.py): no *SCAN generated",
    "stream-nodes": "stream node accounting (storage/stream.py): no '~' trimming generated, "
                    "XINFO STREAM radix-tree-keys/-nodes dropped from both replies",
    "bitfield-sat": "BITFIELD OVERFLOW SAT: no SAT generated",
}

# XINFO STREAM fields not compared while "stream-nodes" is pending.
UNCOMPARED_XINFO_FIELDS: frozenset[bytes] = frozenset({b"radix-tree-keys", b"radix-tree-nodes"})
