"""The A* kernels of trips/osm/search.py, compiled by numba (cached under NUMBA_CACHE_DIR, which search.py points
at the instance folder). Imported on the first search only: numba and LLVM cost a process tens of megabytes.
"""
from __future__ import annotations

from typing import Any

import numpy as np


def _as_python(*args, **kwargs):
    return args[0] if args and callable(args[0]) else (lambda f: f)


njit: Any = _as_python  # numba is pinned in requirements.txt; without it the same code runs as Python: slow, right
try:
    import numba

    njit = numba.njit
except ImportError:
    pass

# A sphere no larger than the ellipsoid anywhere (WGS84's smallest radius of curvature, a(1 - e²)): its chord between
# two points is never longer than their geodesic, so the estimate never says more than the road can cost.
CHORD_RADIUS_M = 6_335_000.0
CHORD_SLACK_M = 1.0  # the polyline's rounding of the nodes' places (1e-6°), taken off every estimate


@njit(cache=True)
def _estimate(xyz, v, tx, ty, tz, per_metre):
    dx, dy, dz = xyz[v, 0] - tx, xyz[v, 1] - ty, xyz[v, 2] - tz
    chord = np.sqrt(dx * dx + dy * dy + dz * dz) * CHORD_RADIUS_M - CHORD_SLACK_M
    return per_metre * chord if chord > 0.0 else 0.0


@njit(cache=True)
def _push(hf, hg, hv, n, f, g, v):
    """Push (f, g, v) on the binary heap of `n` entries (the arrays are grown by the caller)."""
    i = n
    while i > 0:
        parent = (i - 1) >> 1
        if hf[parent] <= f:
            break
        hf[i], hg[i], hv[i] = hf[parent], hg[parent], hv[parent]
        i = parent
    hf[i], hg[i], hv[i] = f, g, v


@njit(cache=True)
def _pop(hf, hg, hv, n):
    """Take the smallest entry off the heap of `n` entries into slot n - 1 (read it there)."""
    f, g, v = hf[0], hg[0], hv[0]
    last = n - 1
    lf, lg, lv = hf[last], hg[last], hv[last]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= last:
            break
        if child + 1 < last and hf[child + 1] < hf[child]:
            child += 1
        if hf[child] >= lf:
            break
        hf[i], hg[i], hv[i] = hf[child], hg[child], hv[child]
        i = child
    hf[i], hg[i], hv[i] = lf, lg, lv
    hf[last], hg[last], hv[last] = f, g, v


@njit(cache=True)
def astar(indptr, head, cost, scale, xyz, per_metre, target, starts, start_cost, ends, end_cost,
           g, pred_node, pred_arc, stamp, gen):
    """(cost, last node) of the cheapest path from one of `starts` (at its cost) to one of `ends` (plus its cost);
    (inf, -1) when none joins them. `g`, `pred_*` and `stamp` are scratch arrays of a node each: a node's values are
    this search's only where stamp == gen, so nothing of the size of the graph is cleared per search. Nodes may be
    reopened, which keeps the answer exact even where rounding leaves the estimate a hair inconsistent."""
    tx, ty, tz = target[0], target[1], target[2]
    scaled = len(scale) > 0
    cap = 1024
    hf, hg, hv = np.empty(cap), np.empty(cap), np.empty(cap, np.int64)
    n = 0
    for i in range(len(starts)):
        v = starts[i]
        if stamp[v] != gen or start_cost[i] < g[v]:
            stamp[v], g[v], pred_node[v], pred_arc[v] = gen, start_cost[i], -1, -1
            _push(hf, hg, hv, n, start_cost[i] + _estimate(xyz, v, tx, ty, tz, per_metre), start_cost[i], v)
            n += 1
    best, best_node = np.inf, -1
    while n > 0:
        _pop(hf, hg, hv, n)
        n -= 1
        f, gu, u = hf[n], hg[n], hv[n]
        if f >= best:
            break
        if gu > g[u]:
            continue  # a stale entry: u was reached cheaper since
        for k in range(len(ends)):
            if ends[k] == u and gu + end_cost[k] < best:
                best, best_node = gu + end_cost[k], u
        for a in range(indptr[u], indptr[u + 1]):
            v = head[a]
            gv = gu + (cost[a] * scale[a] if scaled else cost[a])
            if stamp[v] == gen and gv >= g[v]:
                continue
            stamp[v], g[v], pred_node[v], pred_arc[v] = gen, gv, u, a
            if n == cap:
                cap *= 2
                hf2, hg2, hv2 = np.empty(cap), np.empty(cap), np.empty(cap, np.int64)
                hf2[:n], hg2[:n], hv2[:n] = hf[:n], hg[:n], hv[:n]
                hf, hg, hv = hf2, hg2, hv2
            _push(hf, hg, hv, n, gv + _estimate(xyz, v, tx, ty, tz, per_metre), gv, v)
            n += 1
    return best, best_node


@njit(cache=True)
def walk_back(pred_node, pred_arc, last):
    """The nodes from the path's first to `last`, and the arcs between them."""
    count = 0
    v = last
    while pred_node[v] >= 0:
        count += 1
        v = pred_node[v]
    nodes, arcs = np.empty(count + 1, np.int64), np.empty(count, np.int64)
    v = last
    for i in range(count, 0, -1):
        nodes[i], arcs[i - 1] = v, pred_arc[v]
        v = pred_node[v]
    nodes[0] = v
    return nodes, arcs
