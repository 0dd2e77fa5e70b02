"""The jobs edge: RQ entry points (tasks.py: ids in, one app per process, safe to run twice), BTP's RQ worker
(worker.py), the reconciler, and the `flask worker` / `flask serve` commands. Nothing below this edge imports it:
jobs are enqueued by dotted name (trips/core/queue.py)."""
