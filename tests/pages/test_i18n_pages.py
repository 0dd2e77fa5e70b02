"""Every page and e-mail in English and French (trips/core/i18n.py): the account's language, else Accept-Language, else
English; no page key, no unfilled {field}, no plural written by hand, no English word in French, no raw OSM value.
The catalogues against the code: tests/trips/core/test_i18n.py."""
import email
import re
from email import policy
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import sqlalchemy as sa
from flask import g

from oauth.services.authorize_errors import PAGE_WORDS
from oauth.kernel.models import User
from tests.factories import auth, make_token
from tests.trips.core.test_i18n import set_locale, trip_with_alerts, trip_with_weather  # noqa: F401 (fixtures)
from tests.oauth.test_oauth_flow import REDIRECT, authorize_url, code_from, csrf_of, exchange, pkce, sign_in
from trips.core import i18n
from trips.core.db import atomic, db
from trips.models import Stage

NBSP = "\u00a0"
# Words that only an English page would show; checked on the French pages' visible text.
ENGLISH = ("Sign in", "Sign out", "Your account", "mail address", "Check your", "Connected", "Personal token",
           "Language", "Save", "Revoke", "Disconnect", "Delete", "Allow", "Deny", "asks to use", "Published by",
           "Error code", "refused", "not valid", "not found", "Page not", "Day ", "Download", "chance of", "Rest day",
           "Night", "unknown", "unnamed", "about ", " a night", " up ", " down", "climbing", "nudge", "warning",
           "critical", "campsite", "paving", "gravel", "guest house", " the ", " and ", " of ", " to ", " your ",
           "You ", "This ", " is ", " with ", "Hello", "link")
KEY = re.compile(r"\b(?:page|login|sent|mail|account|scope|delete|deleted|consent|error|oauth|share|osm|weather|wind)"
                 r"\.[a-z_]+\b")


def visible(html: str) -> str:
    """The words a person reads: the markup out, the entities a browser would show back in."""
    text = re.sub(r"<[^>]+>", " ", html)
    text = text.replace("&#39;", "'").replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
    return re.sub(r"[ \t\r\n]+", " ", text).strip()  # the no-break spaces kept: they are the typography


def problems(text: str, locale: str) -> list[str]:
    found = [f"key {k}" for k in KEY.findall(text)] + [f"field {m}" for m in re.findall(r"\{\w*\}", text)]
    found += ["a plural by hand"] if "(s)" in text else []
    return found + ([f"English {w!r}" for w in ENGLISH if w in text] if locale == "fr" else [])


def newest_mail(app) -> email.message.EmailMessage:
    newest = max((Path(app.instance_path) / "outbox").glob("*.eml"), key=lambda p: p.stat().st_mtime_ns)
    return email.message_from_bytes(newest.read_bytes(), policy=policy.default)


def every_page(app, client, locale: str) -> dict:
    """Walks a person's whole life on the site in `locale` (Accept-Language): {page name: response}."""
    lang, seen = {"Accept-Language": locale}, {}
    seen["login"] = client.get("/login", headers=lang)
    csrf = csrf_of(seen["login"].get_data(as_text=True))
    seen["login refused"] = client.post("/login", data={"email": "nobody", "csrf_token": csrf}, headers=lang)
    seen["login expired"] = client.post("/login", data={"email": "a@example.org", "csrf_token": "x"}, headers=lang)
    seen["link sent"] = client.post("/login", data={"email": f"{locale}@example.org", "csrf_token": csrf},
                                    headers=lang)
    mail = newest_mail(app)
    path = urlsplit(re.search(r"http://\S+/login/\S+", mail.get_content()).group(0)).path
    seen["link confirm"] = client.get(path, headers=lang)
    seen["link invalid"] = client.get("/login/not-a-link", headers=lang)
    signed = client.post(path, data={"csrf_token": csrf_of(seen["link confirm"].get_data(as_text=True))}, headers=lang)
    assert signed.status_code == 302
    registered = client.post("/oauth/register", json={"client_name": "Carnet de route", "redirect_uris": [REDIRECT],
                                                      "token_endpoint_auth_method": "none"}).get_json()["client_id"]
    # not yet approved: the error is BTP's own page
    seen["oauth error"] = client.get(authorize_url(registered, pkce()[1], code_challenge_method="plain"), headers=lang)
    verifier, challenge = pkce()
    url = authorize_url(registered, challenge)
    seen["consent"] = client.get(url, headers=lang)
    form = seen["consent"].get_data(as_text=True)
    decision = re.search(r'name="decision_token" value="([^"]+)"', form).group(1)
    approved = client.post(url, data={"csrf_token": csrf_of(form), "decision_token": decision, "decision": "approve"},
                           headers=lang)
    assert exchange(client, registered, code_from(approved), verifier).status_code == 200  # a connected agent
    make_token(db.session.scalar(sa.select(User).where(User.email == f"{locale}@example.org")))
    seen["account"] = client.get("/account", headers=lang)
    seen["account delete"] = client.get("/account/delete", headers=lang)
    csrf = csrf_of(seen["account"].get_data(as_text=True))
    seen["account delete refused"] = client.post("/account/delete", data={"csrf_token": csrf}, headers=lang)
    seen["not found"] = client.get("/no/such/page", headers=lang)
    seen["account deleted"] = client.post("/account/delete", data={"csrf_token": csrf, "confirm": "yes"},
                                          headers=lang)
    return seen, mail


