"""The map under the share page's route (trips/osm/basemap.py, trips/readmodels/mapsvg.py): water, coastline, rivers,
main roads and named places chosen by the view's scale, and a scale bar. On SQLite and on PostGIS (skipped without
it)."""
from __future__ import annotations

import io

import pytest
import sqlalchemy as sa
from lxml import etree

from tests.enrich_helpers import import_map
from tests.fakes.thirdparty import gpx_from_points, make_points
from tests.extracts import extract
from tests.osm_maps import MapBuilder, map_support_or_skip
from trips.core.text import shorten
from trips.core.db import db
from trips.models import Stage
from trips.osm import basemap
from trips.osm.geometry import metres_per_degree
from trips.osm.importer import import_file
from trips.readmodels import mapsvg
from trips.services.sharing import share_trip
from trips.services.trips import import_gpx

# make_points(1800) rides 180 km north-east from (45.0, 5.0): about 45.0–46.15 N, 5.0–6.6 E.
ROUTE_BOX = (45.0, 5.0, 46.2, 6.7)


def region(town="Valence", lake_name="Lac Bleu") -> MapBuilder:
    m = MapBuilder(bounds=(44.5, 4.5, 46.5, 7.0))
    m.way([(44.7, 4.6), (44.9, 5.2), (45.1, 5.9), (45.0, 6.8)], {"natural": "coastline"})
    m.way([(45.5, 5.5), (45.5, 5.8), (45.7, 5.8), (45.7, 5.5)], {"natural": "water", "name": lake_name}, closed=True)
    m.way([(45.9, 5.1), (45.95, 5.6), (46.05, 6.4)], {"waterway": "river", "name": "Rhône"})
    m.way([(46.0, 5.05), (46.01, 5.06)], {"waterway": "stream"})  # too small to draw at any scale
    m.way([(45.2, 5.0), (45.6, 6.0), (46.1, 6.6)], {"highway": "primary", "ref": "N7"})
    m.way([(45.3, 5.2), (45.35, 5.9)], {"highway": "secondary"})
    m.way([(45.31, 5.3), (45.32, 5.4)], {"highway": "tertiary"})
    m.way([(45.4, 5.3), (45.41, 5.31)], {"highway": "residential"})
    m.node(45.45, 5.45, {"place": "city", "name": town, "population": "64000"})
    m.node(45.8, 6.1, {"place": "town", "name": "Annecy"})
    m.node(45.62, 5.95, {"place": "village", "name": "Talloires"})
    m.node(45.61, 5.96, {"place": "hamlet", "name": "Angon"})
    m.node(45.9, 6.3, {"place": "town", "name": "<b>\u202eEvil</b>"})
    return m


def test_the_import_keeps_coastline_lakes_and_rivers_but_not_streams(ctx, tmp_path):
    summary = import_map(region(), tmp_path)
    assert summary["counts"]["kept"]["water"] == 3  # coastline, lake, river: the stream is not kept
    base = basemap.base_map(ROUTE_BOX)
    assert base.covered
    assert len(base.coastline) == 1 and len(base.water) == 1 and len(base.rivers) == 1
    assert base.water[0][0].tolist() == base.water[0][-1].tolist()  # a ring, drawn closed


def test_what_is_drawn_follows_the_scale(ctx, tmp_path):
    import_map(region(), tmp_path)
    wide = basemap.base_map(ROUTE_BOX)  # ~130 km across: primary and secondary roads, cities and towns
    assert {major for major, _ in wide.roads} == {True, False} and len(wide.roads) == 2
    assert wide.places[0][0] == "Valence" and "Annecy" in [p[0] for p in wide.places]  # the city first
    assert "Talloires" not in [p[0] for p in wide.places]
    narrow = basemap.base_map((45.25, 5.15, 45.65, 5.5))  # ~27 km: tertiary roads and villages too
    assert len(narrow.roads) == 3  # primary, secondary, tertiary; never a residential street
    close = basemap.base_map((45.55, 5.85, 45.7, 6.05))
    assert "Talloires" in [p[0] for p in close.places] and "Angon" not in [p[0] for p in close.places]


def _around(lat: float, lon: float, km: float) -> tuple[float, float, float, float]:
    """A view `km` across (east–west) and two thirds of it high, centred on the point."""
    north, east = metres_per_degree(lat)
    return lat - km * 333 / north, lon - km * 500 / east, lat + km * 333 / north, lon + km * 500 / east


