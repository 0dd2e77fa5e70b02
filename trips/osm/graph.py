"""The routable network prepared for the router's search: every ready import's edges as one graph in compressed rows
(numpy arrays: for each node its outgoing arcs' heads, costs and edge ids, and each node's place on the unit sphere).

`prepare` writes an import's part into `osm_graph` (binary chunks, the source of truth every web node and worker
reads); the import calls it before the area is published. `current` answers the graph of the imports ready now: the
parts merged once into .npy files under the instance folder, named after the parts' tokens, checked and opened
memory-mapped, so the processes of one machine share their pages. A new import changes the tokens: a graph made
of other parts is never used; a missing or damaged copy is made again from the database.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import secrets
import shutil
import threading
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import sqlalchemy as sa
from flask import current_app, has_app_context

from trips.osm import geometry
from trips.osm.search import Scratch, unit_vectors
from trips.osm.store import postgis_schema

CHUNK_BYTES = 16 * 1024 * 1024  # a row of osm_graph
READ_EDGES = 500_000  # edges read from osm_edge per statement while preparing
FOLDER = "osm-graph"
_PART = ("edge", "source", "target", "cost", "reverse", "length", "grade", "node", "lat", "lon")
_GRAPH = ("node", "xyz", "indptr", "head", "cost", "edge", "grade")


@dataclass
class Graph:
    key: str
    node: np.ndarray  # OSM node ids, sorted: a node's index is its place here
    xyz: np.ndarray  # (n, 3) the node on the unit sphere
    indptr: np.ndarray  # node i's arcs are indptr[i]:indptr[i + 1]
    head: np.ndarray  # the node an arc leads to
    cost: np.ndarray  # the arc's cost (osm_edge cost or reverse_cost)
    edge: np.ndarray  # the osm_edge id an arc rides: a weighting per edge is applied per arc through it
    grade: np.ndarray  # the surface grade of the edge an arc rides (trips/osm/waykinds.py GRADE): a bike weighs it
    per_metre: float  # the cheapest cost of a metre of any arc: the search's estimate
    cache_dir: str = ""  # where numba keeps the compiled search
    scratch: Scratch = field(repr=False, default=None)  # type: ignore[assignment]

    def __post_init__(self):
        self.scratch = Scratch(len(self.node))

    def index(self, node_id: int) -> int | None:
        """The index of an OSM node id, None when the graph has no such node."""
        at = int(np.searchsorted(self.node, node_id))
        return at if at < len(self.node) and int(self.node[at]) == node_id else None

    def files_bytes(self) -> int:
        return sum(getattr(self, name).nbytes for name in _GRAPH)


# --- preparing an import's part ------------------------------------------------------------------------------------

def prepare(engine: sa.Engine, area_id: int, places=None) -> dict:
    """Write the graph part of import `area_id` (its osm_edge rows) into osm_graph, replacing any; returns its
    counts {"edges", "nodes", "bytes"}. `places`: (node ids, lat, lon) of the edges' ends, as the import knows them;
    without them they are read from the edges' lines."""
    part = _read_part(engine, area_id, places)
    buf = io.BytesIO()
    save: Any = np.savez  # numpy's stubs read the arrays' names as its keyword arguments
    save(buf, **part)
    blob = buf.getvalue()
    token = secrets.token_hex(16)
    rows = [{"a": area_id, "s": i, "t": token, "d": blob[at:at + CHUNK_BYTES]}
            for i, at in enumerate(range(0, max(len(blob), 1), CHUNK_BYTES))]
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM osm_graph WHERE area_id = :a"), {"a": area_id})
        conn.execute(sa.text("INSERT INTO osm_graph (area_id, seq, token, data) VALUES (:a, :s, :t, :d)"), rows)
    return {"edges": len(part["edge"]), "nodes": len(part["node"]), "bytes": len(blob)}


_NUMBERS = ("edge", "source", "target", "cost", "reverse", "length", "grade")
_ENDS = ("lat0", "lon0", "lat1", "lon1")


