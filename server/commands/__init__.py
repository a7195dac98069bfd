"""Command families, one module each; importing a module registers its commands.

Layout:
    table           the one command table: each handler joined to its declared facts (``@command``)
    args            what every family shares: argument parsing, Redis's error texts, HELP replies
    values          facts about stored values several families report: encoding, size, digest
    connection      PING, ECHO, HELLO, AUTH, SELECT, SWAPDB, QUIT, RESET
    keys            DEL, EXISTS, TYPE, RENAME, COPY, SCAN, EXPIRE and the other keyspace commands
    strings, bits   strings and counters; bit operations on strings
    lists, hashes, sets, zsets    the collections (lists and zsets with their blocking pops)
    streams         XADD, XRANGE, XREAD, XDEL, XTRIM...; stream_groups: XGROUP, XREADGROUP, XACK...;
                    xinfo: XINFO; stream_args and stream_replies: their shared parsing and replies
    geo, hyperloglog, sort (with pqsort), lolwut    the other data commands
    transactions    MULTI, EXEC, DISCARD, WATCH
    scripting, functions    EVAL and SCRIPT; FUNCTION and FCALL
    pubsub, tracking        Pub/Sub; CLIENT TRACKING and client-side caching
    persistence, replication, migrate    SAVE/BGSAVE/DUMP/RESTORE; SYNC/PSYNC/REPLCONF/WAIT/
                    REPLICAOF/ROLE; MIGRATE
    admin           CONFIG, FLUSHDB/FLUSHALL, DEBUG, OBJECT, MEMORY, MONITOR, SLOWLOG, SHUTDOWN
    introspection   INFO, CLIENT, COMMAND
    latency, acl, cluster    LATENCY; ACL; CLUSTER on a server without cluster support
    activeactive    ACTIVEACTIVE: STATUS, PAUSE, RESUME, WAIT, and the peers' link protocol
"""

from __future__ import annotations

import importlib

# Every family module; each registers its handlers in table.TABLE on import.
FAMILIES = (
    "connection",
    "admin",
    "introspection",
    "latency",
    "keys",
    "strings",
    "bits",
    "transactions",
    "scripting",
    "functions",
    "lists",
    "streams",
    "stream_groups",
    "xinfo",
    "hashes",
    "sets",
    "zsets",
    "geo",
    "sort",
    "pubsub",
    "hyperloglog",
    "persistence",
    "migrate",
    "replication",
    "activeactive",
    "acl",
    "tracking",
    "cluster",
    "lolwut",
)


def load_all() -> list:
    """Import every family module that exists (families land one issue at a time)."""
    modules = []
    for name in FAMILIES:
        try:
            modules.append(importlib.import_module(f"{__name__}.{name}"))
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
    return modules
