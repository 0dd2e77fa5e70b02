"""Client ID Metadata Documents (oauth.services.cimd). Every request goes to the fakes on 127.0.0.1; the address-vetting
tests fake DNS and fail the test if a connection pool is even built."""
import socket
import time

import pytest
import urllib3

import oauth.services.cimd as cimd
from oauth.services.cimd import CimdError, expires_in_from, fetch_client_metadata, fetch_from, is_metadata_client_id
from tests.fakes.cimd import TLS_HOSTNAME  # fixtures fake_cimd / fake_cimd_tls come from tests/oauth/conftest.py

OWN = "btp.example.com"
PUBLIC_ID = "https://agent.example.com/oauth/client.json"


def fetch(client_id, **kwargs):
    kwargs.setdefault("own_host", OWN)
    kwargs.setdefault("allow_insecure_loopback", True)
    return fetch_client_metadata(client_id, **kwargs)


def refused(client_id, **kwargs) -> str:
    with pytest.raises(CimdError) as info:
        fetch(client_id, **kwargs)
    return info.value.reason


# --- the client id itself ---

@pytest.mark.parametrize("client_id", [
    PUBLIC_ID, "https://a.bc/c", "https://agent.example.com:8443/x", "https://xn--bcher-kva.example/c",
    "https://agent.example.com/c/", "https://agent.example.com/a%20b", "https://" + "a" * 20 + ".example/" + "p" * 2000,
])
def test_client_id_shapes_accepted(client_id):
    assert is_metadata_client_id(client_id)


@pytest.mark.parametrize("client_id", [
    "https://agent.example.com", "https://agent.example.com/", "http://agent.example.com/c",
    "HTTPS://agent.example.com/c", "https://Agent.example.com/c", "https://agent.example.com./c",
    "https://agent.example.com/c#f", "https://agent.example.com/c#", "https://u@agent.example.com/c",
    "https://u:p@agent.example.com/c", "https://agent.example.com/c?x=1", "https://agent.example.com/c?",
    "https://203.0.113.7/c", "https://[2001:db8::1]/c", "https://localhost/c", "https://intranet/c",
    "https://agent.example.com/a/../c", "https://agent.example.com/./c", "https://agent.example.com/a/%2e%2E/c",
    "https://agent.example.com/c d", "https://agent.example.com/c\n", "https://agent.example.com/é",
    "https://agent.example.com\\@evil.example/c", "https://agent.example.com:0/c", "https://agent.example.com:99999/c",
    "https://agent.example.com:/c", "https://[::1/c", "https://" + "a" * 20 + ".example/" + "p" * 2030,
    "ftp://agent.example.com/c", "javascript:alert(1)", "", None, 42,
    "http://127.0.0.1:5000/client.json",  # only with the test-only flag
])
def test_client_id_shapes_refused(client_id):
    assert not is_metadata_client_id(client_id)


@pytest.mark.parametrize("client_id,expected", [
    ("http://127.0.0.1:5000/client.json", True), ("http://127.0.0.1/client.json", False),
    ("http://localhost:5000/client.json", False), ("http://127.0.0.1:5000/", False),
    ("http://127.0.0.1:5000/c#x", False), ("http://127.0.0.1.evil.com:5000/c", False),
    ("http://[::1]:5000/c", False), (PUBLIC_ID, True),
])
def test_insecure_loopback_shapes(client_id, expected):
    assert is_metadata_client_id(client_id, allow_insecure_loopback=True) is expected


# --- happy path through the fake ---

def test_happy_path(fake_cimd):
    client_id = fake_cimd.add_client("/client.json")
    meta = fetch(client_id)
    assert meta == cimd.ClientMetadata(client_id=client_id, client_name="Example Agent",
                                       redirect_uris=["http://127.0.0.1/callback", "https://agent.example.com/cb"],
                                       expires_in=300)
    [request] = fake_cimd.requests
    assert request.path == "/client.json"
    assert request.headers["host"] == f"127.0.0.1:{fake_cimd.port}"
    assert request.headers["accept"] == "application/json"
    assert request.headers["accept-encoding"] == "identity"
    assert "cookie" not in request.headers and "authorization" not in request.headers


