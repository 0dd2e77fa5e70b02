"""Confirmation of destructive MCP calls (delete_trip, unshare_trip, update_trip_settings).

A token confirms exactly one call (same user, OAuth client, tool and arguments): it proves that a summary was
produced and the arguments did not move since, not that a human agreed. Kept in Redis for TOKEN_TTL, it is spent by
the first attempt, match or not. Sealed states (MCP elicitation) carry the same binding signed, single use through a
nonce spent in Redis.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
import time
from dataclasses import dataclass

from itsdangerous import BadData, URLSafeTimedSerializer

__all__ = ["canonical", "Binding", "mint", "spend", "seal_state", "open_state", "TOKEN_TTL", "TOKEN_PREFIX"]

TOKEN_TTL = 300
TOKEN_PREFIX = "btp:confirm:"
STATE_NONCE_PREFIX = "btp:confirm-state:"
STATE_SALT = "btp.mcp.confirmation-state"
MAX_STATE_TTL = 3600
_TOKEN = re.compile(r"[0-9a-f]{32}")


def canonical(arguments: dict, exclude=("confirmationToken",)) -> str:
    """The arguments as one string: maps key-sorted at every level, lists in order, compact JSON,
    top-level names in `exclude` removed.

    Only `confirmationToken` is excluded by default: `version` stays bound (a token minted at version 3 does
    not confirm a call at version 4) and every other argument too. Values are compared as JSON: `7` and `"7"`
    differ, as do `95` and `95.0`. Raises TypeError for a non-JSON value, ValueError for NaN or infinity.
    """
    kept = {key: value for key, value in arguments.items() if key not in exclude}
    return json.dumps(kept, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


@dataclass(frozen=True)
class Binding:
    """What a token confirms. `arguments` is the `canonical` string (addressing arguments such as tripId
    included); build one with `Binding.of`."""

    user_id: str
    client_id: str | None
    tool: str
    arguments: str

    @classmethod
    def of(cls, user_id, client_id, tool: str, arguments: dict, exclude=("confirmationToken",)) -> "Binding":
        """Raises like `canonical`."""
        return cls(str(user_id), None if client_id is None else str(client_id), tool, canonical(arguments, exclude))

    @property
    def digest(self) -> str:
        fields = ["btp-confirm-v1", self.user_id, self.client_id, self.tool, self.arguments]
        return hashlib.sha256(json.dumps(fields, ensure_ascii=False).encode()).hexdigest()


def _text(value) -> str | None:
    return value.decode() if isinstance(value, bytes) else value


def mint(redis, binding: Binding, ttl: int = TOKEN_TTL) -> str:
    """A fresh token for `binding`, stored for `ttl` seconds. Raises redis errors."""
    while True:
        token = secrets.token_hex(16)
        if redis.set(TOKEN_PREFIX + token, binding.digest, ex=ttl, nx=True):
            return token


def spend(redis, token, binding: Binding) -> bool:
    """Whether `token` confirms `binding`. The token is gone afterwards, match or not. A value that is not
    32 lowercase hex characters is False without a Redis call. Raises redis errors."""
    if not isinstance(token, str) or not _TOKEN.fullmatch(token):
        return False
    stored = _text(redis.getdel(TOKEN_PREFIX + token))
    return stored is not None and hmac.compare_digest(stored, binding.digest)


def _serializer(secret_key: str) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(secret_key, salt=STATE_SALT, signer_kwargs={"digest_method": hashlib.sha256})


def seal_state(secret_key: str, binding: Binding, ttl: int = TOKEN_TTL) -> str:
    """An opaque, signed request state for `binding`, valid `ttl` seconds (at most MAX_STATE_TTL), once.
    Raises ValueError for a ttl out of range."""
    if not 0 < ttl <= MAX_STATE_TTL:
        raise ValueError("ttl out of range")
    return _serializer(secret_key).dumps({"b": binding.digest, "n": secrets.token_hex(16), "t": ttl})


def _now() -> float:
    return time.time()


def open_state(redis, secret_key: str, state, binding: Binding) -> bool:
    """Whether `state` was sealed with `secret_key` for `binding`, is unexpired and unused. A genuine,
    unexpired state is used up by this call, match or not. Raises redis errors only."""
    if not isinstance(state, str):
        return False
    try:
        payload, signed_at = _serializer(secret_key).loads(state, max_age=MAX_STATE_TTL, return_timestamp=True)
    except BadData:
        return False
    if not isinstance(payload, dict):
        return False
    digest, nonce, ttl = payload.get("b"), payload.get("n"), payload.get("t")
    if not (isinstance(digest, str) and isinstance(nonce, str) and _TOKEN.fullmatch(nonce)
            and type(ttl) is int and 0 < ttl <= MAX_STATE_TTL):
        return False
    if _now() - signed_at.timestamp() > ttl:
        return False
    if not redis.set(STATE_NONCE_PREFIX + nonce, 1, ex=ttl + 2, nx=True):
        return False
    return hmac.compare_digest(digest, binding.digest)
