"""Domain errors. They know nothing of HTTP or JSON-RPC: each edge maps them with one table."""


class DomainError(Exception):
    """Base of every refusal a caller can be told about."""

    code = "error"

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


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

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


class Unavailable(DomainError):
    """A third party (or a local service) could not answer."""

    code = "unavailable"


class ServiceUnavailable(Unavailable):
    """BTP itself cannot serve this now (its Redis is unreachable); the same request will work again soon."""

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


class Invalid(DomainError):
    """Bad input. `errors` maps a field (or argument) name to a message about it."""

    code = "invalid_argument"

    def __init__(self, errors: dict[str, str], message: str | None = None):
        self.errors = dict(errors)
        first = next(iter(self.errors.items()), ("input", "is invalid"))
        super().__init__(message or f"{first[0]}: {first[1]}")


class BadRequest(DomainError):
    """A malformed control value (a header or argument the request cannot be judged without)."""

    code = "bad_request"


class InvalidQuery(Invalid):
    """Bad query-string parameters: the request itself is malformed (400), not its content."""
