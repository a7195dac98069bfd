"""The network side of rill: listener, clients, command table and dispatch."""

__version__ = "0.1.0"
# The Redis version rill reports and whose behaviour it reproduces.
REDIS_VERSION = "7.0.15"
