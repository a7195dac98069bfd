"""The network side of rill: listener, clients, command table and dispatch.

Layout (a request's path first):
    main           ``rill-server``: the command line, logging, listeners, the cron, shutdown
    connection     one client connection: bytes in, commands dispatched, replies out
    client         per-client state: database, protocol, transaction, output
    server         the server state and the dispatcher (Redis's processCommand and call)
    fastpath       the dispatcher's loop over one read's commands (compiled, see setup.py)
    commands/      the command table and one module per command family (see its map)
    outcomes       what a handler hands back besides a reply (Block, NO_REPLY, ...)
    blocking       blocked clients: park, serve, retry, time out, unblock (Redis's blocked.c)
    propagation    the one path a write's effects take out: the AOF and replication feeds
    disk           RDB snapshots, the AOF and the forked children that write them
    childinfo      what a forked child reports while it works (keys written, copy-on-write)
    replication/   both sides of replication: master (replicas, backlog) and replica
    activeactive/  Active-Active: effects, peers' links, causal apply (docs/active-active.md)
    acl, config    users and permissions; every configuration parameter
    pubsub, notify, tracking    Pub/Sub, keyspace events, client-side caching
    scripting, functions, lua_libs, lua/    EVAL and FUNCTION on Lua 5.1, and their Lua sources
    memory, evict  used_memory and maxmemory's evictions
    commandstats, latency    INFO commandstats and latencystats; the latency monitor
    iostats        INFO stats' network counters, bumped on every read and write (compiled)
    migrate, tls, process, shutdown    MIGRATE's links, TLS, the process, the shutdown sequence
    proctitle      the process title ps shows (set-proc-title, proc-title-template)
    outbound       dialling another server (a replica's master, an Active-Active peer)
"""

import os as _os

from rill.protocol._native import install as _install_native

# Before any submodule is imported: decides compiled or pure for the hot modules
# (the same shim as protocol's; server/ may import protocol/).
native = _install_native(__name__, _os.path.dirname(__file__))


__version__ = "0.1.0"
# The Redis version rill reports and whose behaviour it reproduces.
REDIS_VERSION = "7.0.15"
