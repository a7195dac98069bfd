"""GEO commands (Redis's geo.c): geo sets are sorted sets scored by 52-bit geohashes.

The math lives in ``storage.geohash``; this module parses arguments the way
georadiusGeneric does (error order included), scans the cells a search needs,
and formats replies as Redis does: distances with four decimals, coordinates
as "human" long doubles (``%.17Lf`` without trailing zeros, a ``,`` double in
RESP3), hashes as integers.

GEOADD is ZADD underneath and propagates as the ``zadd`` Redis rewrites it
into. The STORE forms write a sorted set (event "georadiusstore" or
"geosearchstore"), or delete the destination when nothing matched, and
propagate as sent.
"""

from __future__ import annotations

from rill.protocol.reply import EMPTY_ARRAY, NULL_ARRAY, Raw, ReplyError
from rill.storage import geohash
from rill.storage import zset as _zset
from rill.storage.zset import SortedSet

from ..client import Client
from .args import NOT_INT, SYNTAX_ERR, string2ll
from .pqsort import pqsort
from .table import command
from .zsets import _notify, _zread, get_double
from .zsets import zadd as _zadd_command

UNIT_ERR = ReplyError("ERR unsupported unit provided. please use M, KM, FT, MI")
RADIUS_NOT_FLOAT = ReplyError("ERR need numeric radius")
RADIUS_NEGATIVE = ReplyError("ERR radius cannot be negative")
WIDTH_NOT_FLOAT = ReplyError("ERR need numeric width")
HEIGHT_NOT_FLOAT = ReplyError("ERR need numeric height")
BOX_NEGATIVE = ReplyError("ERR height or width cannot be negative")
NO_MEMBER = ReplyError("ERR could not decode requested zset member")
COUNT_ERR = ReplyError("ERR COUNT must be > 0")
ANY_ERR = ReplyError("ERR the ANY argument requires COUNT argument")

# Metres per unit.
_UNITS = {b"m": 1.0, b"km": 1000.0, b"ft": 0.3048, b"mi": 1609.34}

_LLONG_MIN = -(2**63)


# -- helpers ---------------------------------------------------------------------------
def _lonlat(argv: list[bytes], i: int) -> tuple[float, float]:
    """extractLongLatOrReply: two floats, then the range check of the Mercator limits."""
    lon = get_double(argv[i])
    lat = get_double(argv[i + 1])
    if not (geohash.LONG_MIN <= lon <= geohash.LONG_MAX and geohash.LAT_MIN <= lat <= geohash.LAT_MAX):
        raise ReplyError(b"ERR invalid longitude,latitude pair %f,%f" % (lon, lat))
    return lon, lat


def _unit(arg: bytes) -> float:
    conversion = _UNITS.get(arg.lower())
    if conversion is None:
        raise UNIT_ERR
    return conversion


def _radius(argv: list[bytes], i: int) -> tuple[float, float]:
    """(radius, metres per unit) from ``radius unit``."""
    radius = get_double(argv[i], RADIUS_NOT_FLOAT)
    if radius < 0:
        raise RADIUS_NEGATIVE
    return radius, _unit(argv[i + 1])


def _box(argv: list[bytes], i: int) -> tuple[float, float, float]:
    """(width, height, metres per unit) from ``width height unit``."""
    width = get_double(argv[i], WIDTH_NOT_FLOAT)
    height = get_double(argv[i + 1], HEIGHT_NOT_FLOAT)
    if height < 0 or width < 0:
        raise BOX_NEGATIVE
    return width, height, _unit(argv[i + 2])


def _member_pos(zs: SortedSet, member: bytes) -> tuple[float, float]:
    score = zs.dict.get(member)
    if score is None:
        raise NO_MEMBER
    return geohash.decode(score)


