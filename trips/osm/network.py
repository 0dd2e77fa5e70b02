"""The routable network: the imported roads and ferries cut into edges between the nodes ways share. The import
hands every road and ferry way to `Network.add`; once the file is read, `Network.rows` cuts each way at its ends and
at every node another way (or the same one again) passes through: one `osm_edge` row a piece, with its ends' node
ids, shape, length, class and cost each way (docs/RULES.md "Bicycle routing"). Ways closed to bicycles are not kept.
"""
from __future__ import annotations

from array import array

import numpy as np

from trips.osm import geometry
from trips.osm.waykinds import grade

EDGE_COLS = ("area_id", "osm_type", "osm_id", "source", "target", "kind", "forward", "backward", "length_m",
             "line", "min_lat", "min_lon", "max_lat", "max_lon", "cost", "reverse_cost", "grade")

# docs/RULES.md "Bicycle routing": the cost of a metre by routing class (a metre of cycleway is the cheapest).
COST_PER_METRE = {
    "cycleway": 0.8, "quiet": 1.0, "track": 1.3, "path": 1.3, "tertiary": 1.3, "service": 1.1,
    "secondary": 1.6, "primary": 2.2, "trunk": 3.0, "foot": 2.5, "steps": 10.0, "ferry": 25.0, "other": 1.5,
}
CLASS_OF_HIGHWAY = {
    "cycleway": "cycleway", "residential": "quiet", "living_street": "quiet", "unclassified": "quiet",
    "road": "other", "service": "service", "track": "track", "path": "path", "bridleway": "foot",
    "tertiary": "tertiary", "tertiary_link": "tertiary", "secondary": "secondary", "secondary_link": "secondary",
    "primary": "primary", "primary_link": "primary", "trunk": "trunk", "trunk_link": "trunk",
    "footway": "foot", "pedestrian": "foot", "steps": "steps",
}
CLOSED_HIGHWAYS = frozenset({"motorway", "motorway_link", "bus_guideway", "busway", "escape", "via_ferrata"})
CLOSED_VALUES = frozenset({"no", "private", "use_sidepath", "agricultural", "forestry", "delivery"})
ALLOWED_VALUES = frozenset({"yes", "designated", "permissive", "destination", "customers", "official"})
YES = frozenset({"yes", "true", "1"})
CELL_DEG = 0.05  # the edges are written cell by cell (about 5 km): see Network.rows
SCALE = 10_000_000  # locations held as whole 1e-7 degrees, as OSM and libosmium keep them


def profile(tags: dict) -> tuple[str, bool, bool] | None:
    """(routing class, forward, backward) of a way for a bicycle, or None when a bicycle may not use it
    (docs/RULES.md "Bicycle routing")."""
    if tags.get("route") == "ferry" and "highway" not in tags:
        return ("ferry", True, True) if tags.get("bicycle") not in CLOSED_VALUES else None
    highway = tags.get("highway", "")
    bicycle = tags.get("bicycle")
    if highway in CLOSED_HIGHWAYS or tags.get("motorroad") == "yes" or bicycle in CLOSED_VALUES:
        return None
    if tags.get("access") in CLOSED_VALUES and bicycle not in ALLOWED_VALUES:
        return None
    kind = CLASS_OF_HIGHWAY.get(highway, "other")
    if bicycle == "designated" or (kind == "foot" and bicycle in ALLOWED_VALUES):
        kind = "cycleway" if bicycle == "designated" else "path"
    return (kind, *_directions(tags))


def _directions(tags: dict) -> tuple[bool, bool]:
    oneway = tags.get("oneway")
    if oneway is None and tags.get("junction") in ("roundabout", "circular"):
        oneway = "yes"
    own = tags.get("oneway:bicycle")
    if own in YES or own == "-1":
        oneway = own
    elif own == "no" or any(str(tags.get(k, "")).startswith("opposite") for k in
                           ("cycleway", "cycleway:left", "cycleway:right", "cycleway:both")):
        return True, True  # a contraflow for bicycles
    if oneway in YES:
        return True, False
    if oneway in ("-1", "reverse"):
        return False, True
    return True, True


def ewkb_line(coords: np.ndarray) -> str:
    """Hex EWKB (SRID 4326) of a (n, 2) lat, lon line, as PostGIS reads it from COPY."""
    xy = np.ascontiguousarray(coords[:, ::-1], dtype="<f8")
    return "0102000020E6100000" + len(xy).to_bytes(4, "little").hex() + xy.tobytes().hex()


