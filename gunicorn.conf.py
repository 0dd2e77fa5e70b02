"""gunicorn settings read by `gunicorn wsgi:app` from the project folder (and by `make run`)."""


def post_worker_init(worker):
    # Build the offline gazetteer in the background, so the first place search of a worker is not the one
    # that pays for it (about 2.5 s); with a Nominatim URL it is never used.
    import threading

    app = worker.wsgi
    if not app.config.get("BTP_NOMINATIM_URL"):
        from trips.gazetteer import get_gazetteer

        threading.Thread(target=get_gazetteer, name="gazetteer-warmup", daemon=True).start()
