"""Facts about stored values that several families report: encoding, size, digest."""

from __future__ import annotations

import hashlib
from typing import Any

from rill.persistence import lzf
from rill.storage.keyspace import Database, Keyspace
from rill.storage.list import ListValue, jemalloc_size

from .args import string2ll

EMBSTR_LIMIT = 44  # OBJ_ENCODING_EMBSTR_SIZE_LIMIT


def string_encoding(value: bytes | bytearray) -> bytes:
    """OBJECT ENCODING of a stored string: int, embstr or raw.

    A ``bytearray`` was mutated in place (APPEND, SETRANGE): "raw". ``bytes``
    are what tryObjectEncoding made of them: "int" for a canonical integer
    (Redis's string2l, 64-bit long), "embstr" up to 44 bytes, "raw" beyond.
    """
    if type(value) is bytearray:
        return b"raw"
    if len(value) <= 20 and string2ll(value) is not None:
        return b"int"
    return b"embstr" if len(value) <= EMBSTR_LIMIT else b"raw"


def object_encoding(value: Any) -> bytes:
    if isinstance(value, (bytes, bytearray)):
        return string_encoding(value)
    return value.encoding()


SHARED_REFCOUNT = 2147483647  # Redis's shared objects never die: OBJ_SHARED_REFCOUNT
SHARED_INTEGERS = 10000  # 0 .. 9999 are shared objects when written as integers


def key_encoding(db: Database, key: bytes, value: Any) -> bytes:
    """OBJECT ENCODING of ``key``'s ``value``, minding what db.unshared says of it."""
    if db.unshared and type(value) is bytes and (enc := db.unshared.get(key)) is not None:
        return enc
    return object_encoding(value)


def key_refcount(db: Database, key: bytes, value: Any) -> int:
    """OBJECT REFCOUNT: a small integer written as one is Redis's shared object; the
    same digits as an object of its own (db.unshared) and everything else count 1."""
    if type(value) is bytes and len(value) <= 4 and db.keyspace.shared_integers \
            and (n := string2ll(value)) is not None \
            and 0 <= n < SHARED_INTEGERS and not (db.unshared and key in db.unshared):
        return SHARED_REFCOUNT
    return 1


def unshared_copy(src: Database, key: bytes, value: Any) -> bytes | None:
    """What db.unshared says of a COPY of ``key``: Redis duplicates the object, so a
    shared small integer becomes an int of its own and an unshared one stays as it is."""
    if type(value) is not bytes:
        return None
    if src.unshared and (enc := src.unshared.get(key)) is not None:
        return enc
    return b"int" if key_refcount(src, key, value) == SHARED_REFCOUNT else None


# Values whose release takes more allocations than this go to Redis's free thread.
LAZYFREE_THRESHOLD = 64


def free_effort(value: Any, server: Any) -> int:
    """Redis's estimate of the allocations freeing ``value`` takes (lazyfreeGetFreeEffort):
    quicklist nodes, hash-table or skiplist elements, stream nodes plus consumer groups
    times (1 + the first group's pending entries); 1 for everything compact."""
    if isinstance(value, (bytes, bytearray)):
        return 1
    kind = value.type_name
    if kind == b"list":
        return quicklist_nodes_estimate(value, server.config.int("list-max-listpack-size"))
    if kind == b"stream":
        groups = value.groups()
        return value.node_count() + (len(groups) * (1 + len(groups[0].pel)) if groups else 0)
    if value.encoding() in (b"hashtable", b"skiplist"):
        return len(value)
    return 1


def quicklist_nodes_estimate(value: Any, fill: int) -> int:
    """About how many quicklist nodes Redis would hold the list in: walking the elements
    as ListValue.nodes() does is exact but far too slow for UNLINK of a long list, so nodes
    are filled with elements of the average size (plus their 2-byte minimum overhead)."""
    n = len(value)
    if not n:
        return 0
    if fill >= 0:
        # At most ``fill`` elements a node (one for 0), and never past quicklist's 8 KiB
        # safety limit.
        cap, limit = max(fill, 1), _NODE_BYTES[1]
    else:
        cap, limit = n, _NODE_BYTES[min(-fill, 5) - 1]
    if 2 * n > limit * LAZYFREE_THRESHOLD:
        return 2 * n // limit  # a lower bound already past the threshold: skip the sum
    per_node = min(cap, limit * n // (sum(map(len, value)) + 2 * n))  # elements of average size
    return -(-n // max(1, per_node))


_NODE_BYTES = (4096, 8192, 16384, 32768, 65536)  # list-max-listpack-size -1 .. -5


def type_name(value: Any) -> bytes:
    if isinstance(value, (bytes, bytearray)):
        return b"string"
    return value.type_name


_DICT_ENTRY = 24  # key, value and next pointers


def _sds_header(n: int) -> int:
    """Header bytes of the sds a key of length ``n`` is copied into (sdsReqType)."""
    return 1 if n < 32 else 3 if n < 256 else 5 if n < 65536 else 9


def memory_usage(key: bytes, value: Any, config: Any = None, samples: int = 5,
                 encoding: bytes | None = None) -> int:
    """MEMORY USAGE: the key, the value and per-object overhead, in bytes.

    With the server's ``config``, a list is laid out in nodes as its
    list-max-listpack-size builds them, compressed as its list-compress-depth says.
    ``encoding`` is the string's if the caller knows better than its bytes (key_encoding)."""
    overhead = _DICT_ENTRY + jemalloc_size(_sds_header(len(key)) + len(key) + 1)
    if isinstance(value, (bytes, bytearray)):
        if (encoding or string_encoding(value)) == b"int":
            return overhead + 16
        return overhead + 16 + len(value) + 3
    if config is not None and isinstance(value, ListValue):
        return overhead + value.memory_usage(
            samples,
            fill=config.int("list-max-listpack-size"),
            depth=config.int("list-compress-depth"),
            lzf=lzf.compress,
        )
    return overhead + value.memory_usage()


def digest_value(value: Any) -> bytes:
    """DEBUG DIGEST-VALUE: a content hash, 40 zeros for a missing key."""
    if value is None:
        return b"0" * 40
    h = hashlib.sha1()
    h.update(type_name(value))
    if isinstance(value, (bytes, bytearray)):
        h.update(bytes(value))
    else:
        for part in value.digest_parts():
            h.update(b"%d:" % len(part))
            h.update(part)
    return h.hexdigest().encode()


def digest_dataset(keyspace: Keyspace) -> bytes:
    """DEBUG DIGEST: order-independent digest of every key, value and expire."""
    if all(len(db) == 0 for db in keyspace.dbs):
        return b"0" * 40
    acc = 0
    for db in keyspace.dbs:
        for key, value in list(db.data.items()):
            h = hashlib.sha1(b"%d:" % db.id + key + b"\0" + digest_value(value))
            expire = db.expires.get(key)
            if expire is not None:
                h.update(b"!%d" % expire)
            acc ^= int.from_bytes(h.digest(), "big")
    return b"%040x" % acc
