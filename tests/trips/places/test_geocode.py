"""trips.places.geocode: validation, the offline gazetteer, and Nominatim through a local fake."""
import time

import pytest

from trips.places import geocode
from trips.errors import Invalid, RateLimited, Unavailable
from trips.places.gazetteer import get_gazetteer
from trips.places.geocode import search_places
from trips.providers import nominatim
from trips.providers.nominatim import GeocodeConfig

# The `fake_nominatim` fixture. (Not imported by name: pytest must load the module itself to rewrite it.)

OFFLINE = GeocodeConfig(nominatim_url=None)


def offline(q, limit=None):
    return search_places(q, limit, config=OFFLINE, redis=None, user_key="u1")


def online(fake, redis, q, limit=None, user_key="u1", **config):
    return search_places(q, limit, config=fake.config(**config), redis=redis, user_key=user_key)


# --- validation -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("q", [None, "", "   \t"])
def test_q_is_required(q):
    with pytest.raises(Invalid) as caught:
        offline(q)
    assert {k: str(v) for k, v in caught.value.errors.items()} == {"q": "is required"}


def test_q_too_long_is_refused_without_echoing_it():
    with pytest.raises(Invalid) as caught:
        offline("Grenoble" * 30)
    assert set(caught.value.errors) == {"q"}
    assert "Grenoble" not in caught.value.message and "200" in str(caught.value.errors["q"])
    assert offline("a" * 190 + " " * 40)["totalItems"] == 0  # length counts after trimming


@pytest.mark.parametrize("limit", ["abc", 0, "0", 11, "11", -1, "-1", "2.5", 2.5, True, "１"])
def test_bad_limit_is_refused(limit):
    with pytest.raises(Invalid) as caught:
        offline("Grenoble", limit)
    assert {k: str(v) for k, v in caught.value.errors.items()} == {"limit": "must be a whole number from 1 to 10"}  # the value is not echoed


def test_both_fields_reported_at_once():
    with pytest.raises(Invalid) as caught:
        offline(" ", "abc")
    assert set(caught.value.errors) == {"q", "limit"}


@pytest.mark.parametrize("limit, expected", [(None, 5), ("", 5), ("3", 3), (" 7 ", 7), (1, 1), (10, 10)])
def test_limit_accepts_query_string_values(limit, expected):
    assert geocode.validate("Paris", limit) == ("Paris", expected)


# --- offline gazetteer ------------------------------------------------------------------------------------

def test_offline_finds_grenoble():
    result = offline("Grenoble")
    first = result["member"][0]
    assert first["name"] == "Grenoble" and first["displayName"] == "Grenoble, France" and first["type"] == "city"
    assert first["lat"] == pytest.approx(45.19, abs=0.05) and first["lon"] == pytest.approx(5.72, abs=0.05)
    assert result["totalItems"] == len(result["member"]) >= 1


def test_offline_ignores_case_and_accents():
    assert offline("grenoble")["member"][0]["displayName"] == "Grenoble, France"
    accented, plain = offline("Genève")["member"], offline("geneve")["member"]
    assert accented == plain
    assert accented[0]["displayName"] == "Geneva, Switzerland"
    assert offline("SAINT-ÉTIENNE")["member"][0]["name"] == "Saint-Étienne"


def test_offline_ranks_exact_then_prefix_then_population():
    assert offline("Pari")["member"][0]["displayName"] == "Paris, France"
    names = [m["displayName"] for m in offline("Paris", 10)["member"]]
    assert names[0] == "Paris, France" and "Paris, Texas, United States" in names
    assert offline("Grenob")["member"][0]["name"] == "Grenoble"
    assert offline("etienne")["member"][0]["name"] == "Saint-Étienne"  # a later word of the name


def test_offline_honours_limit_and_answers_empty_when_nothing_matches():
    assert len(offline("Saint", 3)["member"]) == 3
    assert len(offline("Saint")["member"]) == 5
    assert offline("Qzxqzxq") == {"member": [], "totalItems": 0}


def test_offline_lookups_are_fast():
    index = get_gazetteer()
    assert len(index) > 20000
    queries = ["Grenoble", "Pari", "s", "a", "saint", "Genève", "noble", "zzzzqq", "new york", "lyon"]
    started = time.perf_counter()
    for _ in range(5):
        for q in queries:
            index.search(q, 10)
    per_query_ms = (time.perf_counter() - started) * 1000 / (5 * len(queries))
    assert per_query_ms < 5


# --- Nominatim --------------------------------------------------------------------------------------------

def test_nominatim_fields_are_mapped(fake_nominatim, redis_client):
    fake_nominatim.places = [
        fake_nominatim.place("Grenoble", 45.1875602, 5.7357819, address={"city": "Grenoble", "state": "Auvergne-Rhône-Alpes"}),
        fake_nominatim.place("Le Sappey", 45.26, 5.77, address={"village": "Le Sappey-en-Chartreuse"}, addresstype=None),
        {"lat": "1.5", "lon": "2.5", "display_name": "Somewhere, " + "x" * 300},
        {"lat": "north", "lon": "2", "display_name": "Bad coordinates"},
    ]
    result = online(fake_nominatim, redis_client, "  Grenoble   Isère ", "4")
    assert result["totalItems"] == 3
    first, second, third = result["member"]
    assert first == {"name": "Grenoble", "lat": 45.1875602, "lon": 5.7357819,
                     "displayName": "Grenoble, France", "type": "city"}
    assert second["name"] == "Le Sappey-en-Chartreuse" and second["type"] == "administrative"
    assert third["name"] == "Somewhere" and third["type"] == "place" and len(third["displayName"]) == 200
    sent = fake_nominatim.requests[0]
    assert sent.path == "/search"
    assert sent.query == {"q": ["Grenoble Isère"], "format": ["jsonv2"], "limit": ["4"], "addressdetails": ["1"]}
    assert sent.headers["user-agent"] == GeocodeConfig(None).user_agent
    assert sent.headers["accept"] == "application/json"


