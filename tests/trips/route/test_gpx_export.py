"""trips.route.gpx_export: GPX 1.1 validity (schema in tests/data/gpx11.xsd), round trip through trips.route.gpx,
escaping and cleaning of text, links, rest days and empty trips."""
from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo
from pathlib import Path

import numpy as np
import pytest
from lxml import etree

from tests.fakes.thirdparty import make_points
from trips.route.gpx import NO_POINTS, GpxError, parse_gpx
from trips.route.gpx_export import GPX_NS, DayExport, clean_text, write_gpx

NS = {"g": GPX_NS}
XSD = Path(__file__).resolve().parents[2] / "data" / "gpx11.xsd"
HOSTILE = "A <b>&amp;</b> \"quoted\" 'single' \x00\x01\x08\x0b\x0c\x1f\x7f\ud800\udfff\ufffe\uffff tab\there 🚲🏔 é"
HOSTILE_CLEAN = "A <b>&amp;</b> \"quoted\" 'single' \x7f tab\there 🚲🏔 é"


@pytest.fixture(scope="module")
def schema() -> etree.XMLSchema:
    parser = etree.XMLParser(no_network=True, resolve_entities=False)
    return etree.XMLSchema(etree.parse(str(XSD), parser))


def valid(schema: etree.XMLSchema, data: bytes) -> etree._Element:
    """The parsed document, after asserting it is GPX 1.1."""
    doc = etree.fromstring(data, etree.XMLParser(no_network=True, resolve_entities=False))
    assert schema.validate(doc), schema.error_log
    return doc


def sample_days() -> list[DayExport]:
    day1 = make_points(40, start=(45.0, 5.0), step_m=250.0)
    day3 = make_points(25, start=(45.3, 5.2), step_m=300.0, ele_start=480.0)
    return [
        DayExport(1, "Lyon → Vienne", day1, day1[-1], "Vienne",
                  {"name": "Hôtel du Rhône", "lat": day1[-1][0] + 0.001, "lon": day1[-1][1], "type": "hotel",
                   "url": "https://example.com/hotel?a=1&b=2"}),
        DayExport(2, None, [day1[-1]], day1[-1], "Vienne", {"name": "Hôtel du Rhône", "lat": day1[-1][0],
                                                            "lon": day1[-1][1]}, is_rest_day=True),
        DayExport(3, "Vienne → Valence", day3, day3[-1], None, None),
    ]


def test_sample_trip_is_valid_gpx_11(schema):
    data = write_gpx("Rhône 2025", sample_days(), time=datetime(2025, 5, 1, 8, 30, tzinfo=timezone.utc))
    assert data.startswith(b"<?xml") and b"<!DOCTYPE" not in data
    doc = valid(schema, data)
    assert doc.get("version") == "1.1" and doc.get("creator") == "BTP"
    assert doc.get("{http://www.w3.org/2001/XMLSchema-instance}schemaLocation") == (
        "http://www.topografix.com/GPX/1/1 http://www.topografix.com/GPX/1/1/gpx.xsd")
    assert doc.xpath("g:metadata/g:name/text()", namespaces=NS) == ["Rhône 2025"]
    assert doc.xpath("g:metadata/g:time/text()", namespaces=NS) == ["2025-05-01T08:30:00Z"]
    assert [etree.QName(el).localname for el in doc] == ["metadata"] + ["wpt"] * 5 + ["trk"] * 2

    wpts = doc.xpath("g:wpt", namespaces=NS)
    assert [w.findtext("g:name", namespaces=NS) for w in wpts] == [
        "Day 1 end", "Hôtel du Rhône", "Day 2: rest day", "Hôtel du Rhône", "Day 3 end"]
    assert [w.findtext("g:type", namespaces=NS) for w in wpts] == [
        "day_end", "accommodation", "rest_day", "accommodation", "day_end"]
    assert [w.findtext("g:sym", namespaces=NS) for w in wpts] == [
        "Flag, Blue", "Lodging", "Flag, Blue", "Lodging", "Flag, Blue"]
    assert [w.findtext("g:desc", namespaces=NS) for w in wpts] == [
        "Vienne", "Day 1 accommodation (hotel)", "Vienne", "Day 2 accommodation", "Vienne → Valence"]
    assert [etree.QName(el).localname for el in wpts[0]] == ["ele", "name", "desc", "sym", "type"]
    assert [etree.QName(el).localname for el in wpts[1]] == ["name", "desc", "link", "sym", "type"]
    assert wpts[1].find("g:link", namespaces=NS).get("href") == "https://example.com/hotel?a=1&b=2"
    assert wpts[3].find("g:link", namespaces=NS) is None

    trks = doc.xpath("g:trk", namespaces=NS)
    assert [t.findtext("g:name", namespaces=NS) for t in trks] == ["Day 1: Lyon → Vienne", "Day 3: Vienne → Valence"]
    assert [t.findtext("g:number", namespaces=NS) for t in trks] == ["1", "3"]
    assert [t.findtext("g:type", namespaces=NS) for t in trks] == ["cycling", "cycling"]
    assert [len(t.xpath("g:trkseg", namespaces=NS)) for t in trks] == [1, 1]
    first = trks[0].find("g:trkseg/g:trkpt", namespaces=NS)
    assert first.get("lat") == "45.0000000" and first.get("lon") == "5.0000000"
    assert first.findtext("g:ele", namespaces=NS) == "250.0"