def _read_part(engine: sa.Engine, area_id: int, places=None) -> dict[str, np.ndarray]:
    names = _NUMBERS + (() if places is not None else _ENDS)
    cols: dict[str, list] = {k: [] for k in names}
    with engine.connect() as conn:
        lo, hi = conn.execute(sa.text("SELECT min(id), max(id) FROM osm_edge WHERE area_id = :a"),
                              {"a": area_id}).one()
        read = _read_pg if conn.dialect.name == "postgresql" else _read_sqlite
        for first in range(lo or 0, (hi or -1) + 1, READ_EDGES):
            for k, v in zip(cols, read(conn, area_id, first, first + READ_EDGES, places is None)):
                cols[k].append(v)
    out = {k: np.concatenate(v) if v else np.empty(0, np.int64 if k in _NUMBERS[:3] else float)
           for k, v in cols.items()}
    node = np.unique(np.concatenate((out["source"], out["target"])))
    if places is None:
        ids = np.concatenate((out["source"], out["target"]))
        lat, lon = np.concatenate((out.pop("lat0"), out.pop("lat1"))), np.concatenate((out.pop("lon0"), out.pop("lon1")))
    else:
        ids, lat, lon = (np.asarray(a) for a in places)
    order = np.argsort(ids, kind="stable")
    at = order[np.searchsorted(ids, node, sorter=order)]
    return {**out, "node": node, "lat": lat[at], "lon": lon[at]}


def _packed(with_ends: bool) -> np.dtype:
    return np.dtype([(c, ">i8") for c in _NUMBERS[:3]] + [(c, ">f8") for c in _NUMBERS[3:] + (_ENDS if with_ends
                                                                                              else ())])


def _read_pg(conn, area_id: int, lo: int, hi: int, with_ends: bool) -> list[np.ndarray]:
    """One id range's columns, packed by PostgreSQL into one binary value: a numpy call reads it, no Python object
    per row."""
    g = postgis_schema(conn)
    ends = [f'"{g}".ST_{f}("{g}".ST_{p}Point(t.geom))' for p in ("Start", "End") for f in ("Y", "X")]
    packed = " || ".join([f"int8send(t.{c})" for c in ("id::int8", "source", "target")]
                         + [f"float8send({c})" for c in ("t.cost", "t.reverse_cost", "t.length_m", "t.grade::float8",
                                                         *(ends if with_ends else ()))])
    with conn.connection.driver_connection.cursor(binary=True) as cur:
        cur.execute(f"SELECT string_agg({packed}, ''::bytea ORDER BY t.id) FROM osm_edge t "
                    "WHERE t.area_id = %s AND t.id >= %s AND t.id < %s", (area_id, lo, hi))
        data = cur.fetchone()[0] or b""
    dtype = _packed(with_ends)
    rows = np.frombuffer(data, dtype=dtype)
    return [rows[c].astype(np.int64 if i < 3 else float) for i, c in enumerate(dtype.names or ())]


def _read_sqlite(conn, area_id: int, lo: int, hi: int, with_ends: bool) -> list[np.ndarray]:
    cur = conn.connection.driver_connection.execute(
        "SELECT id, source, target, cost, reverse_cost, length_m, grade" + (", line" if with_ends else "")
        + " FROM osm_edge WHERE area_id = ? AND id >= ? AND id < ? ORDER BY id", (area_id, lo, hi))
    rows = cur.fetchall()
    columns = list(zip(*rows)) or [()] * (8 if with_ends else 7)
    out = ([np.array(columns[k], dtype=np.int64) for k in range(3)]
           + [np.array(columns[k], dtype=float) for k in range(3, 7)])
    if with_ends:
        lines = geometry.decode_many(list(columns[7]))
        first = np.array([ln[0] for ln in lines], dtype=float).reshape(-1, 2)
        last = np.array([ln[-1] for ln in lines], dtype=float).reshape(-1, 2)
        out += [first[:, 0], first[:, 1], last[:, 0], last[:, 1]]
    return out


