import io
import random
import resource

import numpy as np
import pytest
from lxml import etree
from werkzeug.datastructures import FileStorage

from trips.core import i18n
from trips.route import gpx as gpx_module
from trips.route import gpx_fast
from trips.route.gpx import MAX_BYTES, GpxError, parse_gpx

NS11 = "http://www.topografix.com/GPX/1/1"
NS10 = "http://www.topografix.com/GPX/1/0"
INVALID = "The file is not a valid GPX document."
DOCTYPE = "GPX documents with a DOCTYPE are not allowed."


def gpx(body: str, ns: str | None = NS11, decl: str = '<?xml version="1.0" encoding="UTF-8"?>\n') -> bytes:
    xmlns = f' xmlns="{ns}"' if ns else ""
    return f'{decl}<gpx version="1.1" creator="t"{xmlns}>{body}</gpx>'.encode()


def trk(points: str, name: str | None = None) -> str:
    title = f"<name>{name}</name>" if name is not None else ""
    return f"<trk>{title}<trkseg>{points}</trkseg></trk>"


def pt(lat, lon, ele=None, extra="") -> str:
    inner = (f"<ele>{ele}</ele>" if ele is not None else "") + extra
    return f'<trkpt lat="{lat}" lon="{lon}">{inner}</trkpt>'


def refused(data, message=None, **kw) -> str:
    with pytest.raises(GpxError) as info:
        parse_gpx(data, **kw)
    said = i18n.say(info.value.message, "en")  # a key: the refusal in English
    if message is not None:
        assert said == i18n.say(message, "en")
    assert str(info.value) == said
    return said


def reference_points(data: bytes) -> np.ndarray:
    """Independent reading of the same rule with a plain full-tree parse."""
    root = etree.fromstring(data)
    rows = []
    for p in root.iter("{*}trkpt"):
        ele = next((c.text for c in p if etree.QName(c).localname == "ele"), None)
        rows.append((float(p.get("lat")), float(p.get("lon")), float(ele) if ele and ele.strip() else np.nan))
    return np.array(rows).reshape(-1, 3)


class Dribble:
    """A binary stream that hands out random small pieces, to move chunk boundaries around."""

    def __init__(self, data: bytes, seed: int, most: int = 700):
        self.data, self.pos, self.rng, self.most = data, 0, random.Random(seed), most

    def read(self, n=-1):
        k = min(n, self.rng.randint(1, self.most))
        out = self.data[self.pos:self.pos + k]
        self.pos += k
        return out


# ------------------------------------------------------------------ reading


@pytest.mark.parametrize("ns", [NS11, NS10, None])
def test_track_points_with_and_without_namespace(ns):
    data = gpx(trk(pt(45.1, 5.2, 210.5) + pt(45.2, 5.3, "  211  ") + pt(45.3, 5.4)), ns=ns)
    route = parse_gpx(data)
    assert len(route.tracks) == 1
    assert route.tracks[0].dtype == np.float64
    assert comparable(route.tracks[0]) == [[45.1, 5.2, 210.5], [45.2, 5.3, 211.0], [45.3, 5.4, None]]


def test_prefixed_namespace():
    data = (f'<g:gpx xmlns:g="{NS11}"><g:trk><g:name>P</g:name><g:trkseg>'
            '<g:trkpt lat="1" lon="2"><g:ele>3</g:ele></g:trkpt></g:trkseg></g:trk></g:gpx>').encode()
    route = parse_gpx(data)
    assert route.title == "P" and route.points.tolist() == [[1.0, 2.0, 3.0]]


def test_missing_or_blank_elevation_is_unknown_not_zero_and_bad_elevation_refused():
    """docs/RULES.md "Elevation": a point without <ele> (or with a blank one) has an unknown elevation, NaN, not 0."""
    data = gpx(trk(pt(1, 2, "") + pt(1, 3) + pt(1, 4, 5) + pt(1, 5, extra="<time>2024-01-01T00:00:00Z</time>")))
    assert comparable(parse_gpx(data).points)[:4] == [[1, 2, None], [1, 3, None], [1, 4, 5.0], [1, 5, None]]
    refused(gpx(trk(pt(1, 2, "inf"))), "A track point has an elevation that is not a number.")
    assert refused(gpx(trk(pt(1, 2, "high")))) == "A track point has an elevation that is not a number."
    refused(gpx(trk(pt(1, 2, "nan"))), "A track point has an elevation that is not a number.")


