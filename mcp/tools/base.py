"""What a tool is: a name, a scope, schemas, annotations that never lie, and a thin `run` over a service."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

from oauth.kernel.principal import Principal

ANNOTATION_KEYS = frozenset({"title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"})
# The revisions whose Tool has neither a top-level `title` nor an `outputSchema` (both came with 2025-06-18): their
# clients show annotations.title, so only their listing repeats the title there, and it carries neither field.
TITLE_IN_ANNOTATIONS = frozenset({"2025-03-26"})


@dataclass
class CallContext:
    """Everything a tool may use besides its arguments."""

    principal: Principal
    tool: str
    modern: bool
    client_capabilities: dict = field(default_factory=dict)
    input_responses: dict | None = None
    request_state: str | None = None
    # The values of the keys the tool asked to read beside the budgets (Tool.reads), in order; None when Redis
    # could not be asked.
    read_values: tuple | None = None
    read_state: object = None  # what Tool.reads left for `run`

    @property
    def user(self):
        return self.principal.user

    @property
    def can_elicit(self) -> bool:
        return self.modern and isinstance(self.client_capabilities.get("elicitation"), dict)


@dataclass(frozen=True)
class Content:
    """A tool answer given as MCP content blocks (text, image, audio, resource …) rather than one JSON object;
    the dispatcher sends the blocks as they are, with no structuredContent."""

    blocks: list
    is_error: bool = False


@dataclass(frozen=True)
class Tool:
    name: str
    title: str
    description: str
    scope: str
    input_schema: dict
    output_schema: dict | None
    run: Callable[[CallContext, dict], dict]
    annotations: dict = field(default_factory=dict)
    # The argument naming the trip a lock-carrying tool writes: its ownership and lock are judged before
    # the other arguments, so a started trip answers "locked" whatever else was sent (docs/RULES.md "Write guards").
    locked_trip: str | None = None
    # (ctx, the arguments as sent) -> Redis string keys to read in the budgets' round trip, each with the value it
    # takes when missing (trips/core/epochs.py): their values reach `run` as ctx.read_values.
    reads: Callable | None = None
    # (ctx) -> None: what a call refused for its arguments still spends (create_trip: the creation budget), so a
    # flood of bad calls costs what a flood of good ones does. Raises RateLimited when that budget is spent.
    on_refused: Callable | None = None

    def __post_init__(self):
        unknown = set(self.annotations) - ANNOTATION_KEYS
        if unknown:
            raise ValueError(f"{self.name}: unknown annotation keys {sorted(unknown)}")

    @property
    def writes(self) -> bool:
        return self.scope == "trips:write"

    def listing(self, version: str | None = None) -> dict:
        """What tools/list says of this tool on protocol `version` (None: a revision with the top-level title).
        Built once per era and kept: the same object on every call, read and never changed by the caller."""
        return self._listings[version in TITLE_IN_ANNOTATIONS]

    @cached_property
    def _listings(self) -> tuple[dict, dict]:
        """(the listing for the revisions that read the top-level title, the one for those that read
        annotations.title). cached_property writes the instance's __dict__, which a frozen dataclass allows."""
        listing = {"name": self.name, "title": self.title, "description": self.description,
                   "inputSchema": self.input_schema, "outputSchema": self.output_schema,
                   "annotations": dict(self.annotations)}
        if self.output_schema is None:  # a tool answering Content blocks publishes no structured shape
            del listing["outputSchema"]
        if not self.annotations:  # {} says what absent annotations say (every hint at its default)
            del listing["annotations"]
        earlier = {k: v for k, v in listing.items() if k not in ("title", "outputSchema")}
        return listing, {**earlier, "annotations": {"title": self.title, **self.annotations}}
