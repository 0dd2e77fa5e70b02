"""Place search for riders and agents: the query checked, then Nominatim or the offline gazetteer."""
from __future__ import annotations

from trips.core.redis_client import get_redis
from oauth.kernel.models import User
from trips.core.db import db
from trips.core.text import bounded
from trips.errors import Invalid, InvalidQuery, Msg
from trips.places.geocode import search_places as search
from trips.providers.settings import configs


def search_places(actor: User, query) -> dict:
    """Places matching `q` (Nominatim when configured, else the imported map places and the offline gazetteer).

    Raises Invalid (q, limit), RateLimited (the user's upstream budget), Unavailable (upstream refused
    or is down: never an empty list in that case).
    """
    extra = sorted(set(query) - {"q", "limit"})
    if extra:
        raise InvalidQuery({bounded(extra[0]): Msg("field.unknown")})
    try:
        return search(query.get("q"), query.get("limit"), config=configs().nominatim, redis=get_redis(),
                      user_key=actor.id, engine=db.engine)
    except Invalid as exc:
        raise InvalidQuery(exc.errors) from None
