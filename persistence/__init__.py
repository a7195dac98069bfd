"""Redis's on-disk formats, without the server: bytes and files in, values out, and back.

Layout:
    rdb         RDB files and DUMP payloads: a ``REDIS0010`` writer and a reader for versions 1..12
    rdb_split   a foreground RDB save shared with a forked helper process
    aof         Redis 7's multi-part AOF: manifest, command stream, writer, rewrite
    crc64       the checksum of RDB files and DUMP payloads
    lzf         the compression of RDB strings

Imports only storage (the values) and protocol (the AOF's RESP). When to save and the forked
children that do it are the server's: server/disk.py.
"""
