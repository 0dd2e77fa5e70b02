"""get_trip names every day's start and end from the map's labels (trips/enrich/labels.py), the rider's own label first,
cut at a word, within the digest budget in English and French; new labels are seen at once through the kept day
lines (mcp/kept.py)."""
import io
import json

import jsonschema
import pytest

from mcp.tools import get_trip as get_trip_tool
from tests.factories import make_user
from tests.fakes.thirdparty import gpx_from_points, make_points
from tests.mcp_helpers import call, mcp_token, payload
from tests.trips.readmodels.test_readmodels_enriched import fill, thirty_filled_days
from trips.core.db import atomic, db
from trips.core.text import label
from trips.models import Trip
from trips.services.trips import import_gpx

# real-shaped French place names, long ones and hyphenated ones (the map's nearest places)
PLACES = ["Saint-Laurent-du-Pont", "Villard-de-Lans", "Pont-en-Royans", "Saint-Jean-en-Royans", "Die",
          "Châtillon-en-Diois", "Lus-la-Croix-Haute", "Saint-Pierre-de-Chartreuse", "Le Bourg-d'Oisans",
          "La Chapelle-en-Vercors"]


def size(answer) -> int:
    return len(json.dumps(answer, ensure_ascii=False, separators=(",", ":")).encode())


def map_labels(trip_id: str) -> None:
    """Every day's ends named as trips/enrich/labels.py leaves them (merged into the day's enrichment)."""
    with atomic():
        for stage in db.session.get(Trip, trip_id).stages:
            names = {"start": PLACES[stage.position % len(PLACES)], "end": PLACES[(stage.position + 1) % len(PLACES)]}
            stage.enrichment = {**(stage.enrichment or {}), "labels": names}


@pytest.fixture
def owner(app, ctx):
    user = make_user("owner@example.org")
    trip = import_gpx(user, io.BytesIO(gpx_from_points(make_points(2400), name="Vercors")), {})
    return user, trip, mcp_token(app, user)


def test_the_digest_names_each_day_from_the_map_and_the_rider_s_label_wins(client, owner):
    _, trip, token = owner
    map_labels(trip.id)
    with atomic():
        db.session.get(Trip, trip.id).stages[1].end_label = "Camping du Lac"
    digest = payload(call(client, token, "get_trip", {"id": trip.id}))
    jsonschema.Draft202012Validator(get_trip_tool.OUTPUT).validate(digest)
    lines = digest["stages"]
    assert all(line["startLabel"] and line["endLabel"] for line in lines)  # today: null on every day
    assert lines[0]["startLabel"] == "Saint-Laurent-du…" and lines[0]["endLabel"] == "Villard-de-Lans"  # at a word
    stage = payload(call(client, token, "get_stage", {"tripId": trip.id, "stageId": lines[0]["stageId"]}))
    assert stage["startLabel"] == "Saint-Laurent-du-Pont"  # get_stage has the whole name
    assert lines[1]["endLabel"] == "Camping du Lac"  # the rider's own label first
    assert lines[1]["startLabel"] == "Villard-de-Lans"


def test_a_new_labels_enrichment_shows_through_the_kept_day_lines(client, owner):
    _, trip, token = owner
    before = payload(call(client, token, "get_trip", {"id": trip.id}))["stages"]
    assert before[0]["startLabel"] is None  # no labels yet: none invented
    map_labels(trip.id)  # as the labels enrichment commits them (docs/CACHES.md: the day's JSON texts are keyed)
    after = payload(call(client, token, "get_trip", {"id": trip.id}))["stages"]
    assert after[0]["startLabel"] == "Saint-Laurent-du…" and after[1]["startLabel"] == "Villard-de-Lans"
    with atomic():
        stage = db.session.get(Trip, trip.id).stages[0]
        stage.enrichment = {**stage.enrichment, "labels": {"start": "Grenoble", "end": None}}
    again = payload(call(client, token, "get_trip", {"id": trip.id}))["stages"]
    assert again[0]["startLabel"] == "Grenoble" and again[0]["endLabel"] is None


def test_odd_stored_labels_are_ignored_not_fatal(client, owner):
    _, trip, token = owner
    with atomic():
        db.session.get(Trip, trip.id).stages[0].enrichment = {"labels": ["not", "a", "dict"]}
    lines = payload(call(client, token, "get_trip", {"id": trip.id}))["stages"]
    assert lines[0]["startLabel"] is None and lines[0]["endLabel"] is None
    stage = payload(call(client, token, "get_stage", {"tripId": trip.id, "stageId": lines[0]["stageId"]}))
    assert stage["startLabel"] is None  # today: an internal error (a list has no .get)


def test_labels_are_cut_at_a_word_never_mid_word():
    assert label("Saint-Pierre-de-Chartreuse", 20) == "Saint-Pierre-de…"
    assert label("Quai de la Grande Chartreuse", 16) == "Quai de la…"
    assert label("Col du Galibier", 15) == "Col du Galibier"  # fits: untouched
    assert label("Hotel Internationale", 16) == "Hotel…"  # never "Hotel Internatio…"
    assert label("Llanfairpwllgwyngyllgogerychwyrndrobwll", 16) == "Llanfairpwllgwy…"  # one word: cut at the limit
    assert label("a" * 250) == "a" * 199 + "…"


def test_a_lodging_s_name_is_cut_at_a_word_in_the_digest(client, owner):
    _, trip, token = owner
    with atomic():
        db.session.get(Trip, trip.id).stages[0].selected_accommodation = {
            "name": "Hotel Internationale", "type": "hotel", "lat": 45.0, "lon": 5.0}
    line = payload(call(client, token, "get_trip", {"id": trip.id}))["stages"][0]
    assert line["accommodation"] == "Hotel…"  # never "Hotel Internatio…"


def test_a_thirty_day_digest_with_every_day_named_stays_under_twelve_kilobytes(client, owner):
    user, _, token = owner
    long_trip = thirty_filled_days(user)
    map_labels(long_trip.id)
    result = payload(call(client, token, "get_trip", {"id": long_trip.id}))
    assert result["stageCount"] == 30
    for line in result["stages"]:
        for key in ("startLabel", "endLabel"):
            text = line[key]
            assert text, (line["dayNumber"], key)
            # readable: the whole name, or a cut at a word of one of the map's names
            assert text in PLACES or any(p.startswith(text[:-1]) and p[len(text) - 1] in " -" for p in PLACES), text
    assert size(result) < 12 * 1024, size(result)
    with atomic():
        db.session.get(type(user), user.id).locale = "fr"
    fill(long_trip.id, gaps_every=5)
    map_labels(long_trip.id)
    french = payload(call(client, token, "get_trip", {"id": long_trip.id}))
    assert all(line["startLabel"] and line["endLabel"] for line in french["stages"])
    assert size(french) < 12 * 1024, size(french)
