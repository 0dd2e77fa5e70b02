"""Route sources: link parsing, fetching against a real local fake of Komoot/Strava/RideWithGPS, the cache."""
import logging
import socket

import numpy as np
import pytest
import redis as redis_lib

from tests.fakes.thirdparty import gpx_from_points, komoot_html, make_points
from trips.route import source_formats, sources
from trips.providers.routes import SourceConfig
from trips.services.route_links import fetch_route
from trips.route.source_formats import FetchError
from trips.route.sources import SourceRef, UnsupportedSource, parse_source_url




def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Sleeps(list):
    def __call__(self, seconds):
        self.append(seconds)


# --- links ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("url, kind, rid", [
    ("https://www.komoot.com/tour/123", "komoot_tour", "123"),
    ("https://www.komoot.com/fr-fr/tour/123", "komoot_tour", "123"),
    ("https://www.komoot.com/tour/123?share_token=abc&ref=wtd", "komoot_tour", "123"),
    ("https://www.komoot.com/tour/123/#map", "komoot_tour", "123"),
    ("  https://www.komoot.com/tour/123  ", "komoot_tour", "123"),
    ("https://www.komoot.com/collection/456", "komoot_collection", "456"),
    ("https://www.komoot.com/de-de/collection/456?ref=x", "komoot_collection", "456"),
    ("https://www.strava.com/routes/789", "strava_route", "789"),
    ("https://ridewithgps.com/routes/42?privacy_code=z", "ride_with_gps", "42"),
    ("https://ridewithgps.com/routes/" + "9" * 20, "ride_with_gps", "9" * 20),
])
def test_supported_links(url, kind, rid):
    assert parse_source_url(url) == SourceRef(kind, rid)
    assert kind in sources.SOURCE_KINDS


@pytest.mark.parametrize("url", [
    "http://www.komoot.com/tour/123", "HTTP://www.komoot.com/fr-fr/collection/9", "http://www.strava.com/routes/5",
    "http://ridewithgps.com/routes/42?privacy_code=z",
])
def test_an_http_link_is_told_that_https_is_required(url):
    with pytest.raises(UnsupportedSource) as info:
        parse_source_url(url)
    assert "https" in str(info.value) and "http://" in str(info.value)
    assert "komoot.com/tour" not in str(info.value) and "42" not in str(info.value)  # the link is not echoed


@pytest.mark.parametrize("url", ["http://www.komoot.com.evil.example/tour/1", "http://evil.example/routes/1"])
def test_an_http_lookalike_still_gets_the_supported_forms(url):
    with pytest.raises(UnsupportedSource) as info:
        parse_source_url(url)
    assert "https://www.komoot.com/tour/<id>" in str(info.value) and "evil" not in str(info.value)


@pytest.mark.parametrize("url", [
    "https://komoot.com/tour/123",
    "https://www.komoot.de/tour/123",
    "https://www.komoot.com.evil.example/tour/123",
    "https://www.komoot.com@evil.example/tour/1",
    "https://evil.example/https://www.komoot.com/tour/1",
    "https://www.komoot.com:443/tour/1",
    "https://www.komoot.com/FR-fr/tour/1",
    "https://www.komoot.com/tour/abc",
    "https://www.komoot.com/tour/12abc",
    "https://www.komoot.com/tour/",
    "https://www.komoot.com/tour/\u0661\u0662",
    "https://www.komoot.com/tour/1\nhttps://evil.example",
    "https://www.strava.com/routes/" + "1" * 21,
    "https://www.strava.com/activities/123",
    "https://ridewithgps.com.evil.example/routes/1",
    "https://ridewithgps.com/trips/1",
    "https://www.komoot.com/tour/1?" + "a" * 3000,
    "",
    None,
])
def test_unsupported_links(url):
    with pytest.raises(UnsupportedSource) as info:
        parse_source_url(url)
    message = str(info.value)
    assert "https://www.komoot.com/tour/<id>" in message and "https://ridewithgps.com/routes/<id>" in message
    assert "evil" not in message and "abc" not in message


def test_forged_ref_is_refused_before_any_request(fake_thirdparty):
    for ref in (SourceRef("komoot_tour", "1/../../admin"), SourceRef("gpx_upload", "1")):
        with pytest.raises(UnsupportedSource):
            fetch_route(ref, fake_thirdparty.source_config())
    assert fake_thirdparty.requests == []


