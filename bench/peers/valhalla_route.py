"""The router peer of bench/bench_router.py: Valhalla (pyvalhalla-weekly, its own venv), one process.

    <valhalla venv>/bin/python bench/peers/valhalla_route.py CONFIG.json RUNS ANSWERS.json < requests.json

Reads a JSON list of [[lat, lon], [lat, lon]] pairs, routes each by bicycle with Valhalla's Actor (one warm-up,
then RUNS times) and writes [{"km": length, "ms": median wall time}] in the same order to ANSWERS.json
(Valhalla logs on stdout). Never a BTP dependency.
"""
import json
import statistics
import sys
import time

from valhalla import Actor


def main() -> None:
    config, runs, answers = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    actor = Actor(config)
    out = []
    for (lat0, lon0), (lat1, lon1) in json.load(sys.stdin):
        body = json.dumps({"locations": [{"lat": lat0, "lon": lon0}, {"lat": lat1, "lon": lon1}],
                           "costing": "bicycle", "units": "kilometers", "directions_type": "none"})
        answer = json.loads(actor.route(body))  # warm-up, and the length
        times = []
        for _ in range(runs):
            t = time.perf_counter()
            actor.route(body)
            times.append((time.perf_counter() - t) * 1000.0)
        out.append({"km": answer["trip"]["summary"]["length"], "ms": statistics.median(times)})
    with open(answers, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
