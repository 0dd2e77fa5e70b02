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
`fake.url(path)` is the 127.0.0.1 URL of `path` (https on the TLS fake; TLS tests build
https://client.example:{fake.port}{path}). Built on tests/fakes/server.py; nothing here talks to anything but
127.0.0.1.
"""
from __future__ import annotations

import datetime
import json
import ssl
import time
from dataclasses import dataclass, field
from typing import Any, Hashable, Iterator

import pytest

from tests.fakes.server import FakeHandler, FakeServer, RecordedRequest, StreamRecord, fixture_for, singleton

TLS_HOSTNAME = "client.example"


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


_NOT_FOUND = _Route(body=b'{"error":"not found"}', status=404)


class _Handler(FakeHandler):
    protocol_version = "HTTP/1.1"  # but every answer closes its connection

    def _serve(self) -> None:
        self.close_connection = True
        _, route, release = self.owner._take(RecordedRequest("GET", self.path, self.lowered_headers()), self.path)
        route = route or _NOT_FOUND
        if route.delay and release.wait(route.delay):
            return  # reset while waiting: drop the connection
        headers = {"Connection": "close", **route.headers}
        if route.oversize is not None:
            self._stream(route.oversize, route.declare_length, status=route.status,
                         content_type=route.content_type, headers=headers, filler=b" ")
        else:
            self._send(route.status, route.body, route.content_type, headers, trickle=route.chunk_delay,
                       release=release)


class FakeCimd(FakeServer):
    handler = _Handler
    thread_name = "fake-cimd"

    def _clear(self) -> None:
        self._routes: dict[str, _Route] = {}

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
    def requests_to(self, path: str) -> int:
        return sum(1 for r in self.requests if r.path == path)

    def _state(self, key: Hashable) -> _Route | None:
        return self._routes.get(key)


get_fake_cimd = singleton(FakeCimd)
fake_cimd = fixture_for(get_fake_cimd, "fake_cimd")


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
