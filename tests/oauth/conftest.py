"""Fixtures of the oauth tests: the fake client metadata document servers (tests/fakes/cimd.py), plain and HTTPS."""
from tests.fakes.cimd import fake_cimd, fake_cimd_tls  # noqa: F401 (fixtures, registered for this folder)