class Network:
    """The routable ways of one import, cut into edges when the file has been read. The node ids and locations go
    into flat typed arrays (8 bytes a value, no object per way or node): the import holds them to the end."""

    def __init__(self):
        import osmium.geom  # only the import builds a network: a web worker that reads the costs loads no osmium

        self.osmium, self.wkb = osmium, osmium.geom.WKBFactory()
        self.heads: list[tuple[int, str, bool, bool, int]] = []  # (way id, class, forward, backward, grade)
        self.ids = array("q")
        # OSM's own precision (1e-7°, int32: libosmium keeps locations so): 8 bytes a node for both, not 16
        self.lats, self.lons = array("i"), array("i")
        self.ends = array("q")  # where each way's nodes end in the flat arrays
        self.places: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # set by `rows`

    def add(self, way_id: int, tags: dict, nodes) -> None:
        """A way's node refs (osmium NodeRefList); ways closed to bicycles and nodes without a location are left."""
        found = profile(tags)
        if found is None:
            return
        try:  # every node, repeated ones too, located in one call (osmium's WKB: little-endian lon, lat doubles)
            xy = np.frombuffer(bytes.fromhex(self.wkb.create_linestring(nodes, use_nodes=self.osmium.geom.ALL)),
                               "<f8", offset=9).reshape(-1, 2)
            refs = [n.ref for n in nodes]
        except (RuntimeError, self.osmium.InvalidLocationError):  # the extract cut the way: its located nodes only
            kept = [(n.ref, n.lon, n.lat) for n in nodes if n.location.valid()]
            refs, xy = [k[0] for k in kept], np.array([k[1:] for k in kept], dtype=float).reshape(-1, 2)
        if len(refs) < 2:
            return
        self.heads.append((way_id, *found, grade(tags)))
        self.ids.extend(refs)
        self.lats.frombytes(np.rint(xy[:, 1] * SCALE).astype(np.int32).tobytes())
        self.lons.frombytes(np.rint(xy[:, 0] * SCALE).astype(np.int32).tobytes())
        self.ends.append(len(self.ids))

    def rows(self, area_id: int, pg: bool, batch: int):
        """The edge rows (EDGE_COLS, plus the EWKB geometry on PostgreSQL), `batch` at most at a time."""
        if not self.heads:
            return
        ids = np.frombuffer(self.ids, dtype=np.int64)
        lats, lons = np.frombuffer(self.lats, dtype=np.int32), np.frombuffer(self.lons, dtype=np.int32)
        ends = np.frombuffer(self.ends, dtype=np.int64)
        starts = np.concatenate(([0], ends[:-1]))
        cut = _shared(ids)
        cut[starts] = cut[ends - 1] = True
        # The edges' end nodes and their places: the router's prepared graph (trips/osm/graph.py) reads them here
        # rather than decode every edge's line back from the table.
        self.places = (ids[cut].copy(), lats[cut] / SCALE, lons[cut] / SCALE)
        pieces: list[tuple[tuple, np.ndarray, int, int]] = []
        # Written by cells of CELL_DEG (row by row), not in the file's order: the edges a search box reads then lie
        # together on disk, a few runs of pages rather than pages all over the table.
        cells = np.floor(lats[starts] / SCALE / CELL_DEG) * 100_000 + np.floor((lons[starts] / SCALE + 180.0) / CELL_DEG)
        for k in np.argsort(cells, kind="stable"):
            at = starts[k] + np.flatnonzero(cut[starts[k]:ends[k]])
            for a, b in zip(at[:-1].tolist(), at[1:].tolist()):
                line = np.column_stack((lats[a:b + 1], lons[a:b + 1])) / SCALE
                pieces.append((self.heads[k], line, int(ids[a]), int(ids[b])))
            if len(pieces) >= batch:
                yield self._rows(pieces, area_id, pg)
                pieces = []
        if pieces:
            yield self._rows(pieces, area_id, pg)

    @staticmethod
    def _rows(pieces, area_id: int, pg: bool) -> list[tuple]:
        lengths = np.array([len(p[1]) for p in pieces])
        coords = np.vstack([p[1] for p in pieces])
        encoded = geometry.encode_many(coords, lengths)
        metres = geometry.lengths_m(coords, lengths)
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        mins, maxs = np.minimum.reduceat(coords, starts), np.maximum.reduceat(coords, starts)
        rows = []
        for i, ((way_id, kind, fwd, bwd, surface), line, source, target) in enumerate(pieces):
            cost = float(metres[i]) * COST_PER_METRE[kind]  # the search's cost each way, -1 where closed
            row = (area_id, "w", way_id, source, target, kind, fwd, bwd, float(metres[i]), encoded[i],
                   float(mins[i, 0]), float(mins[i, 1]), float(maxs[i, 0]), float(maxs[i, 1]),
                   cost if fwd else -1.0, cost if bwd else -1.0, surface)
            rows.append(row + (ewkb_line(line),) if pg else row)
        return rows


def _shared(ids: np.ndarray) -> np.ndarray:
    """True where a node id appears more than once (two ways meet there, or one way passes twice). The repeated ids
    are found in a sorted copy, then looked up by bisection: two arrays of 8 bytes a node at the most (np.unique's
    inverse and counts would take four)."""
    ordered = np.sort(ids)
    repeated = np.unique(ordered[1:][ordered[1:] == ordered[:-1]])
    del ordered
    if not len(repeated):
        return np.zeros(len(ids), dtype=bool)
    at = np.searchsorted(repeated, ids)
    np.minimum(at, len(repeated) - 1, out=at)
    return repeated[at] == ids
