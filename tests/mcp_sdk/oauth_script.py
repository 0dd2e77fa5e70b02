"""Let the official MCP Python SDK client (`mcp` 2.3.0) authorize itself against an MCP server with OAuth, then
list the tools and call one; print what it saw.

Runs inside the SDK's own virtual environment (`.venv-mcp-sdk`), never BTP's (BTP's top-level package `mcp/`
would shadow the SDK's). It imports only the SDK, httpx2 and the standard library.

    python oauth_script.py --url http://127.0.0.1:PORT/mcp --mode legacy|2026-07-28|auto \
        --outbox INSTANCE/outbox --email someone@example.org

The SDK's `OAuthClientProvider` does everything an OAuth client does: discovery from the 401 (RFC 9728 then
RFC 8414), dynamic client registration (RFC 7591), authorization code + PKCE S256 with `resource` (RFC 8707),
the `iss` check (RFC 9207) and the token exchange. Only the person is played here, by the `redirect_handler`:
a cookie-keeping httpx2 client that follows redirects itself, on the server's origin only, signs in by e-mail
link (the link is read from the newest .eml for --email in --outbox) and approves the consent form. The 302 off
the origin is the redirect to the client's redirect_uri: its code, state and iss go to the `callback_handler`.

Prints ONE JSON document on stdout and exits 0:

    {"protocolVersion": "...", "tools": [names], "listTripsIsError": bool, "listTripsText": "...",
     "requests": ["POST /mcp 401", "GET /.well-known/oauth-protected-resource/mcp 200", ...],
     "authorization": {query of the authorization request, code_challenge and state left out},
     "callback": {"iss": "...", "code": bool, "state": bool}, "token": {"scope", "expires_in", "refresh": bool},
     "person": ["GET /oauth/authorize 302", ...]}

`requests` lists every HTTP request the SDK made (its OAuth requests included), in order, with the status it
got; `person` the requests of the person's browser. On an exception it prints {"error": repr, ...what was
gathered so far} and exits 1.
"""
from __future__ import annotations

import argparse
import asyncio
import email
import email.policy
import html
import json
import re
import socket
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx2
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 30.0
MAIL_WAIT = 10.0  # seconds to wait for the sign-in mail to appear in the outbox
MAX_HOPS = 10  # redirects the person follows in a row
SECRET_PARAMS = {"code_challenge", "state"}


class PersonError(Exception):
    """The person's way through sign-in and consent did not go as a browser's would."""


class MemoryStorage:
    """The SDK's TokenStorage protocol, in memory: nothing survives the run."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


def unused_port() -> int:
    """A loopback port for the redirect URI (nothing listens there: the person reads the 302 instead)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def origin(url: str | httpx2.URL) -> tuple[str, str, int | None]:
    parts = httpx2.URL(str(url))
    return parts.scheme, parts.host, parts.port


def hidden(page: str, name: str) -> str:
    """The value of the form field `name` (attributes in BTP's order: name then value), HTML-unescaped."""
    found = re.search(rf'name="{re.escape(name)}"\s+value="([^"]*)"', page)
    if not found:
        raise PersonError(f"no {name!r} field in the page: {page[:800]!r}")
    return html.unescape(found.group(1))


def form_action(page: str, base: str) -> str:
    found = re.search(r'<form[^>]*\smethod="post"[^>]*\saction="([^"]*)"', page, re.IGNORECASE) \
        or re.search(r'<form[^>]*\saction="([^"]*)"[^>]*\smethod="post"', page, re.IGNORECASE)
    return urljoin(base, html.unescape(found.group(1))) if found else base


