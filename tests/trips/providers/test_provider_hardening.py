"""Every third-party provider goes through the one hardened client (trips/providers/http.py): the same
refusals for each, driven through the provider's own entry point against its local fake.

A timeout on a silent server, retries on 503/429 as its policy says (and no more), a redirect to another
origin refused, the size cap, and the deadline over a body that trickles in.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Any, Callable

import pytest

from tests.fakes.nominatim import get_fake_nominatim, place
from tests.fakes.openmeteo import get_fake_openmeteo
from tests.fakes.thirdparty import get_fake_thirdparty, komoot_html, make_points
from tests.fakes.valhalla import get_fake_valhalla
from trips.errors import Unavailable
from trips.places.geocode import search_places
from trips.providers.openmeteo import WeatherUnavailable, day_forecasts
from trips.services.route_links import fetch_route
from trips.providers.valhalla import MAX_RESPONSE_BYTES, RoutingError
from trips.services.routing import reroute
from trips.route.source_formats import FetchError
from trips.route.sources import SourceRef

OTHER_ORIGIN = "http://127.0.0.2:9/elsewhere"  # another host: never to be asked


@dataclass
class Provider:
    """One provider as the test drives it: program its fake, call it, count what reached the fake."""

    name: str
    error: type[Exception]
    fake: Any
    config: Callable[..., Any]  # overrides → the provider's config aimed at the fake
    call: Callable[[Any, list], Any]  # (config, sleeps) → answer; raises `error`
    requests: Callable[[], int]
    fail: Callable[[int, dict], None]  # every request answers this status (and headers)
    fail_once: Callable[[int, dict], None]
    redirect: Callable[[str], None]
    silent: Callable[[float], None]  # headers only after this many seconds
    huge: Callable[[int], None]  # a 200 answer this many bytes long
    trickle: Callable[[float], None]  # a 200 answer one byte per interval
    max_bytes: Callable[[Any], int]
    policy: Callable[[Any], Any]
    sleeps: list = field(default_factory=list)


def _routes() -> Provider:
    fake, path = get_fake_thirdparty(), "/tour/1"

    def config(**overrides):
        return fake.source_config(**overrides)

    return Provider(
        "routes", FetchError, fake, config,
        call=lambda cfg, sleeps: fetch_route(SourceRef("komoot_tour", "1"), cfg, sleep=sleeps.append),
        requests=lambda: fake.requests_to(path),
        fail=lambda status, headers: fake.fail(path, status, times=None, headers=headers),
        fail_once=lambda status, headers: fake.fail(path, status, times=1, headers=headers),
        redirect=lambda location: fake.redirect(path, location),
        silent=lambda seconds: fake.slow(path, seconds, times=None),
        huge=lambda size: fake.oversized(path, size),
        trickle=lambda interval: fake.trickle(path, komoot_html({"page": {}}) + b" " * 400, interval),
        max_bytes=lambda cfg: cfg.max_bytes,
        policy=lambda cfg: cfg.policy("text/html"),
    )


def _valhalla() -> Provider:
    fake = get_fake_valhalla()
    start, waypoint, end = (45.0, 5.0, 210.0), (45.05, 5.08), (45.1, 5.02, 250.0)
    return Provider(
        "valhalla", RoutingError, fake, fake.config,
        call=lambda cfg, sleeps: reroute(start, waypoint, end, cfg),
        requests=lambda: len(fake.bodies),
        fail=lambda status, headers: fake.set_body(b"down", status, headers),
        fail_once=lambda status, headers: fake.set_body(b"down", status, headers),  # no retry: once is enough
        redirect=fake.redirect,
        silent=fake.delay,
        huge=lambda size: fake.set_body(b" " * size),
        trickle=lambda interval: (fake.set_route([start[:2], waypoint, end[:2]]), fake.trickle(interval)),
        max_bytes=lambda cfg: MAX_RESPONSE_BYTES,
        policy=lambda cfg: cfg.policy(),
    )


def _nominatim() -> Provider:
    fake = get_fake_nominatim()
    return Provider(
        "nominatim", Unavailable, fake, fake.config,
        call=lambda cfg, sleeps: search_places("Annecy", None, config=cfg, redis=None, user_key="u1"),
        requests=lambda: len(fake.requests),
        fail=lambda status, headers: fake.fail(status, times=None, headers=headers),
        fail_once=lambda status, headers: fake.fail(status, times=1, headers=headers),
        redirect=fake.redirect,
        silent=lambda seconds: fake.slow(seconds, times=None),
        huge=lambda size: fake.answer(b"[" + b" " * size + b"]"),
        trickle=lambda interval: fake.trickle(b"[]" + b" " * 400, interval),
        max_bytes=lambda cfg: cfg.max_bytes,
        policy=lambda cfg: cfg.policy(),
    )


def _openmeteo() -> Provider:
    fake = get_fake_openmeteo()
    wanted = [(45.0, 5.0, date.today()), (45.1, 5.2, date.today())]
    return Provider(
        "openmeteo", WeatherUnavailable, fake, fake.config,
        call=lambda cfg, sleeps: day_forecasts(wanted, cfg, None, sleep=sleeps.append) or None,
        requests=lambda: len(fake.requests),
        fail=lambda status, headers: fake.fail(status, times=None, headers=headers),
        fail_once=lambda status, headers: fake.fail(status, times=1, headers=headers),
        redirect=fake.redirect,
        silent=lambda seconds: fake.slow(seconds, times=None),
        huge=lambda size: fake.answer(b"[" + b" " * size + b"]"),
        trickle=lambda interval: fake.trickle(b"[]" + b" " * 400, interval),
        max_bytes=lambda cfg: cfg.max_bytes,
        policy=lambda cfg: cfg.policy(),
    )


@pytest.fixture(params=[_routes, _valhalla, _nominatim, _openmeteo],
                ids=["routes", "valhalla", "nominatim", "openmeteo"])
def provider(request) -> Provider:
    chosen = request.param()
    chosen.fake.reset()
    if chosen.name == "routes":
        chosen.fake.add_komoot_tour(1, "Tour", make_points(20))
    elif chosen.name == "valhalla":
        chosen.fake.set_route([(45.0, 5.0), (45.05, 5.08), (45.1, 5.02)])
    elif chosen.name == "nominatim":
        chosen.fake.places.append(place("Annecy", 45.9, 6.12))
    yield chosen
    chosen.fake.reset()


def test_the_fake_answers_when_nothing_is_programmed(provider):
    # The cases below fail for the reason they name, not because the provider never works.
    assert provider.call(provider.config(), provider.sleeps) is not None


def test_a_silent_server_times_out(provider):
    provider.silent(1.5)
    with pytest.raises(provider.error):
        provider.call(provider.config(timeout=0.3), provider.sleeps)


@pytest.mark.parametrize("status", [503, 429])
def test_retries_are_bounded_by_the_policy(provider, status):
    config = provider.config()
    provider.fail(status, {"Retry-After": "3600"})
    with pytest.raises(provider.error):
        provider.call(config, provider.sleeps)
    policy = provider.policy(config)
    assert provider.requests() == 1 + policy.retries
    assert len(provider.sleeps) == policy.retries
    assert all(0 <= s <= policy.max_retry_after for s in provider.sleeps)  # Retry-After: 3600 is capped


def test_one_failure_is_retried_when_the_policy_allows(provider):
    config = provider.config()
    provider.fail_once(503, {})
    if provider.policy(config).retries:
        assert provider.call(config, provider.sleeps) is not None and provider.requests() == 2
    else:
        with pytest.raises(provider.error):  # asked inside a request or a single job attempt: fail fast
            provider.call(config, provider.sleeps)
        assert provider.requests() == 1


def test_a_redirect_to_another_origin_is_refused(provider):
    provider.redirect(OTHER_ORIGIN)
    with pytest.raises(provider.error):
        provider.call(provider.config(), provider.sleeps)
    assert provider.requests() == 1


def test_an_answer_over_the_size_cap_is_refused(provider):
    config = provider.config(max_bytes=64 * 1024) if provider.name != "valhalla" else provider.config()
    provider.huge(provider.max_bytes(config) + 1)
    with pytest.raises(provider.error):
        provider.call(config, provider.sleeps)


def test_a_body_that_trickles_past_the_deadline_is_refused(provider):
    overrides = {"timeout": 0.5}
    if provider.name == "routes":
        overrides["deadline"] = 0.5
    config = provider.config(**overrides)
    provider.trickle(0.05)  # every read is quick; the whole body would take 20 s
    with pytest.raises(provider.error):
        provider.call(config, provider.sleeps)
