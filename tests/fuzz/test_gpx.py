"""The GPX parser (trips/route/gpx.py) and the upload, fuzzed with documents built from hostile parts (encodings, BOMs,
DOCTYPEs and entities, namespaces, edge coordinates, huge text, truncation). Every case: a ParsedRoute in range or a
GpxError, nothing fetched and no local file read, the upload 201 or a 4xx that commits nothing."""
from __future__ import annotations

import io
import math
import socket
import threading

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from werkzeug.datastructures import FileStorage, MultiDict
from werkzeug.test import encode_multipart

from tests.fuzz.support import LONG, OUTCOMES, assert_bounded_message, bounded_case, fuzz_settings
from trips.route.gpx import GpxError, parse_gpx

pytestmark = pytest.mark.slow

SECRET = "fuzz-secret-7f3a"  # the content of the local file an external entity names


class Listener:
    """A TCP port on 127.0.0.1 that counts connections: an external entity or DTD must never reach it."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.connections += 1
            conn.close()

    def close(self):
        self._stop = True
        self._thread.join(2)
        self.sock.close()


@pytest.fixture(scope="module")
def outside(tmp_path_factory):
    secret = tmp_path_factory.mktemp("xxe") / "secret.txt"
    secret.write_text(SECRET)
    listener = Listener()
    yield secret, listener
    listener.close()


NUMBERS = ["45.1", "-90", "90", "-180", "180", "90.0000001", "-90.0000001", "180.0000001", "-180.0000001", "91",
           "-181", "1e400", "-1e400", "NaN", "nan", "inf", "-Infinity", "", " ", " 45.2 ", "45,2", "0x1p3", "1_000",
           "4.5e1", "+45", "--45", "45.", ".5", "0", "-0", "1e-400", "9" * 400, "٤٥", "45\x00", "&#52;&#53;"]
LATS = st.one_of(st.floats(-90, 90).map(repr), st.floats().map(repr), st.sampled_from(NUMBERS))
LONS = st.one_of(st.floats(-180, 180).map(repr), st.floats().map(repr), st.sampled_from(NUMBERS))
ELES = st.one_of(st.floats(-500, 9000).map(repr), st.sampled_from(NUMBERS))
TEXT = st.one_of(st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=20),
                 st.sampled_from(["&amp;&lt;&gt;", "&#x1F6B2;", "&#xD800;", "&#0;", "&unknown;", "<![CDATA[a<b]]>",
                                  "x" * 300, LONG, "é" * 256, "  padded  ", "<!-- c -->n", "<?pi x?>n", "&lol9;"]))
NAMESPACES = ["http://www.topografix.com/GPX/1/1", "http://www.topografix.com/GPX/1/0", None,
              "http://example.org/not-gpx", "urn:x"]


_DOCUMENTS: dict = {}


def docs(outside):
    """The document strategy for this module's secret file and listener, built once (st.composite compiles
    a wrapper each time it is called)."""
    secret, listener = outside
    key = (str(secret), listener.port)
    if key not in _DOCUMENTS:
        _DOCUMENTS[key] = documents(*key)
    return _DOCUMENTS[key]


def _point(lat, lon, ele, shape: str) -> str:
    attrs = {"both": f' lat="{lat}" lon="{lon}"', "no-lat": f' lon="{lon}"', "no-lon": f' lat="{lat}"',
             "swapped": f' lon="{lon}" lat="{lat}"', "twice": f' lat="{lat}" lat="{lat}" lon="{lon}"',
             "single-quotes": f" lat='{lat}' lon='{lon}'", "huge": f' lat="{lat}" lon="{lon}" x="{"a" * 200_000}"',
             }[shape]
    body = "" if ele is None else f"<ele>{ele}</ele>"
    return f"<trkpt{attrs}>{body}</trkpt>"


SHAPES = st.sampled_from(["both"] * 12 + ["no-lat", "no-lon", "swapped", "twice", "single-quotes", "huge"])
HOSTILE_POINTS = st.lists(st.tuples(LATS, LONS, st.one_of(st.none(), ELES), SHAPES), max_size=4)
CLEAN_POINTS = st.lists(st.tuples(st.floats(-90, 90).map(repr), st.floats(-180, 180).map(repr),
                                  st.one_of(st.none(), st.floats(-500, 9000).map(repr)), st.just("both")),
                        min_size=1, max_size=4)


@st.composite
def documents(draw, secret_path: str, port: int) -> bytes:
    ns = draw(st.sampled_from(NAMESPACES))
    prefix = draw(st.sampled_from(["", "", "", "g:"])) if ns else ""
    p = prefix
    xmlns = (f' xmlns:{prefix[:-1]}="{ns}"' if prefix else f' xmlns="{ns}"') if ns else ""
    root = draw(st.sampled_from(["gpx"] * 12 + ["GPX", "kml", "html"]))
    segments = draw(st.lists(st.one_of(CLEAN_POINTS, CLEAN_POINTS, HOSTILE_POINTS), min_size=0, max_size=2))
    tracks = "".join(
        f"<{p}trk>" + (f"<{p}name>{draw(TEXT)}</{p}name>" if draw(st.booleans()) else "")
        + "".join(f"<{p}trkseg>" + "".join(_point(*pt) for pt in seg).replace("<trkpt", f"<{p}trkpt")
                  .replace("</trkpt>", f"</{p}trkpt>").replace("<ele>", f"<{p}ele>").replace("</ele>", f"</{p}ele>")
                  + f"</{p}trkseg>" for seg in segments)
        + f"</{p}trk>" for _ in range(draw(st.sampled_from([1, 1, 1, 2, 0]))))
    extras = draw(st.sampled_from(["", "", "", "", "", f"<{p}metadata><{p}name>{draw(TEXT)}</{p}name></{p}metadata>",
                                   f'<{p}wpt lat="1" lon="2"/>', f'<{p}rte><{p}rtept lat="1" lon="2"/></{p}rte>',
                                   "&xxe;", "&lol9;", "<extensions><a><b><c/></b></a></extensions>"]))
    text = f"<{p}{root}{xmlns} version=\"1.1\">{extras}{tracks}</{p}{root}>"
    doctype = draw(st.sampled_from([None] * 16 + [
        '<!DOCTYPE gpx [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">'
        '<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;"><!ENTITY lol9 "&lol3;&lol3;">]>',
        f'<!DOCTYPE gpx [<!ENTITY xxe SYSTEM "file://{secret_path}">]>',
        f'<!DOCTYPE gpx [<!ENTITY xxe SYSTEM "http://127.0.0.1:{port}/x">]>',
        f'<!DOCTYPE gpx SYSTEM "http://127.0.0.1:{port}/gpx.dtd">',
        f'<!DOCTYPE gpx [<!ENTITY % p SYSTEM "http://127.0.0.1:{port}/p.dtd"> %p;]>',
        "<!doctype gpx>", "<!DocType gpx []>", "<!-- a comment --><!DOCTYPE gpx>"]))
    declaration = draw(st.sampled_from(["", '<?xml version="1.0" encoding="UTF-8"?>'] * 5 + [ '<?xml version="1.0"?>', '<?xml version="1.0" encoding="UTF-8"?>', '<?xml version="1.0" encoding="ISO-8859-1"?>',
        '<?xml version="1.0" encoding="UTF-16"?>', '<?xml version="1.0" encoding="cp500"?>',
        '<?xml version="1.0" encoding="UTF-7"?>', '<?xml version="1.0" encoding="nope"?>',
        '<?xml version="1.1"?>', '<?xml version="1.0" standalone="no"?>', "<?xml " + "a" * 2000 + "?>"]))
    document = declaration + (doctype or "") + text
    encoding = draw(st.sampled_from(["utf-8"] * 12 + ["utf-16", "utf-16-le", "utf-32", "latin-1", "cp500", "utf-7"]))
    try:
        data = document.encode(encoding)
    except UnicodeEncodeError:
        data = document.encode("utf-8")
    bom = draw(st.sampled_from([b""] * 12 + [b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff", b"\xff\xfe\x00\x00"]))
    data = bom + data
    cut = draw(st.sampled_from([None] * 9 + ["cut"]))
    if cut and len(data) > 1:
        data = data[:draw(st.integers(1, len(data) - 1))]
    return data


BILLION_LAUGHS = (b'<?xml version="1.0"?><!DOCTYPE gpx [<!ENTITY a "aaaaaaaaaa">'  # 10^10 characters
                  + b"".join(b'<!ENTITY %c "%s">' % (98 + i, b"&%c;" % (97 + i) * 10) for i in range(9))
                  + b']><gpx><trk><name>&j;</name><trkseg><trkpt lat="1" lon="2"/></trkseg></trk></gpx>')


def _check_route(route, secret) -> None:
    points = route.points
    assert points.ndim == 2 and points.shape[1] == 3 and len(points) > 0
    assert np.isfinite(points[:, :2]).all()
    # a height is a number or unknown (NaN: no <ele>, docs/RULES.md "Elevation"), never an infinity
    assert not np.isinf(points[:, 2]).any()
    assert (np.abs(points[:, 0]) <= 90).all() and (np.abs(points[:, 1]) <= 180).all()
    if route.title is not None:
        assert len(route.title) <= 255 and SECRET not in route.title


def _parse(data: bytes, outside) -> str:
    secret, listener = outside
    seen = listener.connections
    with bounded_case("gpx parser", limit=10):
        try:
            route = parse_gpx(data)
        except GpxError as refused:
            assert refused.message and len(refused.message) <= 300 and SECRET not in refused.message
            assert_bounded_message(refused.message, "a GPX refusal")
            outcome = "refused"
        else:
            _check_route(route, secret)
            outcome = "parsed"
    assert listener.connections == seen, "the parser reached the network"
    OUTCOMES[("gpx parser", outcome)] += 1
    return outcome


@given(data=st.data())
@fuzz_settings(1300)
def test_fuzz_gpx_parser(outside, data):
    _parse(data.draw(docs(outside)), outside)


@given(data=st.binary(max_size=400))
@fuzz_settings(700)
def test_fuzz_gpx_parser_bytes(outside, data):
    _parse(data, outside)


FORM_VALUES = st.sampled_from(["", " ", "0", "-1", "1e400", "NaN", "inf", "true", "yes", "2026-02-30", "2031-06-01",
                               "2031-06-03", "0.5", "1.0", "23", "24", "30", "300", "301", "hotel", "HOTEL", "a\x00b",
                               "\ufffd", LONG])
SETTINGS = st.dictionaries(st.sampled_from(["title", "startDate", "endDate", "fatigueFactor", "elevationPenalty",
                                            "ebikeMode", "departureHour", "maxDistancePerDay", "averageSpeed",
                                            "enabledAccommodationTypes", "sourceUrl", "unknown"]),
                           st.one_of(FORM_VALUES, st.lists(FORM_VALUES, min_size=2, max_size=3)), max_size=3)


@given(data=st.data(), settings=st.one_of(st.just({}), SETTINGS), as_file=st.sampled_from([True] * 5 + [False]))
@fuzz_settings(150)
def test_fuzz_gpx_upload(client, world, ledger, unlimited, outside, data, settings, as_file):
    secret, listener = outside
    document = data.draw(docs(outside))
    form = MultiDict([("gpxFile", FileStorage(io.BytesIO(document), "ride.gpx") if as_file
                           else document.decode("latin-1"))])
    for name, value in settings.items():
        for item in value if isinstance(value, list) else [value]:
            form.add(name, item)
    # encoded here, in memory: the test client spools a body over 500 KB to a temporary file it never closes
    boundary, body = encode_multipart(form)
    seen = listener.connections
    with bounded_case("gpx upload"):
        before = ledger.look()
        response = client.post("/api/trips/gpx-upload", headers=world.rest, data=body,
                               content_type=f"multipart/form-data; boundary={boundary}")
        assert response.status_code < 500, response.data[:300]
        if response.status_code >= 400:
            assert response.mimetype == "application/problem+json", response.mimetype
            raw = response.get_data(as_text=True)
            assert SECRET not in raw
            assert_bounded_message(raw, "a GPX upload refusal")
            ledger.assert_unchanged(before, "GPX upload")
        else:
            assert response.status_code == 201, response.status_code
            assert SECRET not in response.get_data(as_text=True)
    assert listener.connections == seen, "the upload reached the network"
    OUTCOMES[("gpx upload", "refused" if response.status_code >= 400 else "stored")] += 1


def test_edges_and_entities_answer_as_they_should(outside):
    """The checks above can fail: the edges of the range parse, one step past them and an entity bomb do not."""
    assert _parse(BILLION_LAUGHS, outside) == "refused"
    assert _parse(b'<gpx><trk><trkseg><trkpt lat="90" lon="-180"><ele>1</ele></trkpt></trkseg></trk></gpx>',
                  outside) == "parsed"
    assert _parse(b'<gpx><trk><trkseg><trkpt lat="90.0000001" lon="0"/></trkseg></trk></gpx>', outside) == "refused"
    assert _parse(b'<gpx><trk><trkseg><trkpt lat="NaN" lon="0"/></trkseg></trk></gpx>', outside) == "refused"
    assert math.isfinite(parse_gpx(b'<gpx><trk><trkseg><trkpt lat="1" lon="2"/></trkseg></trk></gpx>').points[0, 0])