# --- each source end to end -------------------------------------------------------------------------------

def test_komoot_tour(fake_thirdparty):
    points = make_points(30)
    fake_thirdparty.add_komoot_tour(123, "Col de la Croix", points)
    config = fake_thirdparty.source_config()
    route = fetch_route(parse_source_url("https://www.komoot.com/fr-fr/tour/123?ref=x"), config)
    assert route.title == "Col de la Croix"
    assert len(route.tracks) == 1 and route.tracks[0].shape == (30, 3)
    np.testing.assert_allclose(route.tracks[0], np.array(points))
    [request] = fake_thirdparty.requests
    assert request.path == "/tour/123"
    assert request.headers["accept"] == "text/html" and request.headers["user-agent"] == config.user_agent


def test_komoot_tour_default_title_and_js_escapes(fake_thirdparty):
    fake_thirdparty.add_komoot_tour(1, None, make_points(3))
    assert fetch_route(SourceRef("komoot_tour", "1"), fake_thirdparty.source_config()).title == "Komoot Tour"
    # A JS string literal may use \' and \xHH, which JSON does not know.
    literal = ("{\\\"page\\\":{\\\"_embedded\\\":{\\\"tour\\\":{\\\"name\\\":\\\"L\\'Alpe \\xe9t\\xe9\\\","
               "\\\"_embedded\\\":{\\\"coordinates\\\":{\\\"items\\\":[{\\\"lat\\\":45,\\\"lng\\\":6,\\\"alt\\\":1},"
               "{\\\"lat\\\":45.1,\\\"lng\\\":6.1}]}}}}}}")
    page = f'<script>kmtBoot.setProps("{literal}");</script>'.encode()
    fake_thirdparty.set_response("/tour/2", page, "text/html")
    route = fetch_route(SourceRef("komoot_tour", "2"), fake_thirdparty.source_config())
    assert route.title == "L'Alpe été"
    np.testing.assert_allclose(route.tracks[0], [[45, 6, 1], [45.1, 6.1, np.nan]])  # no alt: unknown, not 0


def test_komoot_page_without_payload(fake_thirdparty):
    fake_thirdparty.set_response("/tour/3", b"<html>maintenance</html>", "text/html")
    with pytest.raises(FetchError, match="could not be read"):
        fetch_route(SourceRef("komoot_tour", "3"), fake_thirdparty.source_config())


def test_komoot_collection_skips_failing_tour(fake_thirdparty, redis_client):
    for tid in (11, 13):
        fake_thirdparty.add_komoot_tour(tid, f"Day {tid}", make_points(10 + tid, start=(45.0 + tid / 100, 5.0)))
    fake_thirdparty.add_collection(7, "Tour de Savoie", [11, 12, 13])  # 12 is unknown: 404
    config = fake_thirdparty.source_config()
    route = fetch_route(parse_source_url("https://www.komoot.com/collection/7"), config, redis_client)
    assert route.title == "Tour de Savoie"
    assert [len(t) for t in route.tracks] == [21, 23]
    assert {r.path for r in fake_thirdparty.requests} == {"/collection/7", "/tour/11", "/tour/12", "/tour/13"}
    # The collection warmed each fetched tour's cache.
    before = len(fake_thirdparty.requests)
    tour = fetch_route(SourceRef("komoot_tour", "13"), config, redis_client)
    assert tour.title == "Day 13" and len(fake_thirdparty.requests) == before


def test_komoot_collection_defaults_and_failures(fake_thirdparty):
    config = fake_thirdparty.source_config()
    fake_thirdparty.add_komoot_tour(21, "x", make_points(5))
    fake_thirdparty.add_collection(8, None, [21])
    assert fetch_route(SourceRef("komoot_collection", "8"), config).title == "Komoot Collection"
    fake_thirdparty.add_collection(9, "all broken", [31, 32])
    fake_thirdparty.fail("/tour/31", 403)
    with pytest.raises(FetchError, match="none of the collection's tours"):
        fetch_route(SourceRef("komoot_collection", "9"), config)
    fake_thirdparty.add_collection(10, "empty", [])
    with pytest.raises(FetchError, match="^The route has no points.$"):
        fetch_route(SourceRef("komoot_collection", "10"), config)


