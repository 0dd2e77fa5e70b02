"""Operators' endpoints: liveness now; readiness and metrics come with their issue."""
from flask import Blueprint, jsonify

bp = Blueprint("ops", __name__)


@bp.get("/healthz")
def healthz():
    return jsonify({"status": "ok"})
