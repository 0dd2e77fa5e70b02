"""The public share page shows the owner's and third parties' words through the text floor of the MCP
answers (trips/core/text.py): no bidi override, invisible or control character reaches the page."""
import io
import unicodedata

import pytest

from tests.fakes.thirdparty import gpx_from_points, make_points
from trips.core.db import atomic, db
from trips.models import Stage, Trip
from trips.services.trips import import_gpx

RLO, LRI, ZWSP, BOM = "\u202e", "\u2066", "\u200b", "\ufeff"


def hostile(word: str) -> str:
    """`word` wrapped in what reshapes text: a right-to-left override, an isolate, zero-width characters,
    C0/C1 controls, breaks (not NUL: no text column can store it, and BTP refuses or mends it where it enters)."""
    return f"{RLO}{word}{LRI}\x01\x07{ZWSP}\x1b[31m\x85{BOM}\u2028end"


@pytest.fixture
def shared(client, rider):
    user, headers = rider
    gpx = gpx_from_points(make_points(2400, step_m=100.0), name="plain")
    trip = import_gpx(user, io.BytesIO(gpx), {"startDate": "2031-06-01", "endDate": "2031-06-03"})
    with atomic():
        row = db.session.get(Trip, trip.id)
        row.title = hostile("Title")
        stage = db.session.query(Stage).filter_by(trip_id=trip.id, position=0).one()
        stage.label, stage.start_label, stage.end_label = hostile("Label"), hostile("From"), hostile("To")
        stage.selected_accommodation = {"name": hostile("Inn"), "type": "guest_house\u202e", "lat": 1, "lon": 2}
    return client.post(f"/api/trips/{trip.id}/share", headers=headers).get_json()["shortCode"]


def reshaping(text: str) -> set[str]:
    """The characters the floor removes or turns into spaces, beside the page's own line breaks."""
    return {ch for ch in text if ch not in "\n" and (unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp"))}


def test_the_share_page_floors_third_party_and_user_text(client, shared):
    page = client.get(f"/s/{shared}")
    html = page.get_data(as_text=True)
    assert page.status_code == 200 and reshaping(html) == set()
    for word in ("Title", "Label", "From", "To", "Inn"):
        assert f"{word}[31m end" in html  # the words stay; ESC and NUL are gone, a run of breaks is one space
    assert "(guest house)" in html


def test_the_floor_would_have_been_needed(client, shared, ctx):
    # The stored text still carries every character: the page, not the data, is what the floor changes.
    trip = db.session.query(Trip).one()
    assert RLO in trip.title and "\x1b" in trip.title
    assert client.get(f"/api/trips/{trip.id}", headers=_owner_headers(trip)).get_json()["title"] == trip.title


def _owner_headers(trip):
    from oauth.kernel.models import User
    from tests.factories import auth, make_token

    return auth(make_token(db.session.get(User, trip.user_id)))
