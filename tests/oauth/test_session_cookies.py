"""oauth/services/session.py SessionCookies: the signed session cookie's signer is made once per set of keys, and a key
change (a rotation, with the old key kept as a fallback) is honoured at once."""
import pytest
from itsdangerous import BadSignature

from oauth.services.session import SessionCookies


def test_the_signer_is_made_once_and_again_when_the_keys_change(app, monkeypatch):
    cookies = app.session_interface
    assert isinstance(cookies, SessionCookies)
    first = cookies.get_signing_serializer(app)
    assert cookies.get_signing_serializer(app) is first
    signed = first.dumps({"uid": "someone"})
    old_key = app.secret_key
    monkeypatch.setattr(app, "secret_key", "a-new-key-of-enough-length-for-the-test")
    monkeypatch.setitem(app.config, "SECRET_KEY_FALLBACKS", [old_key])
    rotated = cookies.get_signing_serializer(app)
    assert rotated is not first
    assert rotated.loads(signed) == {"uid": "someone"}  # signed with the old key: still read through the fallback
    monkeypatch.setitem(app.config, "SECRET_KEY_FALLBACKS", [])
    alone = cookies.get_signing_serializer(app)
    assert alone is not rotated
    with pytest.raises(BadSignature):  # the old key is no longer trusted
        alone.loads(signed)
