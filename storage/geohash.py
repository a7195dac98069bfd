"""Geohash math of Redis's GEO commands (geohash.c, geohash_helper.c semantics).

A geo set member's score is a 52-bit geohash: 26 latitude bits at the even
positions interleaved with 26 longitude bits at the odd ones, over longitude
[-180, 180] and latitude [-85.05112878, 85.05112878] (the Web Mercator
limits). Every formula below keeps Redis's order of floating point operations
so that results, distances and the cells a search visits are bit for bit the
same; Python's ``math`` calls the same libm. Where C would quietly produce a
NaN (cos of infinity, asin just past 1), Python raises, so those spots fall
back to NaN explicitly.
"""

from __future__ import annotations

import math

STEP_MAX = 26  # 26 bits per coordinate: a 52-bit score, exact in a double
LONG_MIN = -180.0
LONG_MAX = 180.0
LAT_MIN = -85.05112878
LAT_MAX = 85.05112878
EARTH_RADIUS_IN_METERS = 6372797.560856
MERCATOR_MAX = 20037726.37
_D_R = math.pi / 180.0
_NAN = math.nan
_U64 = (1 << 64) - 1
_ALPHABET = b"0123456789bcdefghjkmnpqrstuvwxyz"

Range = tuple[float, float]
WGS84_LONG: Range = (LONG_MIN, LONG_MAX)
WGS84_LAT: Range = (LAT_MIN, LAT_MAX)


# -- bit interleaving ----------------------------------------------------------------
def interleave(x: int, y: int) -> int:
    """Spread the low 32 bits of ``x`` over the even bits and ``y`` over the odd ones."""
    for shift, mask in (
        (16, 0x0000FFFF0000FFFF),
        (8, 0x00FF00FF00FF00FF),
        (4, 0x0F0F0F0F0F0F0F0F),
        (2, 0x3333333333333333),
        (1, 0x5555555555555555),
    ):
        x = (x | (x << shift)) & mask
        y = (y | (y << shift)) & mask
    return x | (y << 1)


def deinterleave(bits: int) -> tuple[int, int]:
    """The inverse of :func:`interleave`: (even bits, odd bits) as two 32-bit numbers."""
    x = bits & _U64
    y = x >> 1
    for shift, mask in (
        (0, 0x5555555555555555),
        (1, 0x3333333333333333),
        (2, 0x0F0F0F0F0F0F0F0F),
        (4, 0x00FF00FF00FF00FF),
        (8, 0x0000FFFF0000FFFF),
        (16, 0x00000000FFFFFFFF),
    ):
        x = (x | (x >> shift)) & mask
        y = (y | (y >> shift)) & mask
    return x, y


# -- encode / decode -------------------------------------------------------------------
def encode(
    lon: float, lat: float, step: int = STEP_MAX, lon_range: Range = WGS84_LONG, lat_range: Range = WGS84_LAT
) -> int | None:
    """The ``2*step``-bit hash of a point, or None outside the ranges (geohashEncode)."""
    if not (LONG_MIN <= lon <= LONG_MAX and LAT_MIN <= lat <= LAT_MAX):
        return None
    if not (lat_range[0] <= lat <= lat_range[1] and lon_range[0] <= lon <= lon_range[1]):
        return None
    lat_offset = (lat - lat_range[0]) / (lat_range[1] - lat_range[0])
    lon_offset = (lon - lon_range[0]) / (lon_range[1] - lon_range[0])
    scale = float(1 << step)
    # C converts the offsets to uint32_t: truncation (an offset of exactly 2**step keeps its bit)
    return interleave(int(lat_offset * scale), int(lon_offset * scale))


def score_of(lon: float, lat: float) -> int:
    """The sorted-set score GEOADD stores for a validated point (the hash aligned to 52 bits)."""
    bits = encode(lon, lat)
    assert bits is not None
    return bits


def decode_area(
    bits: int, step: int, lon_range: Range = WGS84_LONG, lat_range: Range = WGS84_LAT
) -> tuple[float, float, float, float]:
    """The cell of a hash: (lon_min, lon_max, lat_min, lat_max) (geohashDecode)."""
    ilat, ilon = deinterleave(bits)
    lat_scale = lat_range[1] - lat_range[0]
    lon_scale = lon_range[1] - lon_range[0]
    div = float(1 << step)
    return (
        lon_range[0] + (ilon * 1.0 / div) * lon_scale,
        lon_range[0] + (((ilon + 1) & 0xFFFFFFFF) * 1.0 / div) * lon_scale,
        lat_range[0] + (ilat * 1.0 / div) * lat_scale,
        lat_range[0] + (((ilat + 1) & 0xFFFFFFFF) * 1.0 / div) * lat_scale,
    )


