"""`flask osm import FILE`: stream an OpenStreetMap extract into the map tables. osmium drops every object without
one of the keys BTP reads before Python sees it (trips/osm/tags.py) and keeps node locations so ways get their
geometry. Rows go in batches under a `loading` area, visible only once the whole file is read (trips/osm/store.py),
so a refused file leaves the region as it was. A new import of a region's name replaces the old one; other names
stay side by side (the queries drop the duplicates of overlapping extracts).
"""
from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path

import numpy as np
import osmium
import osmium.filter
import osmium.geom
import sqlalchemy as sa

from trips.route import geo
from trips.core.text import normalise
from trips.osm import geometry, graph, network, router, search, streets, tags as T
from trips.osm.store import Loader, MapImportError, begin_area, publish, purge, refresh_statistics, tags_json
from trips.osm.tables import NAMED_RANKS, PLACE_RANKS

FORMATS = {".osm.pbf": "pbf", ".osm.bz2": "osm.bz2", ".osm": "osm"}
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
BATCH_ROWS = 20_000
BOUNDARY_TOLERANCE_M = 100.0
_MAX_POPULATION = 2**31 - 1

POINT_COLS = ("area_id", "osm_type", "osm_id", "kind", "subkind", "name", "lat", "lon", "tags", "tag_count")
WAY_COLS = ("area_id", "osm_type", "osm_id", "highway", "surface", "tracktype", "smoothness", "cycleway",
            "cycleway_left", "cycleway_right", "cycleway_both", "bicycle", "maxspeed", "name", "length_m", "line",
            "min_lat", "min_lon", "max_lat", "max_lon")
FERRY_COLS = ("area_id", "osm_type", "osm_id", "name", "length_m", "line", "min_lat", "min_lon", "max_lat",
              "max_lon")
WATER_COLS = ("area_id", "osm_type", "osm_id", "kind", "name", "length_m", "line", "min_lat", "min_lon", "max_lat",
              "max_lon")
PLACE_COLS = ("area_id", "osm_type", "osm_id", "name", "name_key", "place", "rank", "population", "lat", "lon")
BOUNDARY_COLS = ("area_id", "osm_type", "osm_id", "iso", "name", "rings", "min_lat", "min_lon", "max_lat",
                 "max_lon")


def file_format(path: Path) -> str:
    """The osmium format of `path` by its extension. Raises MapImportError for any other file."""
    name = path.name.lower()
    for suffix, fmt in FORMATS.items():
        if name.endswith(suffix) and len(name) > len(suffix):
            return fmt
    raise MapImportError("FILE: expected an OpenStreetMap extract ending in .osm.pbf, .osm or .osm.bz2")


def default_name(path: Path) -> str:
    name = path.name
    for suffix in FORMATS:
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
            break
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-._")[:100]
    return cleaned or "region"


class _Progress:
    """Counts on stderr at most once a second (the CLI passes click.echo; silent when None)."""

    def __init__(self, echo, every: float = 1.0):
        self.echo, self.every = echo, every
        self.start = self.last = time.monotonic()

    def tick(self, seen: dict, kept: dict, force: bool = False) -> None:
        now = time.monotonic()
        if self.echo is None or (not force and now - self.last < self.every):
            return
        self.last = now
        rate = sum(kept.values()) / max(now - self.start, 1e-9)
        # "read" counts what passed osmium's key filters (the untagged nodes and buildings never reach Python)
        self.echo(f"read {seen['node']:,} tagged nodes, {seen['way']:,} ways, {seen['area']:,} boundaries; kept "
                  + ", ".join(f"{v:,} {k}" for k, v in kept.items()) + f"; {rate:,.0f} rows/s")


