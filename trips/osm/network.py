"""The routable network: the imported roads and ferries cut into edges between the nodes ways share.

The import (trips/osm/importer.py) hands every road and ferry way to `Network.add` with its OSM node ids and
their locations; once the whole file is read, `Network.rows` counts how many times each node appears and cuts
every way at its ends and at each node another way (or the same way again) passes through. Each piece becomes one
row of `osm_edge` (trips/osm/tables.py) with the node ids of its two ends, its real shape, its length, its routing
class and whether a bicycle may ride it each way (docs/RULES.md "Bicycle routing"). Ways closed to bicycles are
not kept at all, so no search can use them.

The ways are held in memory until the end of the file (node ids and locations: 24 bytes a node).
"""
from __future__ import annotations

import numpy as np

from trips.osm import geometry

EDGE_COLS = ("area_id", "osm_type", "osm_id", "source", "target", "kind", "forward", "backward", "length_m",
             "line", "min_lat", "min_lon", "max_lat", "max_lon")

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


def profile(tags: dict) -> tuple[str, bool, bool] | None:
    """(routing class, forward, backward) of a way for a bicycle, or None when a bicycle may not use it
    (docs/RULES.md "Bicycle routing")."""
    if tags.get("route") == "ferry" and "highway" not in tags:
        return ("ferry", True, True) if tags.get("bicycle") not in CLOSED_VALUES else None
    highway = tags.get("highway")
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
    """The routable ways of one import, cut into edges when the file has been read."""

    def __init__(self):
        self.heads: list[tuple[int, str, bool, bool]] = []  # (way id, class, forward, backward)
        self.ids: list[np.ndarray] = []
        self.coords: list[np.ndarray] = []

    def add(self, way_id: int, tags: dict, nodes) -> None:
        """A way's node refs (osmium NodeRefList); ways closed to bicycles and nodes without a location are left."""
        found = profile(tags)
        if found is None:
            return
        refs = [(n.ref, n.lat, n.lon) for n in nodes if n.location.valid()]
        if len(refs) < 2:
            return
        arr = np.array(refs, dtype=float)
        self.heads.append((way_id, *found))
        self.ids.append(np.array([r[0] for r in refs], dtype=np.int64))
        self.coords.append(arr[:, 1:])

    def rows(self, area_id: int, pg: bool, batch: int):
        """The edge rows (EDGE_COLS, plus the EWKB geometry on PostgreSQL), `batch` at most at a time."""
        if not self.ids:
            return
        every = np.concatenate(self.ids)
        _, inverse, counts = np.unique(every, return_inverse=True, return_counts=True)
        shared = counts[inverse] >= 2
        bounds = np.cumsum([0] + [len(a) for a in self.ids])
        pieces: list[tuple[tuple, np.ndarray, int, int]] = []
        # Written by cells of CELL_DEG (row by row), not in the file's order: the edges a search box reads then lie
        # together on disk, a few runs of pages rather than pages all over the table.
        first = np.array([c[0] for c in self.coords])
        cells = np.floor(first[:, 0] / CELL_DEG) * 100_000 + np.floor((first[:, 1] + 180.0) / CELL_DEG)
        for k in np.argsort(cells, kind="stable"):
            head, ids, coords = self.heads[k], self.ids[k], self.coords[k]
            cut = shared[bounds[k]:bounds[k + 1]].copy()
            cut[0] = cut[-1] = True
            at = np.flatnonzero(cut)
            for a, b in zip(at[:-1], at[1:]):
                pieces.append((head, coords[a:b + 1], int(ids[a]), int(ids[b])))
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
        for i, ((way_id, kind, fwd, bwd), line, source, target) in enumerate(pieces):
            row = (area_id, "w", way_id, source, target, kind, fwd, bwd, float(metres[i]), encoded[i],
                   float(mins[i, 0]), float(mins[i, 1]), float(maxs[i, 0]), float(maxs[i, 1]))
            rows.append(row + (ewkb_line(line),) if pg else row)
        return rows