def test_routes_and_waypoints_are_ignored():
    body = '<wpt lat="9" lon="9"><name>W</name></wpt><rte><name>R</name><rtept lat="8" lon="8"/></rte>'
    assert comparable(parse_gpx(gpx(body + trk(pt(1, 2), "T"))).points) == [[1.0, 2.0, None]]
    refused(gpx(body), "The GPX file has no track points.")


def test_tracks_and_segments_are_concatenated_in_document_order():
    two_segs = f"<trk><name>A</name><trkseg>{pt(1, 1)}{pt(1, 2)}</trkseg><trkseg>{pt(1, 3)}</trkseg></trk>"
    data = gpx(two_segs + trk("") + trk(pt(2, 1) + pt(2, 2), "B"))
    route = parse_gpx(data)
    assert route.title == "A"
    assert len(route.tracks) == 1
    assert route.points[:, :2].tolist() == [[1, 1], [1, 2], [1, 3], [2, 1], [2, 2]]


def test_split_tracks_gives_one_array_per_trk():
    two_segs = f"<trk><name>A</name><trkseg>{pt(1, 1)}{pt(1, 2)}</trkseg><trkseg>{pt(1, 3)}</trkseg></trk>"
    data = gpx(two_segs + trk("", "empty") + trk(pt(2, 1) + pt(2, 2), "B"))
    route = parse_gpx(data, split_tracks=True)
    assert [t[:, :2].tolist() for t in route.tracks] == [[[1, 1], [1, 2], [1, 3]], [[2, 1], [2, 2]]]
    assert same(route.points, parse_gpx(data).points)



def test_long_tracks_keep_every_point_in_order_across_chunks_and_segments(monkeypatch):
    """Each track's points are gathered into one array grown in place: 30 000 points in uneven segments,
    read in small chunks, come back whole, in order, one array per track when split."""
    monkeypatch.setattr(gpx_module, "_CHUNK_BYTES", 4096)
    rng = np.random.default_rng(5)
    lat, lon = rng.uniform(-80, 80, 30_000).round(6), rng.uniform(-170, 170, 30_000).round(6)
    cuts = [0, 3, 9_000, 9_001, 20_000, 30_000]
    segs = ["<trkseg>" + "".join(pt(la, lo) for la, lo in zip(lat[a:b], lon[a:b])) + "</trkseg>"
            for a, b in zip(cuts, cuts[1:])]
    data = gpx(f"<trk>{''.join(segs[:3])}</trk><trk>{''.join(segs[3:])}</trk>")
    route = parse_gpx(data)
    assert same(route.points[:, 0], lat) and same(route.points[:, 1], lon)
    split = parse_gpx(data, split_tracks=True)
    assert [len(t) for t in split.tracks] == [9_001, 20_999]
    assert same(np.concatenate(split.tracks), route.points)

# ------------------------------------------------------------------ title


@pytest.mark.parametrize("body, title", [
    (trk(pt(1, 2), "  Tour du Mont Blanc \n"), "Tour du Mont Blanc"),
    (trk(pt(1, 2), "   "), None),
    (trk(pt(1, 2)), None),
    (trk(pt(1, 2), "Tour &amp; Co"), "Tour & Co"),
    ("<metadata><name>Meta</name></metadata>" + trk(pt(1, 2)), "Meta"),  # the document's own name wins
    (trk(pt(1, 2)) + trk(pt(2, 2), "Second"), None),  # only the first <trk>
    (f"<trk><trkseg>{pt(1, 2)}</trkseg><name>Late</name></trk>", None),  # after the first point
    (trk(pt(1, 2, extra="<name>Point</name>"), None), None),
    (trk(pt(1, 2), "é" * 300), "é" * 254 + "…"),  # one word: cut at the limit, the ellipsis inside it
    (trk(pt(1, 2), "Tour " * 60), ("Tour " * 51).strip() + "…"),  # else at a word (docs/RULES.md "Shortened names")
])
def test_title_rules(body, title):
    assert parse_gpx(gpx(body)).title == title


# ------------------------------------------------------------------ sources and streaming


