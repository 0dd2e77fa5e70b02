"""A French account's agent reads French in every text BTP writes over MCP (README "Languages"): refusals and their
field messages, argument refusals, nextAction, the digest's day lines, edit answers, the confirmation's words; an
English account reads the same answers in English."""
import io

import pytest

from tests.factories import make_user
from tests.fakes.thirdparty import gpx_from_points, make_points
from tests.mcp_helpers import call, mcp_token, payload
from tests.trips.readmodels.test_readmodels_enriched import fill, settle
from trips.core.db import atomic, db
from trips.enrich.registry import COVERAGE_FIELD
from trips.models import Stage, Trip
from trips.services.trips import import_gpx

NBSP, NNBSP = "\u00a0", "\u202f"
UNKNOWN = "0192f000-0000-7000-8000-000000000000"
ENGLISH_WORDS = ("The ", " the ", "Call ", "must ", "Unknown", "suggested", "day(s)", " is ")


def rider(app, email: str, locale: str | None):
    user = make_user(email)
    with atomic():
        db.session.merge(user).locale = locale
    trip = import_gpx(user, io.BytesIO(gpx_from_points(make_points(2400), name="Vercors")), {})
    fill(trip.id)
    settle(trip.id)
    return user, trip, mcp_token(app, user)


@pytest.fixture
def french(app, ctx):
    return rider(app, "francais@example.org", "fr")


@pytest.fixture
def english(app, ctx):
    return rider(app, "english@example.org", None)


def refusal(client, token, tool, arguments) -> dict:
    result = call(client, token, tool, arguments)
    assert result["isError"] is True, result
    return payload(result)["error"]


def french_only(text: str) -> None:
    """`text` holds none of the English words a leak would bring."""
    assert not [w for w in ENGLISH_WORDS if w in text], text


def test_a_refusal_and_its_field_message_are_in_the_account_s_language(client, french, english):
    _, trip, token = french
    assert refusal(client, token, "get_trip", {"id": UNKNOWN})["message"] == "Voyage introuvable."
    assert refusal(client, english[2], "get_trip", {"id": UNKNOWN})["message"] == "Trip not found."
    stale = refusal(client, token, "edit_stages", {"tripId": trip.id, "action": "rest_day", "version": 99,
                                                     "stageId": trip.stages[0].id})
    assert stale["code"] == "stale_version"
    assert stale["message"].startswith(f"Le voyage a changé entre-temps{NBSP}: vous avez modifié la version 99")
    bad = refusal(client, token, "update_trip_settings", {"id": trip.id, "version": trip.version,
                                                          "fatigueFactor": 3.0})
    assert bad["fields"] == {"fatigueFactor": "doit valoir au plus 1"}
    assert bad["message"] == f"fatigueFactor{NBSP}: doit valoir au plus 1"
    moved = refusal(client, token, "edit_stages", {"tripId": trip.id, "action": "move", "version": trip.version,
                                                   "stageId": trip.stages[0].id, "toIndex": 0})
    assert moved["fields"] == {"toIndex": "est déjà la place de cette étape"}


def test_a_schema_s_refusal_is_said_in_french(client, french):
    _, trip, token = french
    bad = refusal(client, token, "edit_stages", {"tripId": trip.id, "action": "add", "version": trip.version,
                                                 "startPoint": {"lat": 45.0, "lon": 5.0},
                                                 "endPoint": {"lat": 45.1, "lon": 5.1}, "label": "x" * 300})
    assert bad["fields"] == {"label": "a une longueur maximale de 255"}


def test_argument_refusals_are_in_french_and_count_without_a_hand_made_plural(client, french, english):
    _, trip, token = french
    one = refusal(client, token, "get_trip", {"id": trip.id, "bogus": 1})
    assert one["fields"]["arguments"] == f'Argument inconnu{NBSP}: "bogus". Cet outil accepte{NBSP}: id.'
    two = refusal(client, token, "get_trip", {"id": trip.id, "bogus": 1, "other": 2})
    assert two["fields"]["arguments"].startswith(f"Arguments inconnus{NBSP}: ")
    english_one = refusal(client, english[2], "get_trip", {"id": english[1].id, "bogus": 1})
    assert english_one["fields"]["arguments"] == 'Unknown argument: "bogus". This tool accepts: id.'
    missing = refusal(client, token, "edit_stages", {"tripId": trip.id, "action": "rest_day"})
    assert missing["fields"]["version"].startswith("Cet outil demande un argument")


