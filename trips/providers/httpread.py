"""Reading a third party's answer safely: a size cap and a deadline over the whole body.

Each socket read returns what has arrived (`read1`), so a server trickling bytes cannot stretch a download
past its deadline, and a body over the cap is abandoned as soon as it crosses it.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import requests


class BodyTooLarge(Exception):
    pass


class BodyTooSlow(Exception):
    pass


class BodyUnreadable(Exception):
    pass


def read_capped(response: requests.Response, limit: int, deadline: float) -> bytes:
    """The decoded body of a streamed response. `deadline` is a time.monotonic() value.

    Raises BodyTooLarge (declared or actual size over `limit`), BodyTooSlow (deadline passed, or a socket
    read timed out), BodyUnreadable (the connection failed mid-body).
    """
    import urllib3  # loaded by the caller's client already; not at start-up (tests/jobs/test_worker_imports.py)

    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge()
    chunks: list[bytes] = []
    total = 0
    try:
        while True:
            if time.monotonic() > deadline:
                raise BodyTooSlow()
            chunk = response.raw.read1(64 * 1024, decode_content=True)
            if not chunk:
                return b"".join(chunks)
            total += len(chunk)
            if total > limit:
                raise BodyTooLarge()
            chunks.append(chunk)
    except urllib3.exceptions.ReadTimeoutError as exc:
        raise BodyTooSlow() from exc
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise BodyUnreadable() from exc
