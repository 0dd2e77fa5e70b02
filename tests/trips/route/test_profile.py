"""A day's compact profile and its categorised climbs (docs/RULES.md "Climbs")."""
import numpy as np
import pytest

from trips.route import profile
from trips.route.geo import cumulative_km

from tests.fakes.thirdparty import make_points


def line(heights, step_m: float = 100.0) -> list[list[float]]:
    """A stored line [[lat, lon, ele], …] with one point every `step_m` metres at the given heights."""
    points = make_points(len(heights), step_m=step_m, wiggle_deg=0.0)
    return [[lat, lon, float(h)] for (lat, lon, _), h in zip(points, heights)]


def ramp(length_m: float, grade_pct: float, start: float = 200.0, step_m: float = 100.0) -> list[float]:
    n = int(round(length_m / step_m))
    return [start + grade_pct / 100 * step_m * i for i in range(n + 1)]


@pytest.mark.parametrize(("score", "name"), [
    (7_999, None), (8_000, "4"), (15_999, "4"), (16_000, "3"), (32_000, "2"), (64_000, "1"), (79_999, "1"),
    (80_000, "HC"), (250_000, "HC")])
def test_the_category_follows_length_times_grade(score, name):
    assert profile.category(score) == name


def test_the_profile_keeps_at_most_64_of_the_line_s_points_and_its_summits():
    heights = [200.0 + 300.0 * abs(((i / 40) % 2) - 1) for i in range(401)]  # a saw: five tops of 500 m
    km, ele = profile.along(line(heights))
    samples = profile.sampled(km, ele)
    assert len(samples) <= profile.PROFILE_SAMPLES
    assert samples[0] == [0.0, 500.0] and samples[-1] == [round(float(km[-1]), 2), 500.0]
    own = {(round(float(k), 2), round(float(e))) for k, e in zip(km, ele)}
    assert all((k, m) in own for k, m in samples)  # the line's own points
    assert sum(m == 500.0 for _, m in samples) == 6 and sum(m == 200.0 for _, m in samples) == 5  # every top, every foot


def test_a_long_even_ramp_is_two_samples_and_a_bumpy_one_at_most_64():
    km, ele = profile.along(line(ramp(30_000, 2.0)))
    assert profile.sampled(km, ele) == [[0.0, 200.0], [round(float(km[-1]), 2), 800.0]]
    bumpy = [200.0 + 20.0 * (i % 2) for i in range(301)]
    km, ele = profile.along(line(bumpy))
    assert len(profile.sampled(km, ele)) == profile.PROFILE_SAMPLES


def test_a_short_line_keeps_the_points_off_its_straight_profile():
    km, ele = profile.along(line([100, 130, 120]))
    assert profile.sampled(km, ele) == [[0.0, 100.0], [0.1, 130.0], [0.2, 120.0]]
    km, ele = profile.along(line([100, 110.5, 120]))  # half a metre off the straight line: left out
    assert profile.sampled(km, ele) == [[0.0, 100.0], [0.2, 120.0]]
    assert profile.sampled(*profile.along([])) == []


def test_a_line_without_elevation_is_not_known_and_has_no_climbs():
    rows = [[lat, lon, None] for lat, lon, _ in line(ramp(5_000, 6.0))]
    km, ele = profile.along(rows)
    assert not profile.known(ele) and profile.climbs(km, ele) == []


def test_one_climb_is_measured_foot_to_top():
    # 1 km flat, then 5 km at 6 % (300 m up: score 30 000, category 3), then 2 km down at 5 %
    heights = [200.0] * 10 + ramp(5_000, 6.0) + [500.0 - 10.0 * i for i in range(1, 21)]
    km, ele = profile.along(line(heights))
    [climb] = profile.climbs(km, ele)
    assert climb.start_km == pytest.approx(0.9, abs=0.11)  # the foot: the last point of the flat
    assert climb.length_km == pytest.approx(5.0, abs=0.11) and climb.gain_m == 300
    assert climb.mean_pct == pytest.approx(6.0, abs=0.1) and climb.steepest_pct == pytest.approx(6.0, abs=0.1)
    assert climb.category == "3"


