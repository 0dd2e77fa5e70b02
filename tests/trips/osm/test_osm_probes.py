"""The corridor queries' index probes (trips/osm/index.py `merge_boxes`, `select_chunks`): overlapping chunk boxes are
asked as fewer merged probes covering every chunk's corridor, with exactly one probe per chunk's answers; a plan that
drops a box is caught. On PostgreSQL the statement runs without JIT."""
import random

import pytest
import sqlalchemy as sa

from tests.enrich_helpers import engine, import_map
from tests.osm_maps import per_box_select
from tests.trips.osm.test_osm_batched_days import _days, _lines, _map
from trips.osm import geometry as G
from trips.osm import index
from trips.osm import queries as Q
from trips.osm.tables import osm_point


def _chunks(days):
    return [c for _, c, _ in Q._chunked(days)[1]]


def _corridor_samples(chunks, buffer_m: float, rnd: random.Random, per_chunk: int = 30):
    """Points at most buffer_m from a chunk's line (geodesic): a vertex or a point along a segment, moved
    0.999 × buffer_m in a random direction, with the chunk they belong to."""
    out = []
    for k, chunk in enumerate(chunks):
        for _ in range(per_chunk):
            i = rnd.randrange(len(chunk))
            a, b = chunk[i], chunk[min(i + 1, len(chunk) - 1)]
            f = rnd.random()
            lat, lon = a[0] + f * (b[0] - a[0]), a[1] + f * (b[1] - a[1])
            lon2, lat2, _ = G.GEOD.fwd(lon, lat, rnd.uniform(0, 360), 0.999 * buffer_m * rnd.random() ** 0.1)
            out.append((k, lat2, lon2))
    return out


def _uncovered(plan, boxes, samples) -> list:
    """The samples no probe of `plan` holds, and the boxes no probe holds or holds more than once."""
    missing = [s for s in samples if not any(p[0] <= s[1] <= p[2] and p[1] <= s[2] <= p[3] for p, _ in plan)]
    owners = sorted(k for _, members in plan for k in members)
    inside = all(p[0] <= boxes[k][0] and p[1] <= boxes[k][1] and boxes[k][2] <= p[2] and boxes[k][3] <= p[3]
                 for p, members in plan for k in members)
    return missing + ([] if owners == list(range(len(boxes))) and inside else ["boxes"])


@pytest.mark.parametrize("buffer_m", [20.0, 500.0, 2000.0])
def test_merged_probes_hold_every_box_and_every_corridor_point(buffer_m):
    rnd = random.Random(int(buffer_m))
    chunks = _chunks(_days(rnd, 6))
    boxes = index.grow_chunks(chunks, buffer_m)
    plan = index.merge_boxes(boxes)
    samples = _corridor_samples(chunks, buffer_m, rnd)
    assert _uncovered(plan, boxes, samples) == []
    if buffer_m >= 500:
        assert len(plan) < len(boxes) / 2  # the wide corridors' overlapping boxes merge
    # each probe stays within the slack of the area its boxes cover (no probe reads a whole region)
    for probe, members in plan:
        area = (probe[2] - probe[0]) * (probe[3] - probe[1])
        assert area <= index.MERGE_SLACK * sum((boxes[k][2] - boxes[k][0]) * (boxes[k][3] - boxes[k][1])
                                               for k in members) + 1e-12


def test_a_plan_without_one_box_is_seen():
    """The cover check fails for a plan whose probe lost a box (the negative of the test above)."""
    rnd = random.Random(5)
    chunks = _chunks(_days(rnd, 3))
    boxes = index.grow_chunks(chunks, 2000.0)
    plan = index.merge_boxes(boxes)
    samples = _corridor_samples(chunks, 2000.0, rnd)
    probe, members = plan[0]
    shrunk = [((probe[0], probe[1], *boxes[members[-2]][2:]), members[:-1])] + plan[1:]
    assert _uncovered(shrunk, boxes, samples) != []
    assert _uncovered(plan[1:], boxes, samples) != []


