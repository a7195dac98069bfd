"""Command families, one module each; importing a module registers its commands."""

from __future__ import annotations

import importlib

# Every family module; each registers its handlers in table.TABLE on import.
FAMILIES = (
    "connection",
    "admin",
    "introspection",
    "keys",
    "strings",
    "transactions",
    "lists",
    "streams",
    "hashes",
    "sets",
    "zsets",
    "pubsub",
    "persistence",
)


def load_all() -> None:
    """Import every family module that exists (families land one issue at a time)."""
    for name in FAMILIES:
        try:
            importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
