"""CLUSTER, ASKING, READONLY, READWRITE on a server without cluster support.

rill is a single server, as a redis-server with ``cluster-enabled no``: these
commands exist (COMMAND lists them, arity is checked first) and answer that
cluster support is disabled, which is how clients tell a standalone server
from a cluster node.
"""

from __future__ import annotations

from rill.protocol.reply import ReplyError

from ..client import Client
from .table import command, redis_subcommands

CLUSTER_DISABLED = ReplyError("ERR This instance has cluster support disabled")


def cluster_disabled(c: Client, argv: list[bytes]):
    raise CLUSTER_DISABLED


for _name in ("asking", "readonly", "readwrite"):
    command(_name)(cluster_disabled)
for _name in redis_subcommands("cluster"):
    command(_name)(cluster_disabled)