def test_merged_probes_answer_as_one_probe_per_chunk_and_a_dropped_probe_shows(ctx, tmp_path, monkeypatch):
    rnd = random.Random(31)
    days = _days(rnd, 5)
    import_map(_map(rnd, days), tmp_path)

    def answers():
        return (Q.points_along_each(days, 2000), Q.points_along_each(days, 500, kinds=["water", "resupply"]),
                Q.points_along_each(days, 25), _lines(Q.ways_along_each(days, 20)),
                _lines(Q.ways_along_each(days, 300)), _lines(Q.ferries_along_each(days, 1500)))

    merged = answers()
    assert len(index.merge_boxes(index.grow_chunks(_chunks(days), 2000))) < len(_chunks(days)) / 3
    monkeypatch.setattr(index, "select_chunks", per_box_select)
    assert answers() == merged
    assert all(any(day) for day in merged[:2]) and any(merged[3])

    def dropping(boxes):
        plan = real(boxes)
        return plan[:len(plan) // 2] + plan[len(plan) // 2 + 1:] if len(plan) > 2 else plan

    real = index.merge_boxes
    monkeypatch.undo()
    monkeypatch.setattr(index, "merge_boxes", dropping)
    assert answers() != merged  # a probe less loses what only it held


def test_select_chunks_rows_per_box_are_the_per_box_rows(ctx, tmp_path):
    """Row for row (ids, in order) per chunk box: points by their position; on SQLite also the lines (their
    stored box); an empty box list asks nothing."""
    rnd = random.Random(8)
    days = _days(rnd, 3)
    import_map(_map(rnd, days), tmp_path)
    boxes = index.grow_chunks(_chunks(days), 1500.0)
    with engine().connect() as conn:
        merged = index.select_chunks(conn, osm_point, boxes)
        alone = per_box_select(conn, osm_point, boxes)
        assert index.select_chunks(conn, osm_point, []) == []
    assert [[r["id"] for r in rows] for rows in merged] == [[r["id"] for r in rows] for rows in alone]
    assert sum(map(len, alone)) > 3 * len({r["id"] for rows in alone for r in rows})  # boxes overlap


def test_postgis_statement_runs_without_jit_for_that_transaction_only(ctx, tmp_path):
    if engine().dialect.name != "postgresql":
        pytest.skip("PostgreSQL only (JIT)")
    rnd = random.Random(2)
    days = _days(rnd, 2)
    import_map(_map(rnd, days), tmp_path)
    boxes = index.grow_chunks(_chunks(days), 500.0)
    with engine().connect() as conn:
        default = conn.execute(sa.text("SHOW jit")).scalar()
        conn.rollback()
        if default != "on":
            pytest.skip("this server runs without JIT anyway")
        assert index.select_chunks(conn, osm_point, boxes)
        assert conn.execute(sa.text("SHOW jit")).scalar() == "off"
    with engine().connect() as conn:
        assert conn.execute(sa.text("SHOW jit")).scalar() == default


def test_decode_many_is_decode_of_each_to_the_last_bit_and_refuses_as_it_does():
    import numpy as np

    rng = np.random.default_rng(4)
    lines = [np.column_stack((45 + np.cumsum(rng.normal(0, 0.02, n)), 5 + np.cumsum(rng.normal(0, 0.02, n))))
             for n in rng.integers(1, 30, 400)]
    lines += [np.array([[-89.999999, -179.999999]]), np.array([[0.0, 0.0], [0.0, 0.0]]),
              np.array([[89.999999, 179.999999], [-89.999999, -179.999999]])]
    texts = G.encode_many(np.vstack(lines), np.array([len(line) for line in lines]))
    many = G.decode_many(texts)
    assert len(many) == len(texts) and G.decode_many([]) == []
    for one, text in zip(many, texts):
        alone = G.decode(text)
        assert one.shape == alone.shape and one.tobytes() == alone.tobytes()
    for bad in ("_p~iF", "_p~iF~ps|U_", "_p~iF~ps|U\x7f", "é@", "\u20ac"):  # odd, truncated, out of range, not ASCII
        with pytest.raises(ValueError):
            G.decode_many([texts[0], bad])
