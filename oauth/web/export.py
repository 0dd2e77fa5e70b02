"""The account's data as its owner downloads it (trips/readmodels/account.py): JSON, or a ZIP with the trips' GPX,
served by the REST twin (a bearer token) and by the /account page's link (the signed-in session) alike."""
from __future__ import annotations

import json

from flask import Response

from oauth.kernel.models import User
from trips.readmodels.account import account_data, account_zip, export_format


def export_answer(user: User, asked: str | None) -> Response:
    """The download in the format `asked` (json when absent); raises Invalid naming `format` for another one. Never
    cached: it holds everything about the account."""
    fmt = export_format(asked)
    data = account_data(user)
    if fmt == "zip":
        response = Response(account_zip(user, data), mimetype="application/zip")
    else:
        response = Response(json.dumps(data, ensure_ascii=False), mimetype="application/json")
    response.headers["Content-Disposition"] = f'attachment; filename="btp-account.{fmt}"'
    response.headers["Cache-Control"] = "no-store"
    return response
