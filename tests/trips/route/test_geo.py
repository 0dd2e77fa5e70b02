import math

import numpy as np
import pytest
from pyproj import Geod

from trips.route import geo

GEOD = Geod(ellps="WGS84")
M_PER_DEG_EQUATOR = 111_319.490793  # WGS-84 degree of longitude on the equator


def equator_line(n, step_m=1000.0, ele=0.0):
    lon = np.arange(n) * step_m / M_PER_DEG_EQUATOR
    return np.column_stack((np.zeros(n), lon, np.full(n, ele)))


def random_walk(n, lat0, lon0, step_m, turn, seed):
    rng = np.random.default_rng(seed)
    heading = np.cumsum(rng.normal(0, turn, n))
    lat = lat0 + np.cumsum(np.cos(heading) * step_m) / 111_000
    lon = lon0 + np.cumsum(np.sin(heading) * step_m) / (111_000 * np.cos(np.radians(lat)))
    return np.column_stack((lat, (lon + 180) % 360 - 180, 100 + np.cumsum(rng.normal(0, 0.5, n))))


def heron_distances(pts, s, e):
    """The docs/RULES.md "Geodesy" distance of pts[s+1:e] to the segment (s, e), straight from the definition."""
    i = np.arange(s + 1, e)
    k = len(i)
    a = GEOD.inv(np.full(k, pts[s, 1]), np.full(k, pts[s, 0]), pts[i, 1], pts[i, 0])[2]
    b = GEOD.inv(pts[i, 1], pts[i, 0], np.full(k, pts[e, 1]), np.full(k, pts[e, 0]))[2]
    c = GEOD.inv(pts[s, 1], pts[s, 0], pts[e, 1], pts[e, 0])[2]
    if c < 0.001:
        return a
    sp = (a + b + c) / 2
    area2 = sp * (sp - a) * (sp - b) * (sp - c)
    return np.where(area2 > 0, 2 * np.sqrt(np.maximum(area2, 0)) / c, 0.0)


def reference_simplify(pts, tol=20.0):
    """Plain Douglas–Peucker with the exact distance for every point."""
    if len(pts) <= 2:
        return pts.copy()
    keep = np.zeros(len(pts), dtype=bool)
    keep[[0, -1]] = True
    stack = [(0, len(pts) - 1)]
    while stack:
        s, e = stack.pop()
        if e - s < 2:
            continue
        d = heron_distances(pts, s, e)
        k = int(np.argmax(d))
        if d[k] > tol:
            keep[s + 1 + k] = True
            stack += [(s, s + 1 + k), (s + 1 + k, e)]
    return pts[keep]


# ------------------------------------------------------------------ distances


def test_one_degree_of_latitude_at_the_equator():
    assert geo.distance_m(0, 0, 1, 0) == pytest.approx(110_574.389, abs=0.01)
    assert geo.distance_m(0, 0, 0, 1) == pytest.approx(M_PER_DEG_EQUATOR, abs=0.01)
    assert geo.distance_m(45, 5, 45, 5) == 0.0


def test_haversine_scalar_and_vectorised():
    assert geo.haversine_m(0, 0, 1, 0) == pytest.approx(6_371_000 * math.pi / 180, rel=1e-12)
    assert isinstance(geo.haversine_m(0, 0, 1, 0), float)
    # Paris -> London, about 343.5 km on the sphere
    assert geo.haversine_m(48.8566, 2.3522, 51.5074, -0.1278) == pytest.approx(343_556, abs=100)
    d = geo.haversine_m(np.zeros(3), np.zeros(3), np.array([0.0, 1.0, 0.0]), np.array([0.0, 0.0, 90.0]))
    assert d.shape == (3,)
    assert d[0] == 0.0
    assert d[2] == pytest.approx(6_371_000 * math.pi / 2, rel=1e-12)


def test_segment_lengths_total_and_cumulative():
    pts = equator_line(5, step_m=1000.0)
    seg = geo.segment_lengths_m(pts)
    assert seg.shape == (4,)
    assert np.allclose(seg, 1000.0, atol=1e-4)
    assert geo.total_distance_km(pts) == pytest.approx(4.0, abs=1e-6)
    assert np.allclose(geo.cumulative_km(pts), [0, 1, 2, 3, 4], atol=1e-6)
    assert geo.total_distance_km(pts[:1]) == 0.0
    assert geo.total_distance_km(np.zeros((0, 3))) == 0.0
    assert geo.segment_lengths_m(pts[:1]).shape == (0,)


