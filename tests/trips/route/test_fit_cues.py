"""A day's cues in a FIT course (trips/route/fit_export.py): each a course point with the turn's FIT type and the
street as its name, in order along the course; and the encoder's CRC as Garmin's SDK computes it. Read back with
Garmin's own decoder."""
from datetime import datetime, timezone

import numpy as np
import pytest
from garmin_fit_sdk import crc_calculator

from tests.trips.route.test_fit_export import read_fit
from trips.route import fit_export
from trips.route.fit_writer import crc16
from trips.route.gpx_export import DayExport

START = datetime(2031, 6, 1, 8, tzinfo=timezone.utc)
LINE = np.array([[45.0 + i * 1e-3, 5.0, 300.0] for i in range(101)])  # about 11.1 km north


def cue(km, turn, street="", instruction=""):
    return {"lat": 45.0 + km / 111.13, "lon": 5.0, "km": km, "turn": turn, "street": street,
            "instruction": instruction}


def test_each_turn_is_its_fit_course_point_type_named_by_its_street():
    turns = ["left", "right", "slight_left", "slight_right", "sharp_left", "sharp_right", "u_turn", "continue",
             "roundabout"]
    cues = [cue(1 + i, turn, f"Rue {i}") for i, turn in enumerate(turns)]
    fit = read_fit(fit_export.course("Cues", [DayExport(1, None, LINE, tuple(LINE[-1]))], START, 15.0, [cues]))
    points = fit["course_point_mesgs"]
    assert [p["type"] for p in points] == ["left", "right", "slight_left", "slight_right", "sharp_left",
                                           "sharp_right", "u_turn", "straight", "generic", "segment_end"]
    assert [p["name"] for p in points[:3]] == ["Rue 0", "Rue 1", "Rue 2"]
    assert points[0]["distance"] == pytest.approx(1000, abs=0.01)
    assert points[0]["timestamp"] == datetime(2031, 6, 1, 8, 4, tzinfo=timezone.utc)  # 1 km at 15 km/h
    distances = [p["distance"] for p in points]
    assert distances == sorted(distances)


def test_a_cue_name_is_cut_at_a_word_to_fifteen_characters():
    cues = [cue(2, "left", "Avenue de la République"), cue(3, "right", "", "Turn right at the church"),
            cue(4, "left", "Rue\u202e cachée")]
    fit = read_fit(fit_export.course("Cues", [DayExport(1, None, LINE, tuple(LINE[-1]))], START, 15.0, [cues]))
    names = [p["name"] for p in fit["course_point_mesgs"][:3]]
    assert names == ["Avenue de la…", "Turn right at…", "Rue cachée"]  # the street, else the instruction
    assert all(len(n) <= fit_export.CUE_CHARS for n in names)


def test_cues_of_the_second_day_sit_after_the_first_day_and_bad_cues_are_left_out():
    second = LINE + [0.2, 0.0, 0.0]
    days = [DayExport(1, None, LINE, tuple(LINE[-1])), DayExport(2, None, second, tuple(second[-1]))]
    bad = [{"lat": float("nan"), "lon": 5.0, "km": 1, "turn": "left", "street": "Nowhere"},
           {"lat": 95.0, "lon": 5.0, "km": 1, "turn": "left", "street": "Off the globe"},
           {"lat": "x", "lon": None, "km": 1, "turn": "left"},
           {**cue(0.5, "jump"), "street": "Odd turn"},
           {**cue(99, "left"), "street": "Past the end"}]
    fit = read_fit(fit_export.course("Two", days, START, 15.0, [None, bad]))
    points = fit["course_point_mesgs"]
    assert [p.get("name") for p in points] == ["Day 1 end", "Odd turn", "Past the end", "Day 2 end"]
    day_one = points[0]["distance"]
    assert points[1]["type"] == "generic" and points[1]["distance"] == pytest.approx(day_one + 500, abs=0.01)
    assert points[2]["distance"] == pytest.approx(points[3]["distance"], abs=0.01)  # held within its day


def test_each_day_s_own_course_carries_its_cues():
    import io
    import zipfile

    second = LINE + [0.2, 0.0, 0.0]
    days = [DayExport(1, None, LINE, tuple(LINE[-1])), DayExport(2, None, second, tuple(second[-1]))]
    data = fit_export.course_per_day("Two", days, START, 15.0, [[cue(1, "left", "A")], [cue(2, "right", "B")]])
    archive = zipfile.ZipFile(io.BytesIO(data))
    second_day = read_fit(archive.read("day-02.fit"))["course_point_mesgs"]
    assert [(p["type"], p.get("name")) for p in second_day][0] == ("right", "B")
    assert second_day[0]["distance"] == pytest.approx(2000, abs=0.01)


def test_a_long_day_thinned_from_its_20_m_line_keeps_the_points_and_its_length():
    from tests.fakes.thirdparty import make_points
    from trips.route import geo

    route = np.array(make_points(45 * 800 + 1, step_m=100.0))  # 45 days: each day's share is 500 points
    lines = [route[d * 800:(d + 1) * 800 + 1] for d in range(45)]
    days = [DayExport(d + 1, None, line, tuple(line[-1])) for d, line in enumerate(lines)]
    simplified = [geo.simplify(line, geo.TOLERANCE_M) for line in lines]
    full = read_fit(fit_export.course("Full", days, START, 15.0))
    fast = read_fit(fit_export.course("Full", days, START, 15.0, simplified=simplified))
    assert len(full["record_mesgs"]) < 45 * 500  # thinned
    assert fast["record_mesgs"] == full["record_mesgs"] and fast["lap_mesgs"] == full["lap_mesgs"]


@pytest.mark.parametrize("data", [b"", b".FIT", bytes(range(256)) * 3])
def test_the_crc_is_garmin_s(data):
    assert crc16(data) == crc_calculator.CrcCalculator.calculate_crc(bytearray(data), 0, len(data))
