"""Domain errors and the texts they carry. They know nothing of HTTP or JSON-RPC: each edge maps them with one
table and renders their texts in the reader's language (trips/core/i18n.py `say`)."""
from __future__ import annotations

from typing import Callable, Mapping


class Msg:
    """A text for a reader: a catalogue key and the values of its {fields}, rendered at the edge in the reader's
    language (trips/core/i18n.py `say`). A value may be a Msg (rendered first), a number or a date (written the
    reader's way), a list of them (joined with ", "), or a caller's value already quoted (trips/core/text.py).
    `str()` is the English text (logs, the CLI); never send it to a reader."""

    __slots__ = ("key", "values", "count")
    english: Callable[[Msg], str] | None = None  # set by trips/core/i18n.py: renders a Msg in English for str()

    def __init__(self, key: str, /, **values):
        self.key, self.values = key, values
        self.count: int | None = None

    def format(self, **values) -> list[Msg]:
        """A copy with `values` added, as a one-item list: a marshmallow validator given a Msg as its `error` fills
        it this way and raises ValidationError with the result, which takes a list as the field's messages."""
        made = Msg(self.key, **{**values, **self.values})
        made.count = self.count
        return [made]

    def __str__(self) -> str:
        return Msg.english(self) if Msg.english else self.key

    def __repr__(self) -> str:
        return f"Msg({self.key!r}, count={self.count!r}, **{self.values!r})"

    def __eq__(self, other) -> bool:
        if isinstance(other, str):  # a text without values is its key
            return self.count is None and not self.values and self.key == other
        return isinstance(other, Msg) and (self.key, self.count, self.values) == (other.key, other.count, other.values)

    def __hash__(self) -> int:
        return hash(self.key)


class Plural(Msg):
    """A text whose form follows `count` (the catalogue's msgid_plural entry, chosen by the language's rule)."""

    __slots__ = ()

    def __init__(self, key: str, count: int, /, **values):
        super().__init__(key, **values)
        self.count = count


def N_(key: str) -> str:  # noqa: N802 (gettext's name for a key marked, not yet rendered)
    """`key` itself: marks a catalogue key for extraction where it is named before it is rendered (babel.cfg)."""
    return key


def as_msg(text: str | Msg, values: dict | None = None) -> Msg:
    """`text` as a Msg: a key with `values`, or the Msg itself."""
    return text if isinstance(text, Msg) else Msg(text, **(values or {}))


class DomainError(Exception):
    """Base of every refusal a caller can be told about: `text` is a Msg (a key and its values)."""

    code = "error"

    def __init__(self, text: str | Msg, /, **values):
        self.text = as_msg(text, values)
        super().__init__(self.text.key)

    @property
    def message(self) -> str:
        """The English text (logs, the CLI): a reader gets `say(exc.text, locale)`."""
        return str(self.text)

    def __str__(self) -> str:
        return self.message


class NotFound(DomainError):
    code = "not_found"


class Locked(DomainError):
    code = "locked"


class PreconditionRequired(DomainError):
    code = "precondition_required"


class PreconditionFailed(DomainError):
    code = "stale_version"


class Conflict(DomainError):
    code = "conflict"


class RateLimited(DomainError):
    code = "rate_limited"

    def __init__(self, text: str | Msg, retry_after: int, /, **values):
        super().__init__(text, **values)
        self.retry_after = retry_after


class Unavailable(DomainError):
    """A third party (or a local service) could not answer."""

    code = "unavailable"


class ServiceUnavailable(Unavailable):
    """BTP itself cannot serve this now (its Redis is unreachable); the same request will work again soon."""

    def __init__(self, text: str | Msg, retry_after: int, /, **values):
        super().__init__(text, **values)
        self.retry_after = retry_after


class Invalid(DomainError):
    """Bad input. `errors` maps a field (or argument) name to a Msg about it; the text names the first."""

    code = "invalid_argument"

    def __init__(self, errors: Mapping[str, str | Msg], text: str | Msg | None = None):
        self.errors = {name: as_msg(said) for name, said in errors.items()}
        first = next(iter(self.errors.items()), ("input", Msg("field.invalid")))
        super().__init__(text if text is not None else Msg("refusal.field", field=first[0], message=first[1]))


class BadRequest(DomainError):
    """A malformed control value (a header or argument the request cannot be judged without)."""

    code = "bad_request"


class InvalidQuery(Invalid):
    """Bad query-string parameters: the request itself is malformed (400), not its content."""