def test_next_action_is_in_french_and_counts_the_days_off_the_map(client, french, english):
    user, trip, token = french
    settle(trip.id, accommodations="running")
    assert payload(call(client, token, "get_trip", {"id": trip.id}))["nextAction"] == (
        f"Le voyage est encore en cours de calcul{NBSP}: redemandez dans quelques secondes.")
    settle(trip.id)
    for t in (trip, english[1]):
        with atomic():
            for stage in db.session.get(Trip, t.id).stages[:2]:
                stage.enrichment = {**(stage.enrichment or {}),
                                    COVERAGE_FIELD: {"share": 0.5, "offMapKm": [[0.0, 5.5]]}}
    told = payload(call(client, token, "get_trip", {"id": trip.id}))["nextAction"]
    assert told.startswith(f"Des parties de 2{NBSP}étapes sont hors de la carte importée (étape 1{NBSP}: "
                           f"km 0–5,5{NNBSP}; étape 2{NBSP}: km 0–5,5)")
    french_only(told)
    said = payload(call(client, english[2], "get_trip", {"id": english[1].id}))["nextAction"]
    assert said.startswith("Parts of 2 days lie outside the imported map (day 1: km 0–5.5; day 2: km 0–5.5)")
    with atomic():
        db.session.get(Stage, english[1].stages[1].id).enrichment = {}
    said = payload(call(client, english[2], "get_trip", {"id": english[1].id}))["nextAction"]
    assert said.startswith("Part of 1 day lies outside the imported map (day 1: km 0–5.5)")


def test_a_failed_route_s_reason_is_said_in_the_reader_s_language(client, french):
    user, trip, token = french
    with atomic():
        for c in db.session.get(Trip, trip.id).computations:
            if c.name == "route":
                c.status, c.reason = "failed", '{"key":"route.could_not_fetch","values":{"detail":' \
                                               '{"key":"route.answered_not_found"}}}'
    told = payload(call(client, token, "get_trip", {"id": trip.id}))["nextAction"]
    assert told.startswith(f"L'itinéraire n'a pas pu être récupéré{NBSP}: L'itinéraire n'a pas pu être "
                           f"récupéré{NBSP}: le service a répondu 404 (introuvable).")
    assert "Appelez analyze_trip pour réessayer." in told
    french_only(told)


def test_the_digest_s_day_lines_are_in_french(client, french, english):
    _, trip, token = french
    digest = payload(call(client, token, "get_trip", {"id": trip.id}))
    lodging = digest["stages"][0]["accommodation"]
    assert lodging.startswith(f"suggéré{NBSP}: "), lodging
    assert payload(call(client, english[2], "get_trip", {"id": english[1].id}))["stages"][0][
        "accommodation"].startswith("suggested: ")


def test_edit_answers_are_in_french(client, french, english):
    _, trip, token = french
    answer = payload(call(client, token, "edit_stages", {"tripId": trip.id, "action": "rest_day",
                                                         "version": trip.version, "stageId": trip.stages[0].id}))
    assert answer["result"].startswith(f"Un jour de repos a été inséré après l'étape{NNBSP}; chaque date suivante")
    assert answer["nextAction"] == (f"Passez la version ci-dessus à la prochaine modification{NNBSP}; inutile de "
                                    "relire le voyage.")
    french_only(answer["result"])
    shared = payload(call(client, token, "share_trip", {"tripId": trip.id}))
    unshare = payload(call(client, token, "unshare_trip", {"tripId": trip.id}))
    assert shared and unshare["action"].startswith("Révoquer le lien public vers ce voyage")
    done = payload(call(client, token, "unshare_trip", {"tripId": trip.id,
                                                        "confirmationToken": unshare["confirmationToken"]}))
    assert done["result"] == "Le lien de partage a été révoqué. L'adresse ne fonctionne plus, pour personne."
    created = payload(call(client, token, "create_trip", {"sourceUrl": "https://www.komoot.com/tour/123"}))
    assert created["result"].startswith("Le voyage est créé.") and created["nextAction"].startswith(
        f"Appelez get_trip avec l'id {created['id']}.")
    english_answer = payload(call(client, english[2], "edit_stages", {
        "tripId": english[1].id, "action": "rest_day", "version": english[1].version,
        "stageId": english[1].stages[0].id}))
    assert english_answer["result"].startswith("A rest day has been inserted after the day; every later date")