def test_minimal_document_and_cleaned_name(fake_cimd):
    client_id = fake_cimd.add_client(
        "/c.json", client_name=" \u202eExample\x07\u2028 Agent\t", grant_types=None, response_types=None,
        token_endpoint_auth_method=None, redirect_uris=["cursor://anysphere.cursor-mcp/oauth/callback"] * 2,
        logo_uri="https://agent.example.com/logo.png")
    meta = fetch(client_id)
    assert meta.client_name == "Example Agent"
    assert meta.redirect_uris == ["cursor://anysphere.cursor-mcp/oauth/callback"]


@pytest.mark.parametrize("content_type", ["application/json", "application/json; charset=utf-8",
                                          "Application/JSON", "application/oauth-client+json"])
def test_json_media_types_accepted(fake_cimd, content_type):
    client_id = fake_cimd.url("/c.json")
    fake_cimd.serve("/c.json", fake_cimd.document(client_id), content_type=content_type)
    assert fetch(client_id).client_id == client_id


def test_limits_are_inclusive(fake_cimd):
    uris = [f"http://127.0.0.1/cb{i}" for i in range(10)]
    client_id = fake_cimd.add_client("/c.json", client_name="n" * 128, redirect_uris=uris)
    meta = fetch(client_id)
    assert meta.client_name == "n" * 128 and meta.redirect_uris == uris


def test_document_of_exactly_64_kib_is_read(fake_cimd):
    client_id = fake_cimd.url("/c.json")
    body = cimd.json.dumps(fake_cimd.document(client_id)).encode()
    fake_cimd.serve("/c.json", body + b" " * (64 * 1024 - len(body)))
    assert fetch(client_id).client_id == client_id
    fake_cimd.serve("/c.json", body + b" " * (64 * 1024 + 1 - len(body)))
    assert refused(client_id) == "body too large"


def test_proxy_environment_is_ignored(fake_cimd, monkeypatch):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    assert fetch(fake_cimd.add_client("/c.json")).client_name == "Example Agent"


# --- refusals of the document ---

@pytest.mark.parametrize("overrides", [
    {"client_id": "SUFFIX/"}, {"client_id": "SUFFIX?"}, {"client_id": "OTHER"}, {"client_id": None},
    {"client_name": None}, {"client_name": ""}, {"client_name": "   "}, {"client_name": "\x00\x01\u202e"},
    {"client_name": "n" * 129}, {"client_name": 42}, {"client_name": ["Agent"]},
    {"redirect_uris": None}, {"redirect_uris": []}, {"redirect_uris": "https://agent.example.com/cb"},
    {"redirect_uris": [f"http://127.0.0.1/cb{i}" for i in range(11)]}, {"redirect_uris": [42]},
    {"redirect_uris": ["http://localhost:3000/cb"]}, {"redirect_uris": ["https://agent.example.com/cb#x"]},
    {"redirect_uris": ["https://agent.example.com/cb", "javascript:alert(1)"]},
    {"redirect_uris": ["http://agent.example.com/cb"]},
    {"token_endpoint_auth_method": "client_secret_basic"}, {"token_endpoint_auth_method": "private_key_jwt"},
    {"token_endpoint_auth_method": ""}, {"grant_types": ["client_credentials"]},
    {"grant_types": "authorization_code"}, {"grant_types": []}, {"response_types": ["token"]},
])
def test_invalid_documents_are_refused(fake_cimd, overrides):
    client_id = fake_cimd.url("/client.json")
    replace = {"SUFFIX/": client_id + "/", "SUFFIX?": client_id + "?", "OTHER": fake_cimd.url("/other.json")}
    overrides = {k: replace.get(v, v) if isinstance(v, str) else v for k, v in overrides.items()}
    fake_cimd.serve("/client.json", fake_cimd.document(client_id, **overrides))
    refused(client_id)
    assert fake_cimd.requests_to("/client.json") == 1


