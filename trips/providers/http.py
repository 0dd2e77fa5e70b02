"""The one hardened HTTP client for every third-party provider (route services, Valhalla, Nominatim, Open-Meteo).

Every request goes to the operator-configured base URL plus a fixed path: the caller's data never chooses the host.
Per provider (`HttpPolicy`): timeouts, a deadline over the whole body, a size cap, bounded retries honouring a
capped Retry-After (RFC 9110 §10.2.3), redirects only on the base URL's own origin, no proxy or netrc from the
environment.
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable
from urllib.parse import urljoin, urlsplit

from trips.providers.httpread import BodyTooLarge, BodyTooSlow, BodyUnreadable, read_capped

if TYPE_CHECKING:
    import requests

log = logging.getLogger(__name__)

# What went wrong, for the provider to word for its user (never a response body).
TIMEOUT = "timeout"  # connecting or a read timed out
UNREACHABLE = "unreachable"  # refused, reset, DNS, TLS
OFF_ORIGIN = "off_origin"  # a redirect to another scheme, host or port (or with userinfo)
TOO_MANY_REDIRECTS = "too_many_redirects"
TOO_LARGE = "too_large"
TOO_SLOW = "too_slow"  # the whole body did not arrive before the deadline
UNREADABLE = "unreadable"  # the connection failed mid-body
MISCONFIGURED = "misconfigured"  # the base URL is not an http(s) URL with a host


class HttpFailure(Exception):
    """The exchange failed; `kind` is one of the constants above."""

    def __init__(self, kind: str):
        super().__init__(kind)
        self.kind = kind


@dataclass(frozen=True)
class HttpPolicy:
    """`retries`: attempts after the first on 429, 5xx and transport errors; `backoff`: the first retry delay
    (doubled each retry) when the answer names no Retry-After; `deadline`: seconds for one whole body."""

    user_agent: str
    accept: str = "application/json"
    timeout: float = 10.0
    deadline: float = 60.0
    max_bytes: int = 1024 * 1024
    retries: int = 0
    backoff: float = 0.5
    max_retry_after: float = 2.0
    max_redirects: int = 0


@dataclass(frozen=True)
class Answer:
    """A final answer (not a redirect). `body` is read for 2xx and 4xx answers, empty for the others."""

    status: int
    body: bytes


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) with default ports filled in. Raises ValueError on a malformed port."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or {"http": 80, "https": 443}.get(scheme)


class HttpClient:
    """Requests on one base URL. Each call uses its own Session, so calls may run in threads.

    `sleep` waits between retries (tests pass a recorder). Raises HttpFailure(MISCONFIGURED) for a base URL
    that is not http(s) with a host."""

    def __init__(self, base_url: str, policy: HttpPolicy, sleep: Callable[[float], None] = time.sleep):
        self.base = (base_url or "").strip().rstrip("/")
        try:
            self.origin = origin(self.base)
        except ValueError:
            raise HttpFailure(MISCONFIGURED) from None
        if self.origin[0] not in ("http", "https") or not self.origin[1]:
            raise HttpFailure(MISCONFIGURED)
        self.policy = policy
        self.sleep = sleep

    def request(self, method: str, path: str, *, params: dict | None = None, json: dict | None = None) -> Answer:
        """The final answer to `method` base+path. Raises HttpFailure (see the kinds above)."""
        import requests  # only where a call goes out: a web worker that never calls a provider keeps it unloaded

        url = self.base + path
        with requests.Session() as session:
            session.trust_env = False  # no proxy or netrc from the environment: the base URL is the whole truth
            session.headers.update({"User-Agent": self.policy.user_agent, "Accept": self.policy.accept})
            for _hop in range(self.policy.max_redirects + 1):
                with self._send(session, method, url, params, json) as response:
                    if response.is_redirect:
                        url = self._redirect_target(url, response.headers.get("Location"))
                        method, params, json = ("GET", None, None) if method != "GET" else (method, params, json)
                        continue
                    return Answer(response.status_code, self._body(response))
            raise HttpFailure(TOO_MANY_REDIRECTS)

    def _redirect_target(self, current: str, location: str | None) -> str:
        """Raises HttpFailure unless the redirect stays on the base URL's scheme, host and port (no userinfo),
        and the policy follows one more."""
        target = urljoin(current, (location or "").strip())
        try:
            same = bool(location) and origin(target) == self.origin and "@" not in urlsplit(target).netloc
        except ValueError:
            same = False
        if not same:
            raise HttpFailure(OFF_ORIGIN)
        if self.policy.max_redirects == 0:
            raise HttpFailure(TOO_MANY_REDIRECTS)
        return target

    def _send(self, session: requests.Session, method: str, url: str, params, json) -> requests.Response:
        import requests  # loaded by `request` already: the name, for the exceptions below

        timeout = (self.policy.timeout, self.policy.timeout)
        for attempt in range(self.policy.retries + 1):
            last = attempt == self.policy.retries
            try:
                response = session.request(method, url, params=params, json=json, stream=True,
                                           allow_redirects=False, timeout=timeout)
            except (requests.ConnectionError, requests.Timeout) as exc:
                log.warning("%s %s: transport error %s (attempt %d)", method, url, type(exc).__name__, attempt + 1)
                if last:
                    raise HttpFailure(TIMEOUT if isinstance(exc, requests.Timeout) else UNREACHABLE) from exc
                self.sleep(self._delay(attempt, None))
                continue
            except requests.RequestException as exc:
                raise HttpFailure(UNREACHABLE) from exc
            if (response.status_code == 429 or response.status_code >= 500) and not last:
                log.warning("%s %s: status %d (attempt %d)", method, url, response.status_code, attempt + 1)
                delay = self._delay(attempt, response.headers.get("Retry-After"))
                response.close()
                self.sleep(delay)
                continue
            return response
        raise AssertionError("unreachable")

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        """Retry-After in seconds (capped at max_retry_after) when given, else exponential backoff."""
        try:
            value = float(retry_after) if retry_after is not None else math.nan
        except ValueError:
            value = math.nan
        if math.isfinite(value):
            return min(max(value, 0.0), self.policy.max_retry_after)
        return self.policy.backoff * 2**attempt

    def _body(self, response: requests.Response) -> bytes:
        if not (200 <= response.status_code < 300 or 400 <= response.status_code < 500):
            return b""
        try:
            return read_capped(response, self.policy.max_bytes, time.monotonic() + self.policy.deadline)
        except BodyTooLarge:
            raise HttpFailure(TOO_LARGE) from None
        except BodyTooSlow:
            raise HttpFailure(TOO_SLOW) from None
        except BodyUnreadable:
            raise HttpFailure(UNREADABLE) from None
