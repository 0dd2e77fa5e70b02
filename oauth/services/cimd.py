"""Client ID Metadata Documents (draft-ietf-oauth-client-id-metadata-document): an https URL is the client id, and
the JSON document it serves describes the client.

The fetch goes to a URL an outsider chose, so it is fenced in: the host is resolved once and refused unless every
address is public unicast, and the connection goes to that vetted address (no DNS-rebinding window), with no
redirect, timeouts and a capped body. A refusal raises CimdError. `allow_insecure_loopback` is for tests alone.
"""
from __future__ import annotations

import ipaddress
import json
import re
import socket
import time
import unicodedata
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

import certifi

from oauth.kernel.redirects import check_redirect_uri
from trips.providers.httpread import BodyTooLarge, BodyTooSlow, BodyUnreadable, read_capped

if TYPE_CHECKING:
    import urllib3

MAX_CLIENT_ID_LENGTH = 2048
MAX_CLIENT_NAME_LENGTH = 128
MAX_REDIRECT_URIS = 10
MIN_EXPIRES_IN, MAX_EXPIRES_IN = 300, 86_400
USER_AGENT = "BTP-OAuth/1 (client metadata fetch)"

_HOSTNAME = re.compile(r"(?=.{1,253}$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)+")
_INSECURE_PREFIX = re.compile(r"http://127\.0\.0\.1:[0-9]{1,5}/")
_BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
# Special-purpose ranges refused explicitly, whatever this Python's ipaddress tables say (they differ between
# releases): IANA special-purpose registries, documentation, benchmarking, CGNAT, local NAT64, 6to4/Teredo.
_BLOCKED = tuple(ipaddress.ip_network(n) for n in (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.0.0.0/24",
    "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24",
    "224.0.0.0/3", "::/8", "100::/64", "64:ff9b:1::/48", "2001::/23", "2001:db8::/32", "2002::/16", "3fff::/20",
    "5f00::/16", "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8",
))


class CimdError(Exception):
    """The client id could not be resolved. `reason` is for logs only, never for the user."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass
class ClientMetadata:
    client_id: str
    client_name: str
    redirect_uris: list[str]
    expires_in: int  # seconds the document may be cached, within [300, 86400]


def _client_id_problem(client_id: str, allow_insecure_loopback: bool) -> str | None:
    if not isinstance(client_id, str) or not client_id:
        return "empty"
    if len(client_id) > MAX_CLIENT_ID_LENGTH:
        return "too long"
    if any(not ("\x21" <= ch <= "\x7e") or ch in '"<>\\^`{|}' for ch in client_id):
        return "character not allowed"
    insecure = allow_insecure_loopback and _INSECURE_PREFIX.match(client_id) is not None
    if not (client_id.startswith("https://") or insecure):
        return "not https"
    if "#" in client_id:
        return "fragment"
    if "?" in client_id:
        return "query string"  # the draft says SHOULD NOT; refusing avoids any normalisation question
    try:
        parts = urlsplit(client_id)
        port = parts.port
    except ValueError:
        return "bad port or host"
    if "@" in parts.netloc:
        return "userinfo"
    if port == 0 or parts.netloc.endswith(":"):
        return "bad port"
    host = parts.netloc.rsplit(":", 1)[0] if port is not None else parts.netloc
    if not insecure and (not _HOSTNAME.fullmatch(host) or host.rsplit(".", 1)[1].isdigit()):
        return "host is not a lower-case DNS name"  # IP literals, single labels, trailing dots, upper case
    if parts.path in ("", "/"):
        return "no path"
    if any(unquote(segment) in (".", "..") for segment in parts.path.split("/")):
        return "dot segment in path"
    return None


def is_metadata_client_id(client_id: str, *, allow_insecure_loopback: bool = False) -> bool:
    """True when `client_id` has the shape of a metadata document URL: `https://` + a lower-case DNS name
    (at least two labels, no IP literal, no trailing dot) + optional port + a path other than `/` without `.`/`..`
    segments; no userinfo, no query (refused by choice), no fragment; at most 2048 printable ASCII characters.
    With the test-only `allow_insecure_loopback`, `http://127.0.0.1:<port>/…` also qualifies. Never raises."""
    return _client_id_problem(client_id, allow_insecure_loopback) is None


def address_problem(address: str) -> str | None:
    """None when `address` (an IP literal from getaddrinfo) is a public unicast address, else why not."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return "unparseable address"
    candidates = [ip]
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.teredo is not None:
            return "teredo address"
        for embedded in (ip.ipv4_mapped, ip.sixtofour):
            if embedded is not None:
                candidates.append(embedded)
        if ip in _NAT64:  # well-known NAT64 prefix (DNS64 networks): judged by the IPv4 address it carries
            candidates = [ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)]
    for candidate in candidates:
        if (not candidate.is_global or candidate.is_private or candidate.is_loopback or candidate.is_link_local
                or candidate.is_multicast or candidate.is_reserved or candidate.is_unspecified
                or getattr(candidate, "is_site_local", False)
                or any(candidate.version == net.version and candidate in net for net in _BLOCKED)):
            return f"non-public address {candidate}"
    return None


