"""The trip's budget (docs/RULES.md "Trip budget"): the nights' price ranges summed per currency, never converted,
the nights without a price named by their day; the same on the REST trip and on get_trip."""
import io

import pytest

from tests.factories import auth, make_token, make_user
from tests.fakes.thirdparty import gpx_from_points, make_points
from tests.mcp_helpers import call, mcp_token, payload
from tests.trips.api.test_openapi import Conformance
from trips.core.db import atomic, db
from trips.models import Stage, Trip
from trips.readmodels.budget import night_price, trip_budget
from trips.services.trips import import_gpx


def place(name, low=None, high=None, currency=None, exact=False) -> dict:
    out = {"name": name, "type": "hotel", "lat": 45.0, "lon": 5.0}
    if low is not None:
        out |= {"estimatedPriceMin": low, "estimatedPriceMax": high, "isExactPrice": exact}
    return out | ({"currency": currency} if currency else {})


@pytest.fixture
def trip(rider):
    """Five days of 80 km: day 1 a chosen hotel in euros, day 2 a suggested camp site (the best of two), day 3 a
    chosen Swiss hut in francs, day 4 a chosen friend's house without a price, day 5 (the last) suggestions only."""
    made = import_gpx(rider[0], io.BytesIO(gpx_from_points(make_points(4000, step_m=100.0))),
                      {"maxDistancePerDay": 80})
    with atomic():
        days = db.session.query(Stage).filter_by(trip_id=made.id).order_by(Stage.position).all()
        assert len(days) == 5
        days[0].selected_accommodation = place("Hôtel", 50, 120)
        days[1].accommodations = [place("Camping", 8, 25), place("Palace", 180, 450)]
        days[2].selected_accommodation = place("Cabane", 40, 40, currency="CHF", exact=True)
        days[3].selected_accommodation = place("Chez Paulette")
        days[4].accommodations = [place("Gîte", 40, 80)]
    return db.session.get(Trip, made.id)


EXPECTED = {"totals": [{"currency": "EUR", "min": 58.0, "max": 145.0, "nights": 2},
                       {"currency": "CHF", "min": 40.0, "max": 40.0, "nights": 1}],
            "nights": 4, "chosen": 3, "unknown": [4]}


def test_the_rest_trip_sums_the_nights_per_currency(app, client, rider, trip):
    doc = client.get("/api/openapi.json").get_json()
    url = f"/api/trips/{trip.id}"
    body = Conformance(app, doc).check(client.get(url, headers=rider[1]), "get", url).get_json()
    assert body["budget"] == EXPECTED


def test_get_trip_carries_the_same_budget(app, client, rider, trip):
    answer = payload(call(client, mcp_token(app, rider[0]), "get_trip", {"id": trip.id}))
    assert answer["budget"] == EXPECTED
    with atomic():  # a choice changes the budget at once, through the kept digests too
        db.session.query(Stage).filter_by(trip_id=trip.id, position=4).one().selected_accommodation = \
            place("Gîte", 60, 60, exact=True)
    answer = payload(call(client, mcp_token(app, rider[0]), "get_trip", {"id": trip.id}))
    assert answer["budget"]["totals"][0] == {"currency": "EUR", "min": 118.0, "max": 205.0, "nights": 3}
    assert answer["budget"]["nights"] == 5 and answer["budget"]["chosen"] == 4


def test_a_stranger_reads_no_budget(client, trip):
    assert client.get(f"/api/trips/{trip.id}", headers=auth(make_token(make_user()))).status_code == 404


def test_a_trip_without_lodgings_has_every_night_unknown(client, rider):
    bare = import_gpx(rider[0], io.BytesIO(gpx_from_points(make_points(2400, step_m=100.0))), {})
    budget = client.get(f"/api/trips/{bare.id}", headers=rider[1]).get_json()["budget"]
    assert budget == {"totals": [], "nights": len(bare.stages) - 1, "chosen": 0,
                      "unknown": [s.day_number for s in bare.stages][:-1]}


@pytest.mark.parametrize(("stored", "read"), [
    (place("a", 10, 20), ("EUR", 10.0, 20.0)),
    (place("a", 20, 10, currency="GBP"), ("GBP", 10.0, 20.0)),
    (place("a", 0, 0), ("EUR", 0.0, 0.0)),  # free is a price, not an unknown one
    (place("a", 10, 20, currency="eur"), ("EUR", 10.0, 20.0)),  # not an ISO code: the map's euros
    (place("a"), None), (place("a", 10, None), None), (place("a", True, 3), None), (place("a", -5, 3), None),
    (None, None),
])
def test_a_night_s_price_keeps_its_currency(stored, read):
    assert night_price(stored) == read


def test_a_rest_day_is_a_night_and_the_last_day_is_not_unless_chosen():
    days = [Stage(position=0, accommodations=[place("A", 10, 20)]),
            Stage(position=1, is_rest_day=True, accommodations=[place("A", 10, 20)]),
            Stage(position=2, accommodations=[place("B", 30, 30)])]
    assert trip_budget(days) == {"totals": [{"currency": "EUR", "min": 20.0, "max": 40.0, "nights": 2}],
                                 "nights": 2, "chosen": 0, "unknown": []}
    days[2].selected_accommodation = place("B", 30, 30)
    assert trip_budget(days)["totals"][0]["nights"] == 3 and trip_budget(days)["chosen"] == 1
