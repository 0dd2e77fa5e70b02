"""gunicorn.conf.py's worker hook: once a worker has loaded the app, its start-up heap is frozen out of the
garbage collector (a full collection walking it paused requests for 90–240 ms on the bench machine)."""
import gc
import runpy
from pathlib import Path
from types import SimpleNamespace


def test_a_worker_freezes_its_start_up_heap_once_the_app_is_loaded():
    conf = runpy.run_path(str(Path(__file__).resolve().parents[2] / "gunicorn.conf.py"))
    worker = SimpleNamespace(wsgi=SimpleNamespace(config={"BTP_NOMINATIM_URL": "http://127.0.0.1:9"}),
                             log=SimpleNamespace(warning=lambda *a: None))
    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    try:
        conf["post_worker_init"](worker)
        assert gc.get_freeze_count() > 1000  # the objects alive now: modules, the app, the test session's own
    finally:
        gc.unfreeze()