def _resolve_public(host: str, port: int) -> str:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise CimdError(f"cannot resolve host: {exc}") from exc
    addresses = [info[4][0] for info in infos if info[0] in (socket.AF_INET, socket.AF_INET6)]
    if not addresses:
        raise CimdError("host has no address")
    for address in addresses:
        problem = address_problem(address)
        if problem:
            raise CimdError(problem)
    return addresses[0]


def _clean_name(value: object) -> str:
    if not isinstance(value, str):
        raise CimdError("client_name missing or not a string")
    kept = []
    for ch in value:
        category = unicodedata.category(ch)
        if category in ("Zl", "Zp") or ch in "\t\n\r":
            kept.append(" ")
        elif category != "Cc" and ch not in _BIDI_CONTROLS:
            kept.append(ch)
    name = " ".join("".join(kept).split())
    if not name:
        raise CimdError("client_name blank")
    if len(name) > MAX_CLIENT_NAME_LENGTH:
        raise CimdError("client_name too long")
    return name


def expires_in_from(cache_control: str | None) -> int:
    """Seconds to cache from a Cache-Control header: max-age clamped to [300, 86400]; absent, unparseable,
    no-store or no-cache give 300."""
    max_age = None
    for directive in (cache_control or "").split(","):
        name, _, value = directive.strip().partition("=")
        name, value = name.strip().lower(), value.strip().strip('"')
        if name in ("no-store", "no-cache"):
            return MIN_EXPIRES_IN
        if name == "max-age" and value.isdigit():
            max_age = int(value[:9])
    if max_age is None:
        return MIN_EXPIRES_IN
    return max(MIN_EXPIRES_IN, min(MAX_EXPIRES_IN, max_age))


def parse_document(client_id: str, body: bytes, cache_control: str | None) -> ClientMetadata:
    """Validate a fetched document for `client_id`. Raises CimdError."""
    try:
        document = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise CimdError(f"body is not JSON: {type(exc).__name__}") from exc
    if not isinstance(document, dict):
        raise CimdError("document is not a JSON object")
    if document.get("client_id") != client_id:
        raise CimdError("client_id in the document differs from the URL")
    name = _clean_name(document.get("client_name"))
    uris = document.get("redirect_uris")
    if not isinstance(uris, list) or not 1 <= len(uris) <= MAX_REDIRECT_URIS:
        raise CimdError("redirect_uris must be a list of 1 to 10 URIs")
    for uri in uris:
        problem = check_redirect_uri(uri) if isinstance(uri, str) else "not a string"
        if problem:
            raise CimdError(f"redirect_uri refused: {problem}")
    if "token_endpoint_auth_method" in document and document["token_endpoint_auth_method"] != "none":
        raise CimdError("token_endpoint_auth_method other than none")
    for key, needed in (("grant_types", "authorization_code"), ("response_types", "code")):
        if key in document:
            value = document[key]
            if not isinstance(value, list) or needed not in value:
                raise CimdError(f"{key} without {needed}")
    return ClientMetadata(client_id=client_id, client_name=name, redirect_uris=list(dict.fromkeys(uris)),
                          expires_in=expires_in_from(cache_control))