def test_strava_route(fake_thirdparty):
    points = make_points(40)
    fake_thirdparty.add_strava(789, gpx_from_points(points, "Morning ride"))
    route = fetch_route(parse_source_url("https://www.strava.com/routes/789"), fake_thirdparty.source_config())
    assert route.title == "Morning ride"
    np.testing.assert_allclose(np.concatenate(route.tracks), np.array(points))
    [request] = fake_thirdparty.requests
    assert request.path == "/routes/789/export_gpx" and request.headers["accept"] == "application/gpx+xml"


def test_strava_unparseable_or_empty_gpx(fake_thirdparty):
    fake_thirdparty.add_strava(790, b"<html>login required</html")
    with pytest.raises(FetchError, match="could not be read"):
        fetch_route(SourceRef("strava_route", "790"), fake_thirdparty.source_config())
    fake_thirdparty.add_strava(791, gpx_from_points([], "empty"))
    with pytest.raises(FetchError) as info:
        fetch_route(SourceRef("strava_route", "791"), fake_thirdparty.source_config())
    assert str(info.value) == "The route has no points."


@pytest.mark.parametrize("style", ["xy", "latlng"])
def test_ridewithgps_route(fake_thirdparty, style):
    points = make_points(25)
    fake_thirdparty.add_rwgps(42, "Gravel loop", points, style=style)
    route = fetch_route(parse_source_url("https://ridewithgps.com/routes/42"), fake_thirdparty.source_config())
    assert route.title == "Gravel loop"
    np.testing.assert_allclose(route.tracks[0], np.array(points))
    [request] = fake_thirdparty.requests
    assert request.path == "/routes/42.json" and request.headers["accept"] == "application/json"


def test_invalid_coordinates_dropped_and_no_points(fake_thirdparty):
    good = make_points(3)
    fake_thirdparty.add_rwgps(1, None, [good[0], (91.0, 5.0, 0.0), (45.0, -181.0, 0.0),
                                        (float("nan"), 5.0, 0.0), good[1], (45.0, 5.0, float("inf")), good[2]])
    route = fetch_route(SourceRef("ride_with_gps", "1"), fake_thirdparty.source_config())
    assert route.title is None
    np.testing.assert_allclose(route.tracks[0], np.array([good[0], good[1], (45.0, 5.0, np.nan), good[2]]))
    fake_thirdparty.add_rwgps(2, "nothing", [(95.0, 5.0, 0.0)])
    with pytest.raises(FetchError) as info:
        fetch_route(SourceRef("ride_with_gps", "2"), fake_thirdparty.source_config())
    assert str(info.value) == "The route has no points."


# --- HTTP behaviour -----------------------------------------------------------------------------------------

def test_404_and_403_are_not_retried(fake_thirdparty):
    config = fake_thirdparty.source_config()
    with pytest.raises(FetchError) as info:
        fetch_route(SourceRef("komoot_tour", "404"), config)
    assert str(info.value) == "The route could not be fetched: the service answered 404 (not found)."
    fake_thirdparty.add_komoot_tour(5, "private", make_points(3))
    fake_thirdparty.fail("/tour/5", 403, times=None)
    with pytest.raises(FetchError, match="private or access denied") as info:
        fetch_route(SourceRef("komoot_tour", "5"), config)
    assert "failure body" not in str(info.value)
    assert fake_thirdparty.requests_to("/tour/404") == 1 and fake_thirdparty.requests_to("/tour/5") == 1


def test_server_errors_retried_then_ok(fake_thirdparty):
    fake_thirdparty.add_komoot_tour(1, "ok", make_points(3))
    fake_thirdparty.fail("/tour/1", 500, times=1)
    fake_thirdparty.fail("/tour/1", 503, times=1)
    sleeps = Sleeps()
    route = fetch_route(SourceRef("komoot_tour", "1"), fake_thirdparty.source_config(backoff=0.1), sleep=sleeps)
    assert route.title == "ok" and fake_thirdparty.requests_to("/tour/1") == 3
    assert sleeps == [0.1, 0.2]


def test_server_errors_exhaust_retries(fake_thirdparty):
    fake_thirdparty.add_komoot_tour(1, "ok", make_points(3))
    fake_thirdparty.fail("/tour/1", 500, times=3)
    with pytest.raises(FetchError) as info:
        fetch_route(SourceRef("komoot_tour", "1"), fake_thirdparty.source_config(), sleep=Sleeps())
    assert str(info.value) == "The route could not be fetched: the service is unavailable."
    assert fake_thirdparty.requests_to("/tour/1") == 3