def test_nominatim_answers_are_cached(fake_nominatim, redis_client):
    fake_nominatim.places = [fake_nominatim.place("Annecy", 45.9, 6.12)]
    first = online(fake_nominatim, redis_client, "Annecy")
    fake_nominatim.places = []
    assert online(fake_nominatim, redis_client, " annecy ") == first
    assert len(fake_nominatim.requests) == 1
    online(fake_nominatim, redis_client, "Annecy", 2)  # another limit is another question
    assert len(fake_nominatim.requests) == 2
    ttl = redis_client.ttl(next(iter(redis_client.scan_iter("btp:geocode:search:*"))))
    assert 23 * 3600 < ttl <= 24 * 3600


def test_no_result_is_an_empty_list(fake_nominatim, redis_client):
    assert online(fake_nominatim, redis_client, "Nowhere") == {"member": [], "totalItems": 0}


@pytest.mark.parametrize("status, message", [(403, nominatim.REFUSED), (429, nominatim.REFUSED),
                                             (500, nominatim.UNAVAILABLE), (503, nominatim.UNAVAILABLE)])
def test_upstream_errors_are_unavailable_not_empty(fake_nominatim, redis_client, status, message):
    fake_nominatim.places = [fake_nominatim.place("Annecy", 45.9, 6.12)]
    fake_nominatim.fail(status)
    with pytest.raises(Unavailable) as caught:
        online(fake_nominatim, redis_client, "Annecy")
    assert caught.value.text == message
    assert online(fake_nominatim, redis_client, "Annecy")["totalItems"] == 1  # failures are not cached


def test_timeout_is_unavailable(fake_nominatim, redis_client):
    fake_nominatim.slow(2.0)
    started = time.monotonic()
    with pytest.raises(Unavailable) as caught:
        online(fake_nominatim, redis_client, "Annecy", timeout=0.3)
    assert caught.value.text == nominatim.UNAVAILABLE
    assert time.monotonic() - started < 1.5


def test_a_trickling_answer_is_cut_at_the_timeout(fake_nominatim, redis_client):
    fake_nominatim.trickle(b"[]" + b" " * 200, 0.05)  # would take 10 s
    started = time.monotonic()
    with pytest.raises(Unavailable):
        online(fake_nominatim, redis_client, "Annecy", timeout=0.5)
    assert time.monotonic() - started < 1.5


def test_redirect_is_not_followed(fake_nominatim, redis_client):
    fake_nominatim.redirect(fake_nominatim.base_url + "/elsewhere")
    with pytest.raises(Unavailable):
        online(fake_nominatim, redis_client, "Annecy")
    assert [r.path for r in fake_nominatim.requests] == ["/search"]


@pytest.mark.parametrize("body", [b"<html>not json</html>", b'{"error": "Unable to geocode"}', b"\xff\xfe["])
def test_unreadable_answer_is_unavailable(fake_nominatim, redis_client, body):
    fake_nominatim.answer(body)
    with pytest.raises(Unavailable):
        online(fake_nominatim, redis_client, "Annecy")


def test_oversized_answer_is_unavailable(fake_nominatim, redis_client):
    fake_nominatim.answer(b"[" + b" " * (1024 * 1024) + b"]")
    with pytest.raises(Unavailable):
        online(fake_nominatim, redis_client, "Annecy")


def test_connection_refused_is_unavailable(redis_client):
    config = GeocodeConfig(nominatim_url="http://127.0.0.1:1", timeout=0.5)
    with pytest.raises(Unavailable):
        search_places("Annecy", None, config=config, redis=redis_client, user_key="u1")


def test_rate_limit_is_spent_only_on_cache_misses(fake_nominatim, redis_client):
    fake_nominatim.places = [fake_nominatim.place("Annecy", 45.9, 6.12)]
    online(fake_nominatim, redis_client, "Annecy")
    for _ in range(40):  # cached: free
        online(fake_nominatim, redis_client, "Annecy")
    for i in range(29):
        online(fake_nominatim, redis_client, f"Place {i}")
    with pytest.raises(RateLimited) as caught:
        online(fake_nominatim, redis_client, "One too many")
    assert 1 <= caught.value.retry_after <= 60
    assert len(fake_nominatim.requests) == 30  # the refused search never reached upstream
    online(fake_nominatim, redis_client, "Annecy")  # still answered from the cache
    online(fake_nominatim, redis_client, "Other user", user_key="u2")  # budgets are per user


def test_works_without_redis(fake_nominatim):
    fake_nominatim.places = [fake_nominatim.place("Annecy", 45.9, 6.12)]
    assert online(fake_nominatim, None, "Annecy")["totalItems"] == 1
    assert online(fake_nominatim, None, "Annecy")["totalItems"] == 1
    assert len(fake_nominatim.requests) == 2