def _open_pool(scheme: str, ip: str, port: int, host: str, timeout: urllib3.Timeout,
               ca_certs: str | None) -> urllib3.HTTPConnectionPool:
    import urllib3  # only when a client's document is fetched: a web worker does not load it at start-up

    if scheme == "http":
        return urllib3.HTTPConnectionPool(ip, port, timeout=timeout, retries=False, maxsize=1)
    return urllib3.HTTPSConnectionPool(
        ip, port, timeout=timeout, retries=False, maxsize=1, server_hostname=host, assert_hostname=host,
        cert_reqs="CERT_REQUIRED", ca_certs=ca_certs or certifi.where())


def fetch_from(client_id: str, ip: str, *, timeout: float = 5.0, max_bytes: int = 64 * 1024,
               ca_certs: str | None = None) -> ClientMetadata:
    """Fetch and validate `client_id`'s document from the already-vetted address `ip`. TLS SNI, the
    certificate check and the Host header use the URL's hostname. `ca_certs` (tests only) replaces the
    certifi bundle. Raises CimdError (network failure, timeout, non-200, redirect, non-JSON, too large, invalid)."""
    import urllib3  # only when a client's document is fetched: a web worker does not load it at start-up

    parts = urlsplit(client_id)
    scheme, host = parts.scheme, parts.hostname or ""
    port = parts.port or (443 if scheme == "https" else 80)
    default_port = (scheme, port) in (("https", 443), ("http", 80))
    headers = {"Host": host if default_port else f"{host}:{port}", "Accept": "application/json",
               "Accept-Encoding": "identity", "User-Agent": USER_AGENT}
    deadline = time.monotonic() + timeout
    pool = _open_pool(scheme, ip, port, host, urllib3.Timeout(total=timeout), ca_certs)
    response = None
    try:
        try:
            response = pool.urlopen("GET", parts.path, headers=headers, redirect=False, retries=False,
                                    preload_content=False, assert_same_host=False)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise CimdError(f"request failed: {type(exc).__name__}: {exc}") from exc
        if 300 <= response.status < 400:
            raise CimdError(f"redirect refused ({response.status})")
        if response.status != 200:
            raise CimdError(f"status {response.status}")
        media_type = (response.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
        if media_type != "application/json" and not media_type.endswith("+json"):
            raise CimdError(f"content type {media_type or 'missing'}")
        try:
            body = read_capped(SimpleNamespace(headers=response.headers, raw=response), max_bytes, deadline)
        except BodyTooLarge as exc:
            raise CimdError("body too large") from exc
        except BodyTooSlow as exc:
            raise CimdError("body too slow") from exc
        except BodyUnreadable as exc:
            raise CimdError("body unreadable") from exc
        return parse_document(client_id, body, response.headers.get("Cache-Control"))
    finally:
        if response is not None:
            response.close()
        pool.close()


def fetch_client_metadata(client_id: str, *, own_host: str, allow_insecure_loopback: bool = False,
                          timeout: float = 5.0, max_bytes: int = 64 * 1024) -> ClientMetadata:
    """Resolve a metadata-document client id: check its shape, refuse our own host (`own_host`, a hostname
    with or without port; any port of it is refused), resolve it and refuse unless every address is public,
    then fetch from the vetted address and validate the document. The whole fetch takes about `timeout`
    (at worst twice that). Raises CimdError with a log-only reason.

    `allow_insecure_loopback` is TEST-ONLY (see the module docstring): never set it in production."""
    problem = _client_id_problem(client_id, allow_insecure_loopback)
    if problem:
        raise CimdError(f"client id refused: {problem}")
    parts = urlsplit(client_id)
    host = parts.hostname or ""
    own = (urlsplit(f"//{own_host}").hostname or own_host or "").lower().rstrip(".")
    if host == own:
        raise CimdError("client id on our own host")
    if parts.scheme == "http":  # only reachable with allow_insecure_loopback: http://127.0.0.1:<port>/
        ip = "127.0.0.1"
    else:
        ip = _resolve_public(host, parts.port or 443)
    return fetch_from(client_id, ip, timeout=timeout, max_bytes=max_bytes)
