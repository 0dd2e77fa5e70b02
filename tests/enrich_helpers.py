"""Builders for the enrichment tests: hand-built trip snapshots (trips/enrich/contract.py) and map data
imported into the test database.

    snap = trip_east(45.0, 5.0, [40, 60], start_date=date(2026, 7, 1))   # two days going east
    import_map(MapBuilder().node(...) ..., tmp_path)                       # through the real importer

Shared by the enrichment helpers' tests: extend with targeted additions, keep the signatures.
"""
from __future__ import annotations

from datetime import date, timedelta

from tests.osm_maps import MapBuilder, line_east, map_support_or_skip
from trips.enrich.contract import StageSnap, TripSnap

ALL_TYPES = ("camp_site", "hostel", "alpine_hut", "chalet", "guest_house", "hotel", "wilderness_hut")


def stage(sid: str, index: int, line, *, date_: date | None = None, rest: bool = False, distance_km=None,
          gain_m: float = 0.0, loss_m: float = 0.0, selected_accommodation: dict | None = None,
          end=None) -> StageSnap:
    """One day along `line` ((lat, lon[, ele]) vertices); `end` overrides the end point (a chosen lodging)."""
    geometry = tuple((p[0], p[1], p[2] if len(p) > 2 else 0.0) for p in line)
    if distance_km is None:
        from trips.osm.geometry import GEOD

        lats, lons = [p[0] for p in geometry], [p[1] for p in geometry]
        distance_km = GEOD.line_length(lons, lats) / 1000 if len(geometry) > 1 else 0.0
    return StageSnap(id=sid, index=index, day_number=index + 1, is_rest_day=rest, distance_km=distance_km,
                     elevation_gain_m=gain_m, elevation_loss_m=loss_m, start=(geometry[0][0], geometry[0][1]),
                     end=end or (geometry[-1][0], geometry[-1][1]), geometry=geometry, date=date_,
                     selected_accommodation=selected_accommodation)


def trip(stages, *, start_date: date | None = None, ebike_mode: bool = False, departure_hour: int = 8,
         average_speed: float = 15.0, types=ALL_TYPES, generation: int = 1, trip_id: str = "trip-1") -> TripSnap:
    """A snapshot of `stages`; when `start_date` is given, each day without a date gets startDate + index."""
    if start_date is not None:
        stages = [s if s.date is not None else _dated(s, start_date + timedelta(days=s.index)) for s in stages]
    return TripSnap(id=trip_id, generation=generation, start_date=start_date, ebike_mode=ebike_mode,
                    departure_hour=departure_hour, average_speed=average_speed,
                    enabled_accommodation_types=tuple(types), stages=tuple(stages))


def _dated(s: StageSnap, day: date) -> StageSnap:
    from dataclasses import replace

    return replace(s, date=day)


def trip_east(lat: float, lon: float, kms, *, rest=(), step_m: float = 200.0, **trip_kw) -> TripSnap:
    """Consecutive days going east from (lat, lon), `kms[i]` kilometres each (0 = a rest day in place);
    day i has id f"s{i + 1}". Indexes in `rest` are rest days. Other keywords go to `trip`."""
    stages, here = [], (lat, lon)
    for i, km in enumerate(kms):
        line = line_east(here[0], here[1], km, step_m) if km > 0 else [here, here]
        stages.append(stage(f"s{i + 1}", i, line, rest=i in rest or km == 0, distance_km=float(km)))
        here = line[-1]
    return trip(stages, **trip_kw)


def import_map(builder: MapBuilder, tmp_path, name: str = "region") -> dict:
    """Write `builder` as .osm.pbf under tmp_path and import it into the test database (skips on a
    PostgreSQL without PostGIS). Needs an app context (the `ctx` fixture). Returns the import summary."""
    from trips.core.db import db
    from trips.osm.importer import import_file

    map_support_or_skip(db.engine)
    return import_file(db.engine, builder.write(tmp_path / f"{name}.osm.pbf"), name=name)


def engine():
    """The test database's engine (inside an app context)."""
    from trips.core.db import db

    return db.engine


def bounds_around(snap: TripSnap, margin_deg: float = 0.3) -> tuple[float, float, float, float]:
    """A MapBuilder `bounds` box holding every day of `snap` with a margin, so the import's recorded area
    covers the trip whatever few objects the test map holds (a map's area is otherwise its data's box)."""
    lats = [p[0] for s in snap.stages for p in s.line]
    lons = [p[1] for s in snap.stages for p in s.line]
    return min(lats) - margin_deg, min(lons) - margin_deg, max(lats) + margin_deg, max(lons) + margin_deg