def test_client_id_compared_byte_for_byte(fake_cimd):
    client_id = fake_cimd.url("/client.json")
    fake_cimd.serve("/client.json", fake_cimd.document(client_id.replace("http://", "HTTP://")))
    assert "differs" in refused(client_id)


@pytest.mark.parametrize("body,content_type", [
    (b"not json", "application/json"), (b"", "application/json"), (b"[1, 2]", "application/json"),
    (b'"a string"', "application/json"), (b"null", "application/json"), (b'{"client_id": "\xff"}', "application/json"),
    (b"[" * 60000, "application/json"), (b"1" * 60000, "application/json"),
    (b'{"client_id": "x"}', "text/plain"), (b'{"client_id": "x"}', "text/html"), (b'{"client_id": "x"}', ""),
])
def test_unusable_bodies_are_refused(fake_cimd, body, content_type):
    fake_cimd.serve("/c.json", body, content_type=content_type)
    refused(fake_cimd.url("/c.json"))


@pytest.mark.parametrize("status", [404, 500, 204, 201, 403])
def test_non_200_is_refused(fake_cimd, status):
    client_id = fake_cimd.url("/c.json")
    fake_cimd.serve("/c.json", fake_cimd.document(client_id), status=status)
    assert refused(client_id) == f"status {status}"


def test_unknown_path_is_404(fake_cimd):
    assert refused(fake_cimd.url("/nothing.json")) == "status 404"


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_redirects_are_not_followed(fake_cimd, status):
    target = fake_cimd.add_client("/target.json")
    fake_cimd.serve("/c.json", b"", status=status, headers={"Location": target})
    assert refused(fake_cimd.url("/c.json")) == f"redirect refused ({status})"
    assert fake_cimd.requests_to("/target.json") == 0


@pytest.mark.parametrize("declare_length", [True, False])
def test_oversized_body_is_abandoned(fake_cimd, declare_length):
    fake_cimd.serve("/c.json", oversize=50 * 1024 * 1024, declare_length=declare_length)
    assert refused(fake_cimd.url("/c.json")) == "body too large"
    [stream] = fake_cimd.streams
    assert stream.done.wait(10) and stream.aborted and stream.sent < stream.total // 4


def test_slow_server_times_out(fake_cimd):
    client_id = fake_cimd.url("/c.json")
    fake_cimd.serve("/c.json", fake_cimd.document(client_id), delay=5.0)
    start = time.monotonic()
    assert refused(client_id, timeout=0.5).startswith("request failed: ReadTimeoutError")
    assert time.monotonic() - start < 2.5


def test_trickling_body_times_out(fake_cimd):
    client_id = fake_cimd.url("/c.json")
    fake_cimd.serve("/c.json", fake_cimd.document(client_id), chunk_delay=0.05)
    start = time.monotonic()
    assert refused(client_id, timeout=0.5) == "body too slow"
    assert time.monotonic() - start < 2.5


# --- caching ---

@pytest.mark.parametrize("header,expected", [
    (None, 300), ("max-age=10", 300), ("max-age=999999", 86400), ("no-store", 300), ("max-age=3600", 3600),
    ("public, max-age=7200", 7200), ("no-store, max-age=3600", 300), ("max-age=3600, no-cache", 300),
    ("max-age=abc", 300), ('max-age="600"', 600), ("MAX-AGE=600", 600), ("max-age=-5", 300), ("", 300),
    ("max-age=" + "9" * 40, 86400), ("max-age=300", 300), ("max-age=86400", 86400),
])
def test_expires_in_from_cache_control(header, expected):
    assert expires_in_from(header) == expected


