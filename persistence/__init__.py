"""Redis's on-disk formats, without the server: bytes and files in, values out, and back.

Layout:
    rdb         RDB files and DUMP payloads: a ``REDIS0010`` writer and a reader for versions 1..12
    rdb_split   a foreground RDB save shared with a forked helper process
    aof         Redis 7's multi-part AOF: manifest, command stream, writer, rewrite
    crc64       the checksum of RDB files and DUMP payloads
    lzf         the compression of RDB strings
    nodes       a stream's nodes read from an image in one compiled loop (the start-up load's hot path)

Imports only storage (the values) and protocol (the AOF's RESP). When to save and the forked
children that do it are the server's: server/disk.py.
"""

import os as _os

from rill.protocol._native import install as _install_native

# Before any submodule is imported: decides compiled or pure for the hot module
# (the same shim as protocol's; persistence/ may import protocol/).
native = _install_native(__name__, _os.path.dirname(__file__))