async def sign_in_link(outbox: Path, address: str, since: float) -> str:
    """The sign-in link of the newest mail to `address` written at or after `since` (epoch seconds)."""
    deadline = time.monotonic() + MAIL_WAIT
    while True:
        mails = []
        for path in outbox.glob("*.eml") if outbox.is_dir() else ():
            stat = path.stat()
            if stat.st_mtime >= since - 1:
                message = email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
                if str(message["To"]).strip().lower() == address.lower():
                    mails.append((stat.st_mtime_ns, message))
        if mails:
            body = max(mails, key=lambda item: item[0])[1].get_body(preferencelist=("plain",)).get_content()
            found = re.search(r"https?://\S+/login/[A-Za-z0-9_~.%-]+", body)
            if not found:
                raise PersonError(f"no sign-in link in the mail: {body[:800]!r}")
            return found.group(0)
        if time.monotonic() > deadline:
            raise PersonError(f"no mail to {address} in {outbox} after {MAIL_WAIT} s")
        await asyncio.sleep(0.1)


class Person:
    """A browser driven by hand: it keeps cookies, and follows redirects itself on the server's origin only."""

    def __init__(self, server_url: str, address: str, outbox: Path, log: list[str]):
        self.origin = origin(server_url)
        self.address = address
        self.outbox = outbox
        self.log = log
        self.http = httpx2.AsyncClient(follow_redirects=False, timeout=httpx2.Timeout(CONNECT_TIMEOUT, read=READ_TIMEOUT))

    async def send(self, method: str, url: str, data: dict[str, str] | None = None) -> httpx2.Response:
        if origin(url) != self.origin:
            raise PersonError(f"the person was sent off the server's origin: {method} {url}")
        response = await self.http.request(method, url, data=data)
        self.log.append(f"{method} {response.request.url.path} {response.status_code}")
        return response

    async def follow(self, response: httpx2.Response) -> httpx2.Response:
        """Follow 3xx while the Location is on the server's origin; the answer that is not (or a non-3xx one)."""
        for _ in range(MAX_HOPS):
            if not response.is_redirect:
                return response
            target = urljoin(str(response.request.url), response.headers["location"])
            if origin(target) != self.origin:
                return response
            response = await self.send("GET", target)
        raise PersonError(f"more than {MAX_HOPS} redirects in a row, last to {response.headers.get('location')}")

    @staticmethod
    def expect(response: httpx2.Response, status: int, what: str) -> str:
        if response.status_code != status:
            raise PersonError(f"{what}: {response.request.method} {response.request.url} answered "
                              f"{response.status_code} (expected {status}), Location "
                              f"{response.headers.get('location')!r}: {response.text[:800]!r}")
        return response.text

    async def authorize(self, authorization_url: str) -> str:
        """Sign in and approve; the Location the server finally redirects to (the client's redirect_uri)."""
        login = await self.follow(await self.send("GET", authorization_url))
        if urlsplit(str(login.request.url)).path != "/login":
            raise PersonError(f"the authorization request did not lead to /login but to {login.request.url} "
                              f"({login.status_code}): {login.text[:500]!r}")
        page = self.expect(login, 200, "the login page")
        form = {"email": self.address, "csrf_token": hidden(page, "csrf_token")}
        if 'name="next"' in page:
            form["next"] = hidden(page, "next")
        asked = time.time()
        self.expect(await self.send("POST", form_action(page, str(login.request.url)), form), 200, "asking for a link")

        link = await sign_in_link(self.outbox, self.address, asked)
        confirm = await self.send("GET", link)
        page = self.expect(confirm, 200, "the sign-in link")
        signed_in = await self.send("POST", form_action(page, link), {"csrf_token": hidden(page, "csrf_token")})
        self.expect(signed_in, 302, "signing in")

        consent = await self.follow(signed_in)
        if urlsplit(str(consent.request.url)).path != urlsplit(authorization_url).path:
            raise PersonError(f"after signing in the person landed on {consent.request.url}, not the authorization "
                              f"endpoint")
        page = self.expect(consent, 200, "the consent page")
        decision = {"csrf_token": hidden(page, "csrf_token"), "decision_token": hidden(page, "decision_token"),
                    "decision": "approve"}
        approved = await self.send("POST", form_action(page, str(consent.request.url)), decision)
        back = await self.follow(approved)
        self.expect(back, 302, "approving")
        return urljoin(str(back.request.url), back.headers["location"])


