"""The confirmation slot of the write chain for delete_trip, unshare_trip and update_trip_settings.

A first call writes nothing: it answers an impact summary and a single-use token (or, when a 2026-07-28
client declares `elicitation`, asks the human through `input_required` with a sealed request state).
"""
from __future__ import annotations

from flask import current_app

from trips.core.redis_client import get_redis
from mcp.answers import ack, impact
from mcp.confirmation_tokens import Binding, mint, open_state, seal_state, spend
from trips.core import i18n
from trips.errors import Invalid, Msg, N_, Plural
from trips.models import Trip
from trips.services.sharing import active_share, share_url

TOKEN_INVALID = N_("mcp.confirmation_token_invalid")
STATE_INVALID = N_("mcp.request_state_invalid")
DECLINED = N_("mcp.declined")
RESPONSES_INVALID = N_("mcp.input_responses_invalid")


class ConfirmationRequired(Exception):
    """Not an error: the answer to give instead of performing the call."""

    def __init__(self, answer: dict):
        super().__init__("confirmation required")
        self.answer = answer


class InputRequired(Exception):
    def __init__(self, requests: dict, state: str):
        super().__init__("input required")
        self.requests, self.state = requests, state


def confirmer(ctx, arguments: dict, action: Msg):
    """A `confirm(trip)` callable for the write chain. Raises ConfirmationRequired, InputRequired, Invalid."""
    binding = Binding.of(ctx.user.id, ctx.principal.client_id, ctx.tool, arguments)
    token = arguments.get("confirmationToken")
    redis, secret = get_redis(), current_app.config["SECRET_KEY"]

    def confirm(trip: Trip) -> None:
        if token is not None:
            if spend(redis, token, binding):
                return
            raise Invalid({"confirmationToken": Msg(TOKEN_INVALID)})
        if ctx.request_state is not None or ctx.input_responses is not None:
            if ctx.input_responses is not None and not isinstance(ctx.input_responses, dict):
                raise Invalid({"inputResponses": Msg(RESPONSES_INVALID)})  # before the state is used up
            if not open_state(redis, secret, ctx.request_state, binding):
                raise Invalid({"requestState": Msg(STATE_INVALID)})
            answer = (ctx.input_responses or {}).get("confirm")
            answer = answer if isinstance(answer, dict) else {}
            content = answer.get("content") if isinstance(answer.get("content"), dict) else {}
            if answer.get("action") == "accept" and content.get("confirm") is True:
                return
            raise ConfirmationRequired(ack(Msg(DECLINED)))  # anything else is no
        summary = impact(trip, share_link(trip))
        locale = i18n.current_locale()
        if ctx.can_elicit:
            title = summary["title"] or i18n.t("mcp.confirm.this_trip", locale)
            asked = Plural("mcp.confirm.ask", summary["stageCount"], action=action, title=title)
            raise InputRequired({"confirm": {"method": "elicitation/create", "params": {
                "mode": "form", "message": i18n.say(asked, locale),
                "requestedSchema": {"type": "object", "required": ["confirm"], "properties": {"confirm": {
                    "type": "boolean", "title": i18n.t("mcp.confirm.go_ahead", locale),
                    "description": i18n.t("mcp.confirm.tick", locale)}}}}}},
                seal_state(secret, binding))
        raise ConfirmationRequired({"confirmationRequired": True, "confirmationToken": mint(redis, binding),
                                    "action": i18n.say(action, locale), "impact": summary})

    return confirm


def share_link(trip: Trip) -> str | None:
    share = active_share(trip.id)
    return share_url(share) if share else None
