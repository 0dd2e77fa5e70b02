"""BTP behind Debian's nginx, configured by deploy/nginx.conf itself (ports, certificate and log paths
substituted): the sign-in page, a GPX upload over 1 MB, MCP tool calls, the per-address limit counting the real
client (two clients bound to 127.0.0.2 and 127.0.0.3), /metrics refused from outside, request ids joined; and
silent clients (a head never finished, a 32 MB body never sent) let go by nginx's own timeouts while new clients
are answered."""
import datetime
import http.client
import ipaddress
import json
import os
import shutil
import ssl
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests

from tests.live import ROOT, free_port, gunicorn
from tests.live import stop

pytestmark = pytest.mark.slow
NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None)
if NGINX is None:
    if os.environ.get("CI"):
        raise RuntimeError("CI must have nginx (.ci/run installs nginx-light)")
    pytest.skip("nginx is not installed", allow_module_level=True)

METRICS_TOKEN = "t" * 48
ADDRESS_LIMIT = 3


def _certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and btp.example.org."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "btp.example.org")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("btp.example.org"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def render_site(upstream_port: int, tls_port: int, http_port: int, folder: Path, cert: Path, key: Path) -> str:
    """deploy/nginx.conf with this machine's ports and paths; every substitution must find its line."""
    text = (ROOT / "deploy" / "nginx.conf").read_text()
    swaps = [
        ("server 127.0.0.1:8000;", f"server 127.0.0.1:{upstream_port};"),
        ("listen 443 ssl http2;", f"listen 127.0.0.1:{tls_port} ssl http2;"),
        ("listen [::]:443 ssl http2;", ""),
        ("listen 80;", f"listen 127.0.0.1:{http_port};"),
        ("listen [::]:80;", ""),
        ("/etc/letsencrypt/live/btp.example.org/fullchain.pem", str(cert)),
        ("/etc/letsencrypt/live/btp.example.org/privkey.pem", str(key)),
        ("/var/log/nginx/", f"{folder}/logs/"),
        ("/var/www/letsencrypt", f"{folder}/acme"),
    ]
    for old, new in swaps:
        assert old in text, f"deploy/nginx.conf no longer has {old!r}"
        text = text.replace(old, new)
    return text


def _main_conf(folder: Path) -> str:
    temp = folder / "temp"
    user = "user root;\n" if os.geteuid() == 0 else ""  # as root, workers would otherwise run as nobody
    return (f"{user}worker_processes 1;\npid {folder}/nginx.pid;\nerror_log {folder}/logs/error.log info;\n"
            "events { worker_connections 64; }\n"
            f"http {{\n  access_log {folder}/logs/access.log;\n"
            + "".join(f"  {kind}_temp_path {temp}/{kind};\n" for kind in ("client_body", "proxy", "fastcgi",
                                                                           "uwsgi", "scgi"))
            + f"  include {folder}/btp.conf;\n}}\n")


def _wait_port(port: int, proc: subprocess.Popen, log: Path) -> None:
    import socket

    deadline = time.monotonic() + 15
    while True:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        assert proc.poll() is None and time.monotonic() < deadline, \
            f"nginx did not start:\n{log.read_text(errors='replace') if log.exists() else ''}"
        time.sleep(0.05)


def prepared(folder: Path) -> tuple[Path, Path]:
    """The folders nginx writes in, and a certificate: (cert, key)."""
    for sub in ("logs", "acme", "temp"):
        (folder / sub).mkdir()
    return _certificate(folder)