@pytest.mark.parametrize("longest_m", [0.01, 10.0, 300.0, 999.0, 5_000.0, 400_000.0])
def test_segment_lengths_match_the_geodesic_over_the_globe(longest_m):
    """Short segments are measured from their ellipsoid chord; every length stays within 10 nm of pyproj's
    geodesic, at any latitude (poles included), across the antimeridian, and for long segments too."""
    rng = np.random.default_rng(int(longest_m * 100))
    n = 20_000
    lat = rng.uniform(-90.0, 90.0, n)
    lon = rng.uniform(-180.0, 180.0, n)
    lon[:200] = 179.9999  # steps across the antimeridian
    dist = rng.uniform(0.0, longest_m, n)
    lon2, lat2, _ = GEOD.fwd(lon, lat, rng.uniform(0.0, 360.0, n), dist)
    pts = np.zeros((2 * n, 3))
    pts[0::2, 0], pts[0::2, 1], pts[1::2, 0], pts[1::2, 1] = lat, lon, lat2, lon2
    got = geo.segment_lengths_m(pts)
    want = GEOD.line_lengths(pts[:, 1], pts[:, 0])
    assert np.abs(got - want).max() < 1e-8
    assert np.abs(got[0::2] - dist).max() < 1e-8


def test_segment_lengths_of_repeated_points_are_zero_and_a_nan_stays_nan():
    pts = np.array([[45.0, 5.0, 0.0], [45.0, 5.0, 0.0], [np.nan, 5.0, 0.0], [45.0, 5.0, 0.0]])
    seg = geo.segment_lengths_m(pts)
    assert seg[0] == 0.0
    assert np.isnan(seg[1:]).all()


def test_bad_shape_is_refused():
    with pytest.raises(ValueError):
        geo.segment_lengths_m(np.zeros((4,)))


def test_simplify_drops_collinear_points_and_keeps_a_100_m_bump():
    pts = equator_line(21, step_m=500.0, ele=7.0)
    assert np.array_equal(geo.simplify(pts), pts[[0, -1]])
    bumped = pts.copy()
    bumped[:, 0] = (100.0 / 110_574.0) * (1 - np.abs(np.arange(21) - 10) / 10)  # a tent, 100 m high
    bumped[10, 2] = 42.0
    out = geo.simplify(bumped)
    assert len(out) == 3
    assert np.array_equal(out[1], bumped[10])  # elevation kept with the point
    low = pts.copy()
    low[:, 0] = (10.0 / 110_574.0) * (1 - np.abs(np.arange(21) - 10) / 10)  # 10 m: within the tolerance
    assert len(geo.simplify(low)) == 2
    assert len(geo.simplify(low, tolerance_m=5.0)) == 3


def test_simplify_short_arrays_are_unchanged_copies():
    for n in (0, 1, 2):
        pts = equator_line(n)
        out = geo.simplify(pts)
        assert np.array_equal(out, pts)
        assert out is not pts


def test_simplify_coincident_ends_use_distance_to_start():
    # A loop: start == end. The farthest point from the start must be kept.
    lat = np.array([0.0, 0.0, 0.001, 0.002, 0.001, 0.0])
    lon = np.array([0.0, 0.001, 0.002, 0.001, 0.0005, 0.0])
    pts = np.column_stack((lat, lon, np.zeros(6)))
    out = geo.simplify(pts)
    far = np.argmax(GEOD.inv(np.zeros(6), np.zeros(6), lon, lat)[2])
    assert any(np.array_equal(p, pts[far]) for p in out)
    assert np.array_equal(out, reference_simplify(pts))


@pytest.mark.parametrize("seed", range(12))
def test_simplify_matches_the_plain_algorithm(seed):
    rng = np.random.default_rng(1000 + seed)
    n = int(rng.integers(3, 1500))
    step = float(rng.choice([0.7, 5.0, 50.0, 3000.0]))
    pts = random_walk(n, rng.uniform(-80, 80), rng.uniform(-180, 180), step, float(rng.choice([0.02, 0.3])), seed)
    if seed % 4 == 0:
        pts[-1] = pts[0]  # closed loop
    if seed % 3 == 0:
        pts = np.concatenate((pts, pts[::-1]))  # out and back
    tol = float(rng.choice([1.0, 20.0, 150.0]))
    assert np.array_equal(geo.simplify(pts, tol), reference_simplify(pts, tol))


def test_simplify_large_route_is_iterative():
    pts = random_walk(200_000, 45.0, 5.0, 1.5, 0.05, 7)
    out = geo.simplify(pts)
    assert 2 < len(out) < len(pts) // 10
    assert np.array_equal(out[0], pts[0]) and np.array_equal(out[-1], pts[-1])


