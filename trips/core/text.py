"""Text that is not ours: the structural floor every string of an MCP answer passes through, a label cleaner,
bounded quoting of caller values, and names folded for matching (docs/RULES.md "MCP answers"). The floor takes away
what could reshape an answer (line structure, invisible and bidi controls); it never judges meaning.
"""
from __future__ import annotations

import re
import unicodedata

__all__ = ["floor", "label", "shorten", "bounded", "quote", "clean_answer", "Floored", "floored", "has_unstorable", "mend", "MAX_DEPTH",
           "UNSTORABLE"]

ELLIPSIS = "…"
MAX_DEPTH = 64  # our answers nest a handful of levels; deeper means a bug (or a cycle)

_BREAKS = frozenset("\t\n\x0b\x0c\r\x1c\x1d\x1e\x85")
# Planes 4-13 are unassigned and planes 15-16 private use (Co) in every Unicode version so far: not scanned (a test
# checks a full scan finds the same).
_PLANES = (range(0x00000, 0x40000), range(0xE0000, 0xF0000))


def _scan(ranges) -> tuple[list[int], list[int]]:
    """(code points to turn into a space, code points to remove) over `ranges`."""
    spaces, drops = [], []
    for block in ranges:
        for cp, cat in zip(block, map(unicodedata.category, map(chr, block))):
            if cat in ("Zl", "Zp") or chr(cp) in _BREAKS:
                spaces.append(cp)
            elif cat in ("Cc", "Cf"):
                drops.append(cp)
    return spaces, drops


def _char_class(cps: list[int]) -> str:
    parts, start = [], None
    for i, cp in enumerate(cps):
        start = cp if start is None else start
        if i + 1 == len(cps) or cps[i + 1] != cp + 1:
            parts.append(f"\\U{start:08x}" if start == cp else f"\\U{start:08x}-\\U{cp:08x}")
            start = None
    return "[" + "".join(parts) + "]"


_SPACE_CPS, _DROP_CPS = _scan(_PLANES)
_ANY = re.compile(_char_class(sorted(_SPACE_CPS + _DROP_CPS)))
_DROP = re.compile(_char_class(_DROP_CPS) + "+")
_SPACE_RUN = re.compile(_char_class(_SPACE_CPS) + "+")
_SPACES = re.compile(" {2,}")
# What no text column can hold: a lone UTF-16 surrogate (after json.loads or surrogatepass decoding every
# surrogate is lone, and none can be encoded as UTF-8) and NUL (PostgreSQL refuses it in text columns).
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def has_unstorable(text: str) -> bool:
    """True when `text` holds a lone UTF-16 surrogate or a NUL (no database text column can hold it)."""
    return UNSTORABLE.search(text) is not None


