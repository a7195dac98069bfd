"""The network counters INFO stats reports that move on every read and write.

``total_net_input_bytes``/``total_net_output_bytes`` count client traffic,
``total_net_repl_input_bytes``/``total_net_repl_output_bytes`` the replication link's
(what a replica reads from its master, what a master writes to its replicas: Redis keeps
them apart), and ``total_reads_processed``/``total_writes_processed`` the read and write
events themselves. The connection bumps them on every read and write, so compiled
(iostats.pxd) they are C integers it adds to in place; ``Server``'s ``Stats`` subclasses
this with the rest of INFO's counters.
"""

from __future__ import annotations


class IOStats:
    __slots__ = ("net_input_bytes", "net_output_bytes", "net_repl_input_bytes", "net_repl_output_bytes",
                 "total_reads_processed", "total_writes_processed")

    def __init__(self) -> None:
        self.reset_io()

    def reset_io(self) -> None:
        """CONFIG RESETSTAT zeroes all six, as Redis's resetServerStats does."""
        self.net_input_bytes = 0
        self.net_output_bytes = 0
        self.net_repl_input_bytes = 0
        self.net_repl_output_bytes = 0
        self.total_reads_processed = 0
        self.total_writes_processed = 0