def format_distance(d: float) -> bytes:
    """fixedpoint_d2string with four decimals: llrint(d * 10**4) spelled as a decimal."""
    if d == 0:
        return b"0.0000"
    try:
        v = round(d * 10000.0)  # round half to even, as llrint in the default mode
    except (ValueError, OverflowError):
        v = _LLONG_MIN
    if not _LLONG_MIN <= v < 2**63:
        v = _LLONG_MIN  # llrint's "invalid" result
    digits = b"%05d" % abs(v)
    return (b"-" if v < 0 else b"") + digits[:-4] + b"." + digits[-4:]


def format_coord(x: float) -> bytes:
    """ld2string's human mode: %.17Lf, trailing zeros (and a bare dot) dropped, "-0" -> "0"."""
    if x == float("inf"):
        return b"inf"
    if x == float("-inf"):
        return b"-inf"
    s = b"%.17f" % x
    if b"." in s:
        s = s.rstrip(b"0").rstrip(b".")
    return b"0" if s == b"-0" else s


def _coord_reply(resp3: bool, x: float) -> Raw:
    s = format_coord(x)
    if resp3:
        return Raw(b",%b\r\n" % s)
    return Raw(b"$%d\r\n%b\r\n" % (len(s), s))


# -- GEOADD ----------------------------------------------------------------------------------
@command("geoadd")
def geoadd(c: Client, argv: list[bytes]):
    nx = xx = False
    first = 2
    n = len(argv)
    while first < n:
        opt = argv[first].lower()
        if opt == b"nx":
            nx = True
        elif opt == b"xx":
            xx = True
        elif opt != b"ch":  # CH is ZADD's to handle
            break
        first += 1
    if (n - first) % 3 or (xx and nx):
        raise SYNTAX_ERR
    zargv = [b"zadd", *argv[1:first]]
    for i in range(first, n, 3):
        lon, lat = _lonlat(argv, i)
        zargv.append(b"%d" % geohash.score_of(lon, lat))
        zargv.append(argv[i + 2])
    reply = _zadd_command(c, zargv)
    # Redis replaces the command vector, so replicas and the AOF see the ZADD
    c.server.rewrite_propagation(zargv)
    return reply


# -- GEOPOS / GEOHASH / GEODIST ---------------------------------------------------------------
@command("geopos")
def geopos(c: Client, argv: list[bytes]):
    zs = _zread(c, argv[1])
    d = zs.dict if zs is not None else {}
    resp3 = c.resp3
    out: list = []
    for member in argv[2:]:
        score = d.get(member)
        if score is None:
            out.append(NULL_ARRAY)
        else:
            lon, lat = geohash.decode(score)
            out.append([_coord_reply(resp3, lon), _coord_reply(resp3, lat)])
    return out


@command("geohash")
def geohash_(c: Client, argv: list[bytes]):
    zs = _zread(c, argv[1])
    d = zs.dict if zs is not None else {}
    out: list = []
    for member in argv[2:]:
        score = d.get(member)
        out.append(None if score is None else geohash.geohash_string(score))
    return out


@command("geodist")
def geodist(c: Client, argv: list[bytes]):
    to_meter = 1.0
    if len(argv) == 5:
        to_meter = _unit(argv[4])
    elif len(argv) > 5:
        raise SYNTAX_ERR
    zs = _zread(c, argv[1])
    if zs is None:
        return None
    s1 = zs.dict.get(argv[2])
    s2 = zs.dict.get(argv[3])
    if s1 is None or s2 is None:
        return None
    lon1, lat1 = geohash.decode(s1)
    lon2, lat2 = geohash.decode(s2)
    return format_distance(geohash.distance(lon1, lat1, lon2, lat2) / to_meter)


# -- searches ------------------------------------------------------------------------------
_COORDS = 1  # GEORADIUS: centre from longitude latitude
_MEMBER = 2  # GEORADIUSBYMEMBER: centre from a member
_NOSTORE = 4  # the _RO variants: no STORE/STOREDIST
_SEARCH = 8  # GEOSEARCH syntax
_SEARCHSTORE = 16  # GEOSEARCHSTORE: destination first, STOREDIST a flag


