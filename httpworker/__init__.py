"""BTP's HTTP worker for gunicorn (gunicorn.conf.py worker_class): keep-alive, whole requests, no app code
before a request has arrived whole. It imports nothing of the app."""