def test_round_trip_through_parse_gpx():
    days = sample_days()
    parsed = parse_gpx(write_gpx("Rhône 2025", days), split_tracks=True)
    riding = [d for d in days if not d.is_rest_day]
    assert len(parsed.tracks) == len(riding)
    for day, track in zip(riding, parsed.tracks):
        expected = np.asarray(day.geometry, dtype=float)
        assert track.shape == expected.shape
        assert np.abs(track[:, :2] - expected[:, :2]).max() <= 1e-6
        assert np.abs(track[:, 2] - expected[:, 2]).max() <= 0.05 + 1e-9
    # parse_gpx takes the document's <metadata><name>: the trip title comes back.
    assert parsed.title == "Rhône 2025"


def test_timed_days_carry_each_point_s_time_at_the_pace_and_stay_valid(schema):
    """With a pace, each track point carries its UTC time from its day's departure (after <ele>, as the schema
    orders them); a day without a departure, or a document without a pace, has none; the upload reads it back."""
    days = sample_days()
    leaving = datetime(2025, 5, 1, 8, tzinfo=ZoneInfo("America/New_York"))
    days[0] = dataclasses.replace(days[0], departure=leaving)
    days[2] = dataclasses.replace(days[2], departure=leaving + timedelta(days=2))
    doc = valid(schema, write_gpx("Timed", days, speed_kmh=20.0))
    first, third = doc.xpath("g:trk", namespaces=NS)
    stamps = [datetime.fromisoformat(t) for t in first.xpath(".//g:trkpt/g:time/text()", namespaces=NS)]
    assert len(stamps) == 40 and stamps[0] == datetime(2025, 5, 1, 12, tzinfo=timezone.utc)  # 08:00 EDT
    assert (stamps[-1] - stamps[0]).total_seconds() == pytest.approx(39 * 250 / 20 * 3.6, abs=1)  # 9.75 km at 20
    assert [etree.QName(el).localname for el in first.find("g:trkseg/g:trkpt", namespaces=NS)] == ["ele", "time"]
    assert third.xpath(".//g:trkpt[1]/g:time/text()", namespaces=NS) == ["2025-05-03T12:00:00Z"]
    days[2] = dataclasses.replace(days[2], departure=None)
    assert not valid(schema, write_gpx("Timed", days, speed_kmh=20.0)).xpath("g:trk[2]//g:time", namespaces=NS)
    assert not valid(schema, write_gpx("Untimed", days)).xpath("//g:trkpt/g:time", namespaces=NS)
    assert len(parse_gpx(write_gpx("Timed", days, speed_kmh=20.0), split_tracks=True).tracks) == 2


def test_round_trip_keeps_seven_decimals_and_one_decimal_elevation():
    pts = [(45.12345678, 5.98765432, 123.456), (-33.00000004, -70.99999996, -12.34)]
    day = DayExport(1, "x", pts, pts[-1], None)
    track = parse_gpx(write_gpx(None, [day])).points
    assert np.abs(track[:, :2] - np.array(pts)[:, :2]).max() <= 1e-6
    assert track[:, 2].tolist() == [123.5, -12.3]


def test_hostile_text_is_escaped_or_cleaned(schema):
    assert clean_text(HOSTILE) == HOSTILE_CLEAN
    assert clean_text("Camping " + "Grand " * 200, 30) == "Camping Grand Grand Grand…"  # at a word
    day = DayExport(1, HOSTILE, make_points(5), make_points(5)[-1], HOSTILE,
                    {"name": HOSTILE, "lat": 45.0, "lon": 5.0, "type": HOSTILE, "url": "https://example.com/"})
    data = write_gpx(HOSTILE, [day], creator="BTP " + HOSTILE)
    doc = valid(schema, data)
    assert doc.xpath("g:metadata/g:name/text()", namespaces=NS) == [HOSTILE_CLEAN]
    assert doc.get("creator") == "BTP " + HOSTILE_CLEAN
    assert doc.xpath("g:wpt[1]/g:desc/text()", namespaces=NS) == [HOSTILE_CLEAN]
    assert doc.xpath("g:wpt[2]/g:name/text()", namespaces=NS) == [HOSTILE_CLEAN]
    assert doc.xpath("g:trk/g:name/text()", namespaces=NS) == ["Day 1: " + HOSTILE_CLEAN]
    assert parse_gpx(data).title == HOSTILE_CLEAN
    assert b"<b>" not in data  # escaped, never markup


