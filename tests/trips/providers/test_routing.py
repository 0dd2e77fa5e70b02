"""trips.services.routing: polyline6 decoding, the Valhalla request and answer, failures, the straight fallback."""
from __future__ import annotations

import random
import time

import pytest

from tests.fakes.thirdparty import make_points
from tests.fakes.valhalla import encode_polyline6, geodesic_km
from trips.route.geo import distance_m
from trips.providers.valhalla import (
    MAX_RESPONSE_BYTES, NO_ROUTE, REDIRECTED, TIMEOUT, TOO_LARGE, TOO_LONG, UNAVAILABLE, UNREADABLE,
    RoutingConfig, RoutingError, decode_polyline6,
)
from trips.services.routing import reroute


START, WAYPOINT, END = (45.0, 5.0, 210.0), (45.05, 5.08), (45.1, 5.02, 250.0)


# --- polyline6 --------------------------------------------------------------------------------------------

def test_decode_hand_checked_samples():
    # Google's documented sample, whose integers read at 6 digits are the coordinates divided by 10.
    decoded = decode_polyline6("_p~iF~ps|U_ulLnnqC_mqNvxq`@")
    flat = [value for pair in decoded for value in pair]
    assert flat == pytest.approx([3.85, -12.02, 4.07, -12.095, 4.3252, -12.6453], abs=1e-9)
    assert decode_polyline6("AA") == [(1e-6, 1e-6)]  # 1 -> zig-zag 2 -> chr(2 + 63)
    assert decode_polyline6("@@") == [(-1e-6, -1e-6)]  # -1 -> zig-zag 1 -> chr(1 + 63)
    assert decode_polyline6("") == []


def test_encode_decode_round_trip_on_random_points():
    rng = random.Random(1234)
    points = [(rng.uniform(-90, 90), rng.uniform(-180, 180)) for _ in range(500)]
    points += [(90.0, 180.0), (-90.0, -180.0), (0.0, 0.0), (1e-7, -1e-7)]
    decoded = decode_polyline6(encode_polyline6(points))
    assert len(decoded) == len(points)
    for (lat, lon), (dlat, dlon) in zip(points, decoded):
        assert abs(lat - dlat) <= 1e-6 and abs(lon - dlon) <= 1e-6


@pytest.mark.parametrize("bad", ["_p~iF~ps|U_", "AA_", "A", "A\x7f", "A ", "A\u00e9", "_" * 20 + "A"])
def test_decode_rejects_malformed_polylines(bad):
    with pytest.raises(ValueError):
        decode_polyline6(bad)


# --- Valhalla ---------------------------------------------------------------------------------------------

def test_request_body_and_route(fake_valhalla):
    points = [(p[0], p[1]) for p in make_points(30, start=(45.0, 5.0), step_m=400.0)]
    fake_valhalla.set_route(points, length_km=11.6)
    result = reroute(START, WAYPOINT, END, fake_valhalla.config(user_agent="BTP-test/2"))

    assert fake_valhalla.paths == ["/route"]
    body = fake_valhalla.bodies[0]
    assert body["costing"] == "bicycle"
    assert body["directions_type"] == "none"
    assert body["locations"] == [
        {"lat": 45.0, "lon": 5.0, "type": "break"},
        {"lat": 45.05, "lon": 5.08, "type": "through"},
        {"lat": 45.1, "lon": 5.02, "type": "break"},
    ]
    assert fake_valhalla.headers[0]["user-agent"] == "BTP-test/2"
    assert fake_valhalla.headers[0]["content-type"] == "application/json"

    assert result.approximate is False
    assert result.distance_km == pytest.approx(11.6)
    assert len(result.geometry) == len(points)
    for (lat, lon), (rlat, rlon, rele) in zip(points, result.geometry):
        assert abs(lat - rlat) <= 1e-6 and abs(lon - rlon) <= 1e-6 and rele == 0.0


def test_legs_are_joined_without_duplicating_the_joint(fake_valhalla):
    points = [(p[0], p[1]) for p in make_points(20)]
    fake_valhalla.set_route(points, split_at=8)
    result = reroute(START, WAYPOINT, END, fake_valhalla.config())
    assert len(result.geometry) == 20
    for (lat, lon), (rlat, rlon, _) in zip(points, result.geometry):
        assert abs(lat - rlat) <= 1e-6 and abs(lon - rlon) <= 1e-6
    assert result.distance_km == pytest.approx(geodesic_km(points), abs=1e-3)


def test_base_url_with_trailing_slash_and_miles(fake_valhalla):
    points = [(45.0, 5.0), (45.01, 5.01)]
    fake_valhalla.set_route(points, length_km=1.0, units="miles")
    result = reroute(START, WAYPOINT, END, fake_valhalla.config(valhalla_url=fake_valhalla.base_url + "/"))
    assert fake_valhalla.paths == ["/route"]
    assert result.distance_km == pytest.approx(1.609344)


@pytest.mark.parametrize("code, reason", [(442, NO_ROUTE), (171, NO_ROUTE), (170, NO_ROUTE), (154, TOO_LONG)])
def test_valhalla_errors(fake_valhalla, code, reason):
    fake_valhalla.fail(400, error_code=code)
    with pytest.raises(RoutingError) as info:
        reroute(START, WAYPOINT, END, fake_valhalla.config())
    assert info.value.reason == reason