def test_every_page_and_the_mail_in_english_and_in_french(app, client, ctx):
    pages, mails = {}, {}
    for locale in i18n.LOCALES:
        pages[locale], mails[locale] = every_page(app, client, locale)
    statuses = {name: r.status_code for name, r in pages["en"].items()}
    assert statuses == {name: r.status_code for name, r in pages["fr"].items()}
    assert statuses == {"login": 200, "login refused": 422, "login expired": 400, "link sent": 200,
                        "link confirm": 200, "link invalid": 404, "consent": 200, "oauth error": 400, "account": 200,
                        "account delete": 200, "account delete refused": 400, "not found": 404,
                        "account deleted": 200}
    for name in statuses:
        html = {locale: pages[locale][name].get_data(as_text=True) for locale in i18n.LOCALES}
        for locale in i18n.LOCALES:
            assert f'<html lang="{locale}">' in html[locale], name
            assert problems(visible(html[locale]), locale) == [], (name, locale)
        assert visible(html["en"]) != visible(html["fr"]), name
    fr = {name: visible(r.get_data(as_text=True)) for name, r in pages["fr"].items()}
    assert "Connexion" in fr["login"] and "Veuillez saisir une adresse e-mail." in fr["login refused"]
    assert "pendant 15 minutes" in fr["link sent"] and "Lien non valide" in fr["link invalid"]
    assert "Voir vos voyages et leurs journées" in fr["consent"] and "Autoriser" in fr["consent"]
    assert f"PKCE est obligatoire{NBSP}:" in fr["oauth error"] and "invalid_request" in fr["oauth error"]
    assert "Autorisée le" in fr["account"] and "pour l'API REST" in fr["account"]
    assert re.search(r"Autorisée le \d+ \w+\.? \d{4}", fr["account"])  # a date in French words
    assert "Page introuvable" in fr["not found"] and "Votre compte est supprimé" in fr["account deleted"]
    assert mails["fr"]["Subject"] == "Votre lien de connexion à BTP"
    assert problems(mails["fr"].get_content(), "fr") == [] and "pendant 15 minutes" in mails["fr"].get_content()
    assert mails["en"]["Subject"] == "Your BTP sign-in link"
    assert mails["en"].get_content().startswith("Hello,\n\nOpen this link to sign in to BTP (it works once, for 15 "
                                                "minutes):\n\nhttp://")


def test_every_fixed_sentence_of_the_oauth_page_is_its_english_entry():
    # authorize_errors sends the English sentence to a client and shows the page key: the two must not drift.
    assert {sentence: i18n.t(key, "en") for sentence, key in PAGE_WORDS.items()} == {s: s for s in PAGE_WORDS}


