"""Every rate limit and per-agent budget of BTP, with its default: a call site names its bucket, never numbers.
`BTP_LIMIT_<BUCKET>=COUNT/SECONDS` overrides one (`BTP_LIMIT_MCP_ADDRESS=300/60`: 300 requests in any 60 seconds);
`create_app` validates them all before serving, so a typo stops the process instead of keeping the default.
"""
from __future__ import annotations

import re

from flask import current_app, has_app_context

# bucket -> (hits allowed, window in seconds, who is counted). README "Running in production" lists them.
REGISTRY: dict[str, tuple[int, int, str]] = {
    "mcp_address": (300, 60, "requests to /mcp per client address, before authentication"),
    "mcp_calls": (60, 60, "MCP tool calls per (user, agent)"),
    "mcp_writes": (20, 60, "MCP tool calls that write, per (user, agent), counted within mcp_calls"),
    "trip_create": (10, 60, "trip creations, GPX uploads and duplications per user, together"),
    "route_km": (5000, 3600, "km of route drawn from places per user, estimated straight before it is drawn"),
    "geocode": (30, 60, "place searches that reach the upstream geocoder, per user"),
    "oauth_token": (60, 60, "token and revocation requests per client address"),
    "oauth_authorize": (30, 60, "authorization requests per user"),
    "oauth_register": (10, 3600, "dynamic client registrations per client address"),
    "cimd_user": (10, 60, "client metadata document fetches per user"),
    "cimd_host": (30, 60, "client metadata document fetches per host fetched"),
    "login_email": (5, 900, "sign-in links per e-mail address"),
    "login_ip": (20, 900, "sign-in links per client address"),
}

DEFAULTS: dict[str, tuple[int, int]] = {name: (count, window) for name, (count, window, _) in REGISTRY.items()}
ENV_PREFIX = "BTP_LIMIT_"
MAX_COUNT = 1_000_000_000
MAX_WINDOW_S = 7 * 86400  # a week: longer windows would keep a sorted set of every hit for that long
_VALUE = re.compile(r"([0-9]{1,10})/([0-9]{1,7})")


def env_name(bucket: str) -> str:
    return ENV_PREFIX + bucket.upper()


ENV_NAMES = tuple(env_name(bucket) for bucket in REGISTRY)


def parse(name: str, value: str) -> tuple[int, int]:
    """`COUNT/SECONDS` → (count, seconds). Raises ValueError naming the variable (never echoing the value)."""
    match = _VALUE.fullmatch(value.strip()) if isinstance(value, str) and len(value) <= 40 else None
    count, window = (int(match[1]), int(match[2])) if match else (0, 0)
    if not (1 <= count <= MAX_COUNT and 1 <= window <= MAX_WINDOW_S):
        raise ValueError(f"{name} must be COUNT/SECONDS in whole numbers, such as 300/60 (count 1 to {MAX_COUNT}, "
                         f"window 1 to {MAX_WINDOW_S} seconds)")
    return count, window


def from_settings(settings: dict) -> dict[str, tuple[int, int]]:
    """The effective limits: the defaults, overridden by every non-empty `BTP_LIMIT_*` in `settings`.

    Raises ValueError naming the first malformed variable."""
    limits = dict(DEFAULTS)
    for bucket in REGISTRY:
        value = settings.get(env_name(bucket))
        if value not in (None, ""):
            limits[bucket] = parse(env_name(bucket), value)
    return limits


def configured(bucket: str) -> tuple[int, int]:
    """(count, window in seconds) for `bucket`: the app's configuration, else the default outside an app.

    Raises KeyError for a bucket that is not in the registry."""
    if has_app_context():
        effective = current_app.config.get("BTP_LIMITS")
        if effective is not None:
            return effective[bucket]
    return DEFAULTS[bucket]


__all__ = ["DEFAULTS", "ENV_NAMES", "REGISTRY", "configured", "env_name", "from_settings", "parse"]