@pytest.mark.parametrize("header,expected", [(None, 300), ("max-age=10", 300), ("max-age=999999", 86400),
                                             ("no-store", 300), ("public, max-age=3600", 3600)])
def test_expires_in_from_the_served_header(fake_cimd, header, expected):
    client_id = fake_cimd.add_client("/c.json", headers={"Cache-Control": header} if header else {})
    assert fetch(client_id).expires_in == expected


# --- where the fetch may go ---

@pytest.fixture
def no_connections(monkeypatch):
    """Fail the test if any connection pool is built (so no socket can be opened)."""
    def boom(*args, **kwargs):
        pytest.fail(f"a connection pool was built: {args} {kwargs}")

    monkeypatch.setattr(urllib3, "HTTPSConnectionPool", boom)
    monkeypatch.setattr(urllib3, "HTTPConnectionPool", boom)


def fake_dns(monkeypatch, *addresses):
    looked_up = []

    def getaddrinfo(host, port, *args, **kwargs):
        looked_up.append(host)
        return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "",
                 (a, port, 0, 0) if ":" in a else (a, port)) for a in addresses]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return looked_up


@pytest.mark.parametrize("addresses", [
    ["10.0.0.1"], ["127.0.0.1"], ["169.254.169.254"], ["::1"], ["fc00::1"], ["fd12:3456::1"], ["::ffff:127.0.0.1"],
    ["::ffff:10.0.0.1"], ["::ffff:169.254.169.254"], ["0.0.0.0"], ["::"], ["100.64.0.1"], ["192.168.1.1"],
    ["172.16.0.1"], ["224.0.0.1"], ["255.255.255.255"], ["240.0.0.1"], ["198.18.0.1"], ["192.0.0.8"],
    ["fe80::1%eth0"], ["fec0::1"], ["ff02::1"], ["2002:7f00:1::1"], ["64:ff9b::a00:1"], ["2001:0:4136:e378::1"],
    ["::7f00:1"], ["192.0.2.1"], ["203.0.113.7"], ["2001:db8::1"], ["64:ff9b:1::1"],
    ["93.184.215.14", "10.0.0.1"], ["2606:4700::1", "::1"],
])
def test_non_public_addresses_are_refused_before_connecting(monkeypatch, no_connections, addresses):
    looked_up = fake_dns(monkeypatch, *addresses)
    reason = refused(PUBLIC_ID, allow_insecure_loopback=False)
    assert reason.startswith("non-public address") or reason == "teredo address", reason
    assert looked_up == ["agent.example.com"]


@pytest.mark.parametrize("address", ["93.184.215.14", "8.8.8.8", "1.1.1.1", "2606:4700::1", "2a00:1450:4001::1",
                                     "64:ff9b::808:808"])
def test_public_addresses_pass(address):
    assert cimd.address_problem(address) is None


def test_unresolvable_host_is_refused(monkeypatch, no_connections):
    def getaddrinfo(*args, **kwargs):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    assert refused(PUBLIC_ID).startswith("cannot resolve host")
    fake_dns(monkeypatch)
    assert refused(PUBLIC_ID) == "host has no address"


def test_public_address_is_connected_to_directly_with_the_hostname_for_tls(monkeypatch):
    looked_up = fake_dns(monkeypatch, "93.184.215.14", "2606:4700::1")
    built = []

    class RecordingPool:
        def __init__(self, host, port, **kwargs):
            built.append((host, port, kwargs))

        def urlopen(self, method, url, **kwargs):
            built.append((method, url, kwargs))
            raise urllib3.exceptions.NewConnectionError(None, "no network in tests")

        def close(self):
            pass

    monkeypatch.setattr(urllib3, "HTTPSConnectionPool", RecordingPool)
    monkeypatch.setattr(urllib3, "HTTPConnectionPool", lambda *a, **k: pytest.fail("plain http"))
    assert refused(PUBLIC_ID.replace(".com/", ".com:8443/"), allow_insecure_loopback=False).startswith("request failed")
    assert looked_up == ["agent.example.com"]
    (ip, port, options), (method, path, request) = built
    assert (ip, port) == ("93.184.215.14", 8443)
    assert options["server_hostname"] == options["assert_hostname"] == "agent.example.com"
    assert options["cert_reqs"] == "CERT_REQUIRED" and options["retries"] is False
    assert (method, path) == ("GET", "/oauth/client.json")
    assert request["headers"]["Host"] == "agent.example.com:8443"
    assert request["redirect"] is False and request["retries"] is False


