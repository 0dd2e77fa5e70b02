"""Fixtures of the trips tests: the fake Valhalla routing service (tests/fakes/valhalla.py)."""
from tests.fakes.valhalla import fake_valhalla  # noqa: F401 (a fixture, registered for this folder)