def test_the_steepest_500_m_stands_out_of_the_mean():
    heights = ramp(3_000, 4.0) + ramp(1_000, 12.0, start=320.0)[1:]  # 4 km: 3 at 4 %, then 1 at 12 %
    km, ele = profile.along(line(heights))
    [climb] = profile.climbs(km, ele)
    assert climb.mean_pct == pytest.approx(6.0, abs=0.1)
    assert climb.steepest_pct == pytest.approx(12.0, abs=0.1)
    assert climb.category == "3"  # 4 000 m × 6 % = 24 000


def test_a_dip_of_20_m_ends_a_climb_and_a_smaller_one_does_not():
    up = ramp(2_000, 5.0)  # 100 m up, score 10 000: category 4
    small_dip = up + [up[-1] - 10.0] + ramp(2_000, 5.0, start=up[-1] - 10.0)[1:]
    km, ele = profile.along(line(small_dip))
    assert [c.category for c in profile.climbs(km, ele)] == ["3"]  # one climb of 4 km, 190 m up
    big_dip = up + [up[-1] - 30.0] + ramp(2_000, 5.0, start=up[-1] - 30.0)[1:]
    km, ele = profile.along(line(big_dip))
    found = profile.climbs(km, ele)
    assert [c.category for c in found] == ["4", "4"] and found[0].start_km < found[1].start_km


def test_a_plateau_of_a_km_ends_a_climb():
    up = ramp(2_000, 5.0)
    plateau = up + [up[-1]] * 11 + ramp(2_000, 5.0, start=up[-1])[1:]
    km, ele = profile.along(line(plateau))
    assert [c.gain_m for c in profile.climbs(km, ele)] == [100, 100]


def test_gentle_or_short_rises_are_no_climbs():
    gentle = ramp(10_000, 2.5)  # 250 m up, but under 3 %
    short = [200.0] * 5 + ramp(400, 15.0) + [260.0] * 5  # 15 % for 400 m: under 500 m
    flat_bump = ramp(1_500, 5.0)  # 75 m up: score 7 500, under category 4
    for heights in (gentle, short, flat_bump):
        km, ele = profile.along(line(heights))
        assert profile.climbs(km, ele) == []


def test_an_hors_categorie_climb():
    km, ele = profile.along(line(ramp(15_000, 7.0, step_m=200.0), step_m=200.0))  # 1 050 m up
    [climb] = profile.climbs(km, ele)
    assert climb.category == "HC" and climb.gain_m == 1050


def test_a_day_of_many_bumps_keeps_the_highest_scores_in_route_order():
    heights: list[float] = []
    for i in range(20):  # twenty climbs from the same valley floor, each 100 m longer than the one before
        rise = ramp(1_600 + 100 * i, 5.0)
        heights += rise + [rise[-1] - 50.0 - 10.0 * k for k in range(1, 4)] + [200.0] * 3
    km, ele = profile.along(line(heights))
    found = profile.climbs(km, ele)
    assert len(found) == profile.MAX_CLIMBS
    assert [c.start_km for c in found] == sorted(c.start_km for c in found)
    assert min(c.length_km for c in found) >= 2.4  # the eight smallest (1.6 to 2.3 km) left out


def test_the_steepest_stretch_is_the_terrain_one():
    heights = ramp(3_000, 4.0) + ramp(1_000, 12.0, start=320.0)[1:]
    km, ele = profile.along(line(heights))
    assert profile.steepest_pct(km * 1000, ele) == pytest.approx(12.0, abs=0.1)
    assert profile.steepest_pct(km[:3] * 1000, ele[:3]) is None  # 200 m: shorter than the stretch


def test_rows_without_a_height_still_count_for_the_distance():
    rows = line([100.0, 110.0, 120.0])
    rows[1] = rows[1][:2]
    km, ele = profile.along(rows)
    assert km.tolist() == pytest.approx(cumulative_km(np.array(line([0, 0, 0]))).tolist())
    assert np.isnan(ele[1]) and ele[2] == 120.0
