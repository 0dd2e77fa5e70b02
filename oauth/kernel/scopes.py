"""The one list of scopes: consent, metadata, tokens and tools all read it."""

SCOPES = {
    "trips:read": "See your trips and their days",
    "trips:write": "Create, change, share and delete your trips",
}
