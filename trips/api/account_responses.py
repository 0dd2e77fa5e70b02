"""The answers of the account's REST routes (its profile, connected agents and tokens) as marshmallow schemas, for
the OpenAPI document (trips/api/openapi.py), closed and complete like trips/api/responses.py's."""
from __future__ import annotations

from marshmallow import fields, validate

from trips.api.responses import Answer, answer, nullable
from trips.core.i18n import LOCALES


@answer
class MeOut(Answer):
    userId = fields.String()
    email = fields.String(metadata={"format": "email"})
    locale = nullable(fields.String(validate=validate.OneOf(LOCALES), metadata={
        "description": "The language alerts are rendered in; null until chosen (then Accept-Language, else en)."}))


@answer
class ApplicationOut(Answer):
    id = fields.String()
    name = fields.String()
    host = nullable(fields.String(metadata={"description": "The host of a client known by its metadata URL."}))
    scopes = fields.List(fields.String())
    authorizedAt = nullable(fields.DateTime())
    lastUsedAt = nullable(fields.DateTime())


@answer
class ApplicationListOut(Answer):
    member = fields.List(fields.Nested(ApplicationOut))


@answer
class TokenOut(Answer):
    id = fields.String()
    prefix = fields.String(metadata={"description": "The token's first characters (never the secret)."})
    audience = fields.String(metadata={"description": "api or mcp (or an older deployment's resource)."})
    scopes = fields.List(fields.String())
    createdAt = fields.DateTime()
    expiresAt = fields.DateTime()


@answer
class TokenListOut(Answer):
    member = fields.List(fields.Nested(TokenOut))


# Component names, parts before the wholes they make up.
RESPONSES = {"Me": MeOut, "Application": ApplicationOut, "ApplicationList": ApplicationListOut, "Token": TokenOut,
             "TokenList": TokenListOut}
