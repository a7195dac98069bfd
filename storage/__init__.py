"""The data, without I/O or asyncio: the keyspace and one module per type, in Redis's formats.

Layout:
    keyspace          numbered databases of keys, values and expiry times
    stream/           the stream type: IDs, nodes, consumer groups, IDMP (a package; see its map)
    listpack          the listpack byte format: stream nodes, RDB payloads, storage's string2ll
    rax               the ordered map under stream nodes and PELs
    list              lists, reporting themselves as Redis's quicklist
    hash, set, zset   the other collections, with the encodings Redis 7.0 reports
    hll               HyperLogLog in Redis's exact string representation
    cells             Active-Active element state: last-write-wins assigns, counters, removals
    activelist        Active-Active list positions every instance orders alike
    geohash           the geohash math of the GEO commands
    glob              glob-style patterns (KEYS, SCAN MATCH, CONFIG GET, PSUBSCRIBE)
    ranges            Redis's inclusive index ranges
    footprint         what a value holds in this process's heap (MEMORY USAGE, used_memory)
    _native           compiled or pure: which form of the hot modules is imported (see setup.py)

Imports no other rill package.
"""

import os as _os

from ._native import install as _install_native

# Before any submodule is imported: decides compiled or pure for the hot modules.
native = _install_native(__name__, _os.path.dirname(__file__))
