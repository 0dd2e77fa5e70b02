"""A local HTTP(S) server on 127.0.0.1 serving Client ID Metadata Documents, programmable per path.

    fake.add_client("/client.json")                       # a valid document whose client_id is fake.url(path)
    fake.add_client("/c.json", client_name="  ", redirect_uris=None)   # override fields; None removes one
    fake.serve("/raw", b"not json", content_type="text/plain", status=200, headers={"Cache-Control": "max-age=10"})
    fake.serve("/slow", doc, delay=2.0)                   # wait before the status line
    fake.serve("/trickle", doc, chunk_delay=0.2)          # send the body a byte at a time
    fake.serve("/big", oversize=50 * 1024 * 1024)         # stream junk JSON-typed bytes (fake.streams records it)
    fake.requests_to("/client.json") == 1

Fixtures: `fake_cimd` (plain HTTP, one server per session, reset around each test) and `fake_cimd_tls`
(HTTPS with a throwaway CA and a certificate for `client.example`; yields (fake, ca_pem_path)).
Nothing here talks to anything but 127.0.0.1.
"""
from __future__ import annotations

import atexit
import datetime
import json
import ssl
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import pytest

_DISCONNECTS = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, ssl.SSLError)
TLS_HOSTNAME = "client.example"


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names


@dataclass
class StreamRecord:
    total: int
    sent: int = 0
    aborted: bool = False
    done: threading.Event = field(default_factory=threading.Event)


@dataclass
class _Route:
    body: bytes = b""
    status: int = 200
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    chunk_delay: float = 0.0
    oversize: int | None = None
    declare_length: bool = True


