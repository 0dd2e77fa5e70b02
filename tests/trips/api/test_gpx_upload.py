"""GPX upload over HTTP and `flask trips import`: synchronous, hostile files refused, nothing half-written."""
import io

import pytest
from werkzeug.datastructures import FileStorage
from werkzeug.test import stream_encode_multipart

from tests.factories import auth, make_token, make_user
from tests.fakes.thirdparty import gpx_from_points, make_points
from trips.core.db import db
from trips.enrich.registry import ENRICHMENTS
from trips.models import Trip

GPX = gpx_from_points(make_points(2000, step_m=100.0), name="Chartreuse")


def upload(client, headers, data: bytes, filename="ride.gpx", **form):
    # Encoded in memory: the test client would spool a large body to a temporary file it never closes.
    stream, length, boundary = stream_encode_multipart(
        {"gpxFile": FileStorage(io.BytesIO(data), filename, content_type="application/gpx+xml"), **form}, use_tempfile=False)
    return client.post("/api/trips/gpx-upload", headers=headers, data=stream.getvalue(),
                       content_type=f"multipart/form-data; boundary={boundary}")


def count_trips() -> int:
    db.session.rollback()
    return db.session.query(Trip).count()


def test_upload_cuts_days_synchronously(client, rider):
    _, headers = rider
    response = upload(client, headers, GPX, fatigueFactor="0.8", startDate="2031-07-01", endDate="2031-07-03")
    assert response.status_code == 201
    body = response.get_json()
    assert body["title"] == "Chartreuse" and body["sourceType"] == "gpx_upload"
    assert body["status"] == "ready" and len(body["stages"]) == 3
    assert body["fatigueFactor"] == 0.8
    # The days are cut in the request; the analysis they start is queued, so the trip is partial.
    assert {c["name"]: c["status"] for c in body["computations"]} == {
        "route": "done", "stages": "done", **{name: "pending" for name in ENRICHMENTS}}
    assert body["partial"] is True
    assert abs(body["totalDistance"] - 199.9) < 1.0
    assert response.headers["Location"] == f"/api/trips/{body['id']}"


def test_upload_days_are_the_same_whichever_path_reads_the_points(client, rider, monkeypatch):
    """The Strava-shaped file is read by the parser's fast path; with it off (every point through lxml)
    the stored days are the same, figure for figure."""
    from trips.route import gpx_fast

    from tests.trips.route.test_gpx import fast_points

    _, headers = rider
    seen = fast_points(monkeypatch)
    fast = upload(client, headers, GPX).get_json()
    assert seen[0] == 2000
    monkeypatch.setattr(gpx_fast, "_fast_allowed", lambda head: False)
    slow = upload(client, headers, GPX).get_json()
    assert seen[0] == 2000
    keys = ("distance", "elevation", "elevationLoss", "startPoint", "endPoint", "ridingHours")

    def days(body):
        return [{k: stage[k] for k in keys} for stage in body["stages"]]

    assert fast["totalDistance"] == slow["totalDistance"] and days(fast) == days(slow)
    assert len(fast["stages"]) == 3


@pytest.mark.parametrize("data,words", [
    (b"", "not a valid GPX"),
    (b"this is not xml", "not a valid GPX"),
    (b'<?xml version="1.0"?><!DOCTYPE gpx [<!ENTITY x "y">]><gpx><trk><trkseg>'
     b'<trkpt lat="45" lon="5"/></trkseg></trk></gpx>', "DOCTYPE"),
    (b'<?xml version="1.0"?><gpx xmlns="http://www.topografix.com/GPX/1/1"><trk><name>x</name></trk></gpx>',
     "no track points"),
])
def test_bad_files_are_refused_naming_the_field(client, rider, data, words):
    _, headers = rider
    response = upload(client, headers, data)
    assert response.status_code == 422
    assert words in response.get_json()["errors"]["gpxFile"]
    assert count_trips() == 0


def test_billion_laughs_is_refused(client, rider):
    _, headers = rider
    lol = (b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
           + b"".join(b'<!ENTITY lol%d "%s">' % (i, (b"&lol%d;" % (i - 1) if i > 1 else b"&lol;") * 10)
                      for i in range(1, 10))
           + b']><gpx><trk><name>&lol9;</name><trkseg><trkpt lat="1" lon="1"/></trkseg></trk></gpx>')
    response = upload(client, headers, lol)
    assert response.status_code == 422 and "DOCTYPE" in response.get_json()["errors"]["gpxFile"]


def test_files_over_the_cap_are_refused(client, rider):
    _, headers = rider
    big = GPX.replace(b"</gpx>", b"<!--" + b"x" * (31 * 1024 * 1024) + b"--></gpx>")
    response = upload(client, headers, big)
    assert response.status_code in (413, 422)
    assert "30 MB" in (response.get_json().get("errors", {}).get("gpxFile") or response.get_json()["detail"])
    assert count_trips() == 0


def test_missing_file_and_bad_settings_are_named(client, rider):
    _, headers = rider
    missing = client.post("/api/trips/gpx-upload", headers=headers, data={}, content_type="multipart/form-data")
    assert missing.status_code == 422 and "gpxFile" in missing.get_json()["errors"]
    bad = upload(client, headers, GPX, fatigueFactor="2")
    assert bad.status_code == 422 and "fatigueFactor" in bad.get_json()["errors"]
    unknown = upload(client, headers, GPX, status="ready")
    assert unknown.status_code == 422 and "status" in unknown.get_json()["errors"]
    assert count_trips() == 0


def test_upload_needs_the_write_scope(client, ctx):
    reader = auth(make_token(make_user(), "trips:read"))
    assert upload(client, reader, GPX).status_code == 403


def test_cli_import(app, ctx, tmp_path):
    make_user("cli@example.org")
    path = tmp_path / "ride.gpx"
    path.write_bytes(GPX)
    result = app.test_cli_runner().invoke(args=["trips", "import", "CLI@example.org", str(path)])
    assert result.exit_code == 0, result.output
    assert "3 days" in result.output
    assert count_trips() == 1
    nobody = app.test_cli_runner().invoke(args=["trips", "import", "nobody@example.org", str(path)])
    assert nobody.exit_code != 0 and "No account" in nobody.output


def test_a_huge_text_in_a_gpx_gets_the_size_refusal(client, rider):
    # A 32 MB GPX (under the request's 32 MiB) whose one comment holds 10 MB: refused for the file's size; the same
    # comment in a 20 MB file, for the text's, in the reader's language. Nothing is written either way.
    _, headers = rider
    point = b'<trkpt lat="45.1" lon="5.1"><ele>100</ele></trkpt>'

    def file_of(size: int) -> bytes:
        head = b'<gpx version="1.1" creator="t"><!--' + b"a" * 10_000_000 + b"--><trk><trkseg>"
        tail = b"</trkseg></trk></gpx>"
        return head + point * ((size - len(head) - len(tail)) // len(point)) + tail

    before = count_trips()
    big = upload(client, headers, file_of(32 * 1000 * 1000))
    assert big.status_code == 422 and big.get_json()["errors"] == {
        "gpxFile": "The GPX file is larger than the 30 MB limit."}
    french = upload(client, {**headers, "Accept-Language": "fr"}, file_of(20 * 1000 * 1000))
    assert french.status_code == 422 and french.get_json()["errors"]["gpxFile"] == (
        "Un texte du fichier GPX (un commentaire, une description, un attribut…) dépasse à lui seul la limite de "
        "9\u00a0Mo.")
    assert count_trips() == before