@contextmanager
def nginx_running(folder: Path, site: str, tls_port: int):
    """nginx serving `site` (a rendered deploy/nginx.conf) from `folder` (see `prepared`) until the block ends."""
    (folder / "btp.conf").write_text(site)
    (folder / "nginx.conf").write_text(_main_conf(folder))
    command = [NGINX, "-p", str(folder), "-e", str(folder / "logs" / "error.log"), "-c", str(folder / "nginx.conf")]
    checked = subprocess.run([*command, "-t"], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    proc = subprocess.Popen([*command, "-g", "daemon off;"], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        _wait_port(tls_port, proc, folder / "logs" / "error.log")
        yield proc
    finally:
        stop(proc, 10)


@pytest.fixture(scope="module")
def stack(app, app_config, tmp_path_factory):
    folder = tmp_path_factory.mktemp("nginx")
    cert, key = prepared(folder)
    settings = {**app_config, "BTP_TRUSTED_PROXIES": "1", "BTP_LIMIT_MCP_ADDRESS": f"{ADDRESS_LIMIT}/60",
                "BTP_METRICS_TOKEN": METRICS_TOKEN}
    with gunicorn(settings, folder / "gunicorn.log", workers=2) as live:
        tls_port, http_port = free_port(), free_port()
        upstream = int(live.url.rsplit(":", 1)[1])
        with nginx_running(folder, render_site(upstream, tls_port, http_port, folder, cert, key), tls_port):
            yield {"https": f"https://127.0.0.1:{tls_port}", "http": f"http://127.0.0.1:{http_port}",
                   "tls_port": tls_port, "direct": live.url, "cert": str(cert), "folder": folder, "live": live}


def _mcp_body(method: str, params: dict | None = None) -> tuple[str, dict]:
    from tests.mcp_helpers import MODERN

    params = {**(params or {}), "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                                          "io.modelcontextprotocol/clientCapabilities": {}}}
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if method == "tools/call":
        headers["Mcp-Name"] = params["name"]
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}), headers


def _from(source: str, stack, token: str | None) -> int:
    """One tools/list through nginx over a connection bound to `source`; the HTTP status."""
    context = ssl.create_default_context(cafile=stack["cert"])
    conn = http.client.HTTPSConnection("127.0.0.1", stack["tls_port"], source_address=(source, 0), context=context,
                                       timeout=15)
    body, headers = _mcp_body("tools/list")
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        conn.request("POST", "/mcp", body=body, headers=headers)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def test_sign_in_page_and_the_https_redirect(stack):
    page = requests.get(stack["https"] + "/login", verify=stack["cert"], timeout=15)
    assert page.status_code == 200 and "<form" in page.text
    assert page.headers["Strict-Transport-Security"].startswith("max-age=")
    moved = requests.get(stack["http"] + "/login?next=/account", allow_redirects=False, timeout=15)
    assert moved.status_code == 301 and moved.headers["Location"] == "https://btp.example.org/login?next=/account"


def test_a_trip_through_nginx_upload_then_mcp(app, stack, rider):
    from tests.fakes.thirdparty import gpx_from_points, make_points
    from tests.mcp_helpers import mcp_token

    user, rest_headers = rider
    gpx = gpx_from_points(make_points(16000, step_m=20.0), name="Through nginx")
    assert len(gpx) > 1024 * 1024  # over nginx's default client_max_body_size: the 32m line is needed
    uploaded = requests.post(stack["https"] + "/api/trips/gpx-upload", verify=stack["cert"], timeout=60,
                             headers=rest_headers,
                             files={"gpxFile": ("ride.gpx", gpx, "application/gpx+xml")})
    assert uploaded.status_code == 201, uploaded.text[:500]
    trip_id = uploaded.json()["id"]
    token = mcp_token(app, user)
    body, headers = _mcp_body("tools/call", {"name": "get_trip", "arguments": {"id": trip_id}})
    answer = requests.post(stack["https"] + "/mcp", data=body, headers={**headers, "Authorization": f"Bearer {token}"},
                           verify=stack["cert"], timeout=15)
    assert answer.status_code == 200, answer.text[:500]
    result = answer.json()["result"]
    assert result["isError"] is False, result
    assert result["structuredContent"]["title"] == "Through nginx"
    # nginx's $request_id reached BTP: echoed in the answer, and on BTP's JSON access line for /mcp.
    request_id = answer.headers["X-Request-Id"]
    assert len(request_id) == 32
    deadline = time.monotonic() + 5
    while True:
        lines = [json.loads(line) for line in stack["live"].log.read_text().splitlines() if line.startswith("{")]
        mine = [line for line in lines if line.get("logger") == "btp.access" and line.get("request_id") == request_id]
        if mine or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert mine and mine[0]["route"] == "/mcp" and mine[0]["status"] == 200 and mine[0]["user_id"] == str(user.id)


def test_the_address_limit_counts_the_real_client(stack, redis_client):
    first = [_from("127.0.0.2", stack, None) for _ in range(ADDRESS_LIMIT + 1)]
    assert first == [401] * ADDRESS_LIMIT + [429]  # counted before authentication
    assert _from("127.0.0.3", stack, None) == 401  # another client is not limited by the first one
    assert redis_client.exists("btp:rl:mcp_address:127.0.0.2", "btp:rl:mcp_address:127.0.0.3") == 2
    assert not redis_client.exists("btp:rl:mcp_address:127.0.0.1")  # nginx's own address is never counted


def test_a_client_cannot_pose_as_another_address(stack, redis_client):
    spoof = {"X-Forwarded-For": "127.0.0.9"}
    body, headers = _mcp_body("tools/list")
    for _ in range(2):
        requests.post(stack["https"] + "/mcp", data=body, headers={**headers, **spoof}, verify=stack["cert"],
                      timeout=15)
    assert not redis_client.exists("btp:rl:mcp_address:127.0.0.9")
    assert redis_client.exists("btp:rl:mcp_address:127.0.0.1")  # the connection nginx saw


def test_metrics_are_refused_from_outside(stack):
    good = {"Authorization": f"Bearer {METRICS_TOKEN}"}
    for path in ("/metrics", "//metrics", "/%6Detrics", "/metrics?x=1"):
        outside = requests.get(stack["https"] + path, headers=good, verify=stack["cert"], timeout=15)
        assert outside.status_code == 404 and "btp_" not in outside.text, path
    assert requests.get(stack["direct"] + "/metrics", timeout=15).status_code == 401  # no token: nobody
    scraped = requests.get(stack["direct"] + "/metrics", headers=good, timeout=15)
    assert scraped.status_code == 200 and "btp_http_requests_total" in scraped.text


SILENT_S = 10  # deploy/nginx.conf: client_header_timeout, client_body_timeout


def _tls(stack) -> ssl.SSLSocket:
    import socket

    context = ssl.create_default_context(cafile=stack["cert"])
    raw = socket.create_connection(("127.0.0.1", stack["tls_port"]), timeout=SILENT_S + 10)
    return context.wrap_socket(raw, server_hostname="127.0.0.1")


def test_silent_clients_are_let_go_by_nginx_and_new_ones_answered_meanwhile(stack):
    import threading

    silent = []
    for i in range(30):  # nginx's test configuration has 64 connections
        sock = _tls(stack)
        if i % 3:
            sock.sendall(b"POST /api/trips/gpx-upload HTTP/1.1\r\nHost: btp.example.org\r\n"
                         b"Content-Length: 33554432\r\n\r\n")  # within client_max_body_size, never sent
        else:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: btp.example.org\r\n")  # a head never finished
        silent.append(sock)
    started = time.monotonic()
    ends: list[float | None] = [None] * len(silent)

    def wait_end(i: int, sock: ssl.SSLSocket) -> None:
        try:
            while sock.recv(65536):
                pass
        except OSError:
            pass
        ends[i] = time.monotonic() - started

    waiters = [threading.Thread(target=wait_end, args=(i, s), daemon=True) for i, s in enumerate(silent)]
    for waiter in waiters:
        waiter.start()
    times = []
    try:
        while time.monotonic() - started < SILENT_S + 4:
            probe = time.monotonic()
            try:
                ok = requests.get(stack["https"] + "/healthz", verify=stack["cert"], timeout=5).status_code == 200
            except requests.RequestException:
                ok = False
            times.append(time.monotonic() - probe if ok else None)
            time.sleep(0.2)
        for waiter in waiters:
            waiter.join(10)
    finally:
        for sock in silent:
            sock.close()
    fast = sum(1 for t in times if t is not None and t <= 1.0)
    assert fast >= 0.9 * len(times), times
    assert all(end is not None and end <= SILENT_S + 3 for end in ends), ends  # nginx's 60 s default would not
