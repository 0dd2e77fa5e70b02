"""create_trip over MCP: an explicit `idempotencyKey` argument, or a key derived from the call itself.

The derived key hashes (user, tool, canonical arguments without control arguments, a WINDOW-second bucket). A new
trip is stored under the current bucket's key and a call looked up under the previous one's too, so a retry just
past a bucket boundary is still a retry.
"""
from __future__ import annotations

import hashlib
import json
import re
import time

from mcp.confirmation_tokens import canonical
from trips.errors import Invalid, Msg, N_

__all__ = ["derived_keys", "check_explicit_key", "CONTROL_ARGUMENTS", "WINDOW"]

WINDOW = 300
CONTROL_ARGUMENTS = ("idempotencyKey", "confirmationToken", "version")
_KEY = re.compile(r"[A-Za-z0-9_-]{16,255}")
_MALFORMED = N_("mcp.idempotency_key_malformed")


def _key(user_id: str, tool: str, args: str, bucket: int) -> str:
    fields = ["btp-mcp-idempotency-v1", str(user_id), tool, args, bucket]
    return "mcp-" + hashlib.sha256(json.dumps(fields, ensure_ascii=False).encode()).hexdigest()


def derived_keys(user_id: str, tool: str, arguments: dict, now: float | None = None,
                 window: int = WINDOW) -> tuple[str, str]:
    """(key of the current bucket, key of the previous one), each "mcp-" + 64 hex characters.
    Raises like `confirmation.canonical` (TypeError, ValueError) for non-JSON arguments."""
    args = canonical(arguments, exclude=CONTROL_ARGUMENTS)
    bucket = int((time.time() if now is None else now) // window)
    return _key(user_id, tool, args, bucket), _key(user_id, tool, args, bucket - 1)


def check_explicit_key(value) -> str:
    """`value` when it is a valid idempotency key; raises Invalid({"idempotencyKey": …}) otherwise, without
    repeating the value."""
    if not isinstance(value, str) or not _KEY.fullmatch(value):
        raise Invalid({"idempotencyKey": Msg(_MALFORMED)}, Msg(_MALFORMED))
    return value
