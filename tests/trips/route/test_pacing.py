import math
from datetime import date

import numpy as np
import pytest

from trips.route import geo, pacing
from trips.route.pacing import PacingSettings

M_PER_DEG_LAT = 111_132.0  # near 45°; only used to lay out synthetic routes


def zigzag_route(north_km, leg_m=1000.0, spacing_m=100.0, swing_m=25.0, lat0=45.0, lon0=5.0, ele=None):
    """A nearly straight route heading north: ±swing_m zig-zag with legs of leg_m, a point every spacing_m.
    Douglas–Peucker keeps the zig-zag corners, so the decimated route has a point about every leg_m."""
    n = int(north_km * 1000 / spacing_m) + 1
    y = np.arange(n) * spacing_m
    phase = (y % (2 * leg_m)) / leg_m  # 0..2
    x = swing_m * np.where(phase < 1, 2 * phase - 1, 3 - 2 * phase)
    lat = lat0 + y / M_PER_DEG_LAT
    lon = lon0 + x / (M_PER_DEG_LAT * math.cos(math.radians(lat0)))
    return np.column_stack((lat, lon, np.zeros(n) if ele is None else ele(y)))


# ------------------------------------------------------------------ targets and days


def test_domain_check_300_km_flat_3_days():
    targets = pacing.daily_targets(3, 300.0, 0.0, 0.9, 50.0, None)
    assert [round(t, 1) for t in targets] == [110.7, 99.6, 89.7]
    assert pacing.daily_targets(3, 300.0, 0.0, 0.9, 50.0, 200.0) == targets  # a high cap changes nothing
    assert sum(targets) == pytest.approx(300.0)


def test_thirty_km_floor():
    # 3 days of 30 km do not fit 60 km: the days share the route (not 30, 30, then nothing left)
    assert pacing.daily_targets(3, 60.0, 0.0, 0.9, 50.0, None) == pytest.approx([20.0, 20.0, 20.0])
    targets = pacing.daily_targets(4, 150.0, 0.0, 0.5, 50.0, None)  # base 80: 80, 40, 20 -> 30, 10 -> 30
    # 180 km of targets for 150: what lies above the floor (50 + 10) shrinks to the 30 km left over it
    assert targets == pytest.approx([55.0, 35.0, 30.0, 30.0]) and sum(targets) == pytest.approx(150.0)


def test_cap_is_applied_after_the_floor():
    assert pacing.daily_targets(3, 90.0, 0.0, 0.9, 50.0, 25.0) == [25.0, 25.0, 25.0]
    assert pacing.daily_targets(3, 60.0, 0.0, 0.9, 50.0, 25.0) == pytest.approx([20.0, 20.0, 20.0])
    assert pacing.daily_targets(3, 300.0, 0.0, 0.9, 50.0, 100.0) == pytest.approx([100.0, 99.6310, 89.6679],
                                                                                   abs=1e-4)


def test_elevation_penalty():
    # E = 3000 m at p = 50: 60 km of penalty, 20 per day; base = 360 / 2.71
    base = 360.0 / 2.71
    targets = pacing.daily_targets(3, 300.0, 3000.0, 0.9, 50.0, None)
    assert targets == pytest.approx([base - 20, base * 0.9 - 20, base * 0.81 - 20])
    assert sum(targets) == pytest.approx(300.0)
    assert pacing.daily_targets(3, 300.0, 3000.0, 0.9, 0.0, None) == pacing.daily_targets(3, 300.0, 0, 0.9, 50, None)


def test_no_fatigue_splits_evenly():
    assert pacing.daily_targets(4, 200.0, 0.0, 1.0, 50.0, None) == pytest.approx([50.0] * 4)
    with pytest.raises(ValueError):
        pacing.daily_targets(0, 200.0, 0.0, 0.9, 50.0, None)


def test_day_count_from_dates_and_from_cap():
    dated = PacingSettings(start_date=date(2026, 6, 1), end_date=date(2026, 6, 3))
    assert pacing.day_count(1000.0, dated) == 3
    assert pacing.day_count(300.0, PacingSettings()) == 4  # ceil(300 / 80)
    assert pacing.day_count(160.0, PacingSettings()) == 2
    assert pacing.day_count(0.0, PacingSettings()) == 1
    assert pacing.day_count(300.0, PacingSettings(max_distance_per_day=150)) == 2
    only_start = PacingSettings(start_date=date(2026, 6, 1))
    assert pacing.day_count(300.0, only_start) == 4
    with pytest.raises(ValueError):
        pacing.day_count(10.0, PacingSettings(start_date=date(2026, 6, 3), end_date=date(2026, 6, 1)))
    with pytest.raises(ValueError):
        pacing.day_count(10.0, PacingSettings(max_distance_per_day=0))


