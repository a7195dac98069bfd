"""What the fuzzer deliberately does not compare, in one place.

NEWER_REDIS is the one allowed kind of difference: behaviour rill takes from a Redis newer
than the 7.0 oracle. Each item names the Redis version it comes from and says how the
fuzzer keeps it out of the comparison (the generator never sends the command or option, or
the runner drops the newer field from both replies).
"""

from __future__ import annotations

# (what, Redis version it comes from, how the fuzzer keeps it out)
NEWER_REDIS: list[tuple[str, str, str]] = [
    ("XDELEX, XACKDEL, KEEPREF/DELREF/ACKED on XADD/XTRIM", "8.2", "never generated"),
    ("XREADGROUP CLAIM", "8.4", "never generated"),
    ("XADD IDMP/IDMPAUTO, XCFGSET", "8.6", "never generated"),
    ("XNACK", "8.8", "never generated"),
    ("XREAD/XREADGROUP MAXCOUNT/MAXSIZE", "8.10", "never generated"),
    ("ZRANK/ZREVRANK WITHSCORE (arity -3: an argument after the member is a syntax error, "
     "not 7.0's arity error)", "7.2", "never generated: no argument after the member"),
    ("a blocked XREADGROUP woken when the stream's last ID passed the group's but no entry "
     "is there to deliver (XSETID, XDEL of the newest) keeps waiting, as 7.2's re-executed "
     "blocked commands do; 7.0 answers that key with an empty entry list",
     "7.2", "accepted in the runner: exactly rill nil (after CLIENT UNBLOCK) against "
     "redis-server's one-key empty reply"),
]


def newer_blocked_xreadgroup(blocker: tuple[bytes, ...], rill: bytes, redis: bytes) -> bool:
    """The 7.2 XREADGROUP item of NEWER_REDIS: rill still waited (ended by CLIENT UNBLOCK,
    a nil array) where redis-server 7.0 served one key with no entries."""
    if not blocker or blocker[0].upper() != b"XREADGROUP":
        return False
    if rill not in (b"*-1\r\n", b"_\r\n"):
        return False
    import re  # noqa: PLC0415
    return re.fullmatch(rb"(\*1\r\n\*2|%1)\r\n\$\d+\r\n[^\r]*\r\n\*0\r\n", redis) is not None

# Commands the arity mutation must not lengthen, because of NEWER_REDIS.
NO_EXTRA_ARGUMENT: frozenset[bytes] = frozenset({b"ZRANK", b"ZREVRANK"})

# Divergences found and not fixed yet, each with why; the runner accepts exactly these
# reply pairs (rill's, redis's) and nothing wider. None at present: an entry comes with
# its own narrow test in known_unfixed.
KNOWN_UNFIXED: dict[str, str] = {}


def known_unfixed(args: tuple[bytes, ...], rill: bytes, redis: bytes) -> bool:
    """Whether rill's and redis's replies to ``args`` differ only as KNOWN_UNFIXED says."""
    return False
