"""Redirect URI rules, the same for every client (Client ID Metadata Documents and anything registered later).

Accepted (`check_redirect_uri`): https with a host and no userinfo; loopback `http://127.0.0.1` and `http://[::1]`,
never `http://localhost` (RFC 8252 §8.3); a native app's private-use scheme that is no web, script or document
scheme. Refused: a fragment, an overlong URI, characters RFC 3986 never allows unencoded. Matching is exact
(RFC 9700 §4.1.3), but a loopback URI may use any port (RFC 8252 §7.3).
"""
from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

MAX_REDIRECT_URI_LENGTH = 2000

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
_PRIVATE_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*")
_FORBIDDEN_CHARS = frozenset('"<>\\^`{|}')
_REFUSED_SCHEMES = frozenset({
    "http", "https", "javascript", "vbscript", "livescript", "data", "file", "ftp", "ws", "wss", "about", "blob",
    "mailto", "tel", "sms", "view-source", "filesystem", "jar", "intent",
})
# http loopback: scheme (any case), exact literal host, optional port, then path/query (no authority tricks).
_LOOPBACK = re.compile(r"(?P<scheme>[Hh][Tt][Tt][Pp])://(?P<host>127\.0\.0\.1|\[::1\])(?::(?P<port>[0-9]{1,5}))?"
                       r"(?P<rest>[/?].*)?", re.DOTALL)
_DNS_HOST = re.compile(r"(?=.{1,253}$)([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*")


def _split_scheme(uri: str) -> tuple[str, str] | None:
    scheme, sep, rest = uri.partition(":")
    if not sep or not _SCHEME.fullmatch(scheme):
        return None
    return scheme.lower(), rest


def _charset_problem(uri: str) -> str | None:
    if not isinstance(uri, str) or not uri:
        return "empty"
    if len(uri) > MAX_REDIRECT_URI_LENGTH:
        return "too long"
    for ch in uri:
        if not ("\x21" <= ch <= "\x7e"):
            return "whitespace, control or non-ASCII character"
        if ch in _FORBIDDEN_CHARS:
            return "character not allowed in a URI"
    if "#" in uri:
        return "fragment"
    return None


def _valid_port(port: str | None) -> bool:
    return port is None or (port.isdigit() and len(port) <= 5 and 0 < int(port) <= 65535)


def _check_https(uri: str) -> str | None:
    try:
        parts = urlsplit(uri)
    except ValueError:  # e.g. an unbalanced or invalid [IPv6] literal
        return "bad IPv6 literal or URL"
    if not uri[len("https:"):].startswith("//") or not parts.netloc:
        return "https without a host"
    if "@" in parts.netloc:
        return "userinfo"
    host, port = parts.netloc, None
    if host.startswith("["):
        end = host.find("]")
        if end < 0:
            return "bad IPv6 literal"
        literal, after = host[1:end], host[end + 1:]
        try:
            ipaddress.IPv6Address(literal)
        except ValueError:
            return "bad IPv6 literal"
        if after:
            if not after.startswith(":"):
                return "bad port"
            port = after[1:]
    else:
        if ":" in host:
            host, port = host.split(":", 1)
        if not _DNS_HOST.fullmatch(host.lower()):
            return "bad host"
    if not _valid_port(port):
        return "bad port"
    return None


def check_redirect_uri(uri: str) -> str | None:
    """None when `uri` may be registered as a redirect URI, else a short reason (for logs only). Never raises."""
    problem = _charset_problem(uri)
    if problem:
        return problem
    split = _split_scheme(uri)
    if split is None:
        return "no scheme"
    scheme, rest = split
    if scheme == "https":
        return _check_https(uri)
    if scheme == "http":
        match = _LOOPBACK.fullmatch(uri)
        if not match:
            return "http other than 127.0.0.1 / [::1]"
        if not _valid_port(match["port"]):
            return "bad port"
        return None
    if not _PRIVATE_SCHEME.fullmatch(scheme) or scheme in _REFUSED_SCHEMES:
        return "scheme not allowed"
    if not rest.strip("/"):
        return "nothing after the scheme"
    if rest.startswith("//"):
        authority = rest[2:].split("/", 1)[0].split("?", 1)[0]
        if "@" in authority:
            return "userinfo"
    return None


def redirect_matches(registered: list[str], requested: str) -> bool:
    """True when `requested` equals one of `registered` exactly, or differs from a registered loopback
    `http://127.0.0.1` / `http://[::1]` URI only by its port. URIs that `check_redirect_uri` refuses never match."""
    if not isinstance(requested, str) or check_redirect_uri(requested) is not None:
        return False
    candidates = [uri for uri in registered if isinstance(uri, str) and check_redirect_uri(uri) is None]
    if requested in candidates:
        return True
    asked = _LOOPBACK.fullmatch(requested)
    if not asked:
        return False
    for uri in candidates:
        known = _LOOPBACK.fullmatch(uri)
        if known and (known["scheme"], known["host"], known["rest"]) == (asked["scheme"], asked["host"], asked["rest"]):
            return True
    return False


def is_loopback_or_app(uri: str) -> bool:
    """True when the browser would hand the code to a program on the user's own machine rather than to a web
    site: loopback http, https to localhost or a loopback address, or a private-use (app) scheme. The consent
    page warns about these. Also True for anything `check_redirect_uri` refuses (warn when unsure)."""
    if check_redirect_uri(uri) is not None:
        return True
    split = _split_scheme(uri)
    if split is None or split[0] != "https":
        return True
    host = (urlsplit(uri).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