def test_a_page_follows_accept_language_and_varies_on_it(client):
    def login(value=None):
        response = client.get("/login", headers={"Accept-Language": value} if value else {})
        return re.search(r'<html lang="(\w+)">', response.get_data(as_text=True)).group(1), response

    for value, expected in ((None, "en"), ("fr", "fr"), ("fr-CH", "fr"), ("de, fr;q=0.5", "fr"), ("de", "en"),
                            ("en, fr;q=0.9", "en"), ("*", "en")):
        lang, response = login(value)
        assert lang == expected, value
        assert "Accept-Language" in response.headers.get("Vary", ""), value
    assert "<h1>Connexion</h1>" in login("fr")[1].get_data(as_text=True)


def test_the_account_s_language_wins_over_the_browser_s(app, client, ctx):
    sign_in(app, client, "choix@example.org")
    assert '<html lang="en">' in client.get("/account", headers={"Accept-Language": "en"}).get_data(as_text=True)
    french = client.get("/account", headers={"Accept-Language": "fr"}).get_data(as_text=True)
    assert '<html lang="fr">' in french  # no choice made: the browser's
    client.post("/account/locale", data={"locale": "fr", "csrf_token": csrf_of(french)})
    page = client.get("/account", headers={"Accept-Language": "en"})
    assert '<html lang="fr">' in page.get_data(as_text=True) and "Votre compte" in page.get_data(as_text=True)
    assert '<html lang="fr">' in client.get("/nowhere", headers={"Accept-Language": "en"}).get_data(as_text=True)
    client.post("/logout", data={"csrf_token": csrf_of(page.get_data(as_text=True))})
    assert '<html lang="en">' in client.get("/login", headers={"Accept-Language": "en"}).get_data(as_text=True)


def test_the_sign_in_mail_is_in_the_account_s_language_else_the_browser_s(app, client, ctx):
    def ask(address, **headers):
        csrf = csrf_of(client.get("/login").get_data(as_text=True))
        assert client.post("/login", data={"email": address, "csrf_token": csrf}, headers=headers).status_code == 200
        return newest_mail(app)["Subject"]

    assert ask("neuf@example.org", **{"Accept-Language": "fr"}) == "Votre lien de connexion à BTP"
    assert ask("new@example.org") == "Your BTP sign-in link"
    sign_in(app, client, "compte@example.org")
    with atomic():
        db.session.scalar(sa.select(User).where(User.email == "compte@example.org")).locale = "fr"
    client.post("/logout", data={"csrf_token": csrf_of(client.get("/account").get_data(as_text=True))})
    assert ask("compte@example.org", **{"Accept-Language": "en"}) == "Votre lien de connexion à BTP"


@pytest.mark.parametrize("locale", i18n.LOCALES)
def test_the_share_page_in_both_languages(app, client, trip_with_weather, locale):  # noqa: F811
    user, trip, stage_id = trip_with_weather
    with atomic():
        stage = db.session.get(Stage, stage_id)
        stage.alerts_by_group = {**stage.alerts_by_group, "surface": [
            {"code": "surface_rough", "params": {"length": 6.4, "surface": "gravel, paving_stones"}}],
            "bike_shop": [{"code": "bike_shop_none_nearby", "params": {}}],
            "health_service": [{"code": "health_service_none_nearby", "params": {"threshold": 10}}]}
        stage.accommodations = [{"name": "Chez Lise", "type": "guest_house", "estimatedPriceMin": 40,
                                 "estimatedPriceMax": 80, "currency": "EUR"}]
    set_locale(user, locale)
    code = client.post(f"/api/trips/{trip.id}/share", headers=auth(make_token(user))).get_json()["shortCode"]
    g.pop("principal", None)
    html = client.get(f"/s/{code}", headers={"Accept-Language": "de"}).get_data(as_text=True)
    text = visible(html)
    assert f'<html lang="{locale}">' in html and problems(text, locale) == []
    assert re.findall(r"\b[a-z]+_[a-z_]+\b", text) == []  # no raw OSM value (paving_stones, guest_house)
    if locale == "fr":
        assert "3 conseils" in text and "1 avertissement" in text and "1 critique" in text and "(gravier, dalles)" in text
        assert f"Nuit suggérée{NBSP}: Chez Lise (chambre d'hôtes) · environ 40 à 80{NBSP}€ la nuit" in text
    else:
        assert "3 nudges" in text and "1 warning " in text and "1 critical " in text and "(gravel, paving stones)" in text
        assert "Suggested night: Chez Lise (guest house) · about 40–80 € a night" in text