@pytest.mark.parametrize("own_host", [OWN, OWN + ":443", OWN + ":8443", "BTP.Example.com", OWN + "."])
def test_own_host_is_refused(monkeypatch, no_connections, own_host):
    looked_up = fake_dns(monkeypatch, "93.184.215.14")
    assert refused(f"https://{OWN}/client.json", own_host=own_host) == "client id on our own host"
    assert looked_up == []


def test_own_host_is_refused_for_loopback_too(fake_cimd):
    client_id = fake_cimd.add_client("/c.json")
    assert refused(client_id, own_host=f"127.0.0.1:{fake_cimd.port}") == "client id on our own host"
    assert fake_cimd.requests == []


def test_http_loopback_needs_the_test_only_flag(fake_cimd):
    client_id = fake_cimd.add_client("/c.json")
    assert refused(client_id, allow_insecure_loopback=False) == "client id refused: not https"
    assert fake_cimd.requests == []


@pytest.mark.parametrize("client_id", ["http://agent.example.com/client.json", "http://localhost:5000/c.json",
                                       "https://agent.example.com/", "https://agent.example.com/c#x"])
def test_bad_shapes_never_resolve(monkeypatch, no_connections, client_id):
    looked_up = fake_dns(monkeypatch, "93.184.215.14")
    assert refused(client_id).startswith("client id refused")
    assert refused(client_id, allow_insecure_loopback=False).startswith("client id refused")
    assert looked_up == []


# --- TLS: the certificate is checked against the hostname, not the address ---

def test_tls_certificate_checked_against_the_hostname(fake_cimd_tls):
    fake, ca = fake_cimd_tls
    fake.reset()
    client_id = f"https://{TLS_HOSTNAME}:{fake.port}/client.json"
    fake.serve("/client.json", fake.document(client_id))
    assert fetch_from(client_id, "127.0.0.1", ca_certs=ca).client_id == client_id
    assert fake.requests[0].headers["host"] == f"{TLS_HOSTNAME}:{fake.port}"
    other = f"https://other.example:{fake.port}/client.json"
    fake.serve("/client.json", fake.document(other))
    with pytest.raises(CimdError, match="request failed: SSLError"):
        fetch_from(other, "127.0.0.1", ca_certs=ca)
    with pytest.raises(CimdError, match="request failed: SSLError"):  # the public bundle does not know our CA
        fetch_from(other.replace("other.example", TLS_HOSTNAME), "127.0.0.1")


def test_tls_end_to_end_resolves_once_and_connects_to_the_vetted_address(fake_cimd_tls, monkeypatch):
    fake, ca = fake_cimd_tls
    fake.reset()
    client_id = f"https://{TLS_HOSTNAME}:{fake.port}/client.json"
    fake.serve("/client.json", fake.document(client_id))
    real, looked_up = socket.getaddrinfo, []

    def getaddrinfo(host, *args, **kwargs):
        looked_up.append(host)
        return real("127.0.0.1" if host == TLS_HOSTNAME else host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(cimd, "address_problem", lambda address: None if address == "127.0.0.1" else "not local")
    monkeypatch.setattr(cimd.certifi, "where", lambda: ca)
    assert fetch(client_id, allow_insecure_loopback=False).client_name == "Example Agent"
    assert looked_up[0] == TLS_HOSTNAME and set(looked_up[1:]) <= {"127.0.0.1"}