class _Collector:
    def __init__(self, engine: sa.Engine, area_id: int, echo):
        self.loader = Loader(engine)
        self.pg = not self.loader.sqlite
        self.area_id = area_id
        self.wkb = osmium.geom.WKBFactory()
        self.rows: dict[str, list[tuple]] = {t: [] for t in ("osm_point", "osm_place", "osm_boundary")}
        self.lines: dict[str, list] = {"osm_way": [], "osm_ferry": [], "osm_water": []}  # (row head, hex wkb)
        self.seen = {"node": 0, "way": 0, "area": 0}
        self.kept = {"points": 0, "ways": 0, "ferries": 0, "places": 0, "boundaries": 0, "water": 0}
        # The extent of the roads, ferries, points and places kept (and the network's edges): never of rivers or
        # country borders, which run far beyond what the file holds of the roads around them.
        self.box = [math.inf, math.inf, -math.inf, -math.inf]
        self.rest = [math.inf, math.inf, -math.inf, -math.inf]  # theirs: the area of a file holding nothing else
        self.pending = 0
        self.progress = _Progress(echo)
        self.network = network.Network()
        self.places: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # the edges' ends (write_network)

    # --- objects -------------------------------------------------------------------------------------
    def node(self, n) -> None:
        self.seen["node"] += 1
        loc = n.location
        if not loc.valid():
            return
        self._point_like({t.k: t.v for t in n.tags}, "n", n.id, loc.lat, loc.lon)

    def way(self, w) -> None:
        self.seen["way"] += 1
        wt = {t.k: t.v for t in w.tags}  # one pass over osmium's tag list, then plain dict lookups
        highway, route = wt.get("highway"), wt.get("route")
        is_road = highway is not None and highway not in T.SKIPPED_HIGHWAYS
        kinds = T.point_kinds(wt)
        named = wt.get("name") and (wt.get("place") in PLACE_RANKS or T.feature_class(wt))
        water = T.water_kind(wt, w.is_closed())
        if not (is_road or route == "ferry" or kinds or named or water):
            return
        if is_road or route == "ferry":  # before the line: a way the extract cut still routes over its located nodes
            self.network.add(w.id, wt, w.nodes)
        try:
            hexwkb = self.wkb.create_linestring(w)
        except (RuntimeError, osmium.InvalidLocationError):
            return  # fewer than two known nodes (the extract cut the way)
        if is_road:
            head = (self.area_id, "w", w.id, T.short(highway, 32), *(T.short(wt.get(k), 64 if k == "surface" else 32)
                                                             for k in T.WAY_TAGS), T.short(wt.get("name"), 255))
            self._line("osm_way", head, hexwkb)
        if route == "ferry":
            self._line("osm_ferry", (self.area_id, "w", w.id, T.short(wt.get("name"), 255)), hexwkb)
        if water:
            self._line("osm_water", (self.area_id, "w", w.id, water, T.short(wt.get("name"), 255)), hexwkb)
        if kinds or named:
            coords = geometry.wkb_line(hexwkb)
            closed = w.is_closed() and len(coords) > 3
            lat, lon = coords[:-1].mean(axis=0) if closed else coords[len(coords) // 2]
            self._point_like(wt, "w", w.id, float(lat), float(lon), kinds)

    def area(self, a) -> None:
        if a.from_way():
            return  # a closed way: read by way()
        at = {t.k: t.v for t in a.tags}
        if at.get("boundary") == "administrative" and at.get("admin_level") == "2":
            self._country(a, at)
        elif at.get("name") and T.feature_class(at):  # a square or an attraction drawn as a multipolygon
            try:
                rings = [ring for outer, ring in geometry.wkb_polygons(self.wkb.create_multipolygon(a)) if outer]
            except RuntimeError:
                return  # incomplete in the extract
            if rings:
                lat, lon = max(rings, key=len)[:-1].mean(axis=0)
                self._point_like(at, "r", a.orig_id(), float(lat), float(lon), kinds=[])

    def _country(self, a, at: dict) -> None:
        self.seen["area"] += 1
        try:
            rings = geometry.wkb_polygons(self.wkb.create_multipolygon(a))
        except RuntimeError:
            return  # an incomplete boundary (the extract holds only part of the country)
        kept = []
        for outer, ring in rings:
            pts = geo.simplify(np.column_stack((ring, np.zeros(len(ring)))), BOUNDARY_TOLERANCE_M)[:, :2]
            if len(pts) >= 4:
                kept.append((outer, pts))
        if not any(outer for outer, _ in kept):
            return
        allpts = np.vstack([p for _, p in kept])
        box = (float(allpts[:, 0].min()), float(allpts[:, 1].min()), float(allpts[:, 0].max()),
               float(allpts[:, 1].max()))
        enc = geometry.encode_many(allpts, np.array([len(p) for _, p in kept]))
        iso = at.get("ISO3166-1:alpha2") or at.get("ISO3166-1") or at.get("country_code")
        row = (self.area_id, "r", a.orig_id(), T.short(iso and iso.upper(), 8), T.short(at.get("name"), 255),
               json.dumps([[outer, e] for (outer, _), e in zip(kept, enc)]), *box)
        self._add("osm_boundary", row + ((geometry.ewkt_box(*box),) if self.pg else ()), "boundaries", box,
                  self.rest)

    # --- rows ----------------------------------------------------------------------------------------
    def _point_like(self, taglist, osm_type: str, osm_id: int, lat: float, lon: float, kinds=None) -> None:
        kinds = T.point_kinds(taglist) if kinds is None else kinds
        geom = (geometry.ewkt_point(lat, lon),) if self.pg else ()
        box = (lat, lon, lat, lon)
        if kinds:
            kept, count = {k: v[:T.MAX_VALUE] for k, v in taglist.items() if k in T.KEPT_TAGS}, len(taglist)
            payload = tags_json(kept)
            for kind, subkind in kinds:
                row = (self.area_id, osm_type, osm_id, kind, subkind[:32], kept.get("name"), lat, lon, payload, count)
                self._add("osm_point", row + geom, "points", box)
        place, name = taglist.get("place"), taglist.get("name")
        named = place if place in PLACE_RANKS else name and T.feature_class(taglist)
        if named and name:
            place_row = (self.area_id, osm_type, osm_id, name[:255], normalise(name)[:255], named, NAMED_RANKS[named],
                         _population(taglist.get("population")), lat, lon)
            self._add("osm_place", place_row + geom, "places", box)

    def _line(self, table: str, head: tuple, hexwkb: str) -> None:
        self.lines[table].append((head, hexwkb))
        self.kept[{"osm_way": "ways", "osm_ferry": "ferries"}.get(table, "water")] += 1
        self._bump()

    def _add(self, table: str, row: tuple, counter: str, box: tuple, extent: list | None = None) -> None:
        self.rows[table].append(row)
        self.kept[counter] += 1
        self._extend(box, self.box if extent is None else extent)
        self._bump()

    def _extend(self, box, extent: list | None = None) -> None:
        b = self.box if extent is None else extent
        b[0], b[1], b[2], b[3] = min(b[0], box[0]), min(b[1], box[1]), max(b[2], box[2]), max(b[3], box[3])

    def _bump(self) -> None:
        self.pending += 1
        if self.pending >= BATCH_ROWS:
            self.flush()
        elif self.pending % 1024 == 0:
            self.progress.tick(self.seen, self.kept)

    def _line_rows(self, table: str) -> list[tuple]:
        items = self.lines[table]
        if not items:
            return []
        parts = [geometry.wkb_line(h) for _, h in items]
        lengths = np.array([len(p) for p in parts])
        coords = np.vstack(parts)
        encoded = geometry.encode_many(coords, lengths)
        metres = geometry.lengths_m(coords, lengths)
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        mins, maxs = np.minimum.reduceat(coords, starts), np.maximum.reduceat(coords, starts)
        self._extend((float(mins[:, 0].min()), float(mins[:, 1].min()), float(maxs[:, 0].max()),
                      float(maxs[:, 1].max())), self.rest if table == "osm_water" else self.box)
        rows = []
        for i, (head, hexwkb) in enumerate(items):
            row = head + (float(metres[i]), encoded[i], float(mins[i, 0]), float(mins[i, 1]), float(maxs[i, 0]),
                          float(maxs[i, 1]))
            # PostGIS reads hex EWKB: the WKB header with the SRID flag (0x20000000) and SRID 4326 inserted.
            rows.append(row + ("0102000020E6100000" + hexwkb[10:],) if self.pg else row)
        return rows

    def flush(self, last: bool = False) -> None:
        geom = ("geom",) if self.pg else ()
        cols = {"osm_point": POINT_COLS, "osm_place": PLACE_COLS, "osm_boundary": BOUNDARY_COLS,
                "osm_way": WAY_COLS, "osm_ferry": FERRY_COLS, "osm_water": WATER_COLS}
        batches = {t: (cols[t] + geom, rows) for t, rows in self.rows.items()}
        for table in self.lines:
            batches[table] = (cols[table] + geom, self._line_rows(table))
        self.loader.write(batches)
        self.rows = {t: [] for t in self.rows}
        self.lines = {t: [] for t in self.lines}
        self.pending = 0
        self.progress.tick(self.seen, self.kept, force=last)


    def write_streets(self, engine: sa.Engine) -> None:
        """The named roads as streets for place search (trips/osm/streets.py), once every road is written."""
        cols = streets.COLS + (("geom",) if self.pg else ())
        for rows in streets.rows(engine, self.area_id, self.pg, BATCH_ROWS):
            self.loader.write({"osm_place": (cols, rows)})
            self.kept["places"] += len(rows)

    def write_network(self) -> dict:
        """The routable edges (trips/osm/network.py), once every way has been read; returns {"edges": count}."""
        cols = network.EDGE_COLS + (("geom",) if self.pg else ())
        edges = 0
        for rows in self.network.rows(self.area_id, self.pg, BATCH_ROWS):
            self.loader.write({"osm_edge": (cols, rows)})
            edges += len(rows)
            at = network.EDGE_COLS.index("min_lat")  # then min_lon, max_lat, max_lon
            self._extend((min(r[at] for r in rows), min(r[at + 1] for r in rows), max(r[at + 2] for r in rows),
                          max(r[at + 3] for r in rows)))
        self.places = self.network.places  # the edges' end nodes: the graph's (graph.prepare)
        self.network = network.Network()  # the ways' node lists go back to the allocator
        return {"edges": edges}


def _population(value: str | None) -> int | None:
    digits = re.sub(r"[\s,.']", "", value or "")
    return min(int(digits), _MAX_POPULATION) if digits.isdigit() and len(digits) < 12 else None


def _header_box(path: Path, fmt: str) -> tuple | None:
    box = osmium.FileProcessor(osmium.io.File(str(path), fmt)).header.box()
    if not box.valid():
        return None
    return (box.bottom_left.lat, box.bottom_left.lon, box.top_right.lat, box.top_right.lon)


def answered_area(header: tuple | None, data: tuple, rest: tuple) -> tuple[tuple, str]:
    """(box, source) an import answers for (docs/RULES.md "Map coverage"): the header's box joined by the extent of
    the roads, ferries, points and places kept (`data`). Source "header" when the header holds them all, "union"
    when they reach beyond it, "data" without a header. A file of nothing but water and borders (`rest`, their
    extent) answers for its header's box, else for theirs."""
    if not all(math.isfinite(v) for v in data):
        return (tuple(header), "header") if header else (rest, "data")
    if header is None:
        return data, "data"
    union = (min(header[0], data[0]), min(header[1], data[1]), max(header[2], data[2]), max(header[3], data[3]))
    return union, "header" if union == tuple(header) else "union"


def import_file(engine: sa.Engine, path, name: str | None = None, echo=None, node_cache=None) -> dict:
    """Import the extract at `path` as region `name`; returns a summary (area id, counts, bbox, replaced).

    Node locations are held in memory (about 16 bytes per node), or with `node_cache` in that file (a sparse
    file of 8 bytes per node id, deleted afterwards), for extracts whose nodes do not fit in memory.

    Raises MapImportError when the file is not an OSM extract (.osm.pbf, .osm, .osm.bz2), is truncated or
    unreadable, holds nothing BTP uses, or the database has no spatial support (PostgreSQL without PostGIS); and
    for a malformed `name` or a `node_cache` file that exists already. Nothing of a refused file stays in the
    database.
    """
    path = Path(path)
    fmt = file_format(path)
    name = default_name(path) if name is None else name
    if not NAME.fullmatch(name):
        raise MapImportError("--name: 1 to 100 letters, digits, '.', '_' or '-', starting with a letter or digit")
    if not path.is_file() or path.stat().st_size == 0:
        raise MapImportError(f"FILE: {path.name[:100]} is empty or not a regular file")
    if node_cache and Path(node_cache).exists():
        raise MapImportError("--node-cache: the file exists already; name a new file (it is deleted afterwards)")
    area_id, notes = begin_area(engine, name, path.name)
    with engine.begin() as conn:  # pgRouting where PostgreSQL has it: the router searches with it when asked
        router.install_pgrouting(conn)
    collector = None
    try:
        header = _header_box(path, fmt)
        collector = _Collector(engine, area_id, echo)
        _read(path, fmt, node_cache, collector)  # its node locations are freed before the network is written
        collector.flush(last=True)
        collector.write_streets(engine)
        counts = {"seen": collector.seen, "kept": collector.kept, "network": collector.write_network()}
        if not any(collector.kept.values()):
            raise MapImportError(f"FILE: {path.name[:100]} holds no roads, places or points of interest")
        bbox, source = answered_area(header, tuple(collector.box), tuple(collector.rest))
        t = time.perf_counter()
        prepared = {**graph.prepare(engine, area_id, collector.places), "seconds": round(time.perf_counter() - t, 3)}
        search.warm(graph.numba_cache())
        replaced = publish(engine, area_id, name, bbox, source, counts)
    except (RuntimeError, ValueError) as exc:
        # osmium's parse and I/O errors are RuntimeErrors, and a string over libosmium's limits a ValueError
        # "OSM … is too long" (_osmium_limit); any other ValueError is ours, raised as it is.
        _discard(engine, area_id, collector)
        if isinstance(exc, ValueError) and not _osmium_limit(exc):
            raise
        reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        what = "breaks OpenStreetMap's limits" if isinstance(exc, ValueError) else "is not a complete OpenStreetMap file"
        raise MapImportError(f"FILE: {path.name[:100]} {what} ({reason}); "
                             "nothing was imported and the map data already there is unchanged") from None
    except BaseException:
        _discard(engine, area_id, collector)
        raise
    finally:
        if node_cache:
            Path(node_cache).unlink(missing_ok=True)
    collector.loader.close()
    for old in replaced:
        purge(engine, old)
    refresh_statistics(engine)
    return {"area_id": area_id, "name": name, "bbox": bbox, "bbox_source": source, "counts": counts,
            "replaced": replaced, "notes": notes, "graph": prepared}


def _read(path: Path, fmt: str, node_cache: str | None, collector: _Collector) -> None:
    processor = (osmium.FileProcessor(osmium.io.File(str(path), fmt))
                 .with_locations(f"dense_file_array,{node_cache}" if node_cache else "flex_mem")
                 .with_areas(osmium.filter.TagFilter(*T.AREA_TAGS))
                 .with_filter(osmium.filter.EntityFilter(osmium.osm.NODE | osmium.osm.WAY | osmium.osm.AREA))
                 .with_filter(_key_filter(T.NODE_KEYS, osmium.osm.NODE))
                 .with_filter(_key_filter(T.WAY_KEYS, osmium.osm.WAY))
                 .with_filter(_key_filter(T.AREA_KEYS, osmium.osm.AREA)))
    for obj in processor:
        if isinstance(obj, osmium.osm.Node):
            collector.node(obj)
        elif isinstance(obj, osmium.osm.Way):
            collector.way(obj)
        elif isinstance(obj, osmium.osm.Area):
            collector.area(obj)


def _key_filter(keys, entities: osmium.osm.osm_entity_bits) -> osmium.filter.KeyFilter:
    key_filter = osmium.filter.KeyFilter(*keys)
    key_filter.enable_for(entities)
    return key_filter


def _osmium_limit(exc: ValueError) -> bool:
    """libosmium's refusal of an over-long string (its builder's length_error, a ValueError in Python)."""
    text = str(exc)
    return text.startswith("OSM ") and text.endswith("too long")


def _discard(engine: sa.Engine, area_id: int, collector) -> None:
    if collector is not None:
        collector.loader.close()
    purge(engine, area_id)