def score_bits(score: float) -> int:
    """A score as C's (uint64_t) cast yields it on x86-64, out-of-range values included."""
    if score != score or score <= -(2.0**63) or score >= 2.0**64:
        return 0 if score >= 2.0**64 else 1 << 63
    return int(score) & _U64


def decode(score: float) -> tuple[float, float]:
    """(lon, lat) of a stored score: the centre of its 52-bit cell, clamped to the limits."""
    lon_min, lon_max, lat_min, lat_max = decode_area(score_bits(score), STEP_MAX)
    lon = (lon_min + lon_max) / 2
    lon = LONG_MAX if lon > LONG_MAX else LONG_MIN if lon < LONG_MIN else lon
    lat = (lat_min + lat_max) / 2
    lat = LAT_MAX if lat > LAT_MAX else LAT_MIN if lat < LAT_MIN else lat
    return lon, lat


def geohash_string(score: float) -> bytes:
    """GEOHASH's 11 characters: the decoded point re-encoded over latitude [-90, 90]."""
    lon, lat = decode(score)
    bits = encode(lon, lat, STEP_MAX, (-180.0, 180.0), (-90.0, 90.0))
    assert bits is not None
    # 52 bits fill ten characters; the eleventh is always '0', as in Redis
    chars = [_ALPHABET[(bits >> (52 - (i + 1) * 5)) & 0x1F] for i in range(10)]
    return bytes(chars) + b"0"


# -- neighbours --------------------------------------------------------------------------
def _move_x(bits: int, step: int, d: int) -> int:
    x = bits & 0xAAAAAAAAAAAAAAAA
    y = bits & 0x5555555555555555
    zz = 0x5555555555555555 >> (64 - step * 2)
    x = x + (zz + 1) if d > 0 else (x | zz) - (zz + 1)
    return (x & (0xAAAAAAAAAAAAAAAA >> (64 - step * 2))) | y


def _move_y(bits: int, step: int, d: int) -> int:
    x = bits & 0xAAAAAAAAAAAAAAAA
    y = bits & 0x5555555555555555
    zz = 0xAAAAAAAAAAAAAAAA >> (64 - step * 2)
    y = y + (zz + 1) if d > 0 else (y | zz) - (zz + 1)
    return x | (y & (0x5555555555555555 >> (64 - step * 2)))


def neighbours(bits: int, step: int) -> dict[str, int]:
    """The eight adjacent cells at the same step, wrapping around at the edges."""
    out = {}
    for name, dx, dy in (
        ("east", 1, 0),
        ("west", -1, 0),
        ("south", 0, -1),
        ("north", 0, 1),
        ("north_west", -1, 1),
        ("north_east", 1, 1),
        ("south_east", 1, -1),
        ("south_west", -1, -1),
    ):
        b = _move_x(bits, step, dx) if dx else bits
        out[name] = _move_y(b, step, dy) if dy else b
    return out


# -- distances ----------------------------------------------------------------------------
def lat_distance(lat1: float, lat2: float) -> float:
    """Metres along a meridian (the haversine when both longitudes are equal)."""
    return EARTH_RADIUS_IN_METERS * abs(lat2 * _D_R - lat1 * _D_R)


def distance(lon1: float, lat1: float, lon2: float, lat2: float) -> float:
    """Haversine great-circle distance in metres over Redis's Earth radius."""
    lon1r = lon1 * _D_R
    lon2r = lon2 * _D_R
    v = math.sin((lon2r - lon1r) / 2)
    if v == 0.0:
        return lat_distance(lat1, lat2)
    lat1r = lat1 * _D_R
    lat2r = lat2 * _D_R
    u = math.sin((lat2r - lat1r) / 2)
    a = u * u + math.cos(lat1r) * math.cos(lat2r) * v * v
    try:
        return 2.0 * EARTH_RADIUS_IN_METERS * math.asin(math.sqrt(a))
    except ValueError:  # a rounded past 1: C's asin gives NaN
        return _NAN


def _cos(x: float) -> float:
    try:
        return math.cos(x)
    except ValueError:  # cos(inf) is NaN in C
        return _NAN