def test_429_retried_honouring_capped_retry_after(fake_thirdparty):
    fake_thirdparty.add_rwgps(1, "ok", make_points(3))
    fake_thirdparty.fail("/routes/1.json", 429, headers={"Retry-After": "1"})
    fake_thirdparty.fail("/routes/1.json", 429, headers={"Retry-After": "3600"})
    sleeps = Sleeps()
    route = fetch_route(SourceRef("ride_with_gps", "1"), fake_thirdparty.source_config(), sleep=sleeps)
    assert route.title == "ok" and sleeps == [1.0, 2.0]


def test_connection_errors_retried_then_unavailable():
    config = SourceConfig(komoot_url=f"http://127.0.0.1:{_closed_port()}", backoff=0.0, timeout=1.0)
    sleeps = Sleeps()
    with pytest.raises(FetchError, match="the service is unavailable"):
        fetch_route(SourceRef("komoot_tour", "1"), config, sleep=sleeps)
    assert len(sleeps) == 2


def test_slow_answer_times_out_and_is_retried(fake_thirdparty):
    fake_thirdparty.add_komoot_tour(1, "ok", make_points(3))
    fake_thirdparty.slow("/tour/1", 5.0)
    route = fetch_route(SourceRef("komoot_tour", "1"), fake_thirdparty.source_config(timeout=0.3))
    assert route.title == "ok" and fake_thirdparty.requests_to("/tour/1") == 2


def test_redirects_on_same_origin_are_followed(fake_thirdparty):
    fake_thirdparty.add_komoot_tour(3, "target", make_points(3))
    fake_thirdparty.redirect("/tour/1", "/tour/2", status=301)
    fake_thirdparty.redirect("/tour/2", fake_thirdparty.url("/tour/3"), status=307)
    route = fetch_route(SourceRef("komoot_tour", "1"), fake_thirdparty.source_config())
    assert route.title == "target"
    assert [r.path for r in fake_thirdparty.requests] == ["/tour/1", "/tour/2", "/tour/3"]


def test_more_than_two_redirects_refused(fake_thirdparty):
    fake_thirdparty.add_komoot_tour(4, "too far", make_points(3))
    for a, b in ((1, 2), (2, 3), (3, 4)):
        fake_thirdparty.redirect(f"/tour/{a}", f"/tour/{b}")
    with pytest.raises(FetchError, match="redirected too many times"):
        fetch_route(SourceRef("komoot_tour", "1"), fake_thirdparty.source_config())
    assert fake_thirdparty.requests_to("/tour/4") == 0


@pytest.mark.parametrize("location", [
    "https://www.komoot.com/tour/2",
    "http://localhost:{port}/tour/2",
    "http://user:pw@127.0.0.1:{port}/tour/2",
    "//evil.example/tour/2",
    "https://127.0.0.1:{port}/tour/2",
])
def test_redirect_off_the_base_origin_refused(fake_thirdparty, monkeypatch, location):
    port = fake_thirdparty.base_url.rsplit(":", 1)[1]
    fake_thirdparty.add_komoot_tour(2, "elsewhere", make_points(3))
    fake_thirdparty.redirect("/tour/1", location.format(port=port))
    looked_up = _record_lookups(monkeypatch)
    with pytest.raises(FetchError) as info:
        fetch_route(SourceRef("komoot_tour", "1"), fake_thirdparty.source_config())
    assert str(info.value) == "The route could not be fetched: the service redirected to another address."
    assert fake_thirdparty.requests_to("/tour/2") == 0
    assert set(looked_up) <= {"127.0.0.1"}


def test_oversized_body_stops_reading(fake_thirdparty):
    fake_thirdparty.oversized("/tour/1", 64 * 1024 * 1024)
    with pytest.raises(FetchError) as info:
        fetch_route(SourceRef("komoot_tour", "1"), fake_thirdparty.source_config(max_bytes=256 * 1024))
    assert str(info.value) == "The route could not be fetched: the response is larger than 256 KB."
    [stream] = fake_thirdparty.streams
    assert stream.done.wait(10) and stream.aborted and stream.sent < stream.total // 4