class _Point:
    __slots__ = ("dist", "score", "member", "lon", "lat")

    def __init__(self, dist: float, score: float, member: bytes, lon: float, lat: float) -> None:
        self.dist = dist
        self.score = score
        self.member = member
        self.lon = lon
        self.lat = lat


def _points_in(zs: SortedSet, shape: geohash.Shape, limit: int) -> list[_Point]:
    """Members inside the shape, cell by cell in Redis's order; stop at ``limit`` (ANY)."""
    found: list[_Point] = []
    decode = geohash.decode
    contains = shape.contains
    for bits, step in geohash.search_cells(shape):
        if limit and len(found) >= limit:
            break
        lo, hi = geohash.cell_scores(bits, step)
        start = zs.score_rank(float(lo), False, False)
        stop = zs.score_rank(float(hi), True, True)
        for score, member in zs.range(start, stop):
            lon, lat = decode(score)
            dist = contains(lon, lat)
            if dist is not None:
                found.append(_Point(dist, score, member, lon, lat))
                if limit and len(found) >= limit:
                    break
    return found


def _cmp_asc(a: _Point, b: _Point) -> int:
    return 1 if a.dist > b.dist else 0 if a.dist == b.dist else -1


def _cmp_desc(a: _Point, b: _Point) -> int:
    return -_cmp_asc(a, b)


def _sort(points: list[_Point], desc: bool, returned: int) -> None:
    """glibc's qsort is a stable merge sort; a partial sort is Redis's pqsort."""
    if returned == len(points):
        points.sort(key=lambda p: p.dist, reverse=desc)
    else:
        pqsort(points, _cmp_desc if desc else _cmp_asc, 0, returned - 1)


def _delete_store(c: Client, dst: bytes) -> None:
    db = c.db
    if db.delete(dst):
        db.modified(dst)
        _notify(c, b"del", dst, "g")
        c.server.dirty += 1


def _georadius(c: Client, argv: list[bytes], src: int, flags: int):
    """georadiusGeneric: every search form, parsed in Redis's order."""
    store: bytes | None = None
    storedist = False
    zs = _zread(c, argv[src])
    center: tuple[float, float] | None = None
    radius: float | None = None
    width = height = 0.0
    conversion = 1.0
    if flags & _COORDS:
        base = 6
        center = _lonlat(argv, 2)
        radius, conversion = _radius(argv, 4)
    elif flags & _MEMBER:
        base = 5
        if zs is not None:  # without a key only the options are still checked
            center = _member_pos(zs, argv[2])
            radius, conversion = _radius(argv, 3)
    else:
        base = 2
        if flags & _SEARCHSTORE:
            base = 3
            store = argv[1]
    withdist = withhash = withcoord = any_ = False
    frommember = fromloc = byradius = bybox = False
    desc: bool | None = None
    count = 0
    n = len(argv)
    i = base
    search = bool(flags & _SEARCH)
    while i < n:
        arg = argv[i].lower()
        left = n - i - 1  # arguments after this one
        if arg == b"withdist":
            withdist = True
        elif arg == b"withhash":
            withhash = True
        elif arg == b"withcoord":
            withcoord = True
        elif arg == b"any":
            any_ = True
        elif arg == b"asc":
            desc = False
        elif arg == b"desc":
            desc = True
        elif arg == b"count" and left >= 1:
            v = string2ll(argv[i + 1])
            if v is None:
                raise NOT_INT
            if v <= 0:
                raise COUNT_ERR
            count = v
            i += 1
        elif arg in (b"store", b"storedist") and left >= 1 and not flags & (_NOSTORE | _SEARCH):
            store = argv[i + 1]
            storedist = arg == b"storedist"
            i += 1
        elif arg == b"storedist" and flags & _SEARCHSTORE:
            storedist = True
        elif arg == b"frommember" and left >= 1 and search and not fromloc:
            if zs is not None:
                center = _member_pos(zs, argv[i + 1])
            frommember = True
            i += 1
        elif arg == b"fromlonlat" and left >= 2 and search and not frommember:
            center = _lonlat(argv, i + 1)
            fromloc = True
            i += 2
        elif arg == b"byradius" and left >= 2 and search and not bybox:
            radius, conversion = _radius(argv, i + 1)
            byradius = True
            i += 2
        elif arg == b"bybox" and left >= 3 and search and not byradius:
            width, height, conversion = _box(argv, i + 1)
            radius = None
            bybox = True
            i += 3
        else:
            raise SYNTAX_ERR
        i += 1
    if store is not None and (withdist or withhash or withcoord):
        what = b"GEOSEARCHSTORE" if flags & _SEARCHSTORE else b"STORE option in GEORADIUS"
        raise ReplyError(b"ERR %b is not compatible with WITHDIST, WITHHASH and WITHCOORD options" % what)
    if search and not (frommember or fromloc):
        raise ReplyError(b"ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for %b" % argv[0])
    if search and not (byradius or bybox):
        raise ReplyError(b"ERR exactly one of BYRADIUS and BYBOX can be specified for %b" % argv[0])
    if any_ and not count:
        raise ANY_ERR
    if zs is None:
        if store is not None:
            _delete_store(c, store)
            return 0
        return EMPTY_ARRAY
    # COUNT keeps the nearest ones, so it implies ASC unless ANY takes the first found
    if count and desc is None and not any_:
        desc = False
    assert center is not None
    shape = geohash.Shape(center[0], center[1], conversion, radius, width, height)
    points = _points_in(zs, shape, count if any_ else 0)
    if not points and store is None:
        return EMPTY_ARRAY
    returned = min(count, len(points)) if count else len(points)
    if desc is not None and points:
        _sort(points, desc, returned)
    del points[returned:]
    for p in points:
        p.dist /= conversion
    if store is not None:
        return _store(c, store, points, storedist, flags)
    return _reply(c, points, withdist, withhash, withcoord)