@pytest.mark.parametrize("period, amplitude_m", [(2, 40.0), (100, 500.0)])
def test_simplify_adversarial_zigzag_stays_within_tolerance(period, amplitude_m):
    # Equal peaks: the plain algorithm peels them one at a time (quadratic). The work limits must finish
    # it, and every dropped point must still be within the tolerance of its kept chord.
    n = 40_000
    k = np.arange(n)
    offset = np.abs((k % period) - period / 2) / (period / 2) * amplitude_m
    pts = np.column_stack((45 + k * 1.5 / 111_000, 5 + offset / (111_000 * math.cos(math.radians(45))),
                           np.zeros(n)))
    out = geo.simplify(pts)
    kept = np.searchsorted(pts[:, 0], out[:, 0])  # latitudes increase strictly
    assert np.array_equal(pts[kept], out)
    assert len(out) >= n // period
    for s, e in zip(kept[:-1], kept[1:]):
        if e - s > 1:
            assert heron_distances(pts, s, e).max() <= 20.0


def test_simplify_refuses_bad_tolerance():
    with pytest.raises(ValueError):
        geo.simplify(equator_line(5), tolerance_m=-1)
    with pytest.raises(ValueError):
        geo.simplify(equator_line(5), tolerance_m=float("nan"))


# ------------------------------------------------------------------ elevation


@pytest.mark.parametrize("ele, expected", [
    ([0, 1, 2, 3], (0.0, 0.0)),  # a run of exactly 3 m is noise
    ([0, 1, 2, 3.5], (3.5, 0.0)),
    ([3.5, 2, 1, 0], (0.0, 3.5)),
    ([0, 2, 0, 2, 0, 2, 0], (0.0, 0.0)),  # noise both ways
    ([0, 5, 4, 10], (11.0, 0.0)),  # +5 counted, -1 ignored, +6 counted
    ([10, 6, 7, 2], (0.0, 9.0)),
    ([0, 2, 2, 4], (0.0, 0.0)),  # a flat step ends the run: two runs of 2 m
    ([100], (0.0, 0.0)),
    ([], (0.0, 0.0)),
])
def test_elevation_gain_loss_threshold(ele, expected):
    assert geo.elevation_gain_loss(np.array(ele, dtype=float)) == pytest.approx(expected)


def test_elevation_long_series_matches_the_sequential_rule():
    rng = np.random.default_rng(3)
    ele = np.cumsum(rng.normal(0, 1.5, 5000))
    gain = loss = run_up = run_down = 0.0
    for d in np.diff(ele):
        if d > 0:
            run_up += d
        elif run_up:
            gain += run_up if run_up > 3 else 0
            run_up = 0.0
        if d < 0:
            run_down -= d
        elif run_down:
            loss += run_down if run_down > 3 else 0
            run_down = 0.0
    gain += run_up if run_up > 3 else 0
    loss += run_down if run_down > 3 else 0
    assert geo.elevation_gain_loss(ele) == pytest.approx((gain, loss), rel=1e-12)


# ------------------------------------------------------------------ split


def test_cut_at_km_interpolates_the_cut_point():
    pts = np.array([[45.0, 5.0, 100.0], [45.01, 5.0, 200.0], [45.02, 5.0, 300.0]])
    cum = geo.cumulative_km(pts)
    head, tail = geo.cut_at_km(pts, cum[1] * 1.5)
    assert len(head) == 3 and len(tail) == 2
    assert head[-1] == pytest.approx(tail[0]) and head[-1][0] == pytest.approx(45.015, abs=1e-6)
    assert head[-1][2] == pytest.approx(250.0)
    assert geo.total_distance_km(head) + geo.total_distance_km(tail) == pytest.approx(cum[-1])


def test_cut_at_km_on_a_vertex_shares_it():
    pts = np.array([[45.0, 5.0, 0.0], [45.01, 5.0, 0.0], [45.02, 5.0, 0.0]])
    cum = geo.cumulative_km(pts)
    head, tail = geo.cut_at_km(pts, cum[1], cum)
    assert head.tolist() == pts[:2].tolist() and tail.tolist() == pts[1:].tolist()


@pytest.mark.parametrize("goal", [0.0, -1.0, 2.3, 50.0])
def test_cut_at_km_refuses_goals_outside_the_line(goal):
    pts = np.array([[45.0, 5.0, 0.0], [45.01, 5.0, 0.0], [45.02, 5.0, 0.0]])
    with pytest.raises(ValueError):
        geo.cut_at_km(pts, goal)