# ------------------------------------------------------------------ plan_stages


def test_plan_stages_300_km_flat_over_3_days_follows_the_targets():
    route = zigzag_route(300.0)
    settings = PacingSettings(start_date=date(2026, 6, 1), end_date=date(2026, 6, 3))
    stages = pacing.plan_stages(route, settings)
    total = geo.total_distance_km(route)
    assert total == pytest.approx(300.0, abs=1.0)
    assert len(stages) == 3
    # The cap (80 km by default) binds: 80, 80, and the last day takes the rest.
    assert stages[0].distance_km == pytest.approx(80.0, abs=1.1)
    uncapped = PacingSettings(start_date=date(2026, 6, 1), end_date=date(2026, 6, 3), max_distance_per_day=200)
    stages = pacing.plan_stages(route, uncapped)
    targets = pacing.daily_targets(3, total, 0.0, 0.9, 50.0, 200)
    assert [round(t) for t in targets] == [111, 100, 90]
    leg = 1.01  # one decimated segment, in km
    for stage, target in zip(stages[:2], targets):
        assert stage.distance_km == pytest.approx(target, abs=0.01)
    assert stages[0].distance_km == pytest.approx(110.7, abs=leg)
    assert stages[1].distance_km == pytest.approx(99.6, abs=leg)
    assert stages[2].distance_km == pytest.approx(89.7, abs=2 * leg)
    assert [s.day_number for s in stages] == [1, 2, 3]
    assert sum(s.distance_km for s in stages) == pytest.approx(total)


def test_plan_stages_cuts_a_straight_road_at_its_targets():
    # Douglas–Peucker reduces a straight road to its two ends: the cut must still fall on the targets.
    route = zigzag_route(300.0, swing_m=0.0)
    assert len(geo.simplify(route)) == 2
    settings = PacingSettings(start_date=date(2026, 6, 1), end_date=date(2026, 6, 3), max_distance_per_day=200)
    stages = pacing.plan_stages(route, settings)
    total = geo.total_distance_km(route)
    targets = pacing.daily_targets(3, total, 0.0, 0.9, 50.0, 200)
    assert total == pytest.approx(300.0, abs=0.5) and [round(t) for t in targets] == [111, 100, 90]
    assert [s.distance_km for s in stages] == pytest.approx(targets, abs=0.001)
    assert sum(s.distance_km for s in stages) == pytest.approx(total)
    assert all(len(s.geometry) == 2 for s in stages)


def test_plan_stages_are_contiguous_and_cover_the_route():
    route = zigzag_route(250.0)
    stages = pacing.plan_stages(route)  # 80 km cap: 4 days
    assert [s.day_number for s in stages] == [1, 2, 3, 4]
    assert stages[0].start == tuple(route[0])
    assert stages[-1].end == tuple(route[-1])
    for prev, cur in zip(stages, stages[1:]):
        assert prev.end == cur.start
    for s in stages:
        assert s.geometry.shape[1] == 3
        assert tuple(s.geometry[0]) == s.start and tuple(s.geometry[-1]) == s.end
        assert s.elevation_gain_m == 0.0 and s.elevation_loss_m == 0.0


def test_plan_stages_elevation_comes_from_the_raw_slice():
    # A steady 200 m climb over the first 20 km, then flat, then a 150 m descent at the very end.
    def ele(y):
        return np.clip(y, 0, 20_000) / 100.0 - np.clip(y - 240_000, 0, 15_000) / 100.0

    route = zigzag_route(255.0, ele=ele)
    stages = pacing.plan_stages(route)
    assert stages[0].elevation_gain_m == pytest.approx(200.0)
    assert stages[0].elevation_loss_m == 0.0
    assert sum(s.elevation_gain_m for s in stages[1:]) == 0.0
    assert stages[-1].elevation_loss_m == pytest.approx(150.0)
    total_gain, _ = geo.elevation_gain_loss(route[:, 2])
    targets = pacing.daily_targets(4, geo.total_distance_km(route), total_gain, 0.9, 50.0, 80.0)
    assert stages[0].distance_km == pytest.approx(targets[0], abs=1.01)


def test_plan_stages_more_days_than_route():
    route = zigzag_route(70.0)
    settings = PacingSettings(start_date=date(2026, 6, 1), end_date=date(2026, 6, 5))  # 5 days, 30 km floor
    stages = pacing.plan_stages(route, settings)
    # the dates' 5 days share the route (not 30, 30, 10 km and two dates without a day)
    assert [s.day_number for s in stages] == [1, 2, 3, 4, 5]
    assert [s.distance_km for s in stages] == pytest.approx([14.0] * 5, abs=0.05)
    assert stages[-1].end == tuple(route[-1])