def test_a_view_a_few_km_across_draws_every_street_of_a_real_extract(ctx):
    """Helsinki's centre (tests/extracts.py): some 2 500 ways in 1.0 × 1.7 km. A view 3 km across is a street map and
    draws every one of them a pixel long or more, footways too; 12 km across, every street but no path; 40 km, the
    roads between towns."""
    map_support_or_skip(db.engine)
    import_file(db.engine, extract("helsinki"))

    def ways(km: float, highways=None) -> int:
        """The ways of the extract a pixel long or more in a view `km` across (of those `highways`)."""
        where = " AND highway IN :kinds" if highways else ""
        sql = sa.text(f"SELECT count(*) FROM osm_way WHERE length_m >= :pixel{where}")
        if highways:
            sql = sql.bindparams(sa.bindparam("kinds", expanding=True))
        with db.engine.connect() as conn:
            return conn.execute(sql, {"pixel": km * 1000 / basemap.PIXELS, "kinds": list(highways or [])}).scalar()

    with db.engine.connect() as conn:
        lat, lon = conn.execute(sa.text("SELECT (min(min_lat) + max(max_lat)) / 2, (min(min_lon) + max(max_lon)) / 2 "
                                        "FROM osm_way")).one()
    streets = ("residential", "unclassified", "living_street", "primary", "secondary", "tertiary", "primary_link",
               "tertiary_link")
    close = basemap.base_map(_around(lat, lon, 3.0))
    assert ways(3.0) > 2000 and len(close.roads) + len(close.paths) == ways(3.0)  # every street and path
    assert len(close.paths) >= ways(3.0, ("footway", "cycleway", "steps"))
    town = basemap.base_map(_around(lat, lon, 12.0))
    assert not town.paths and len(town.roads) == ways(12.0, streets)  # every street, no path, no service way
    main = basemap.base_map(_around(lat, lon, 40.0))
    assert not main.paths and len(main.roads) == ways(40.0, ("primary", "secondary", "tertiary"))
    view = _around(lat, lon, 3.0)
    svg = "".join(mapsvg.layers(close, mapsvg.fit([view[:2], view[2:]], 600, 400, 0)))
    assert all(f'class="{layer}"' in svg for layer in ("map-path", "map-road", "map-road-major"))


def test_a_view_off_the_map_is_not_covered(ctx, tmp_path):
    import_map(region(), tmp_path)
    off = basemap.base_map((10.0, 10.0, 11.0, 11.0))
    assert not off.covered and off.empty()


def test_a_new_import_replaces_the_kept_map(ctx, tmp_path):
    import_map(region(town="Valence"), tmp_path)
    assert "Valence" in [p[0] for p in basemap.base_map(ROUTE_BOX).places]
    import_map(region(town="Romans"), tmp_path)  # same region name: replaces the import
    names = [p[0] for p in basemap.base_map(ROUTE_BOX).places]
    assert "Romans" in names and "Valence" not in names


def test_the_scale_bar_is_a_round_length_measured_on_the_ground():
    proj = mapsvg.fit([(45.0, 5.0), (45.0, 6.0)], 600, 300, 0)  # one degree of longitude at 45° N: 78.8 km wide
    svg = etree.fromstring(f'<svg xmlns="http://www.w3.org/2000/svg">{mapsvg.scale_bar(proj, lambda km: f"{km:g} km")}</svg>')
    label = svg.xpath("//*[local-name()='text']")[0].text
    assert label == "10 km"  # a fifth of 78.8 km is 15.8: the longest round length below is 10
    d = svg.xpath("//*[local-name()='path']")[0].get("d").split()
    x0, x1 = float(d[0][1:]), float(d[3][1:])
    assert x1 - x0 == pytest.approx(600 * 10 / 78.85, rel=0.01)
    assert mapsvg.nice_km(0.7) == 0.5 and mapsvg.nice_km(3) == 2 and mapsvg.nice_km(1) == 1


def test_the_share_page_draws_the_map_under_the_route(client, rider, tmp_path):
    import_map(region(), tmp_path)
    user, _ = rider
    trip = import_gpx(user, io.BytesIO(gpx_from_points(make_points(1800, step_m=100.0), name="Lakes")), {})
    html = client.get(f"/s/{share_trip(user, trip.id)[0].short_code}").get_data(as_text=True)
    svg = etree.HTML(html).xpath("//svg[@class='route']")[0]
    layers = [e.get("class") for e in svg]
    for layer in ("map-water", "map-coast", "map-river", "map-road", "map-road-major", "map-place", "map-scale"):
        assert layer in layers, layer
    assert layers.index("map-water") < layers.index("map-road-major") < layers.index("day-end") \
        if "day-end" in layers else True
    first_day_line = [i for i, e in enumerate(svg.iter()) if e.get("class") == "day-line"][0]
    last_layer = max(i for i, e in enumerate(svg.iter()) if (e.get("class") or "").startswith("map-road"))
    assert last_layer < first_day_line  # the map is under the route
    names = [t.text for t in svg.xpath(".//g[@class='map-place']/text")]
    assert "Valence" in names and "Annecy" in names
    assert "\u202e" not in html and "<b>Evil" not in html  # names floored and escaped
    assert svg.xpath(".//g[@class='map-scale']/text")[0].text.endswith("\u00a0km")
    assert not etree.HTML(html).xpath("//*[@style]")  # the CSP would refuse inline style