def test_file_like_sources(tmp_path):
    data = gpx(trk(pt(1, 2, 3), "F"))
    path = tmp_path / "t.gpx"
    path.write_bytes(data)
    with open(path, "rb") as f:
        assert parse_gpx(f).title == "F"
    storage = FileStorage(stream=io.BytesIO(data), filename="t.gpx", content_type="application/gpx+xml")
    assert parse_gpx(storage.stream).points.tolist() == [[1.0, 2.0, 3.0]]
    assert parse_gpx(bytearray(data)).title == "F"
    with open(path, encoding="utf-8") as f, pytest.raises(TypeError):
        parse_gpx(f)
    with pytest.raises(TypeError):
        parse_gpx("not bytes")


@pytest.mark.parametrize("chunk", [5, 61, 777, 256 * 1024])
def test_chunk_boundaries_do_not_matter(chunk, monkeypatch):
    rng = np.random.default_rng(5)
    points = []
    for i in range(1200):
        ele = None if i % 7 == 0 else round(float(rng.uniform(0, 900)), 1)
        extra = "<time>2024-06-01T08:00:00Z</time><extensions><x>1</x></extensions>" if i % 3 else ""
        points.append(pt(round(45 + i * 1e-4, 7), round(5 + i * 1e-4, 7), ele, extra))
    segs = "".join(f"<trkseg>{''.join(points[i:i + 400])}</trkseg>" for i in range(0, 1200, 400))
    data = gpx(f"<trk><name>C</name>{segs}</trk>")
    expected = reference_points(data)
    monkeypatch.setattr(gpx_module, "_CHUNK_BYTES", chunk)
    for source in (data, Dribble(data, chunk, most=2 * chunk)):
        route = parse_gpx(source)
        assert route.title == "C"
        assert same(route.points, expected)


def test_utf16_document_is_read():
    data = gpx(trk(pt(1, 2, 3), "Été"), decl='<?xml version="1.0" encoding="UTF-16"?>').decode().encode("utf-16")
    route = parse_gpx(data)
    assert route.title == "Été" and route.points.tolist() == [[1.0, 2.0, 3.0]]


# ------------------------------------------------------------------ hostile input


@pytest.mark.parametrize("doctype", ["<!DOCTYPE gpx>", "<!doctype gpx>", "<!DocType gpx SYSTEM 'x.dtd'>"])
def test_doctype_is_refused(doctype):
    data = gpx(trk(pt(1, 2)), decl=f'<?xml version="1.0"?>\n{doctype}\n')
    refused(data, DOCTYPE)
    refused(Dribble(data, 1, most=2), DOCTYPE)  # split across reads


def test_billion_laughs_is_refused_without_expanding():
    entities = ['<!ENTITY lol "lol">'] + [
        f'<!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">' for i in range(1, 10)]
    data = (f'<?xml version="1.0"?>\n<!DOCTYPE gpx [{"".join(entities)}]>\n'
            f'<gpx><trk><name>&lol9;</name><trkseg>{pt(1, 2)}</trkseg></trk></gpx>').encode()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    refused(data, DOCTYPE)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 50 * 1024  # KiB


def test_external_entity_is_refused_and_not_resolved():
    data = ('<?xml version="1.0"?>\n<!DOCTYPE gpx [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>\n'
            f'<gpx><trk><name>&xxe;</name><trkseg>{pt(1, 2)}</trkseg></trk></gpx>').encode()
    message = refused(data, DOCTYPE)
    assert "root" not in message
    # Without a DOCTYPE the reference is undeclared: not well-formed.
    refused(f'<gpx><trk><name>&xxe;</name><trkseg>{pt(1, 2)}</trkseg></trk></gpx>'.encode(), INVALID)