# --- the graph of the ready imports --------------------------------------------------------------------------------

_loaded: dict[str, Graph] = {}
_lock = threading.Lock()


def instance_folder() -> Path:
    """The running app's instance folder; outside an app, BTP_INSTANCE_DIR (default ./instance), as app.py reads it."""
    if has_app_context():
        return Path(current_app.instance_path)
    return Path(os.environ.get("BTP_INSTANCE_DIR") or "./instance").resolve()


def numba_cache(folder: Path | None = None) -> Path:
    """Where numba keeps the compiled search: beside the graph copies in the instance folder."""
    return (folder or instance_folder()) / "numba-cache"


def parts(conn) -> list[tuple[int, str | None]]:
    """(area id, token or None when not prepared) of every ready import, by id."""
    return [(int(a), t) for a, t in conn.execute(sa.text(
        "SELECT a.id, g.token FROM osm_area a LEFT JOIN osm_graph g ON g.area_id = a.id AND g.seq = 0 "
        "WHERE a.status = 'ready' ORDER BY a.id")).all()]


def graph_key(found: list[tuple[int, str | None]]) -> str:
    return hashlib.sha256(";".join(f"{a}:{t}" for a, t in found).encode()).hexdigest()[:24]


def current(engine: sa.Engine, conn=None, folder: Path | None = None) -> Graph | None:
    """The graph of the imports ready now, None when none is (`conn`: a connection of the caller's to ask with). A
    ready import without its part (imported before parts were prepared), or whose stored part no longer reads, gets
    it (again) from its edges first."""
    if conn is None:
        with engine.connect() as own:
            found = parts(own)
    else:
        found = parts(conn)
    if not found:
        return None
    if any(token is None for _, token in found):
        for area, token in found:
            if token is None:
                prepare(engine, area)
        with engine.connect() as own:
            found = parts(own)
    for _ in range(2):  # once more after a damaged part is prepared anew (a new token: a new key)
        key = graph_key(found)
        with _lock:
            if key in _loaded:
                return _loaded[key]
            where = (folder or instance_folder()) / FOLDER
            graph = _open(where / key, key)
            if graph is None:
                damaged = _build(engine, [a for a, _ in found], where, key)
                if damaged is not None:
                    prepare(engine, damaged)
                    with engine.connect() as own:
                        found = parts(own)
                    continue
                graph = _open(where / key, key)
            if graph is None:
                raise RuntimeError(f"the routing graph written to {where / key} cannot be read back")
            _loaded.clear()  # the graph of other imports is done with (its pages go once no search holds them)
            _loaded[key] = graph
            return graph
    raise RuntimeError("the routing graph's parts cannot be read from the database")


def forget() -> None:
    """Drop the graphs this process holds (the next search opens the instance copy again)."""
    with _lock:
        _loaded.clear()


def _open(folder: Path, key: str) -> Graph | None:
    """The copy in `folder` opened memory-mapped, None when it is missing or any file differs from its manifest."""
    try:
        meta = json.loads((folder / "manifest.json").read_text())
        arrays = {}
        for name in _GRAPH:
            path = folder / f"{name}.npy"
            size, crc = meta["files"][name]
            if path.stat().st_size != size or _crc(path) != crc:
                return None
            arrays[name] = np.load(path, mmap_mode="r", allow_pickle=False)
        return Graph(key=key, per_metre=float(meta["per_metre"]), cache_dir=str(numba_cache(folder.parent.parent)),
                     **arrays)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _crc(path: Path) -> int:
    crc = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            crc = zlib.crc32(chunk, crc)
    return crc


