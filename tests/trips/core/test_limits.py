"""Rate limits and budgets from configuration (trips/core/limits.py), and BTP_TRUSTED_PROXIES (ProxyFix)."""
import pytest

from app import KNOWN_ENV, ConfigError, load_config
from trips.core import limits, ratelimit
from trips.errors import RateLimited


def test_every_limit_has_a_default_and_one_known_variable():
    assert limits.DEFAULTS["mcp_address"] == (300, 60)
    assert limits.DEFAULTS["mcp_calls"] == (60, 60) and limits.DEFAULTS["mcp_writes"] == (20, 60)
    assert limits.DEFAULTS["trip_create"] == (10, 60) and limits.DEFAULTS["geocode"] == (30, 60)
    assert set(limits.ENV_NAMES) <= set(KNOWN_ENV)
    assert "BTP_LIMIT_MCP_ADDRESS" in limits.ENV_NAMES and len(limits.ENV_NAMES) == len(limits.REGISTRY)
    assert load_config(environ={})["BTP_LIMITS"] == limits.DEFAULTS


def test_one_variable_overrides_one_limit():
    conf = load_config(environ={"BTP_LIMIT_MCP_ADDRESS": "3/60", "BTP_LIMIT_OAUTH_REGISTER": " 1000000/1 "})
    assert conf["BTP_LIMITS"]["mcp_address"] == (3, 60)
    assert conf["BTP_LIMITS"]["oauth_register"] == (1_000_000, 1)  # a benchmark lifts a limit this way
    assert conf["BTP_LIMITS"]["mcp_calls"] == limits.DEFAULTS["mcp_calls"]
    assert load_config(environ={}, overrides={"BTP_LIMIT_GEOCODE": "2/30"})["BTP_LIMITS"]["geocode"] == (2, 30)


@pytest.mark.parametrize("value", ["300", "300/", "/60", "0/60", "300/0", "-1/60", "3.5/60", "300/60s", "ten/60",
                                   "300/604801", "1000000001/60", "3/60/1", "9" * 100 + "/60"])
def test_a_malformed_limit_is_refused_naming_its_variable(value):
    with pytest.raises(ConfigError, match="BTP_LIMIT_MCP_CALLS must be COUNT/SECONDS") as caught:
        load_config(environ={"BTP_LIMIT_MCP_CALLS": value})
    assert "9999999999" not in str(caught.value)  # the value is not echoed back


def test_an_unknown_limit_variable_is_refused():
    with pytest.raises(ConfigError, match="BTP_LIMIT_MCP_ADRESS"):
        load_config(environ={"BTP_LIMIT_MCP_ADRESS": "3/60"})


def test_the_app_limits_follow_its_configuration(fresh_app, redis_client):
    app = fresh_app(BTP_LIMIT_GEOCODE="2/60")
    with app.app_context():
        ratelimit.limit(redis_client, "geocode", "u1")
        ratelimit.limit(redis_client, "geocode", "u1")
        with pytest.raises(RateLimited, match="at most 2 per minute"):
            ratelimit.limit(redis_client, "geocode", "u1")
    for _ in range(3):  # outside an app: the default (30 per minute)
        ratelimit.limit(redis_client, "geocode", "u2")


@pytest.mark.parametrize("value", ["-1", "x", "6", "1.0", "100"])
def test_trusted_proxies_must_be_a_small_whole_number(value):
    with pytest.raises(ConfigError, match="BTP_TRUSTED_PROXIES must be a whole number from 0 to 5"):
        load_config(environ={"BTP_TRUSTED_PROXIES": value})


def _echo_app(fresh_app, **settings):
    """A fresh app with one more route that shows what the request looks like after ProxyFix. (Tests using it
    take `redis_client`, which empties Redis after them: the app counts its requests there.)"""
    app = fresh_app(**settings)

    @app.get("/_test/echo")
    def echo():
        from flask import request

        return {"addr": request.remote_addr, "scheme": request.scheme, "host": request.host}

    return app.test_client()


FORWARDED = {"X-Forwarded-For": "198.51.100.1, 203.0.113.7", "X-Forwarded-Proto": "https",
             "X-Forwarded-Host": "evil.example"}


def test_without_trusted_proxies_forwarded_headers_are_ignored(fresh_app, redis_client):
    client = _echo_app(fresh_app)
    seen = client.get("/_test/echo", headers=FORWARDED, base_url="http://127.0.0.1:8000").get_json()
    assert seen == {"addr": "127.0.0.1", "scheme": "http", "host": "127.0.0.1:8000"}


def test_one_trusted_proxy_gives_the_client_it_saw_the_scheme_and_the_host(fresh_app, redis_client):
    client = _echo_app(fresh_app, BTP_TRUSTED_PROXIES="1")
    ours = {**FORWARDED, "X-Forwarded-Host": "localhost:8000"}
    seen = client.get("/_test/echo", headers=ours, base_url="http://10.0.0.11:8000").get_json()
    # The last X-Forwarded-For entry is the one our proxy appended; what the client wrote before it is not ours.
    assert seen == {"addr": "203.0.113.7", "scheme": "https", "host": "localhost:8000"}
    assert client.get("/_test/echo").get_json()["addr"] == "127.0.0.1"  # no header: the connection's address
    # The forwarded host is checked like a Host (app.py, the Host allow-list): not one BTP answers for, refused.
    refused = client.get("/_test/echo", headers=FORWARDED, base_url="http://127.0.0.1:8000")
    assert refused.status_code == 400 and b"evil" not in refused.get_data()


def test_two_trusted_proxies_go_one_hop_further(fresh_app, redis_client):
    client = _echo_app(fresh_app, BTP_TRUSTED_PROXIES="2")
    assert client.get("/_test/echo", headers=FORWARDED).get_json()["addr"] == "198.51.100.1"


def test_the_mcp_address_limit_counts_the_forwarded_client(fresh_app, redis_client):
    from tests.mcp_helpers import modern

    client = _echo_app(fresh_app, BTP_TRUSTED_PROXIES="1", BTP_LIMIT_MCP_ADDRESS="2/60")
    first = [modern(client, "x", "tools/list", headers={"X-Forwarded-For": "203.0.113.7"}).status_code
             for _ in range(3)]
    assert first == [401, 401, 429]  # counted before authentication
    other = modern(client, "x", "tools/list", headers={"X-Forwarded-For": "203.0.113.8"})
    assert other.status_code == 401
    assert redis_client.exists("btp:rl:mcp_address:203.0.113.7", "btp:rl:mcp_address:203.0.113.8") == 2
    assert not redis_client.exists("btp:rl:mcp_address:127.0.0.1")


def test_the_readme_lists_every_limit_with_its_default():
    from tests.live import ROOT

    readme = (ROOT / "README.md").read_text()
    for bucket, (count, window, _) in limits.REGISTRY.items():
        assert f"| `{limits.env_name(bucket)}` | `{count}/{window}` |" in readme, bucket