def mend(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD and every NUL dropped (the same object when there is
    neither)."""
    return UNSTORABLE.sub(_mended, text) if UNSTORABLE.search(text) else text


def _mended(match: re.Match) -> str:
    return "" if match.group() == "\x00" else REPLACEMENT


def floor(text: str) -> str:
    """The structural floor of one string: TAB, every line boundary of `str.splitlines` and every Zl/Zp character
    become one space (a run of them, with removed characters between, a single one); every other Cc and Cf
    character is removed; a lone surrogate becomes U+FFFD. A clean string is returned as it is (the same object).
    Raises nothing for a `str`."""
    if text.isascii() and text.isprintable():  # the common case, in C: no ASCII character is Cf, Zl or Zp,
        return text  # and every Cc one (U+0000–U+001F, U+007F) is not printable
    text = mend(text)
    if not _ANY.search(text):
        return text
    return _SPACE_RUN.sub(" ", _DROP.sub("", text))


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + ELLIPSIS


# Where a name may be cut (before a space, a hyphen, a dash or a slash) and what a cut leaves off its end.
_BREAK = re.compile("[ \t\\-\u2010\u2013\u2014/]")
_TRAIL = " \t-\u2010\u2013\u2014/,;:(&+·"


def shorten(text: str, limit: int, size=len) -> str:
    """The one cut of a name for display (docs/RULES.md "Shortened names"): `text` as it is when
    `size(text)` is at most `limit`, else its longest start that ends at a word, followed by "…", measuring at most
    `limit` with it ("Hotel Internationale" at 16: "Hotel…", never "Hotel Internatio…"; "Saint-Laurent-du-Pont" at
    18: "Saint-Laurent-du…"). Only a first word longer than that is cut inside, where the limit falls. `size`
    measures a text: characters (`len`), or the bytes a field holds. Raises nothing for a `str`."""
    if size(text) <= limit:
        return text
    room = limit - size(ELLIPSIS)
    if room <= 0:
        return ""
    kept = ""
    for found in _BREAK.finditer(text, 0, limit + 1):  # a character measures at least one: no break lies beyond
        start = text[:found.start()].rstrip(_TRAIL)
        if size(start) > room:
            break  # a longer start never measures less
        kept = start or kept
    if not kept:  # one word longer than the room
        kept = text[:room]
        while kept and size(kept) > room:
            kept = kept[:-1]
        kept = kept.rstrip(_TRAIL)
    return kept + ELLIPSIS if kept else ""


def label(text: str | None, limit: int = 200) -> str | None:
    """A third-party label for an answer: floor, runs of spaces squeezed, trimmed; None when nothing is left; cut at
    a word to at most `limit` characters, the ellipsis included (`shorten`)."""
    if text is None:
        return None
    cleaned = _SPACES.sub(" ", floor(text)).strip()
    return shorten(cleaned, limit) if cleaned else None


def bounded(value: object, limit: int = 40) -> str:
    """A caller's value made safe to name in a message: `str(value)` floored, cut to `limit` characters + "…"."""
    return _cut(floor(str(value)), limit)


def quote(value: object, limit: int = 40) -> str:
    """A caller's value quoted back in a message: `str(value)` floored, cut to `limit` characters + "…",
    in double quotes.

    The value is data, so its own quotes stay, but escaped: `\\` becomes `\\\\` and `"` becomes `\\"` (after
    the cut, so an escape is never split). The only unescaped `"` are ours, the first and the last, so a
    value cannot seem to close the quotation early and continue as our own words.
    """
    text = bounded(value, limit)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class Floored(dict):
    """A JSON object whose every string went through the floor already (made only by `floored`): `clean_answer`
    returns it as it is instead of walking it again (a part of an answer kept for many answers, such as a day's
    digest line). Never mutated once made: so what is made of it alone (its JSON texts, the tool result carrying
    it) is made once and kept with it, in `forms` (mcp/protocol.py kept_form)."""

    __slots__ = ("forms",)


def floored(obj: dict) -> Floored:
    """`clean_answer(obj)`, marked as floored. Raises as clean_answer."""
    return Floored(clean_answer(obj))


def clean_answer(obj, _depth: int = 0):
    """A copy of a JSON-like answer with `floor` applied to every string value; dict keys (ours) untouched.
    A Floored part (already floored) is kept as it is.

    Accepts dict, list, tuple (kept a tuple), str, int, float, bool and None.
    Raises TypeError on any other type (its text would escape the floor: convert it first) and ValueError
    when nesting is deeper than MAX_DEPTH (which also stops a cycle).
    """
    if isinstance(obj, str):
        return floor(obj)
    if obj is None or isinstance(obj, (int, float)):  # bool is an int
        return obj
    if isinstance(obj, Floored):
        return obj
    if _depth >= MAX_DEPTH:
        raise ValueError(f"answer nested deeper than {MAX_DEPTH} levels")
    if isinstance(obj, dict):
        return {key: clean_answer(value, _depth + 1) for key, value in obj.items()}
    if isinstance(obj, list):
        return [clean_answer(value, _depth + 1) for value in obj]
    if isinstance(obj, tuple):
        return tuple(clean_answer(value, _depth + 1) for value in obj)
    raise TypeError(f"not a JSON value: {type(obj).__name__}")


# --- names folded for matching (the gazetteer's index, the imported places) ---------------------------------------
_MARKS = re.compile("[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")
_NON_WORD = re.compile(r"(?:[^\w\n]|_)+")  # keeps line breaks: they separate names
# Letters that Unicode does not decompose into a base letter plus a mark.
_FOLD = (("ø", "o"), ("æ", "ae"), ("œ", "oe"), ("ł", "l"), ("đ", "d"), ("ð", "d"), ("þ", "th"), ("ı", "i"))


def normalise(text: str) -> str:
    """Lower-case, strip accents, turn punctuation and spacing runs into single spaces ("Saint-Étienne" →
    "saint etienne")."""
    return normalise_lines(text.replace("\n", " "))


def normalise_lines(text: str) -> str:
    """normalise() applied to each line of `text` at once (one pass of C-level work for a whole index)."""
    text = _MARKS.sub("", unicodedata.normalize("NFKD", text.casefold()))
    for letter, plain in _FOLD:
        text = text.replace(letter, plain)
    return "\n".join(line.strip() for line in _NON_WORD.sub(" ", text).split("\n"))
