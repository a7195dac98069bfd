"""storage.geohash against vectors taken from redis-server 7.0.15 (GEOADD, then
ZSCORE / GEOHASH / GEOPOS / GEODIST)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rill.storage import geohash

# (lon, lat, ZSCORE, GEOHASH, GEOPOS lon, GEOPOS lat) as Redis prints them
VECTORS = [
    (13.361389, 38.115556, 3479099956230698, b"sqc8b49rny0", "13.36138933897018433", "38.11555639549629859"),
    (15.087269, 37.502669, 3479447370796909, b"sqdtr74hyu0", "15.08726745843887329", "37.50266842333162032"),
    (0.0, 0.0, 3377699720527872, b"s0000000000", "0.00000268220901489", "0.00000126736058093"),
    (-122.4194, 37.7749, 1367859919124626, b"9q8yyk8ytp0", "-122.41940170526504517", "37.77490001056577995"),
    # the upper limits give offsets of exactly 2**26: the extra bits stay in the score
    (180.0, 85.05112878, 13510798882111488, b"bp05b5048p0", "180", "85.0511287799999991"),
    (-180.0, -85.05112878, 0, b"00bh0hbj200", "-179.99999731779098511", "-85.05112751263942528"),
]


def _human(x: float) -> str:
    s = f"{x:.17f}"
    return s.rstrip("0").rstrip(".")


@pytest.mark.parametrize("lon,lat,score,hash_,plon,plat", VECTORS)
def test_known_vectors(lon, lat, score, hash_, plon, plat):
    assert geohash.score_of(lon, lat) == score
    assert geohash.geohash_string(float(score)) == hash_
    dlon, dlat = geohash.decode(float(score))
    assert (_human(dlon), _human(dlat)) == (plon, plat)


def test_distances():
    palermo = geohash.decode(3479099956230698.0)
    catania = geohash.decode(3479447370796909.0)
    assert f"{geohash.distance(*palermo, *catania):.4f}" == "166274.1516"
    origin = geohash.decode(3377699720527872.0)
    sf = geohash.decode(1367859919124626.0)
    assert f"{geohash.distance(*origin, *sf):.4f}" == "12799027.2513"
    # equal longitudes take the meridian shortcut
    assert geohash.distance(1.0, 0.0, 1.0, 1.0) == geohash.lat_distance(0.0, 1.0)


def test_out_of_range_points_do_not_encode():
    assert geohash.encode(180.1, 0.0) is None
    assert geohash.encode(0.0, 85.06) is None
    assert geohash.encode(0.0, -85.06) is None


def test_score_bits_follow_the_c_cast():
    assert geohash.score_bits(1.5) == 1
    assert geohash.score_bits(-5.0) == (1 << 64) - 5
    assert geohash.score_bits(float("inf")) == 0
    assert geohash.score_bits(float("-inf")) == 1 << 63
    assert geohash.score_bits(1e20) == 0
    assert geohash.score_bits(2.0**63) == 1 << 63


@given(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1))
def test_interleave_roundtrip(x, y):
    assert geohash.deinterleave(geohash.interleave(x, y)) == (x, y)


def test_neighbours_wrap_and_step():
    bits = geohash.encode(0.0, 0.0, 2)
    n = geohash.neighbours(bits, 2)
    assert len(set(n.values())) == 8
    for b in n.values():
        assert 0 <= b < 16
    # at step 1 the world is 2x2: east and west are the same cell
    one = geohash.encode(10.0, 10.0, 1)
    n1 = geohash.neighbours(one, 1)
    assert n1["east"] == n1["west"]
    assert n1["north"] == n1["south"]


def test_estimate_steps():
    assert geohash.estimate_steps(0, 0) == 26
    assert geohash.estimate_steps(1, 0) == 24  # 2**25 m passes MERCATOR_MAX: 1 + 25 - 2
    assert geohash.estimate_steps(1000, 0) == 14
    assert geohash.estimate_steps(1000, 70) == 13
    assert geohash.estimate_steps(1000, -81) == 12
    assert geohash.estimate_steps(1e9, 0) == 1
    assert geohash.estimate_steps(float("inf"), 0) == 1


def test_search_cells_cover_the_centre_cell():
    shape = geohash.Shape(13.361389, 38.115556, 1000.0, radius=200.0)
    cells = geohash.search_cells(shape)
    assert 1 <= len(cells) <= 9
    bits, step = cells[0]
    lo, hi = geohash.cell_scores(bits, step)
    assert lo <= geohash.score_of(13.361389, 38.115556) < hi


def test_shape_contains():
    box = geohash.Shape(0.0, 0.0, 1.0, width=2000.0, height=2000.0)
    assert box.contains(0.0, 0.005) is not None
    assert box.contains(0.0, 0.01) is None  # ~1.1 km north: outside a 1 km half-height
    circle = geohash.Shape(0.0, 0.0, 1000.0, radius=1.0)
    assert circle.contains(0.0, 0.005) is not None
    assert circle.contains(0.01, 0.0) is None
