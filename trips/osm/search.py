"""The cheapest path on the prepared graph (trips/osm/graph.py): an A* search from a leg's start edge to its end edge
(trips/osm/astar.py, compiled by numba on first use). The estimate of the cost left is the straight chord to the end's
foot times the cheapest cost of a metre on the graph, a lower bound, so the path found is the cheapest there is, as a
Dijkstra search would find it.
"""
from __future__ import annotations

import os
import sys
import threading

import numpy as np


def unit_vectors(lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
    """(n, 3) points of the unit sphere at the given degrees."""
    phi, lam = np.radians(lat), np.radians(lon)
    return np.column_stack((np.cos(phi) * np.cos(lam), np.cos(phi) * np.sin(lam), np.sin(phi)))


def kernels(cache_dir):
    """trips/osm/astar.py, imported once: numba caches the compiled code in `cache_dir` (unless NUMBA_CACHE_DIR
    says where), so the processes after the first load it rather than compile it."""
    if "numba" not in sys.modules:
        os.environ.setdefault("NUMBA_CACHE_DIR", str(cache_dir))
    from trips.osm import astar  # numba and LLVM: loaded by the first search, never at a worker's start

    return astar


def warm(cache_dir) -> None:
    """Compile the kernels into `cache_dir` now (the import does, so that no route waits for the compiler)."""
    astar = kernels(cache_dir)
    indptr, head, cost = np.array([0, 1, 1]), np.array([1], np.int32), np.array([1.0])
    xyz = unit_vectors(np.array([45.0, 45.0]), np.array([5.0, 5.001]))
    for graph_array in (indptr, head, cost, xyz):  # as the graph's files, mapped read-only: the same compiled types
        graph_array.flags.writeable = False
    g, pred_node, pred_arc, stamp = np.empty(2), np.empty(2, np.int32), np.empty(2, np.int64), np.zeros(2, np.int32)
    _, last = astar.astar(indptr, head, cost, np.empty(0), xyz, 0.0, xyz[1].copy(), np.array([0]), np.array([0.0]),
                          np.array([1]), np.array([0.0]), g, pred_node, pred_arc, stamp, 1)
    astar.walk_back(pred_node, pred_arc, last)


class Scratch:
    """A graph's per-node work arrays, reused search after search by one thread at a time (others get their own)."""

    def __init__(self, nodes: int):
        self.g = np.empty(nodes)
        self.pred_node = np.empty(nodes, np.int32)
        self.pred_arc = np.empty(nodes, np.int64)
        self.stamp = np.zeros(nodes, np.int32)
        self.gen = 0
        self.lock = threading.Lock()

    def next_gen(self) -> int:
        self.gen += 1
        if self.gen >= 2**31 - 1:
            self.stamp[:] = 0
            self.gen = 1
        return self.gen


def cheapest(graph, scratch: Scratch, starts: dict[int, float], ends: dict[int, float], target_latlon,
             scale: np.ndarray | None = None):
    """(cost, first node, last node, nodes before the last, arcs) of the cheapest path from a node of `starts` (node
    index → cost already spent) to one of `ends` (node index → cost still to pay), or None. `scale`: a factor per arc
    the costs are multiplied by (all ≥ 0), for a search that weighs the roads otherwise."""
    per_metre = graph.per_metre
    if scale is not None:
        per_metre *= float(scale.min()) if len(scale) else 1.0
    target = unit_vectors(np.array([target_latlon[0]]), np.array([target_latlon[1]]))[0]
    astar = kernels(graph.cache_dir)
    s_idx, s_cost = np.array(list(starts), np.int64), np.array(list(starts.values()), float)
    e_idx, e_cost = np.array(list(ends), np.int64), np.array(list(ends.values()), float)
    own = scratch.lock.acquire(blocking=False)
    work = scratch if own else Scratch(len(graph.xyz))
    try:
        gen = work.next_gen()
        best, last = astar.astar(graph.indptr, graph.head, graph.cost, np.empty(0) if scale is None else scale,
                                 graph.xyz, per_metre, target, s_idx, s_cost, e_idx, e_cost, work.g, work.pred_node,
                                 work.pred_arc, work.stamp, gen)
        if last < 0:
            return None
        nodes, arcs = astar.walk_back(work.pred_node, work.pred_arc, last)
    finally:
        if own:
            scratch.lock.release()
    return float(best), int(nodes[0]), int(nodes[-1]), nodes[:-1], arcs
