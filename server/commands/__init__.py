"""Command families, one module each; importing a module registers its commands."""

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