# -- search areas ---------------------------------------------------------------------------
class Shape:
    """A search area: a circle (``radius``) or a box (``width`` x ``height``) around a
    point, sizes in the request's unit and ``conversion`` metres per unit."""

    __slots__ = ("lon", "lat", "conversion", "radius", "width", "height")

    def __init__(
        self,
        lon: float,
        lat: float,
        conversion: float,
        radius: float | None = None,
        width: float = 0.0,
        height: float = 0.0,
    ) -> None:
        self.lon = lon
        self.lat = lat
        self.conversion = conversion
        self.radius = radius
        self.width = width
        self.height = height

    def bounds(self) -> tuple[float, float, float, float]:
        """(min lon, min lat, max lon, max lat) around the shape (geohashBoundingBox)."""
        lon, lat = self.lon, self.lat
        if self.radius is not None:
            height = self.conversion * self.radius
            width = self.conversion * self.radius
        else:
            height = self.conversion * (self.height / 2)
            width = self.conversion * (self.width / 2)
        lat_delta = (height / EARTH_RADIUS_IN_METERS) / _D_R
        # a parallel is shorter away from the equator: widen by the edge nearer the pole
        top = (width / EARTH_RADIUS_IN_METERS / _cos((lat + lat_delta) * _D_R)) / _D_R
        bottom = (width / EARTH_RADIUS_IN_METERS / _cos((lat - lat_delta) * _D_R)) / _D_R
        delta = bottom if lat < 0 else top
        return lon - delta, lat - lat_delta, lon + delta, lat + lat_delta

    def radius_meters(self) -> float:
        """The circle's radius, or the box's half diagonal, in metres."""
        if self.radius is not None:
            r = self.radius
        else:
            r = math.sqrt((self.width / 2) * (self.width / 2) + (self.height / 2) * (self.height / 2))
        return r * self.conversion

    def contains(self, lon: float, lat: float) -> float | None:
        """The distance in metres from the centre to a point inside the shape, else None."""
        if self.radius is not None:
            d = distance(self.lon, self.lat, lon, lat)
            return None if d > self.radius * self.conversion else d
        # the latitude test is the cheaper one, so it comes first
        if lat_distance(lat, self.lat) > self.height * self.conversion / 2:
            return None
        if distance(lon, lat, self.lon, lat) > self.width * self.conversion / 2:
            return None
        return distance(self.lon, self.lat, lon, lat)


def estimate_steps(radius_meters: float, lat: float) -> int:
    """The coarsest step whose cells still cover a radius (geohashEstimateStepsByRadius)."""
    if radius_meters == 0:
        return STEP_MAX
    step = 1
    while radius_meters < MERCATOR_MAX:
        radius_meters *= 2
        step += 1
    step -= 2  # so that the range fits in most cases
    if lat > 66 or lat < -66:  # cells narrow towards the poles
        step -= 1
        if lat > 80 or lat < -80:
            step -= 1
    return max(1, min(STEP_MAX, step))


def search_cells(shape: Shape) -> list[tuple[int, int]]:
    """The cells (bits, step) to scan for a shape: its own cell and the useful neighbours.

    The order is Redis's (centre, N, S, E, W, NE, NW, SE, SW); a cell equal to the
    previously scanned one is left out, since huge areas make neighbours coincide.
    """
    min_lon, min_lat, max_lon, max_lat = shape.bounds()
    lon, lat = shape.lon, shape.lat
    steps = estimate_steps(shape.radius_meters(), lat)
    bits = encode(lon, lat, steps)
    assert bits is not None
    near = neighbours(bits, steps)
    # near the edge of its cell the estimate can be too fine: N/S/E/W must reach the bounds
    if (
        decode_area(near["north"], steps)[3] < max_lat
        or decode_area(near["south"], steps)[2] > min_lat
        or decode_area(near["east"], steps)[1] < max_lon
        or decode_area(near["west"], steps)[0] > min_lon
    ) and steps > 1:
        steps -= 1
        bits = encode(lon, lat, steps)
        assert bits is not None
        near = neighbours(bits, steps)
    dropped: set[str] = set()
    if steps >= 2:
        a_lon_min, a_lon_max, a_lat_min, a_lat_max = decode_area(bits, steps)
        if a_lat_min < min_lat:
            dropped.update(("south", "south_west", "south_east"))
        if a_lat_max > max_lat:
            dropped.update(("north", "north_east", "north_west"))
        if a_lon_min < min_lon:
            dropped.update(("west", "south_west", "north_west"))
        if a_lon_max > max_lon:
            dropped.update(("east", "south_east", "north_east"))
    cells = [bits]
    for name in ("north", "south", "east", "west", "north_east", "north_west", "south_east", "south_west"):
        cells.append(-1 if name in dropped else near[name])
    out: list[tuple[int, int]] = []
    last = None
    for i, b in enumerate(cells):
        if b < 0:
            continue
        # Redis compares with the previous scanned cell, never with the centre (index 0)
        if last is not None and last != 0 and b == cells[last]:
            continue
        out.append((b, steps))
        last = i
    return out


def cell_scores(bits: int, step: int) -> tuple[int, int]:
    """The score range [min, max) holding every point of a cell."""
    shift = 52 - step * 2
    return bits << shift, (bits + 1) << shift
