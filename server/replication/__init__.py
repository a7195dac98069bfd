"""Replication, both sides of the link.

- ``master.py``: this server as a master: the replicas attached with SYNC/PSYNC,
  full syncs from a forked snapshot (to disk or streamed), the replication stream
  (the propagation path's ``replication`` feed), the backlog for PSYNC
  +CONTINUE, REPLCONF ACK and WAIT.
- ``replica.py``: this server as a replica: REPLICAOF's link to a master, the
  handshake, loading the master's snapshot, running its command stream, ACKs.
- ``failover.py``: FAILOVER, the coordinated switch of roles between this master and
  one of its replicas.

The commands that drive them are server/commands/replication.py.
"""
