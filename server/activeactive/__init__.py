"""Active-Active: several instances accept writes to the same keys and converge.

docs/active-active.md states the rules. Layout:
    engine    effects made from writes, peers' effects applied, clocks, tombstones, TTLs
    backlog   this instance's own effect records, kept for partial resyncs
    links     one outbound link per peer: handshake, resync, records out, acks in
    plain     ordinary commands that mirror an applied peer op, for plain replicas
    state     the whole Active-Active state as one payload (full sync), and its merge

The engine is on while ``active-active-id`` is not 0. Its feed sits on the one
propagation path (server/propagation.py); ``Server.call`` runs writes through it.
"""

