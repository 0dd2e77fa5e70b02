"""Route links: which are accepted (Komoot tours and collections, Strava and RideWithGPS routes), and the
kind and numeric id kept from one. Only the id is taken from the user's link: the fetch (trips/providers/
routes.py) goes to the operator-configured base URL, so the link never chooses the host.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from trips.errors import N_, as_msg

KOMOOT_TOUR = "komoot_tour"
KOMOOT_COLLECTION = "komoot_collection"
STRAVA_ROUTE = "strava_route"
RIDE_WITH_GPS = "ride_with_gps"
SOURCE_KINDS = (KOMOOT_TOUR, KOMOOT_COLLECTION, STRAVA_ROUTE, RIDE_WITH_GPS)

MAX_URL_LENGTH = 2048

_ID = r"([0-9]{1,20})/?(?:[?#]\S*)?"
_LOCALE = r"(?:[a-z]{2}-[a-z]{2}/)?"
_URL_PATTERNS = (
    (KOMOOT_TOUR, re.compile(r"https://www\.komoot\.com/" + _LOCALE + r"tour/" + _ID)),
    (KOMOOT_COLLECTION, re.compile(r"https://www\.komoot\.com/" + _LOCALE + r"collection/" + _ID)),
    (STRAVA_ROUTE, re.compile(r"https://www\.strava\.com/routes/" + _ID)),
    (RIDE_WITH_GPS, re.compile(r"https://ridewithgps\.com/routes/" + _ID)),
)

_UNSUPPORTED = N_("source.unsupported")


_HTTPS_REQUIRED = N_("source.https_required")


class UnsupportedSource(ValueError):
    """The link is not one of the supported forms. `message` (a key) lists them and never repeats the link."""

    def __init__(self, message: str = _UNSUPPORTED):
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return str(as_msg(self.message))  # English: logs


@dataclass(frozen=True)
class SourceRef:
    kind: str
    route_id: str


def parse_source_url(url: str) -> SourceRef:
    """Recognise a supported route link and keep only its kind and numeric id.

    Raises UnsupportedSource for anything else (http, other or lookalike hosts, userinfo, bad ids)."""
    if not isinstance(url, str) or len(url) > MAX_URL_LENGTH:
        raise UnsupportedSource()
    url = url.strip()
    for kind, pattern in _URL_PATTERNS:
        match = pattern.fullmatch(url)
        if match:
            return SourceRef(kind, match.group(1))
        if url[:7].lower() == "http://" and pattern.fullmatch("https://" + url[7:]):
            raise UnsupportedSource(_HTTPS_REQUIRED)
    raise UnsupportedSource()
