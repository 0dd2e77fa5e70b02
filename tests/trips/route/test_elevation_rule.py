"""The partly elevated track rule and the null-keeping helpers (docs/RULES.md "Elevation", trips/route/elevation.py)."""
import math

import numpy as np
import pytest

from tests.trips.enrich.test_unknown_elevation import POINTS, bare_gpx
from trips.route import elevation
from trips.route.gpx import parse_gpx


@pytest.mark.parametrize("share,known", [(0.95, True), (0.5, False), (0.0, False)])
def test_a_partly_elevated_track_is_known_only_when_most_points_carry_one(share, known):
    every = round(1 / (1 - share)) if share < 1 else 0
    points = parse_gpx(bare_gpx(POINTS[:400], keep=lambda i: not every or i % every)).points if share else \
        parse_gpx(bare_gpx(POINTS[:400])).points
    settled = elevation.settle(points)
    assert np.isfinite(settled[:, 2]).all() is known or bool(np.isfinite(settled[:, 2]).all()) == known
    if known:  # the gaps are interpolated between their neighbours: no dip to 0
        assert settled[:, 2].min() >= min(p[2] for p in POINTS[:400]) - 1e-6
        assert np.allclose(settled[:, 2], [p[2] for p in POINTS[:400]], atol=1.5)
    else:
        assert np.isnan(settled[:, 2]).all()


def test_merging_days_keeps_unknown_climbing_unknown():
    assert elevation.add(None, 120.0) is None and elevation.add(80.0, 120.0) == 200.0
    assert elevation.rows(np.array([[1.0, 2.0, math.nan], [1.0, 2.1, 5.0]])) == [[1.0, 2.0, None], [1.0, 2.1, 5.0]]
    assert elevation.value(math.nan) is None and elevation.value(None) is None and elevation.value(3) == 3.0