def test_a_long_place_name_is_cut_at_a_word_on_the_map(client, rider, tmp_path):
    name = "Saint-Laurent-du-Pont-de-Beauvoisin"
    import_map(region(town=name), tmp_path)
    user, _ = rider
    # a view of its own: the map drawn for a view is kept per process by its box and imports (docs/CACHES.md)
    trip = import_gpx(user, io.BytesIO(gpx_from_points(make_points(1790, step_m=100.0), name="Lakes")), {})
    html = client.get(f"/s/{share_trip(user, trip.id)[0].short_code}").get_data(as_text=True)
    names = etree.HTML(html).xpath("//svg[@class='route']//g[@class='map-place']/text/text()")
    assert shorten(name, mapsvg.MAX_LABEL) == "Saint-Laurent-du-Pont…" and "Saint-Laurent-du-Pont…" in names


def test_the_share_page_without_map_data_draws_the_route_alone(client, rider):
    user, _ = rider
    trip = import_gpx(user, io.BytesIO(gpx_from_points(make_points(600, step_m=100.0), name="Bare")), {})
    html = client.get(f"/s/{share_trip(user, trip.id)[0].short_code}").get_data(as_text=True)
    svg = etree.HTML(html).xpath("//svg[@class='route']")[0]
    classes = {e.get("class") for e in svg.iter()}
    assert "day-line" in classes and "map-scale" in classes
    assert not {c for c in classes if c and c.startswith(("map-water", "map-road", "map-place"))}


def test_the_scale_bar_moves_to_the_corner_the_route_leaves_free():
    proj = mapsvg.fit([(45.0, 5.0), (45.5, 6.0)], 600, 300, 20)
    left = mapsvg.scale_bar(proj, lambda km: f"{km:g} km")
    start = proj.xy(45.0, 5.0)  # the route starts at the bottom left
    moved = mapsvg.scale_bar(proj, lambda km: f"{km:g} km", [start])
    assert 'x="8"' in left and 'x="8"' not in moved  # the bar's backdrop starts 4 units left of the bar


def test_a_day_rerouted_straight_through_a_waypoint_is_drawn_dashed_there(client, rider):
    """No map to route on: a waypoint's reroute joins the day's start, the waypoint and its end straight (the day is
    approximate), and the share page's map draws those two joins dashed; the other days stay solid."""
    from jobs.tasks import reroute_stage

    user, headers = rider
    trip = import_gpx(user, io.BytesIO(gpx_from_points(make_points(1800, step_m=100.0), name="Detour")), {})
    day = trip.stages[1]
    lat, lon, _ = day.geometry[len(day.geometry) // 2]
    asked = client.post(f"/api/trips/{trip.id}/stages/{day.id}/poi-waypoint", headers=headers,
                        json={"lat": lat + 0.05, "lon": lon})
    assert asked.status_code == 202
    db.session.expire_all()
    reroute_stage(trip.id, day.id, db.session.get(Stage, day.id).waypoint["requestId"])
    db.session.expire_all()
    assert db.session.get(Stage, day.id).approximate
    html = client.get(f"/s/{share_trip(user, trip.id)[0].short_code}").get_data(as_text=True)
    svg = etree.HTML(html).xpath("//svg[@class='route']")[0]
    days, dashes = 0, {}
    for element in svg.iter():
        days += element.get("class") == "day-line"
        if element.get("class") == "day-straight":
            assert element.xpath("./polyline[@stroke-dasharray]")
            dashes[days] = dashes.get(days, 0) + 1
    assert dashes == {2: 2}  # start → waypoint → end, on the second day alone
    notes = [" ".join(p.itertext()) for p in etree.HTML(html).xpath("//li[contains(@class, 'day')]"
                                                                   "/p[contains(@class, 'approximate')]")]
    assert notes == ["Part of this day is joined straight where no road was found: dashed on the map."]


def test_a_detour_to_a_point_off_the_route_is_drawn_dashed_out_and_back(client, rider):
    """No router: moving a day's end 1.4 km off the route joins the route to it straight, out on that day and back
    on the next (both approximate); the map draws the two joins dashed, and not the route's own long straight
    segments (the first day's start, a cut on the route)."""
    from trips.guards import Precondition
    from trips.services import stages as stage_ops

    user, _ = rider
    road = make_points(2400, step_m=100.0, wiggle_deg=0.0)  # one straight line: its stored segments are long
    trip = import_gpx(user, io.BytesIO(gpx_from_points(road, name="Out and back")), {})
    lat, lon, _ = road[int(trip.stages[0].distance * 10) - 50]  # 5 km before the first day's end
    stage_ops.update_stage(user, trip.id, trip.stages[0].id, Precondition.exact(trip.version),
                           {"endPoint": {"lat": lat + 0.01, "lon": lon - 0.01}})
    db.session.expire_all()
    days = sorted(db.session.query(Stage).filter_by(trip_id=trip.id), key=lambda s: s.position)
    assert days[0].approximate and days[1].approximate
    html = client.get(f"/s/{share_trip(user, trip.id)[0].short_code}").get_data(as_text=True)
    svg = etree.HTML(html).xpath("//svg[@class='route']")[0]
    count, dashes = 0, {}
    for element in svg.iter():
        count += element.get("class") == "day-line"
        if element.get("class") == "day-straight":
            dashes[count] = dashes.get(count, 0) + 1
    assert dashes == {1: 1, 2: 1}  # out on day 1, back on day 2