def test_doctype_hidden_by_encoding_is_refused():
    utf16 = ('<?xml version="1.0" encoding="UTF-16"?><!DOCTYPE gpx [<!ENTITY a "b">]>'
             f'<gpx><trk><trkseg>{pt(1, 2)}</trkseg></trk></gpx>').encode("utf-16")
    refused(utf16, DOCTYPE)
    refused(utf16.decode("utf-16").encode("utf-16-be"), DOCTYPE)  # no BOM
    for encoding in ("UTF-7", "IBM037", "ISO-2022-JP", "no-such-encoding"):
        refused(gpx(trk(pt(1, 2)), decl=f'<?xml version="1.0" encoding="{encoding}"?>'), INVALID)
    for encoding in ("ISO-8859-1", "windows-1252", "Shift_JIS", "us-ascii"):
        assert parse_gpx(gpx(trk(pt(1, 2), "T"), decl=f'<?xml version="1.0" encoding="{encoding}"?>')).title == "T"
    refused("<gpx/>".encode("cp037"), INVALID)  # EBCDIC without declaration
    long_decl = '<?xml version="1.0"' + " " * 2000 + 'encoding="UTF-7"?>'
    refused(gpx(trk(pt(1, 2)), decl=long_decl), INVALID)


class Padding:
    """A stream of `size` bytes of well-formed GPX (waypoints as padding), produced as it is read."""

    def __init__(self, size: int):
        self.head = gpx("", ns=None)[:-6]  # without "</gpx>"
        self.unit = b'<wpt lat="1" lon="2"/>\n'
        self.block = self.unit * (1 + 2 * 1024 * 1024 // len(self.unit))
        self.size, self.served = size, 0

    def read(self, n=-1):
        k = min(n, self.size - self.served)
        if k <= 0:
            return b""
        out = self.head[self.served:self.served + k]
        pos = (self.served + len(out) - len(self.head)) % len(self.unit)
        out += self.block[pos:pos + k - len(out)]
        self.served += k
        return out


def test_too_large_is_refused_while_streaming():
    stream = Padding(31 * 1000 * 1000 + MAX_BYTES - 30 * 1000 * 1000)  # 31 MB
    message = refused(stream)
    assert message == "The GPX file is larger than the 30 MB limit."
    assert stream.served <= MAX_BYTES + 1024 * 1024  # stopped early, not read to the end
    refused(gpx(trk(pt(1, 2))), max_bytes=50)
    assert parse_gpx(gpx(trk(pt(1, 2))), max_bytes=1000).points.shape == (1, 3)


@pytest.mark.parametrize("data", [b"", b"   \n", b"hello", b"<gpx><trk>", b"<gpx></gpx><gpx/>", b"\x00\x01\x02",
                                  b'<foo><trk><trkseg><trkpt lat="1" lon="2"/></trkseg></trk></foo>'])
def test_not_a_gpx_document(data):
    refused(data, INVALID)


def test_no_track_points():
    refused(gpx(""), "The GPX file has no track points.")
    refused(gpx(trk("", "Only a name")), "The GPX file has no track points.")


@pytest.mark.parametrize("lat, lon, message", [
    (91, 5, "A track point has a latitude outside -90..90."),
    (-90.5, 5, "A track point has a latitude outside -90..90."),
    (45, 180.5, "A track point has a longitude outside -180..180."),
    (45, -181, "A track point has a longitude outside -180..180."),
    ("SECRET-VALUE", 5, "A track point has a latitude or longitude that is not a number."),
    (45, "", "A track point has a latitude or longitude that is not a number."),
    ("nan", 5, "A track point has a latitude or longitude that is not a number."),
    (45, "inf", "A track point has a latitude or longitude that is not a number."),
])
def test_bad_coordinates_are_named_not_echoed(lat, lon, message):
    got = refused(gpx(trk(pt(1, 2) + pt(lat, lon))), message)
    assert "SECRET" not in got


def test_missing_coordinates_and_limits():
    refused(gpx(trk('<trkpt lat="1"/>')), "A track point has no latitude or longitude.")
    refused(gpx(trk('<trkpt/>' + pt(1, 2))), "A track point has no latitude or longitude.")
    assert parse_gpx(gpx(trk(pt(90, -180) + pt(-90, 180)))).points[:, :2].tolist() == [[90, -180], [-90, 180]]


def test_open_point_keeps_its_elevation_while_pruned(monkeypatch):
    monkeypatch.setattr(gpx_module, "_CHUNK_BYTES", 61)
    noise = "<a>1</a>" * 300
    point = f'<trkpt lat="1" lon="2"><time>t</time>{noise}<ele>7</ele><ele>8</ele>{noise}<extensions>{noise}' \
            f'</extensions></trkpt>'
    route = parse_gpx(gpx(trk(point + pt(1, 3, 9))))
    assert route.points.tolist() == [[1.0, 2.0, 7.0], [1.0, 3.0, 9.0]]


# ------------------------------------------------------------------ fast path (segments read from the bytes)


def lxml_only(monkeypatch):
    """parse_gpx as it was before the fast path: every point through lxml."""
    monkeypatch.setattr(gpx_fast, "_fast_allowed", lambda head: False)


def outcome(data, **kw):
    try:
        route = parse_gpx(data, **kw)
    except GpxError as exc:
        return "refused", exc.message
    return route.title, [comparable(t) for t in route.tracks]


def same(a, b) -> bool:
    """Equal arrays, a missing elevation (NaN) equal to another."""
    return np.array_equal(a, b, equal_nan=True)


def comparable(points) -> list:
    """Points as lists, a missing elevation (NaN) as None so that two readings compare equal."""
    return [[None if v != v else v for v in row] for row in np.asarray(points).tolist()]


def fast_points(monkeypatch) -> list:
    """Count the points the fast path reads."""
    seen, scan = [0], gpx_fast._scan_points

    def counting(buf):
        end, block = scan(buf)
        seen[0] += 0 if block is None else len(block)
        return end, block

    monkeypatch.setattr(gpx_fast, "_scan_points", counting)
    return seen


PLAIN = '<trkpt lat="{la}" lon="{lo}">\n  <ele>{el}</ele>\n  <time>2024-06-01T08:00:00Z</time>\n</trkpt>\n'


def test_plain_segments_are_read_by_the_fast_path_with_the_same_result(monkeypatch):
    rng = np.random.default_rng(7)
    lat, lon = rng.uniform(-89, 89, 5000).round(7), rng.uniform(-179, 179, 5000).round(7)
    ele = rng.uniform(-50, 4000, 5000).round(1)
    body = "".join(PLAIN.format(la=a, lo=o, el=e) for a, o, e in zip(lat, lon, ele))
    data = gpx(f"<trk><name>F</name><trkseg>\n{body}</trkseg><trkseg>{body[:len(body) // 2]}"
               f"{body[len(body) // 2:]}</trkseg></trk>")
    seen = fast_points(monkeypatch)
    route = parse_gpx(data)
    assert seen[0] == 10_000 and route.title == "F"
    assert same(route.points, np.tile(np.column_stack((lat, lon, ele)), (2, 1)))
    monkeypatch.setattr(gpx_module, "_CHUNK_BYTES", 333)
    assert same(parse_gpx(Dribble(data, 3, most=900)).points, route.points)
    lxml_only(monkeypatch)
    assert same(parse_gpx(data).points, route.points)


@pytest.mark.parametrize("lat, lon, ele", [
    ("1e3", "5", "1"), ("+5", "-5", "+1E2"), (" 5 ", "5", "1"), ("5", "5", " 5 "), ("5.", ".5", "-.5e-3"),
    ("00012", "5", "00012"), ("nan", "5", "1"), ("5", "inf", "1"), ("5", "5", "nan"), ("1e999", "5", "1"),
    ("5", "5", "1e999"), ("1_0", "5", "1"), ("5", "5", "1_0"), ("\u0665", "5", "1"), ("", "5", "1"),
    ("1.2.3", "5", "1"), ("1-2", "5", "1"), ("--1", "5", "1"), ("e", "5", "1"), ("5", "5", "1.2.3"),
    ("5", "5", ""), ("5", "5", "e5"), ("-0", "-0", "-0"), ("45.00000000000000000000000000000000000000000000001", "5", "1"),
    ("5>", "5", "1"), ("1'", "5", "1"), ("4 5", "5", "1"), ("5\t", "\n5", "\t5\r\n"), ("5", "5", "1>2"),
    ("5", "5", " \n "), ("5", "5", "0x10"), ("Infinity", "5", "1"), ("5", "5", "-iNF"), ("5", "5", "1,5"),
])
def test_number_formats_read_as_before(lat, lon, ele, monkeypatch):
    """Each coordinate and elevation form gives what the lxml path gives (value or message), alone or
    among plain points, whichever path reads it."""
    odd = PLAIN.format(la=lat, lo=lon, el=ele)
    plain = PLAIN.format(la=1, lo=2, el=3)
    docs = [gpx(trk(odd)), gpx(trk(plain * 3 + odd + plain * 3))]
    got = [outcome(d) for d in docs]
    lxml_only(monkeypatch)
    assert got == [outcome(d) for d in docs]


def test_numpy_reads_bytes_as_float_does():
    """The fast path converts bytes with numpy: on printable ASCII it accepts and reads exactly what
    float() does (what the lxml path uses)."""
    rng = random.Random(5)
    alphabet = bytes(range(32, 127)) + b"\t\n\r"
    cases = []
    for _ in range(20_000):
        base = bytearray(rng.choice([b"45.123", b"-5", b"1e5", b".5", b"7", b"inf", b"nan", b"1_000", b" 3 "]))
        for _ in range(rng.randint(0, 2)):
            base.insert(rng.randint(0, len(base)), rng.choice(alphabet))
        cases += [bytes(base), bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 6)))]

    def read(convert, text):
        try:
            value = convert(text)
        except ValueError:
            return "refused"
        return "nan" if value != value else value

    for text in cases:
        assert read(lambda t: np.array([t], dtype="S16").astype(np.float64)[0], text) == \
            read(lambda t: float(t.decode()), text), text


