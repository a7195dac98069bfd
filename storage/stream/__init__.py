"""The Redis Streams data type, stored the way Redis 7 stores it (t_stream.c, stream.h).

Entries live in *nodes*: real listpacks in Redis's node layout, indexed by their master ID
in a :class:`~rill.storage.rax.Rax`.  Because the bytes are Redis's bytes, an RDB writer can
emit nodes verbatim and a loader can insert them without touching entries
(:meth:`Stream.nodes`, :meth:`Stream.load_node`).

Layout:

- ``ids``      stream IDs as ints ``ms << 64 | seq``: make, split, format, rax keys.
- ``node``     one node: the listpack layout, walkers both ways, the reference decoder,
               compaction of tombstones, the integrity check run on load.
- ``cache``    what reads keep between calls: decoded nodes (an LRU) and resume points.
- ``fastread`` reply-ready reads: a node's entries encoded in one pass (XRANGE/XREAD),
               the pieces from an encoder the caller passes (protocol's, for RESP).
- ``groups``   consumer groups: PEL entries (NACK), consumers, the group itself.
- ``idmp``     idempotent-producer state (Redis 8.6's IDMP).
- ``stream``   :class:`Stream`: nodes in a rax, appends, ranges, deletes, trims, and the
               group operations that need entries (read, claim, lag).
- ``active``   :class:`ActiveStream`: the Active-Active stream, one append-only sub-stream
               per region merged by ID on read, with its op journal (docs/active-active.md).

The names below are re-exported so ``from rill.storage.stream import Stream`` keeps working.
"""

from .cache import clear_node_cache
from .groups import (
    NACK,
    REF_ACKED,
    REF_DEL,
    REF_KEEP,
    SCG_INVALID_ENTRIES_READ,
    AutoClaimResult,
    ClaimResult,
    Consumer,
    ConsumerGroup,
)
from .idmp import IdmpState
from .ids import (
    ID_MAX,
    MASK64,
    decode_key,
    decr_id,
    encode_key,
    format_id,
    format_sid,
    incr_id,
    make_id,
    split_id,
)
from .node import (
    FLAG_DELETED,
    FLAG_NONE,
    FLAG_SAMEFIELDS,
    STREAM_LISTPACK_MAX_SIZE,
    GCStats,
    node_counts,
    validate_node,
)
from .stream import Stream, StreamIDError, StreamSizeError, default_trim_limit

__all__ = [
    "MASK64",
    "ID_MAX",
    "FLAG_NONE",
    "FLAG_DELETED",
    "FLAG_SAMEFIELDS",
    "STREAM_LISTPACK_MAX_SIZE",
    "SCG_INVALID_ENTRIES_READ",
    "StreamIDError",
    "StreamSizeError",
    "make_id",
    "split_id",
    "format_id",
    "format_sid",
    "encode_key",
    "decode_key",
    "incr_id",
    "decr_id",
    "default_trim_limit",
    "validate_node",
    "clear_node_cache",
    "node_counts",
    "REF_KEEP",
    "REF_DEL",
    "REF_ACKED",
    "GCStats",
    "IdmpState",
    "NACK",
    "Consumer",
    "ConsumerGroup",
    "ClaimResult",
    "AutoClaimResult",
    "Stream",
]
