"""What parse → paced days allocates for a GPX track, counted by tracemalloc (deterministic, unlike RSS or a clock):
bounds relative to the points' bytes that keep whole-route copies from coming back. The upload's peak memory against
gpxpy is bench/bench_gpx.py's."""
import tracemalloc

import numpy as np
import pytest

from trips.route.gpx import parse_gpx
from trips.route.pacing import plan_stages

N_POINTS = 50_000
WHOLE_PATH_BOUND = 3.5  # parse → paced days, in bytes of the parsed points
PACING_BOUND = 2.5  # pacing alone, above what the parse keeps


def generated_gpx(n: int = N_POINTS, seed: int = 7) -> bytes:
    """A random-walk track of `n` points 3 to 7 m apart (about 250 km: four days at the default 80 km) with <ele>."""
    rng = np.random.default_rng(seed)
    heading = np.cumsum(rng.normal(0.0, 0.05, n))
    step = rng.uniform(3.0, 7.0, n)
    lat = 45.0 + np.cumsum(np.cos(heading) * step) / 111_320.0
    lon = 5.0 + np.cumsum(np.sin(heading) * step) / (111_320.0 * np.cos(np.radians(lat)))
    ele = 300.0 + 40 * np.sin(np.arange(n) / 900.0)
    points = "".join(f'<trkpt lat="{a:.7f}" lon="{o:.7f}"><ele>{e:.1f}</ele></trkpt>\n'
                     for a, o, e in zip(lat.tolist(), lon.tolist(), ele.tolist()))
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<gpx version="1.1" creator="test" '
            f'xmlns="http://www.topografix.com/GPX/1/1"><trk><trkseg>\n{points}</trkseg></trk></gpx>\n').encode()


@pytest.fixture(scope="module")
def document() -> bytes:
    data = generated_gpx()
    plan_stages(parse_gpx(data).points)  # first calls' one-off allocations (caches, compiled queries) not counted
    return data


def test_parse_then_pacing_allocates_a_bounded_multiple_of_the_points(document):
    tracemalloc.start()
    try:
        route = parse_gpx(document)
        held, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        stages = plan_stages(route.points)
        _, pacing_peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        tracemalloc.start()
        stages_again = plan_stages(parse_gpx(document).points)
        _, whole_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    points_bytes = route.points.nbytes
    assert len(route.points) == N_POINTS and len(stages) == len(stages_again) == 4
    assert whole_peak <= WHOLE_PATH_BOUND * points_bytes, whole_peak / points_bytes
    assert pacing_peak - held <= PACING_BOUND * points_bytes, (pacing_peak - held) / points_bytes
