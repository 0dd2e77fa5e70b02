"""REST problem documents in the reader's language (README "Languages"): the account's, else Accept-Language with its
q-values (RFC 9110 §12.5.4: q=0 refuses a language), else English: the title, the detail, each field's message,
marshmallow's own messages included, and the HTTP layer's own refusals."""
import io

import pytest

from tests.factories import auth, make_token, make_user
from tests.fakes.thirdparty import gpx_from_points, make_points
from trips.core import i18n
from trips.core.db import atomic, db
from trips.services.trips import import_gpx

NBSP = "\u00a0"
UNKNOWN = "0192f000-0000-7000-8000-000000000000"


@pytest.fixture
def reader(ctx):
    user = make_user("lecteur@example.org")
    trip = import_gpx(user, io.BytesIO(gpx_from_points(make_points(400), name="Jura")), {})
    return user, trip, auth(make_token(user))


def problem(response, status: int) -> dict:
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.mimetype == "application/problem+json"
    return response.get_json()


def test_a_problem_is_french_with_accept_language_fr_and_no_account_choice(client, reader):
    user, trip, headers = reader
    assert user.locale is None
    fr = {**headers, "Accept-Language": "fr"}
    missing = problem(client.get(f"/api/trips/{UNKNOWN}", headers=fr), 404)
    assert (missing["title"], missing["detail"]) == ("Introuvable", "Voyage introuvable.")
    english = problem(client.get(f"/api/trips/{UNKNOWN}", headers=headers), 404)
    assert (english["title"], english["detail"]) == ("Not Found", "Trip not found.")
    stale = problem(client.patch(f"/api/trips/{trip.id}", json={"title": "x"}, headers=fr), 428)
    assert stale["title"] == "Précondition requise"
    assert stale["detail"] == ("Cette modification demande la version du voyage que vous modifiez. Envoyez If-Match: "
                               "\"<version>\" avec l'ETag du voyage.")


def test_field_messages_marshmallow_s_own_included_are_french(client, reader):
    _, trip, headers = reader
    fr = {**headers, "Accept-Language": "fr", "If-Match": f'"{trip.version}"'}
    bad = problem(client.patch(f"/api/trips/{trip.id}", json={"fatigueFactor": 3, "departureHour": "8",
                                                             "nope": 1}, headers=fr), 422)
    assert bad["title"] == "Contenu non traitable"
    assert bad["errors"] == {
        "fatigueFactor": "Doit être supérieur ou égal à 0,5 et inférieur ou égal à 1.",
        "departureHour": "Ce n'est pas un nombre entier valable.",
        "nope": "Champ inconnu.",
    }
    field, _, said = bad["detail"].partition(f"{NBSP}: ")  # the first bad field, named
    assert bad["errors"][field] == said
    english = problem(client.patch(f"/api/trips/{trip.id}", json={"fatigueFactor": 3},
                                   headers={**headers, "If-Match": f'"{trip.version}"'}), 422)
    assert english["errors"] == {"fatigueFactor": "Must be greater than or equal to 0.5 and less than or equal to 1."}
    dates = problem(client.patch(f"/api/trips/{trip.id}", json={"startDate": "2031-06-05", "endDate": "2031-06-01"},
                                 headers=fr), 422)
    assert dates["errors"] == {"endDate": "La date de fin précède la date de départ. Mettez endDate au 2031-06-05 "
                                          "(un voyage d'un jour) ou après."}


def test_the_http_layer_s_own_refusals_are_french(client, reader):
    _, trip, headers = reader
    fr = {**headers, "Accept-Language": "fr"}
    not_json = problem(client.post("/api/trips", data="x", headers={**fr, "Content-Type": "text/plain"}), 400)
    assert not_json["detail"] == "Le corps de la requête doit être du JSON (Content-Type: application/json)."
    nowhere = problem(client.get("/api/nowhere", headers=fr), 404)
    assert (nowhere["title"], nowhere["detail"]) == ("Introuvable", "Il n'y a rien à cette adresse.")
    wrong = problem(client.put(f"/api/trips/{trip.id}", json={}, headers=fr), 405)
    assert wrong["title"] == "Méthode non autorisée"
    no_token = problem(client.get("/api/trips", headers={"Accept-Language": "fr"}), 401)
    assert no_token["detail"] == "Un jeton bearer est obligatoire (un en-tête Authorization: Bearer)."


@pytest.mark.parametrize("header, locale", [
    ("fr", "fr"),
    ("*;q=0, fr;q=0", "en"),  # nothing acceptable: the default, never a refused language
    ("fr;q=0, *", "en"),
    ("fr;q=0, en;q=0", "en"),
    ("fr-CH;q=0.8, de", "fr"),
    ("en;q=0.1, fr;q=0.9", "fr"),
    ("fr;q=0.1, en;q=0.9", "en"),
    ("*", "en"),
    ("de, fr;q=0.5", "fr"),
    ("fr;q=0, fr-CA", "en"),  # French itself refused: a region of it does not bring it back
    ("nonsense;;q=x, fr", "fr"),
])
def test_accept_language_weighs_q_values_and_q0_refuses(client, reader, header, locale):
    _, _, headers = reader
    said = problem(client.get(f"/api/trips/{UNKNOWN}", headers={**headers, "Accept-Language": header}), 404)
    assert said["detail"] == i18n.t("refusal.trip_not_found", locale)


def test_the_account_s_choice_wins_over_accept_language(client, reader):
    user, _, headers = reader
    with atomic():
        db.session.merge(user).locale = "en"
    said = problem(client.get(f"/api/trips/{UNKNOWN}", headers={**headers, "Accept-Language": "fr"}), 404)
    assert said["detail"] == "Trip not found."
    with atomic():
        db.session.merge(user).locale = "fr"
    said = problem(client.get(f"/api/trips/{UNKNOWN}", headers={**headers, "Accept-Language": "en"}), 404)
    assert said["detail"] == "Voyage introuvable."