def test_the_page_checks_find_what_they_name():
    # The checks above must be able to fail: a leaked key, an unfilled field, a hand-written plural, English.
    assert problems("Jour 1 · share.rest_day", "fr") == ["key share.rest_day"]
    assert problems("{count} conseil(s)", "fr") == ["field {count}", "a plural by hand"]
    assert problems("Jour 1 · Download GPX", "fr") == ["English 'Download'"]
    assert problems("Download the GPX file", "en") == []
    assert visible("<p>Nuit\u00a0: <b>Chez&#39;Lise</b></p>") == "Nuit\u00a0: Chez'Lise"


def test_an_agent_s_answer_does_not_follow_accept_language(app, client, trip_with_alerts):  # noqa: F811
    from tests.mcp_helpers import call, mcp_token, payload

    user, trip, stage_id = trip_with_alerts
    answer = call(client, mcp_token(app, user), "get_stage", {"tripId": trip.id, "stageId": stage_id},
                  headers={"Accept-Language": "fr"})
    assert any("Switzerland" in a["message"] for a in payload(answer)["alerts"])  # the account's (none): English


@pytest.mark.parametrize("locale", i18n.LOCALES)
def test_a_trip_without_days_shows_no_sums(app, client, trip_with_alerts, locale):  # noqa: F811
    user, trip, _ = trip_with_alerts
    set_locale(user, locale)
    code = client.post(f"/api/trips/{trip.id}/share", headers=auth(make_token(user))).get_json()["shortCode"]
    with atomic():
        db.session.query(Stage).filter_by(trip_id=trip.id).delete()
    g.pop("principal", None)
    text = visible(client.get(f"/s/{code}").get_data(as_text=True))
    assert i18n.t("share.not_ready", locale) in text and problems(text, locale) == []
    assert not re.search(r"\b0 (?:days?|jours?)\b|\b0\u00a0?km\b|\b0 km\b", text), text  # unknown, never 0


def test_the_e_mail_change_speaks_the_account_s_language(app, client, ctx):
    """The link's mail, its page and the notice to the old address in the account's language (French here, the
    browser saying English); the notice to an address another account holds in that account's language."""
    from tests.factories import make_user
    from tests.oauth.test_email_change import URL, confirm, link_path, mails

    user = make_user("avant@example.org")
    with atomic():
        db.session.get(User, user.id).locale = "fr"
    headers = {**auth(make_token(user)), "Accept-Language": "en"}
    assert client.post(URL, json={"email": "apres@example.org"}, headers=headers).status_code == 202
    asked = mails(app)[-1]
    assert asked["Subject"] == "Confirmez votre nouvelle adresse BTP"
    assert "faire de apres@example.org l'adresse de votre compte BTP" in asked.get_content()
    assert problems(asked.get_content(), "fr") == []
    # the link's page follows the browser, as every page does for someone not signed in (the API call above left
    # its principal on the test's shared app context: a real request starts without one)
    g.pop("principal", None)
    page = {lang: visible(client.get(link_path(asked), headers={"Accept-Language": lang}).get_data(as_text=True))
            for lang in ("fr", "en")}
    assert "Utiliser cette adresse pour BTP\u202f?" in page["fr"] and problems(page["fr"], "fr") == []
    assert "Use this address for BTP?" in page["en"]
    done = confirm(client, link_path(asked))
    assert done.status_code == 200
    told = mails(app)[-1]
    assert told["To"] == "avant@example.org" and told["Subject"] == "L'adresse de votre compte BTP a changé"
    assert problems(told.get_content(), "fr") == [] and "a…@example.org" in told.get_content()
    other = make_user("pris@example.org")  # an English account holds the address asked for next
    assert other.locale in (None, "en")
    headers = {**auth(make_token(db.session.get(User, user.id))), "Accept-Language": "en"}  # the change revoked it
    assert client.post(URL, json={"email": "pris@example.org"}, headers=headers).status_code == 202
    taken = mails(app)[-1]
    assert taken["To"] == "pris@example.org" and taken["Subject"] == "Your BTP address"
    assert "already uses it" in taken.get_content()