@pytest.mark.parametrize("text", ["", "   ", "\x00\x01\x02", "\ud800", None])
def test_text_that_cleans_to_nothing_is_left_out(schema, text):
    day = DayExport(1, text, make_points(3), make_points(3)[-1], text)
    doc = valid(schema, write_gpx(text, [day]))
    assert doc.xpath("g:metadata/g:name", namespaces=NS) == []
    assert doc.xpath("g:wpt/g:desc", namespaces=NS) == []
    assert doc.xpath("g:trk/g:name/text()", namespaces=NS) == ["Day 1"]


@pytest.mark.parametrize("url", [
    "javascript:alert(1)", "JavaScript:alert(document.cookie)", " javascript:alert(1)", "java\tscript:alert(1)",
    "data:text/html,<script>alert(1)</script>", "vbscript:msgbox", "file:///etc/passwd", "//evil.example/",
    "/relative", "https://user:pw@evil.example/", "https://", "http://[::1", "https://a.example/ spaced",
    "https://a.example/\x00", 42, None, "https://a.example/" + "x" * 3000,
])
def test_unsafe_accommodation_links_are_dropped(schema, url):
    day = DayExport(1, None, make_points(3), make_points(3)[-1], None,
                    {"name": "Inn", "lat": 45.0, "lon": 5.0, "url": url})
    doc = valid(schema, write_gpx("t", [day]))
    assert doc.xpath("//g:link", namespaces=NS) == []
    assert doc.xpath("g:wpt[2]/g:name/text()", namespaces=NS) == ["Inn"]


@pytest.mark.parametrize("url, href", [
    ("http://a.example/x", "http://a.example/x"),
    ("HTTPS://a.example/chambre?n=1&m=2#top", "HTTPS://a.example/chambre?n=1&m=2#top"),
    ("https://a.example/hôtel/«x»", "https://a.example/h%C3%B4tel/%C2%ABx%C2%BB"),
    ("https://a.example/a%20b\"<>", "https://a.example/a%20b%22%3C%3E"),
])
def test_http_links_are_kept_and_encoded(schema, url, href):
    day = DayExport(1, None, make_points(3), make_points(3)[-1], None,
                    {"name": "Inn", "lat": 45.0, "lon": 5.0, "url": url})
    doc = valid(schema, write_gpx("t", [day]))
    assert doc.xpath("//g:link/@href", namespaces=NS) == [href]


def test_empty_trip_is_valid_but_has_no_track(schema):
    data = write_gpx("Nothing yet", [])
    doc = valid(schema, data)
    assert doc.xpath("g:trk | g:wpt", namespaces=NS) == []
    assert doc.xpath("g:metadata/g:name/text()", namespaces=NS) == ["Nothing yet"]
    with pytest.raises(GpxError) as info:
        parse_gpx(data)
    assert info.value.message == NO_POINTS


def test_rest_days_only_have_no_track(schema):
    days = [DayExport(1, "Rest", [], (45.0, 5.0, 200.0), "Lyon", None, is_rest_day=True),
            DayExport(2, None, [(45.0, 5.0, 200.0)], (45.0, 5.0, 200.0), None, None, is_rest_day=True)]
    doc = valid(schema, write_gpx("t", days))
    assert doc.xpath("g:trk", namespaces=NS) == []
    assert doc.xpath("g:wpt/g:name/text()", namespaces=NS) == ["Day 1: rest day", "Day 2: rest day"]
    assert doc.xpath("g:wpt/g:desc/text()", namespaces=NS) == ["Lyon"]
    with pytest.raises(GpxError):
        parse_gpx(write_gpx("t", days))


def test_riding_day_without_geometry_has_its_end_but_no_track(schema):
    doc = valid(schema, write_gpx("t", [DayExport(4, "x", [], (45.0, 5.0), None)]))
    assert doc.xpath("g:wpt/g:name/text()", namespaces=NS) == ["Day 4 end"]
    assert doc.xpath("g:wpt/g:ele", namespaces=NS) == []  # (lat, lon) end: no elevation
    assert doc.xpath("g:trk", namespaces=NS) == []