def _build(engine: sa.Engine, areas: list[int], where: Path, key: str) -> int | None:
    """Merge the parts of `areas` from the database into the copy `where/key` (written aside, then renamed in);
    returns the first area whose stored part does not read (nothing written then), else None."""
    loaded = []
    with engine.connect() as conn:
        for area in areas:
            try:  # each array of the .npz is checked against its CRC-32 as it is read
                with np.load(io.BytesIO(_part_bytes(conn, area)), allow_pickle=False) as npz:
                    loaded.append({k: npz[k] for k in _PART})
            except (ValueError, OSError, KeyError, EOFError, zipfile.BadZipFile):
                return area
    arrays, per_metre = merge(loaded)
    where.mkdir(parents=True, exist_ok=True)
    tmp = where / f".{key}.{os.getpid()}.{secrets.token_hex(4)}"
    tmp.mkdir()
    files = {}
    for name, arr in arrays.items():
        np.save(tmp / f"{name}.npy", arr, allow_pickle=False)
        files[name] = [(tmp / f"{name}.npy").stat().st_size, _crc(tmp / f"{name}.npy")]
    (tmp / "manifest.json").write_text(json.dumps({"per_metre": per_metre, "areas": areas, "files": files}))
    final = where / key
    if final.exists() and _open(final, key) is not None:  # another process wrote the same graph meanwhile
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        shutil.rmtree(final, ignore_errors=True)  # damaged: replaced
        try:
            tmp.rename(final)
        except OSError:  # another process renamed its copy in first: the same parts, the same graph
            shutil.rmtree(tmp, ignore_errors=True)
    for other in where.iterdir():  # the copies of other imports (a process still mapping one keeps its pages)
        if other.name != key and not other.name.startswith("."):
            shutil.rmtree(other, ignore_errors=True)
    return None


def _part_bytes(conn, area: int) -> bytes:
    """An import's part as stored: its chunks joined (PostgreSQL sends them in binary, not as hex text)."""
    sql = "SELECT data FROM osm_graph WHERE area_id = {} ORDER BY seq"
    if conn.dialect.name == "postgresql":
        with conn.connection.driver_connection.cursor(binary=True) as cur:
            cur.execute(sql.format("%s"), (area,))
            return b"".join(bytes(r[0]) for r in cur.fetchall())
    return b"".join(bytes(r[0]) for r in conn.exec_driver_sql(sql.format("?"), (area,)).all())


def merge(loaded: list[dict[str, np.ndarray]]) -> tuple[dict[str, np.ndarray], float]:
    """The graph arrays of the parts `loaded` (their node ids joined: the edges of overlapping imports meet at the
    same OSM nodes), and the cheapest cost of a metre of its arcs."""
    node = np.unique(np.concatenate([p["node"] for p in loaded]))
    lat, lon = np.zeros(len(node)), np.zeros(len(node))
    for p in loaded:
        at = np.searchsorted(node, p["node"])
        lat[at], lon[at] = p["lat"], p["lon"]
    tails, heads, costs, edges, lengths, grades = [], [], [], [], [], []
    for p in loaded:
        s, t = np.searchsorted(node, p["source"]), np.searchsorted(node, p["target"])
        fwd, bwd = p["cost"] >= 0, p["reverse"] >= 0
        tails += [s[fwd], t[bwd]]
        heads += [t[fwd], s[bwd]]
        costs += [p["cost"][fwd], p["reverse"][bwd]]
        edges += [p["edge"][fwd], p["edge"][bwd]]
        lengths += [p["length"][fwd], p["length"][bwd]]
        grade = p["grade"] if "grade" in p else np.zeros(len(p["edge"]))  # a part prepared before grades: unknown
        grades += [grade[fwd], grade[bwd]]
    tail, cost, length = np.concatenate(tails), np.concatenate(costs), np.concatenate(lengths)
    order = np.argsort(tail, kind="stable")
    indptr = np.zeros(len(node) + 1, np.int64)
    np.cumsum(np.bincount(tail, minlength=len(node)), out=indptr[1:])
    long = length > 0
    per_metre = float(np.min(cost[long] / length[long])) if long.any() else 0.0
    return {"node": node, "xyz": unit_vectors(lat, lon), "indptr": indptr,
            "head": np.concatenate(heads)[order].astype(np.int32), "cost": cost[order],
            "edge": np.concatenate(edges)[order].astype(np.int64),
            "grade": np.concatenate(grades)[order].astype(np.uint8)}, per_metre
