"""The REST edge under /api: blueprints of a few lines each, answer schemas, the OpenAPI document, GPX downloads."""