@pytest.mark.parametrize("time_text, message", [
    ("a ]]> b", INVALID), ("a \x01 b", INVALID), ("a & b", INVALID), ("&undefined;", INVALID),
    ("a &amp; b", None), ("a > b", None), ("é", None), ("<![CDATA[x]]>", None),
])
def test_time_text_is_checked_as_xml(time_text, message, monkeypatch):
    point = f'<trkpt lat="1" lon="2"><ele>3</ele><time>{time_text}</time></trkpt>'
    data = gpx(trk(PLAIN.format(la=1, lo=1, el=1) * 3 + point))
    if message:
        refused(data, message)
    else:
        assert parse_gpx(data).points[-1].tolist() == [1.0, 2.0, 3.0]
    got = outcome(data)
    lxml_only(monkeypatch)
    assert got == outcome(data)


def test_fast_path_stays_off_where_it_cannot_see(monkeypatch):
    plain = PLAIN.format(la=1, lo=2, el=3) * 50
    seen = fast_points(monkeypatch)
    for data in (
        gpx(trk(plain), decl='<?xml version="1.0" encoding="UTF-16"?>').decode().encode("utf-16"),
        gpx("<!-- <trkseg> -->" + trk(plain)),
        gpx(trk(plain), decl='<?xml version="1.0" encoding="ISO-8859-1"?>'),
        gpx(f"<trk><trkseg >{plain}</trkseg></trk>"),
        gpx(f'<trk><trkseg xmlns="{NS10}">{plain}</trkseg></trk>'),
    ):
        assert parse_gpx(data).points.tolist() == [[1.0, 2.0, 3.0]] * 50
    assert seen[0] == 0
    assert parse_gpx(gpx(trk(plain), decl="\ufeff<?xml version='1.0' encoding='utf-8'?>")).points.shape == (50, 3)
    assert seen[0] == 50


