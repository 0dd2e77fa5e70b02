"""The official MCP conformance suite at 2026-07-28 and 2025-11-25, against BTP under gunicorn (through a loopback proxy
that adds the token) and against its fixture tools (tests/conformance/fixtures.py).
tests/conformance/expected_failures.json lists every unmet check with its reason: an unlisted failure, or a listed
check that passes, fails the test, so the list only shrinks."""
from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest

from tests.conformance.proxy import bearer_proxy
from tests.conformance.suite import run_suite
from tests.factories import make_user
from tests.live import free_port, gunicorn

pytestmark = pytest.mark.slow
EXPECTED = Path(__file__).resolve().parents[1] / "conformance" / "expected_failures.json"
REVISIONS = ("2026-07-28", "2025-11-25")
# One run is a few hundred requests from one address and one agent within seconds: lift the per-address and
# per-agent limits (tested in test_mcp_transport) so a longer suite never meets them by accident.
UNLIMITED = {"BTP_LIMIT_MCP_ADDRESS": "1000000/60", "BTP_LIMIT_MCP_CALLS": "1000000/60",
             "BTP_LIMIT_MCP_WRITES": "1000000/60"}


def expected(target: str, revision: str) -> dict[str, str]:
    return json.loads(EXPECTED.read_text())[target][revision]


def token_for(audience: str) -> str:
    from oauth.kernel.tokens import issue_token
    from trips.core.db import atomic

    user = make_user(f"conformance-{secrets.token_hex(4)}@example.org")
    with atomic():
        return issue_token(user, audience, "trips:read trips:write", 3600, client_id="conformance")


@pytest.fixture(scope="module")
def btp(app, app_config, tmp_path_factory):
    """gunicorn whose public address (BTP_BASE_URL) is the proxy's port: yields (public URL, gunicorn URL)."""
    public = f"http://127.0.0.1:{free_port()}"
    with gunicorn({**app_config, **UNLIMITED, "BTP_BASE_URL": public},
                  tmp_path_factory.mktemp("conf") / "gunicorn.log") as live:
        yield public, live.url


@pytest.fixture(scope="module")
def fixtures(app, app_config):
    from tests.conformance.fixture_app import fixture_app, served
    from trips.core.db import db

    public = f"http://127.0.0.1:{free_port()}"
    application = fixture_app({**app_config, **UNLIMITED, "BTP_BASE_URL": public})
    with served(application) as url:
        yield public, url
    with application.app_context():
        db.engine.dispose()  # its own pool: nothing left connected once the module is done


def judge(target: str, revision: str, upstream: tuple[str, str], out: Path):
    public, url = upstream
    with bearer_proxy(url, token_for(public + "/mcp"), int(public.rsplit(":", 1)[1])) as proxy:
        outcome = run_suite(proxy + "/mcp", revision, out)
    unmet, listed = outcome.unmet(), expected(target, revision)
    (out / "unmet.json").write_text(json.dumps(unmet, indent=1, sort_keys=True))  # to refresh the list by hand
    print(f"\nconformance {target} --requirements {revision}: {outcome.passed} of "
          f"{outcome.passed + outcome.failed} checks passed")
    unexpected = {check: why for check, why in unmet.items() if check not in listed}
    stale = sorted(check for check in listed if check not in unmet)
    assert not unexpected, f"unmet and not in {EXPECTED.name}:\n{json.dumps(unexpected, indent=1)}"
    assert not stale, f"listed in {EXPECTED.name} but no longer failing (remove them): {stale}"
    return outcome


@pytest.mark.parametrize("revision", REVISIONS)
def test_btp_itself(ctx, btp, tmp_path, revision):
    judge("btp", revision, btp, tmp_path)


@pytest.mark.parametrize("revision", REVISIONS)
def test_the_fixture_app_on_the_same_transport(ctx, fixtures, tmp_path, revision):
    judge("fixtures", revision, fixtures, tmp_path)


def test_the_product_never_imports_the_fixtures(app):
    """The fixture app lives under tests/ only: no product module imports tests, and the product serves its
    own thirteen tools."""
    import ast

    from mcp.tools import PRODUCT

    root = Path(__file__).resolve().parents[2]
    for path in [root / "app.py", root / "wsgi.py", *[p for d in ("mcp", "trips", "oauth", "jobs")
                                                       for p in (root / d).rglob("*.py")]]:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not any(n == "tests" or n.startswith("tests.") for n in names), path
    assert app.extensions["mcp.tools"] is PRODUCT and len(PRODUCT.tools) == 13