async def run(url: str, mode: str, outbox: Path, address: str, report: dict[str, Any]) -> None:
    redirect_uri = f"http://127.0.0.1:{unused_port()}/callback"
    person = Person(url, address, outbox, report["person"])
    received: dict[str, Any] = {}

    async def redirect_handler(authorization_url: str) -> None:
        query = parse_qs(urlsplit(authorization_url).query)
        report["authorization"] = {k: v[0] if len(v) == 1 else v for k, v in query.items() if k not in SECRET_PARAMS}
        location = await person.authorize(authorization_url)
        if not location.startswith(redirect_uri + "?"):
            raise PersonError(f"the consent did not go back to {redirect_uri} but to {location}")
        answer = parse_qs(urlsplit(location).query)
        if "code" not in answer:
            raise PersonError(f"the redirect back carries no code: {location}")
        received.update(code=answer["code"][0], state=answer.get("state", [None])[0], iss=answer.get("iss", [None])[0])
        report["callback"] = {"iss": received["iss"], "code": True, "state": received["state"] is not None}

    async def callback_handler() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(**received)

    storage = MemoryStorage()
    provider = OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(
            client_name="SDK OAuth test", redirect_uris=[redirect_uri],
            grant_types=["authorization_code", "refresh_token"], response_types=["code"],
            token_endpoint_auth_method="none", scope="trips:read trips:write"),
        storage=storage, redirect_handler=redirect_handler, callback_handler=callback_handler)

    async def record(response: httpx2.Response) -> None:
        report["requests"].append(f"{response.request.method} {response.request.url.path} {response.status_code}")

    http = httpx2.AsyncClient(auth=provider, timeout=httpx2.Timeout(CONNECT_TIMEOUT, read=READ_TIMEOUT),
                              event_hooks={"response": [record]})
    async with person.http, http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode,
                          read_timeout_seconds=READ_TIMEOUT) as client:
            report["protocolVersion"] = client.protocol_version
            cursor = None
            while True:
                page = await client.list_tools(cursor=cursor)
                report["tools"] += [tool.name for tool in page.tools]
                cursor = page.next_cursor
                if cursor is None:
                    break
            result = await client.call_tool("list_trips", {})
            report["listTripsIsError"] = bool(result.is_error)
            texts = [block.text for block in result.content if getattr(block, "type", None) == "text"]
            report["listTripsText"] = texts[0][:500] if texts else None
    if storage.tokens is not None:
        report["token"] = {"scope": storage.tokens.scope, "expires_in": storage.tokens.expires_in,
                           "refresh": storage.tokens.refresh_token is not None}


def unwrap(exc: BaseException) -> BaseException:
    """The one exception inside (nested) exception groups, as anyio task groups raise them."""
    while len(getattr(exc, "exceptions", ())) == 1:
        exc = exc.exceptions[0]
    return exc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="the MCP endpoint, e.g. http://127.0.0.1:8000/mcp")
    parser.add_argument("--mode", required=True, choices=["auto", "legacy", "2026-07-28"])
    parser.add_argument("--outbox", required=True, type=Path, help="the server's outbox of .eml files")
    parser.add_argument("--email", required=True, help="the address the person signs in with")
    args = parser.parse_args(argv)
    report: dict[str, Any] = {"protocolVersion": None, "tools": [], "listTripsIsError": None, "requests": [],
                              "person": []}
    try:
        asyncio.run(run(args.url, args.mode, args.outbox, args.email, report))
    except BaseException as exc:  # whatever happened, the caller gets one JSON document
        print(json.dumps({"error": repr(unwrap(exc)), **report}, default=str))
        return 1
    print(json.dumps(report, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