def test_points_in_other_forms_continue_through_lxml_in_order(monkeypatch):
    plain = "".join(PLAIN.format(la=1, lo=i / 10, el=i) for i in range(300))
    odd = [
        '<trkpt lon="7" lat="1"><ele>7</ele></trkpt>', "<trkpt lat='1' lon='7'/>",
        '<trkpt lat="1" lon="7"><extensions><ele>9</ele><trkpt lat="3" lon="3"/></extensions></trkpt>',
        '<trkpt lat="1" lon="7"><time>t</time><ele>7</ele></trkpt>', '<trkpt lat="1" lon="7" x="y"><ele>7</ele></trkpt>',
        '<trkpt lat="1" lon="7"><ele>7</ele><ele>8</ele></trkpt>', '<extensions><trkpt lat="3" lon="3"/></extensions>',
        '<trkpt lat="1" lon="7"><!-- c --><ele>7</ele></trkpt>', "junk",
    ]
    for point in odd:
        data = gpx(trk(plain + point + plain) + trk(plain))
        for split in (False, True):
            got = outcome(data, split_tracks=split)
            with monkeypatch.context() as m:
                lxml_only(m)
                assert got == outcome(data, split_tracks=split), point
        assert len(parse_gpx(data).points) in (900, 901)


def test_random_documents_read_alike_on_both_paths(monkeypatch):
    """Plain points mixed with points in other forms, bad values, odd segments and encodings, fed in
    random pieces: the same points, title or message as the lxml path."""
    rng = random.Random(11)
    forms = [PLAIN, '<trkpt lat="{la}" lon="{lo}"></trkpt>', '<trkpt lat="{la}" lon="{lo}"><ele></ele></trkpt>',
             '\t<trkpt lat="{la}" lon="{lo}"><time>2024-06-01T08:00:00.5+02:00</time></trkpt>\r\n',
             '<trkpt lat="{zeros}1.5" lon="{lo}">{gap}<ele>{zeros}7</ele>{gap}</trkpt>{gap}']  # word edges
    others = ['<trkpt lon="{lo}" lat="{la}"><ele>{el}</ele></trkpt>', "<trkpt lat='{la}' lon='{lo}'/>",
              '<trkpt lat="{la}" lon="{lo}"><ele> {el} </ele></trkpt>', '<trkpt lat="&#52;5" lon="{lo}"/>',
              '<trkpt lat="{la}" lon="{lo}"><ele><![CDATA[{el}]]></ele></trkpt>', '<foo/>',
              '<trkpt lat="{la}" lon="{lo}"><time>{long}</time></trkpt>', '<trkpt lat="0.{digits}" lon="{lo}"/>']
    bad = ['<trkpt lat="nan" lon="{lo}"/>', '<trkpt lat="{la}" lon="{lo}"><ele>1e999</ele></trkpt>',
           '<trkpt lat="1.2.3" lon="{lo}"></trkpt>', '<trkpt lat="91" lon="{lo}"></trkpt>', '<trkpt lat="{la}"/>',
           '<trkpt lat="{la}" lon="{lo}"><ele>x</ele></trkpt>', '<trkpt lat="{la}" lon="{lo}"><time>]]></time></trkpt>',
           '<trkpt lat="{la}" lon="{lo}"><ele>1</ele>', '<trkpt lat="{la}" lon="{lo}"></trkpt></trkpt>']
    for case in range(60):
        odd_share = rng.choice([0, 0.002, 0.05])

        def point(kind=None):
            template = kind or (rng.choice(others) if rng.random() < odd_share else rng.choice(forms))
            gap = "".join(rng.choice(" \t\r\n") for _ in range(rng.randint(0, 20)))
            if rng.random() < 0.1:
                gap += rng.choice("x>=")
            return template.format(la=round(rng.uniform(-89, 89), rng.randint(0, 8)), el=rng.randint(-9, 999),
                                   zeros="0" * rng.randint(0, 34), gap=gap,
                                   lo=round(rng.uniform(-179, 179), rng.randint(0, 8)), long="x" * 9000,
                                   digits="1" * rng.choice([5, 60]))

        segs, n_segs = [], rng.randint(1, 3)
        bad_in = rng.randrange(n_segs) if rng.random() < 0.4 else None  # one error at most: one message
        for i in range(n_segs):
            pts = [point() for _ in range(rng.choice([0, 1, 40, 900]))]
            if i == bad_in:
                pts.insert(rng.randint(0, len(pts)), point(rng.choice(bad)))
            segs.append(rng.choice(["<trkseg>", "<trkseg>", "<trkseg >"]) + "\n".join(pts) + "</trkseg>")
        body = rng.choice(["", "<metadata><name>M</name></metadata>", "<!-- x -->"]) + \
            f"<trk>{rng.choice(['', '<name>T</name>'])}{segs[0]}</trk><trk>{''.join(segs[1:])}</trk>"
        data = gpx(body, ns=rng.choice([NS11, NS10, None]))
        chunk = rng.choice([61, 4096, 256 * 1024])
        split = rng.random() < 0.3
        with monkeypatch.context() as m:
            m.setattr(gpx_module, "_CHUNK_BYTES", chunk)
            got = outcome(Dribble(data, case, most=2 * chunk), split_tracks=split)
            lxml_only(m)
            assert got == outcome(Dribble(data, case, most=2 * chunk), split_tracks=split), case