def test_other_client_error_names_the_status_not_the_body(fake_valhalla):
    fake_valhalla.fail(400, error_code=999, error="secret internal detail")
    with pytest.raises(RoutingError) as info:
        reroute(START, WAYPOINT, END, fake_valhalla.config())
    assert "400" in str(info.value.reason) and "secret" not in str(info.value.reason)


@pytest.mark.parametrize("status", [500, 502, 503, 429])
def test_server_errors(fake_valhalla, status):
    fake_valhalla.fail(status)
    with pytest.raises(RoutingError) as info:
        reroute(START, WAYPOINT, END, fake_valhalla.config())
    assert info.value.reason == UNAVAILABLE
    assert "must never reach" not in str(info.value)


def test_timeout(fake_valhalla):
    fake_valhalla.set_route([(45.0, 5.0), (45.1, 5.1)])
    fake_valhalla.delay(3.0)
    began = time.monotonic()
    with pytest.raises(RoutingError) as info:
        reroute(START, WAYPOINT, END, fake_valhalla.config(timeout=0.3))
    assert info.value.reason == TIMEOUT
    assert time.monotonic() - began < 2.0


def test_slow_body_hits_the_overall_deadline(fake_valhalla):
    fake_valhalla.set_route([(45.0, 5.0), (45.1, 5.1)])
    fake_valhalla.trickle(0.05)  # each read is quick, the whole body would take several seconds
    began = time.monotonic()
    with pytest.raises(RoutingError) as info:
        reroute(START, WAYPOINT, END, fake_valhalla.config(timeout=0.5))
    assert info.value.reason == TIMEOUT
    assert time.monotonic() - began < 1.5


@pytest.mark.parametrize("body", [
    b"{not json", b"", b"[]", b'{"trip": null}', b'{"trip": {"legs": [], "summary": {"length": 1}}}',
    b'{"trip": {"legs": [{"shape": "_p~iF~ps|U"}]}}',  # no summary
    b'{"trip": {"legs": [{"shape": 12}], "summary": {"length": 1}}}',
    b'{"trip": {"legs": [{"shape": "_p~iF~ps|U_"}], "summary": {"length": 1}}}',  # truncated shape
    b'{"trip": {"legs": [{"shape": "_p~iF~ps|U_ulLnnqC"}], "summary": {"length": "12"}}}',
    b'{"trip": {"legs": [{"shape": "_p~iF~ps|U_ulLnnqC"}], "summary": {"length": -1}}}',
    b'{"trip": {"legs": [{"shape": "AA"}], "summary": {"length": 1}}}',  # a single point
    b"[" * 100_000,  # nesting deeper than the JSON parser's recursion limit
    "\u00e9".encode("latin-1"),
])
def test_unreadable_answers(fake_valhalla, body):
    fake_valhalla.set_body(body)
    with pytest.raises(RoutingError) as info:
        reroute(START, WAYPOINT, END, fake_valhalla.config())
    assert info.value.reason == UNREADABLE


def test_out_of_range_shape_is_unreadable(fake_valhalla):
    fake_valhalla.set_body(
        b'{"trip": {"legs": [{"shape": "' + encode_polyline6([(95.0, 5.0), (45.0, 5.0)]).encode()
        + b'"}], "summary": {"length": 1}}}')
    with pytest.raises(RoutingError) as info:
        reroute(START, WAYPOINT, END, fake_valhalla.config())
    assert info.value.reason == UNREADABLE


def test_redirect_is_not_followed(fake_valhalla):
    fake_valhalla.redirect(fake_valhalla.base_url + "/elsewhere")
    with pytest.raises(RoutingError) as info:
        reroute(START, WAYPOINT, END, fake_valhalla.config())
    assert info.value.reason == REDIRECTED
    assert fake_valhalla.paths == ["/route"]


def test_oversized_answer(fake_valhalla):
    fake_valhalla.set_body(b" " * (MAX_RESPONSE_BYTES + 1))
    with pytest.raises(RoutingError) as info:
        reroute(START, WAYPOINT, END, fake_valhalla.config())
    assert info.value.reason == TOO_LARGE


def test_unreachable_service():
    with pytest.raises(RoutingError) as info:
        reroute(START, WAYPOINT, END, RoutingConfig(valhalla_url="http://127.0.0.1:9", timeout=1.0))
    assert info.value.reason == UNAVAILABLE


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/", "127.0.0.1:8002", "http://", "http://[::1"])
def test_misconfigured_url(url):
    with pytest.raises(RoutingError):
        reroute(START, WAYPOINT, END, RoutingConfig(valhalla_url=url))


# --- fallback and input -----------------------------------------------------------------------------------

@pytest.mark.parametrize("url", [None, ""])
def test_straight_detour_fallback(url):
    result = reroute(START, WAYPOINT, END, RoutingConfig(valhalla_url=url))
    assert result.approximate is True
    assert result.geometry == [START, (45.05, 5.08, 0.0), END]
    legs = distance_m(*START[:2], *WAYPOINT) + distance_m(*WAYPOINT, *END[:2])
    assert result.distance_km == pytest.approx(legs / 1000.0, rel=1e-9)
    assert result.distance_km > distance_m(*START[:2], *END[:2]) / 1000.0


@pytest.mark.parametrize("bad", [(91.0, 5.0), (45.0, 181.0), (float("nan"), 5.0), (45.0,), (1, 2, 3, 4), "ab",
                                 None, ("x", 5.0)])
def test_malformed_points_raise_value_error(bad):
    with pytest.raises(ValueError):
        reroute(START, bad, END, RoutingConfig(valhalla_url=None))