class FakeCimd:
    def __init__(self, tls_context: ssl.SSLContext | None = None) -> None:
        self._tls = tls_context
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._release = threading.Event()
        self.reset()

    def start(self) -> FakeCimd:
        fake = self

        class Handler(_Handler):
            owner = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.handle_error = lambda request, client_address: None
        if self._tls is not None:
            self._server.socket = self._tls.wrap_socket(self._server.socket, server_side=True)
        threading.Thread(target=self._server.serve_forever, name="fake-cimd", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._release.set()
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return self._server.server_address[1]

    def url(self, path: str) -> str:
        """The http://127.0.0.1 URL of `path` (for TLS tests build https://client.example:{port}{path})."""
        return f"http://127.0.0.1:{self.port}{path}"

    def reset(self) -> None:
        with self._lock:
            self._release.set()
            self._release = threading.Event()
            self._routes: dict[str, _Route] = {}
            self._requests: list[RecordedRequest] = []
            self.streams: list[StreamRecord] = []

    # programming
    def serve(self, path: str, body: bytes | dict | list | str = b"", **options: Any) -> None:
        """Answer GET `path` with `body` (dicts/lists are JSON-encoded). Options: status, content_type, headers,
        delay (seconds before answering), chunk_delay (per body byte), oversize (stream that many junk bytes
        instead of the body), declare_length (send Content-Length for oversize, default True)."""
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        elif isinstance(body, str):
            body = body.encode()
        with self._lock:
            self._routes[path] = _Route(body=body, **options)

    def document(self, client_id: str, /, **overrides: Any) -> dict:
        """A valid metadata document for `client_id`; an override of None removes the field."""
        doc: dict[str, Any] = {"client_id": client_id, "client_name": "Example Agent",
                               "redirect_uris": ["http://127.0.0.1/callback", "https://agent.example.com/cb"],
                               "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
                               "token_endpoint_auth_method": "none"}
        for key, value in overrides.items():
            if value is None:
                doc.pop(key, None)
            else:
                doc[key] = value
        return doc

    def add_client(self, path: str, *, headers: dict[str, str] | None = None, **overrides: Any) -> str:
        """Serve a valid document (with `overrides`) at `path`; returns its client id (= its URL)."""
        client_id = self.url(path)
        self.serve(path, self.document(client_id, **overrides), headers=headers or {})
        return client_id

    # observations
    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def requests_to(self, path: str) -> int:
        return sum(1 for r in self.requests if r.path == path)

    def _take(self, path: str, headers: dict[str, str]) -> tuple[_Route | None, threading.Event]:
        with self._lock:
            self._requests.append(RecordedRequest("GET", path, headers))
            return self._routes.get(path), self._release


class _Handler(BaseHTTPRequestHandler):
    owner: FakeCimd
    server_version = "FakeCimd/1.0"
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        try:
            self._serve()
        except _DISCONNECTS:
            pass
        self.close_connection = True

    def _serve(self) -> None:
        route, release = self.owner._take(self.path, {k.lower(): v for k, v in self.headers.items()})
        if route is None:
            route = _Route(body=b'{"error":"not found"}', status=404)
        if route.delay and release.wait(route.delay):
            return  # reset while waiting: drop the connection
        self.send_response(route.status)
        self.send_header("Content-Type", route.content_type)
        self.send_header("Connection", "close")
        for name, value in route.headers.items():
            self.send_header(name, value)
        if route.oversize is not None:
            return self._stream(route)
        self.send_header("Content-Length", str(len(route.body)))
        self.end_headers()
        if not route.chunk_delay:
            self.wfile.write(route.body)
            return
        for i in range(len(route.body)):
            self.wfile.write(route.body[i:i + 1])
            self.wfile.flush()
            if release.wait(route.chunk_delay):
                return

    def _stream(self, route: _Route) -> None:
        record = StreamRecord(total=route.oversize or 0)
        with self.owner._lock:
            self.owner.streams.append(record)
        try:
            if route.declare_length:
                self.send_header("Content-Length", str(record.total))
            self.end_headers()
            chunk = b" " * 65536
            while record.sent < record.total:
                part = chunk[: record.total - record.sent]
                self.wfile.write(part)
                record.sent += len(part)
        except _DISCONNECTS:
            record.aborted = True
        finally:
            record.done.set()


_instance: FakeCimd | None = None
_instance_lock = threading.Lock()


def get_fake_cimd() -> FakeCimd:
    """The process-wide plain-HTTP server, started on first use and stopped at exit."""
    global _instance
    with _instance_lock:
        if _instance is None:
            _instance = FakeCimd().start()
            atexit.register(_instance.stop)
        return _instance


@pytest.fixture
def fake_cimd() -> Iterator[FakeCimd]:
    fake = get_fake_cimd()
    fake.reset()
    yield fake
    fake.reset()


def make_tls_files(directory, hostname: str = TLS_HOSTNAME) -> tuple[str, str, str]:
    """A throwaway CA and a leaf certificate for `hostname` in `directory`: (ca_pem, cert_pem, key_pem) paths."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    validity = (now - datetime.timedelta(days=1), now + datetime.timedelta(days=1))

    def build(subject: str, issuer: str, public_key, signing_key, ca: bool, san: list | None = None):
        builder = (x509.CertificateBuilder()
                   .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
                   .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
                   .public_key(public_key).serial_number(x509.random_serial_number())
                   .not_valid_before(validity[0]).not_valid_after(validity[1])
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if ca:
            builder = builder.add_extension(x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, key_cert_sign=True, crl_sign=True, encipher_only=False, decipher_only=False),
                critical=True).add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
        if san:
            builder = (builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
                       .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
                       .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(signing_key.public_key()),
                                      critical=False))
        return builder.sign(signing_key, hashes.SHA256())

    ca_key, leaf_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_cert = build("BTP test CA", "BTP test CA", ca_key.public_key(), ca_key, ca=True)
    leaf = build(hostname, "BTP test CA", leaf_key.public_key(), ca_key, ca=False,
                 san=[x509.DNSName(hostname)])
    paths = (f"{directory}/ca.pem", f"{directory}/cert.pem", f"{directory}/key.pem")
    with open(paths[0], "wb") as fh:
        fh.write(ca_cert.public_bytes(serialization.Encoding.PEM))
    with open(paths[1], "wb") as fh:
        fh.write(leaf.public_bytes(serialization.Encoding.PEM))
    with open(paths[2], "wb") as fh:
        fh.write(leaf_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                        serialization.NoEncryption()))
    return paths


@pytest.fixture(scope="module")
def fake_cimd_tls(tmp_path_factory) -> Iterator[tuple[FakeCimd, str]]:
    """An HTTPS fake on 127.0.0.1 presenting a certificate for `client.example` from a throwaway CA."""
    ca, cert, key = make_tls_files(tmp_path_factory.mktemp("cimd-tls"))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    fake = FakeCimd(tls_context=context).start()
    yield fake, ca
    fake.stop()


def wait_until(predicate, seconds: float = 5.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


__all__ = ["FakeCimd", "RecordedRequest", "StreamRecord", "TLS_HOSTNAME", "fake_cimd", "fake_cimd_tls",
           "get_fake_cimd", "make_tls_files", "wait_until"]