@pytest.mark.parametrize("points_per_segment", [1, 3, 100, 5000])
def test_many_segments_cost_linear_time(points_per_segment, monkeypatch):
    """Each fast-path scan starts where the last one stopped and on a window that grows from 1 KB, and
    short segments hand the document back to lxml after a trial: the bytes scanned stay within a small
    multiple of the document, however its segments are cut (they were quadratic in a chunk's segments)."""
    point = PLAIN.format(la=1.5, lo=2.5, el=3)
    n_segments = max(20_000 // points_per_segment, 2)
    data = gpx("<trk>" + f"<trkseg>{point * points_per_segment}</trkseg>\n" * n_segments + "</trk>")
    scanned, scan = [0], gpx_fast._scan_points

    def counting(buf):
        scanned[0] += len(buf)
        return scan(buf)

    monkeypatch.setattr(gpx_fast, "_scan_points", counting)
    route = parse_gpx(data)
    assert len(route.points) == n_segments * points_per_segment
    assert scanned[0] <= 4 * len(data)
    lxml_only(monkeypatch)
    assert same(parse_gpx(data).points, route.points)


TEXT_REFUSAL = "A single text in the GPX file (a comment, a description, an attribute…) is larger than the 9 MB limit."
HEAD = b'<?xml version="1.0"?><gpx version="1.1" creator="t" xmlns="http://www.topografix.com/GPX/1/1">'
POINTS = b'<trkpt lat="45.1" lon="5.1"><ele>100</ele></trkpt>' * 2000


def with_text(kind: str, size: int) -> bytes:
    """A valid GPX holding one text of `size` bytes: a comment, a processing instruction, a CDATA section, a
    description or an attribute value (in an extension), before, inside or after the track."""
    text = b"a" * size
    big = {"comment": b"<!--" + text + b"-->", "pi": b"<?note " + text + b"?>",
           "cdata": b"<desc><![CDATA[" + text + b"]]></desc>", "desc": b"<desc>" + text + b"</desc>",
           "attribute": b'<extensions><x:e xmlns:x="urn:x" v="' + text + b'"/></extensions>'}[kind]
    track = b"<trk><trkseg>" + POINTS + b'<trkpt lat="45.2" lon="5.2">' + (big if kind in ("desc", "attribute")
                                                                             else b"") + b"</trkpt>"
    return HEAD + (big if kind not in ("desc", "attribute") else b"") + track + POINTS + b"</trkseg></trk></gpx>"


@pytest.mark.parametrize("kind", ["comment", "pi", "cdata", "desc", "attribute"])
def test_a_text_over_libxml2_s_limit_gets_the_size_refusal(kind):
    # libxml2 keeps its size limits (docs/RULES.md "GPX parsing"): a text over them is refused for its size, naming
    # the limit, never as "not a valid GPX document"; a text within it is read.
    data = with_text(kind, 10_000_001)
    assert refused(data) == TEXT_REFUSAL
    assert refused(io.BytesIO(data)) == TEXT_REFUSAL
    assert parse_gpx(with_text(kind, 9 * 1024 * 1024)).points.shape == (4001, 3)


class TextThenPadding(Padding):
    """A stream: the GPX head, a comment of `text` bytes, then waypoints up to `size` bytes."""

    def __init__(self, size: int, text: int):
        super().__init__(size)
        self.head = HEAD + b"<!--" + b"a" * text + b"-->"


def test_a_file_over_the_limit_is_refused_for_the_file_s_size_whatever_text_it_holds():
    # A 32 MB upload whose 10 MB comment trips the parser first: the file's limit is the one to name.
    stream = TextThenPadding(32 * 1000 * 1000, 10 * 1000 * 1000)
    assert refused(stream) == "The GPX file is larger than the 30 MB limit."
    assert stream.served <= MAX_BYTES + 1024 * 1024  # read to the limit, not to the end
    assert refused(TextThenPadding(20 * 1000 * 1000, 10 * 1000 * 1000)) == TEXT_REFUSAL


@pytest.mark.parametrize("data", [b"<gpx><!-- never closed", b"<gpx><![CDATA[ never closed", b"<gpx><?pi never",
                                  HEAD + b"<a>" * 300 + b"</a>" * 300 + b"</gpx>"])
def test_a_short_or_deep_document_is_not_called_too_large(data):
    assert refused(data) == INVALID