def test_edge_coordinates_numpy_input_and_missing_elevation(schema):
    pts = np.array([[90.0, 180.0, 0.0], [-90.0, -180.0, np.nan], [0.0, 179.99999999, -0.01], [-0.0, -0.0, 5.0]])
    doc = valid(schema, write_gpx("t", [DayExport(np.int64(2), "x", pts, pts[0], None)]))
    trkpts = doc.xpath("g:trk/g:trkseg/g:trkpt", namespaces=NS)
    assert [(p.get("lat"), p.get("lon")) for p in trkpts] == [
        ("90.0000000", "-180.0000000"), ("-90.0000000", "-180.0000000"), ("0.0000000", "-180.0000000"),
        ("0.0000000", "0.0000000")]
    assert [p.findtext("g:ele", namespaces=NS) for p in trkpts] == ["0.0", None, "0.0", "5.0"]
    two_columns = valid(schema, write_gpx("t", [DayExport(1, "x", [(45.0, 5.0), (45.1, 5.1)], (45.1, 5.1), None)]))
    assert two_columns.xpath("//g:ele", namespaces=NS) == []


@pytest.mark.parametrize("acc", [{"name": "No position"}, {"name": "Bad", "lat": "x", "lon": 5.0},
                                 {"name": "Far", "lat": 95.0, "lon": 5.0}, {"name": "Nan", "lat": float("nan"),
                                                                             "lon": 5.0}, "not a dict"])
def test_accommodation_without_a_valid_position_is_left_out(schema, acc):
    doc = valid(schema, write_gpx("t", [DayExport(1, "x", make_points(3), make_points(3)[-1], None, acc)]))
    assert doc.xpath("g:wpt/g:type/text()", namespaces=NS) == ["day_end"]


@pytest.mark.parametrize("day", [
    DayExport(1, "x", [(float("nan"), 5.0, 0.0)], (45.0, 5.0), None),
    DayExport(1, "x", [(45.0, float("inf"), 0.0)], (45.0, 5.0), None),
    DayExport(1, "x", [(91.0, 5.0, 0.0)], (45.0, 5.0), None),
    DayExport(1, "x", [(45.0, 180.5, 0.0)], (45.0, 5.0), None),
    DayExport(1, "x", [(45.0, 5.0, 0.0, 1.0)], (45.0, 5.0), None),
    DayExport(1, "x", [(45.0, 5.0)], None, None),
    DayExport(1, "x", [(45.0, 5.0)], (95.0, 5.0), None),
    DayExport(-1, "x", [(45.0, 5.0)], (45.0, 5.0), None),
    DayExport(True, "x", [(45.0, 5.0)], (45.0, 5.0), None),
    DayExport("1", "x", [(45.0, 5.0)], (45.0, 5.0), None),
])
def test_bad_days_raise_value_error(day):
    with pytest.raises(ValueError):
        write_gpx("t", [day])


def test_time_defaults_to_now_in_utc():
    before = datetime.now(timezone.utc).replace(microsecond=0)
    doc = etree.fromstring(write_gpx("t", []))
    stamp = datetime.strptime(doc.findtext("g:metadata/g:time", namespaces=NS), "%Y-%m-%dT%H:%M:%SZ")
    assert before <= stamp.replace(tzinfo=timezone.utc) <= datetime.now(timezone.utc)
    naive = etree.fromstring(write_gpx("t", [], time=datetime(2025, 1, 2, 3, 4, 5)))
    assert naive.findtext("g:metadata/g:time", namespaces=NS) == "2025-01-02T03:04:05Z"


@pytest.mark.parametrize("body", [
    '<wpt lat="1" lon="2"><name>a</name><ele>3</ele></wpt>',  # ele after name
    '<trk><name>a</name></trk><wpt lat="1" lon="2"/>',  # wpt after trk
    '<wpt lat="1" lon="180"/>',  # longitude must be < 180
    '<wpt lat="90.1" lon="0"/>',
    '<wpt lat="1e1" lon="0"/>',  # xsd:decimal has no exponent
    '<wpt lat="1"/>',
    '<trk><number>-1</number></trk>',
    '<wpt lat="1" lon="2"><link/></wpt>',  # href is required
    '<metadata><time>yesterday</time></metadata>',
    '<trk><trkseg><trkpt lat="1" lon="2"><fix>4d</fix></trkpt></trkseg></trk>',
])
def test_schema_rejects_invalid_documents(schema, body):
    """The schema is not vacuous: order, ranges and types are enforced."""
    doc = etree.fromstring(f'<gpx xmlns="{GPX_NS}" version="1.1" creator="t">{body}</gpx>'.encode())
    assert not schema.validate(doc)