def test_oversized_declared_length_refused_before_reading(fake_thirdparty):
    fake_thirdparty.oversized("/routes/1.json", 31 * 1024 * 1024, content_length=True)
    with pytest.raises(FetchError) as info:
        fetch_route(SourceRef("ride_with_gps", "1"), fake_thirdparty.source_config())
    assert str(info.value) == "The route could not be fetched: the response is larger than 30 MB."
    [stream] = fake_thirdparty.streams
    assert stream.done.wait(10) and stream.sent < stream.total
    assert fake_thirdparty.requests_to("/routes/1.json") == 1


def _record_lookups(monkeypatch):
    hosts = []
    real = socket.getaddrinfo

    def spy(host, *args, **kwargs):
        hosts.append(host)
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", spy)
    return hosts


def test_user_link_host_is_never_contacted(fake_thirdparty, monkeypatch):
    fake_thirdparty.add_komoot_tour(123, "local", make_points(3))
    looked_up = _record_lookups(monkeypatch)
    route = fetch_route(parse_source_url("https://www.komoot.com/tour/123"), fake_thirdparty.source_config())
    assert route.title == "local"
    assert [r.path for r in fake_thirdparty.requests] == ["/tour/123"]
    assert looked_up and set(looked_up) == {"127.0.0.1"}


# --- cache --------------------------------------------------------------------------------------------------

def test_cache_hit_makes_no_request(fake_thirdparty, redis_client):
    points = make_points(500)
    fake_thirdparty.add_strava(5, gpx_from_points(points, "cached"))
    config = fake_thirdparty.source_config()
    first = fetch_route(SourceRef("strava_route", "5"), config, redis_client)
    key = "btp:route_fetch:strava_route:5"
    assert 86000 < redis_client.ttl(key) <= 86400
    assert len(redis_client.get(key)) < 500 * 3 * 8
    second = fetch_route(SourceRef("strava_route", "5"), config, redis_client)
    assert fake_thirdparty.requests_to("/routes/5/export_gpx") == 1
    assert second.title == first.title == "cached"
    np.testing.assert_array_equal(np.concatenate(second.tracks), np.concatenate(first.tracks))


def test_collection_cache_keeps_tracks(fake_thirdparty, redis_client):
    fake_thirdparty.add_komoot_tour(1, "a", make_points(4))
    fake_thirdparty.add_komoot_tour(2, "b", make_points(6))
    fake_thirdparty.add_collection(3, "trip", [1, 2])
    config = fake_thirdparty.source_config()
    fetch_route(SourceRef("komoot_collection", "3"), config, redis_client)
    before = len(fake_thirdparty.requests)
    again = fetch_route(SourceRef("komoot_collection", "3"), config, redis_client)
    assert len(fake_thirdparty.requests) == before
    assert again.title == "trip" and [len(t) for t in again.tracks] == [4, 6]


def test_corrupt_cache_entry_is_a_miss(fake_thirdparty, redis_client):
    fake_thirdparty.add_komoot_tour(1, "fresh", make_points(3))
    redis_client.set("btp:route_fetch:komoot_tour:1", b"not zlib")
    route = fetch_route(SourceRef("komoot_tour", "1"), fake_thirdparty.source_config(), redis_client)
    assert route.title == "fresh" and fake_thirdparty.requests_to("/tour/1") == 1


def test_redis_down_does_not_break_the_fetch(fake_thirdparty, caplog):
    fake_thirdparty.add_komoot_tour(1, "no cache", make_points(3))
    down = redis_lib.Redis(host="127.0.0.1", port=_closed_port(), socket_connect_timeout=0.2, retry=None)
    try:
        with caplog.at_level(logging.WARNING, logger="trips.providers.cache"):
            route = fetch_route(SourceRef("komoot_tour", "1"), fake_thirdparty.source_config(), down)
    finally:
        down.close()
    assert route.title == "no cache"
    assert any("route cache unavailable" in r.getMessage() for r in caplog.records)


def test_fake_page_helper_round_trips():
    page = komoot_html({"page": {"_embedded": {"tour": {"name": "</script>\"quoted\""}}}})
    assert page.count(b"</script>") == 1
    assert source_formats.komoot_props(page)["page"]["_embedded"]["tour"]["name"] == "</script>\"quoted\""
