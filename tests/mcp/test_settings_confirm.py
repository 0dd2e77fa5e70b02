"""update_trip_settings asks for a confirmation only when the change cuts the days again
(docs/RULES.md "Confirmation"); a departure hour discards nothing and says so."""
import io

import pytest

from tests.factories import make_user
from tests.fakes.thirdparty import gpx_from_points, make_points
from tests.mcp_helpers import call, mcp_token, payload
from trips.core.db import db
from trips.models import Trip
from trips.services.trips import import_gpx


@pytest.fixture
def trip(ctx, rider):
    return import_gpx(rider[0], io.BytesIO(gpx_from_points(make_points(2400))), {"startDate": "2031-06-01"})


@pytest.mark.parametrize("change", [{"departureHour": 6}, {"averageSpeed": 22.5}, {"title": "Alps"},
                                    {"startDate": "2031-06-02"}])
def test_a_change_that_keeps_the_days_is_saved_at_once(app, client, rider, trip, change):
    token = mcp_token(app, rider[0])
    days = [s.id for s in trip.stages]
    answer = payload(call(client, token, "update_trip_settings", {"id": trip.id, "version": trip.version, **change}))
    assert "confirmationRequired" not in answer  # not: "every day and chosen accommodation would be discarded"
    assert "no day, edit or chosen accommodation was discarded" in answer["result"]
    db.session.expire_all()
    assert [s.id for s in db.session.get(Trip, trip.id).stages] == days


@pytest.mark.parametrize("change", [{"fatigueFactor": 0.8}, {"maxDistancePerDay": 60},
                                    {"endDate": "2031-06-05"}])
def test_a_change_that_recuts_still_asks(app, client, rider, trip, change):
    token = mcp_token(app, rider[0])
    answer = payload(call(client, token, "update_trip_settings", {"id": trip.id, "version": trip.version, **change}))
    assert answer["confirmationRequired"] is True and "discards" in answer["action"]
    db.session.expire_all()
    assert db.session.get(Trip, trip.id).version == trip.version  # nothing written


def test_a_stranger_gets_no_summary(app, client, rider, trip):
    token = mcp_token(app, make_user("stranger@example.org"))
    result = call(client, token, "update_trip_settings", {"id": trip.id, "version": trip.version, "fatigueFactor": 0.8})
    assert result["isError"] and "not_found" in result["content"][0]["text"]
