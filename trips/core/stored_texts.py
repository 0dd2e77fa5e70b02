"""Texts a row keeps in no language (a computation's reason): the Msg's key, or its key and values as JSON, rendered
in the reader's language when read (trips/core/i18n.py); a text kept before keys, or a third party's own words, is
read back as it is."""
from __future__ import annotations

import json

from trips.core import i18n
from trips.errors import Msg

STORED_MAX = 255  # a computation's reason column


def stored(text: Msg | str | None, limit: int | None = STORED_MAX) -> str | None:
    """A text as a column keeps it, in no language (a computation's reason): a bare key, or its key and values as
    JSON; a text that is no Msg as it is. A Msg longer than `limit` is kept as its English words, cut there."""
    if text is None or not isinstance(text, Msg):
        return text
    kept = text.key if not text.values and text.count is None else json.dumps(_kept(text), ensure_ascii=False,
                                                                              separators=(",", ":"))
    return kept if limit is None or len(kept) <= limit else str(text)[:limit]


def _kept(value):
    if isinstance(value, Msg):
        kept: dict[str, object] = {"key": value.key}
        if value.values:
            kept["values"] = {k: _kept(v) for k, v in value.values.items()}
        if value.count is not None:
            kept["count"] = value.count
        return kept
    if isinstance(value, (list, tuple)):
        return [_kept(v) for v in value]
    return value if value is None or isinstance(value, (str, int, float, bool)) else str(value)


def unstored(text: str | None) -> Msg | str | None:
    """What `stored` kept, as the Msg it was; a text that is no key (kept before keys, or a third party's words)
    as it is."""
    if not isinstance(text, str) or not text:
        return text
    if text.startswith("{"):
        try:
            return _unkept(json.loads(text))
        except (ValueError, KeyError, TypeError, AttributeError):
            return text
    return Msg(text)


def _unkept(value):
    if isinstance(value, dict):
        made = Msg(value["key"], **{k: _unkept(v) for k, v in value.get("values", {}).items()})
        made.count = value.get("count")
        return made
    return [_unkept(v) for v in value] if isinstance(value, list) else value


def said_stored(text: str | None, locale: str | None) -> str | None:
    """A stored text (`stored`) in `locale`; None for None."""
    found = unstored(text)
    return found if found is None or isinstance(found, str) else i18n.say(found, locale)