def _reply(c: Client, points: list[_Point], withdist: bool, withhash: bool, withcoord: bool) -> list:
    if not (withdist or withhash or withcoord):
        return [p.member for p in points]
    resp3 = c.resp3
    out: list = []
    for p in points:
        item: list = [p.member]
        if withdist:
            item.append(format_distance(p.dist))
        if withhash:
            item.append(int(p.score))
        if withcoord:
            item.append([_coord_reply(resp3, p.lon), _coord_reply(resp3, p.lat)])
        out.append(item)
    return out


def _store(c: Client, dst: bytes, points: list[_Point], storedist: bool, flags: int) -> int:
    """Write the result set (or delete ``dst`` when empty), as Redis's setKey path does."""
    if not points:
        _delete_store(c, dst)
        return 0
    pairs = {p.member: (p.dist if storedist else p.score) for p in points}
    db = c.db
    db.set(dst, _zset.from_pairs(pairs.items()))
    db.modified(dst)
    _notify(c, b"geosearchstore" if flags & _SEARCH else b"georadiusstore", dst)
    c.server.dirty += len(points)
    return len(points)


@command("georadius")
def georadius(c: Client, argv: list[bytes]):
    return _georadius(c, argv, 1, _COORDS)


@command("georadius_ro")
def georadius_ro(c: Client, argv: list[bytes]):
    return _georadius(c, argv, 1, _COORDS | _NOSTORE)


@command("georadiusbymember")
def georadiusbymember(c: Client, argv: list[bytes]):
    return _georadius(c, argv, 1, _MEMBER)


@command("georadiusbymember_ro")
def georadiusbymember_ro(c: Client, argv: list[bytes]):
    return _georadius(c, argv, 1, _MEMBER | _NOSTORE)


@command("geosearch")
def geosearch(c: Client, argv: list[bytes]):
    return _georadius(c, argv, 1, _SEARCH)


@command("geosearchstore")
def geosearchstore(c: Client, argv: list[bytes]):
    return _georadius(c, argv, 2, _SEARCH | _SEARCHSTORE)