@pytest.mark.parametrize("km,days", [(30.0, 3), (30.5, 3), (61.0, 3), (239.9, 10)])
def test_no_near_zero_day_whatever_the_dates(km, days):
    route = zigzag_route(km)
    settings = PacingSettings(start_date=date(2026, 6, 1), end_date=date(2026, 6, days))
    stages = pacing.plan_stages(route, settings)
    assert len(stages) == days and min(s.distance_km for s in stages) > 0.5 * km / days
    assert sum(s.distance_km for s in stages) == pytest.approx(geo.total_distance_km(route), abs=1e-6)


def test_no_near_zero_day_from_the_cap():
    stages = pacing.plan_stages(zigzag_route(61.0), PacingSettings(max_distance_per_day=30.0))  # not 30, 30, 1
    assert [s.distance_km for s in stages] == pytest.approx([61.0 / 3] * 3, abs=0.05)


def test_dates_leaving_days_under_a_kilometre_are_refused_naming_the_end_date():
    settings = PacingSettings(start_date=date(2026, 6, 1), end_date=date(2026, 6, 10))
    with pytest.raises(pacing.TooLarge) as refused:
        pacing.plan_stages(zigzag_route(5.0), settings)
    assert refused.value.field == "endDate" and "under 1 km" in str(refused.value.message)


def test_plan_stages_single_day_and_tiny_routes():
    route = zigzag_route(50.0)
    stages = pacing.plan_stages(route)
    assert len(stages) == 1
    assert stages[0].distance_km == pytest.approx(geo.total_distance_km(geo.simplify(route)))
    assert pacing.plan_stages(route[:1]) == []
    assert pacing.plan_stages(np.zeros((0, 3))) == []
    two = pacing.plan_stages(route[:2])
    assert len(two) == 1 and two[0].distance_km == pytest.approx(0.1, abs=0.01)


def test_plan_collection_one_stage_per_track():
    a, b = zigzag_route(12.0), zigzag_route(30.0, lat0=46.0)
    stages = pacing.plan_collection([a, np.zeros((1, 3)), b])
    assert [s.day_number for s in stages] == [1, 2]
    assert stages[0].distance_km == pytest.approx(geo.total_distance_km(a))
    assert stages[1].distance_km == pytest.approx(geo.total_distance_km(b))
    assert stages[1].start == tuple(b[0]) and stages[1].end == tuple(b[-1])
    assert len(stages[1].geometry) < len(b)


# ------------------------------------------------------------------ rider time


def test_rider_time_with_lunch_and_breaks():
    rt = pacing.rider_time(60.0, 500.0, 15.0, 8.0)
    riding = 60.0 / 13.0  # effective speed 15 - 2 * (500 / 500)
    assert rt.riding_hours == pytest.approx(riding)
    assert rt.breaks_hours == pytest.approx(2 * 10 / 60 + 1.0)  # two 10-minute breaks, plus lunch
    assert rt.arrival_hour == pytest.approx(8.0 + riding + 2 / 6 + 1.0)
    assert rt.time_at(30.0) == pytest.approx(8.0 + 0.5 * (riding + 2 / 6 + 1.0))
    assert rt.time_at(-5.0) == 8.0
    assert rt.time_at(500.0) == pytest.approx(rt.arrival_hour)


def test_rider_time_speed_floor_and_afternoon_start():
    rt = pacing.rider_time(20.0, 2000.0, 12.0, 13.0)  # 12 - 8 = 4 -> floor at 5 km/h
    assert rt.riding_hours == pytest.approx(4.0)
    assert rt.breaks_hours == pytest.approx(2 / 6)  # no lunch after noon
    assert rt.arrival_hour == pytest.approx(17.0 + 2 / 6)


def test_rider_time_lunch_only_when_riding_crosses_noon():
    assert pacing.rider_time(30.0, 0.0, 15.0, 9.0).breaks_hours == pytest.approx(1 / 6)  # arrives 11:00
    assert pacing.rider_time(45.0, 0.0, 15.0, 9.0).breaks_hours == pytest.approx(1 / 6)  # riding ends at 12:00
    assert pacing.rider_time(46.0, 0.0, 15.0, 9.0).breaks_hours == pytest.approx(1 / 6 + 1)
    zero = pacing.rider_time(0.0, 0.0, 15.0, 9.0)
    assert zero.arrival_hour == 9.0 and zero.time_at(10) == 9.0
