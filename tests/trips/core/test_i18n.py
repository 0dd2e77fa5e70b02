"""Alerts in the reader's language (trips/core/i18n.py, docs/RULES.md "Rendering at read time"): the catalogues cover every code and
nothing else, numbers and country names follow the locale, and the locale is the account's, else REST's
Accept-Language, else English; MCP answers use the account's, the share page the owner's."""
import importlib
import io
import os
import pkgutil
import re
import string
import subprocess
from pathlib import Path

import pytest
from babel.messages.plurals import get_plural
from babel.messages.pofile import read_po
from flask import g

import trips.enrich.alerts as alert_modules
from tests.factories import auth, make_token, make_user
from tests.fakes.thirdparty import gpx_from_points, make_points
from tests.mcp_helpers import call, mcp_token, payload
from tests.oauth.test_oauth_flow import csrf_of, sign_in
from trips.core import i18n
from trips.core.db import atomic, db
from trips.enrich import weather
from trips.enrich.alerts.catalogue import CATALOGUE, render
from trips.models import Stage
from trips.readmodels import words
from trips.services.trips import import_gpx

for _module in pkgutil.iter_modules(alert_modules.__path__):  # every family registers its codes on import
    importlib.import_module(f"{alert_modules.__name__}.{_module.name}")

ROOT = Path(__file__).resolve().parents[3]
NBSP = "\u00a0"


def po_entries(locale: str) -> dict:
    """{key: text} of an alerts.po, an entry with plural forms as {key: (form 0, form 1, …)}."""
    with (i18n.TRANSLATIONS / locale / "LC_MESSAGES" / f"{i18n.DOMAIN}.po").open("rb") as handle:
        return {(m.id if isinstance(m.id, str) else m.id[0]): (m.string if isinstance(m.string, str) else tuple(m.string))
                for m in read_po(handle) if m.id}


def fields_of(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}


def sample(name: str):
    """A parameter value of the kind the rules store (trips/enrich/alerts/*.py module docstrings)."""
    if name == "country":
        return "CH"
    if name in ("arrival", "twilight", "sunset"):
        return "20:41"
    if name in ("count", "days", "next"):
        return 3
    return 1.5 if name not in ("name", "type", "surface", "holiday", "date") else f"<{name}>"


@pytest.mark.parametrize("locale", i18n.LOCALES)
def test_every_code_has_an_entry_and_every_entry_a_code(locale):
    keys = set(po_entries(locale))
    codes = {i18n.message_key(code) for code in CATALOGUE}
    assert codes - keys == set(), f"{locale}: codes without a message"
    assert keys - codes == set(), f"{locale}: messages of no code"
    assert all(po_entries(locale).values()), f"{locale}: an empty translation"


def test_the_english_catalogue_says_what_the_codes_register():
    # catalogue.py keeps the English text beside each rule; the en catalogue must not drift from it.
    en = po_entries("en")
    drift = {code for code, kind in CATALOGUE.items() if en.get(i18n.message_key(code)) != kind.message}
    assert drift == set()


@pytest.mark.parametrize("code", sorted(CATALOGUE))
def test_every_code_renders_in_both_languages_with_every_placeholder_filled(code):
    kind = CATALOGUE[code]
    en, fr = (i18n.template(code, locale) for locale in i18n.LOCALES)
    assert fields_of(fr) == fields_of(en) <= {*kind.params, "stage"}, "French and English fill the same fields"
    fact = {"code": code, "params": {name: sample(name) for name in kind.params}}
    out = {locale: render(fact, 4, locale)["message"] for locale in i18n.LOCALES}
    assert out["en"] != out["fr"]
    for message in out.values():
        assert "{" not in message and "}" not in message, message
    if "{stage}" in en:
        assert "4" in out["en"] and "4" in out["fr"]


def test_numbers_distances_and_countries_follow_the_locale():
    gap = {"code": "continuity_gap_critical", "params": {"distance": 1.52, "next": 2}}
    assert render(gap, 1, "en")["message"] == "Discontinuity: 1.5 km between stage 1 and 2."
    assert render(gap, 1, "fr")["message"] == f"Discontinuité{NBSP}: 1,5 km entre l'étape 1 et l'étape 2."
    border = {"code": "border_crossing", "params": {"country": "CH"}}
    assert "Switzerland" in render(border, 1, "en")["message"]
    assert "Suisse" in render(border, 1, "fr")["message"] and "Switzerland" not in render(border, 1, "fr")["message"]
    assert i18n.country("xy", "fr") == "xy"  # unknown: the code as stored, never a failure
    climb = {"code": "elevation_gain", "params": {"elevation": 1650}}
    assert "1,650m" in render(climb, 1, "en")["message"]
    assert f"1{NBSP}650" in render(climb, 1, "fr")["message"].replace("\u202f", NBSP)  # CLDR groups fr by a space
    steep = {"code": "steep_gradient", "params": {"gradient": 11.5, "distance": 0.8}}
    assert "11.5% gradient over 0.8 km" in render(steep, 1, "en")["message"]
    assert f"11,5{NBSP}% sur 0,8 km" in render(steep, 1, "fr")["message"]
    assert render({"code": "rest_day_suggested", "params": {"days": 1000}}, 1, "en")["message"].count("1000") == 1


def test_an_alert_that_counts_takes_the_plural_form_of_its_count(monkeypatch):
    def road(count, locale):
        return render({"code": "traffic_main_road", "params": {"count": count, "length": 7.2}}, 1, locale)["message"]

    assert road(1, "fr").startswith("1 tronçon sur route principale sans piste cyclable détecté (")
    assert road(4, "fr").startswith("4 tronçons sur route principale sans piste cyclable détectés (")
    assert road(0, "fr").startswith("0 tronçon ") and road(0, "en").startswith("0 segments ")
    assert road(1, "en").startswith("1 segment on") and road(4, "en").startswith("4 segments on")
    assert not [k for locale in i18n.LOCALES for k, v in po_entries(locale).items() if "(s)" in str(v)]
    monkeypatch.delitem(i18n.messages("fr"), i18n.message_key("traffic_main_road"))
    assert road(1, "fr").startswith("1 segment on")  # English, in English's forms
    monkeypatch.delitem(i18n.messages("en"), i18n.message_key("traffic_main_road"))
    assert road(3, "fr").startswith("3 segments on")  # the registered English text, still by its count


def test_an_unknown_locale_renders_in_english_and_a_code_missing_in_french_falls_back(monkeypatch):
    fact = {"code": "ford_crossing_dry", "params": {"count": 1}}
    assert render(fact, 2, "de")["message"] == render(fact, 2, "en")["message"]
    monkeypatch.delitem(i18n.messages("fr"), i18n.message_key("ford_crossing_dry"))
    assert render(fact, 2, "fr")["message"] == render(fact, 2, "en")["message"]


def test_make_compiles_the_catalogues_and_a_stale_one_is_not_read(tmp_path, monkeypatch):
    # `make test`, `make run` and .ci/run compile the .po files first (Makefile `catalogues`).
    done = subprocess.run(["make", "-s", "catalogues"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert all(i18n.is_fresh(locale, domain) for locale in i18n.LOCALES for domain in (i18n.DOMAIN, i18n.PAGES))
    i18n.messages.cache_clear()  # read from the .mo: plural forms survive the compile
    assert i18n.messages("fr", i18n.PAGES)["share.count_nudge"] == ("{count} conseil", "{count} conseils")
    assert i18n.template("traffic_main_road", "fr", 4).startswith("{count} tronçons")
    # A .mo older than its .po (edited after the last `make`) is set aside for the source.
    folder = tmp_path / "fr" / "LC_MESSAGES"
    folder.mkdir(parents=True)
    source = (i18n.TRANSLATIONS / "fr" / "LC_MESSAGES" / "alerts.po").read_text(encoding="utf-8")
    (folder / "alerts.mo").write_bytes((i18n.TRANSLATIONS / "fr" / "LC_MESSAGES" / "alerts.mo").read_bytes())
    edited = re.sub(r'(msgid "alert.ford_crossing_dry"\nmsgstr ")[^"]*', r"\1Gué édité.", source)
    assert edited != source
    (folder / "alerts.po").write_text(edited, encoding="utf-8")
    os.utime(folder / "alerts.mo", (1, 1))
    monkeypatch.setattr(i18n, "TRANSLATIONS", tmp_path)
    i18n.messages.cache_clear()
    try:
        assert not i18n.is_fresh("fr")
        assert i18n.messages("fr")[i18n.message_key("ford_crossing_dry")] == "Gué édité."
    finally:
        i18n.messages.cache_clear()


# --- which locale a read uses -----------------------------------------------------------------------------

@pytest.fixture
def trip_with_alerts(app, ctx):
    user = make_user("reader@example.org")
    trip = import_gpx(user, io.BytesIO(gpx_from_points(make_points(400), name="Jura")), {})
    with atomic():
        stage = db.session.query(Stage).filter_by(trip_id=trip.id, position=0).one()
        stage.alerts_by_group = {"border_crossing": [{"code": "border_crossing", "params": {"country": "CH"}}],
                                 "terrain": [{"code": "continuity_gap_critical",
                                              "params": {"distance": 1.52, "next": 2}}]}
    return user, trip, stage.id


def set_locale(user, locale):
    with atomic():
        db.session.merge(user).locale = locale


def rest_messages(client, user, trip, stage_id, **headers) -> tuple[set[str], object]:
    response = client.get(f"/api/trips/{trip.id}/stages/{stage_id}", headers={**auth(make_token(user)), **headers})
    assert response.status_code == 200
    return {a["message"] for a in response.get_json()["alerts"]}, response


def test_rest_uses_the_account_then_accept_language_then_english(client, trip_with_alerts):
    user, trip, stage_id = trip_with_alerts
    assert user.locale is None  # not chosen until the rider says so
    english, response = rest_messages(client, user, trip, stage_id)
    assert any("Switzerland" in m for m in english)
    french, response = rest_messages(client, user, trip, stage_id, **{"Accept-Language": "de;q=1, fr-CH;q=0.8"})
    assert any("Suisse" in m for m in french) and "Accept-Language" in response.headers["Vary"]
    assert rest_messages(client, user, trip, stage_id, **{"Accept-Language": "de, ja"})[0] == english
    set_locale(user, "fr")
    assert rest_messages(client, user, trip, stage_id)[0] == french  # the account's choice
    assert rest_messages(client, user, trip, stage_id, **{"Accept-Language": "en"})[0] == french  # wins over it


def test_patch_me_sets_the_locale_and_refuses_others_by_name(client, trip_with_alerts):
    user, trip, stage_id = trip_with_alerts
    headers = auth(make_token(user))
    answer = client.patch("/api/users/me", json={"locale": "fr"}, headers=headers)
    assert answer.status_code == 200 and answer.get_json()["locale"] == "fr"
    assert client.get("/api/users/me", headers=headers).get_json()["locale"] == "fr"
    assert any("Suisse" in m for m in rest_messages(client, user, trip, stage_id)[0])
    for bad in ({"locale": "de" * 100}, {"locale": 3}, {}, {"locale": "fr", "extra": 1}):
        refused = client.patch("/api/users/me", json=bad, headers=headers)
        assert refused.status_code == 422, bad
        assert "de" * 100 not in refused.get_data(as_text=True)
    assert client.patch("/api/users/me", json={"locale": None}, headers=headers).get_json()["locale"] is None
    read_only = auth(make_token(user, scope="trips:read"))
    assert client.patch("/api/users/me", json={"locale": "fr"}, headers=read_only).status_code == 403


def test_the_account_page_form_sets_the_locale_with_csrf(app, client, ctx):
    sign_in(app, client, "form@example.org")
    page = client.get("/account").get_data(as_text=True)
    assert 'name="locale"' in page and "Français" in page
    from oauth.kernel.models import User

    forged = client.post("/account/locale", data={"locale": "fr", "csrf_token": "nope"})
    assert forged.status_code == 302 and db.session.query(User).filter_by(email="form@example.org").one().locale is None
    client.post("/account/locale", data={"locale": "xx", "csrf_token": csrf_of(page)})
    db.session.expire_all()
    assert db.session.query(User).filter_by(email="form@example.org").one().locale is None
    done = client.post("/account/locale", data={"locale": "fr", "csrf_token": csrf_of(page)})
    assert done.status_code == 302
    db.session.expire_all()
    assert db.session.query(User).filter_by(email="form@example.org").one().locale == "fr"
    assert re.search(r'<option value="fr" lang="fr" selected>', client.get("/account").get_data(as_text=True))


def test_mcp_answers_use_the_account_locale(app, client, trip_with_alerts):
    user, trip, stage_id = trip_with_alerts
    token = mcp_token(app, user)

    def messages():
        answer = payload(call(client, token, "get_stage", {"tripId": trip.id, "stageId": stage_id}))
        return [a["message"] for a in answer["alerts"]]

    assert any("Switzerland" in m for m in messages())
    set_locale(user, "fr")
    assert any("Suisse" in m for m in messages())
    digest = payload(call(client, token, "get_trip", {"id": trip.id}))
    assert digest["stages"][0]["criticalAlerts"] == [f"Discontinuité{NBSP}: 1,5 km entre l'étape 1 et l'étape 2."]


def test_the_share_page_reads_in_the_owner_locale(app, client, trip_with_alerts):
    user, trip, _ = trip_with_alerts
    code = client.post(f"/api/trips/{trip.id}/share", headers=auth(make_token(user))).get_json()["shortCode"]

    def page(**headers):
        # The test's app context outlives each request: a visitor has no principal, not the owner's from the
        # POST above (in production every request has its own context).
        g.pop("principal", None)
        return client.get(f"/s/{code}", headers=headers).get_data(as_text=True)

    assert "Switzerland" in page(**{"Accept-Language": "fr"})
    set_locale(user, "fr")
    html = page(**{"Accept-Language": "en"})
    assert "Suisse" in html and "Switzerland" not in html


# --- the page words (pages.po, trips/readmodels/words.py) --------------------------------------------------

def page_entries(locale: str) -> dict:
    """{key: text} of every keyed catalogue (pages.po, messages.po, mcp.po, api.po: one key space), a plural entry
    as {key: (form 0, form 1, …)}."""
    out = {}
    for domain in i18n.KEYED:
        with (i18n.TRANSLATIONS / locale / "LC_MESSAGES" / f"{domain}.po").open("rb") as handle:
            out.update({(m.id if isinstance(m.id, str) else m.id[0]):
                        (m.string if isinstance(m.string, str) else tuple(m.string)) for m in read_po(handle) if m.id})
    return out


KEY = re.compile(r"[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)+\Z")


def extracted(keywords: tuple[str, ...] | None = None) -> set[str]:
    """The keys pybabel extracts with babel.cfg and the Makefile's `messages` keywords, or only `keywords`: the
    key-shaped strings (a domain error may still carry an English sentence, which tests/trips/core/test_catalogues.py
    counts)."""
    from babel.messages.extract import extract_from_dir
    from babel.messages.frontend import parse_mapping_cfg

    made = re.search(r"^messages:.*?(?=^\S)", (ROOT / "Makefile").read_text(), re.S | re.M).group(0)
    names = keywords or tuple(re.findall(r"-k (\w+)", made))
    assert {"t", "tn", "N_", "Msg", "Plural"} <= set(re.findall(r"-k (\w+)", made)) and names
    with (ROOT / "babel.cfg").open() as handle:
        method_map, options_map = parse_mapping_cfg(handle)
    found = extract_from_dir(str(ROOT), method_map, options_map, keywords=dict.fromkeys(names))
    keys = {message if isinstance(message, str) else message[0] for _, _, message, _, _ in found}
    return {key for key in keys if key and KEY.match(key)}


def faults(entries: dict, used: set[str]) -> dict[str, set[str]]:
    """What is wrong with a catalogue: keys used but missing, entries no code uses, entries without a text."""
    return {"missing": used - set(entries), "unused": set(entries) - used,
            "untranslated": {k for k, v in entries.items() if not v or (isinstance(v, tuple) and not all(v))}}


@pytest.fixture(scope="module")
def used_keys() -> set[str]:
    return extracted() | words.DYNAMIC_KEYS


@pytest.mark.parametrize("locale", i18n.LOCALES)
def test_every_page_key_has_an_entry_and_every_entry_a_key(locale, used_keys):
    assert faults(page_entries(locale), used_keys) == {"missing": set(), "unused": set(), "untranslated": set()}


def test_the_catalogue_check_finds_a_missing_an_unused_and_an_untranslated_key(used_keys):
    entries = dict(page_entries("fr"))
    del entries["login.title"]
    entries["login.nobody_asks_for_this"] = "Personne"
    entries["share.download"] = ""
    assert faults(entries, used_keys) == {"missing": {"login.title"}, "unused": {"login.nobody_asks_for_this"},
                                          "untranslated": {"share.download"}}
    assert "login.title" in extracted(("t",)) and "login.title" not in extracted(("tn",))


def test_the_extraction_sees_the_code_and_the_templates_and_the_registry_the_rest():
    keys = extracted()
    assert {"share.max", "login.form_expired", "scope.trips_read", "error.not_found", "mail.subject",
            "share.count_nudge", "consent.allow"} <= keys  # share.py, pages.py (N_), consent.py, i18n.py, accounts.py
    assert not keys & words.DYNAMIC_KEYS  # a key written in a call needs no registry entry
    from trips.readmodels import pictures

    assert set(pictures._WIND_WORDS.values()) <= words.DYNAMIC_KEYS
    assert {words.weather_key(row[2]) for row in weather.WMO} <= words.DYNAMIC_KEYS


def test_plural_keys_have_plural_forms_and_the_others_none():
    plural = extracted(("tn", "Plural"))
    for locale in i18n.LOCALES:
        entries = page_entries(locale)
        assert {k for k, v in entries.items() if isinstance(v, tuple)} == plural, locale
        assert all(len(entries[k]) == get_plural(locale).num_plurals for k in plural)
        assert not [k for k, v in entries.items() if "(s)" in str(v)], "a plural written by hand"


@pytest.mark.parametrize("locale", i18n.LOCALES)
def test_the_catalogue_s_plural_forms_are_gettext_s_for_the_language(locale):
    for domain in i18n.KEYED:
        with (i18n.TRANSLATIONS / locale / "LC_MESSAGES" / f"{domain}.po").open("rb") as handle:
            assert read_po(handle).plural_forms == get_plural(locale).plural_forms


def test_a_count_takes_its_language_s_plural_form():
    assert [i18n.tn("share.count_nudge", n, "fr") for n in (0, 1, 2)] == ["0 conseil", "1 conseil", "2 conseils"]
    assert [i18n.tn("share.count_nudge", n, "en") for n in (0, 1, 2)] == ["0 nudges", "1 nudge", "2 nudges"]
    assert i18n.tn("share.count_warning", 1200, "fr") == "1\u202f200 avertissements"  # grouped the CLDR way
    assert i18n.tn("share.count_nudge", 3, "de") == "3 nudges"
    assert i18n.tn("share.nothing", 3, "fr") == "share.nothing"
    assert i18n.t("share.count_nudge", "fr", count=2) == "2 conseil"  # t reads the first form only: use tn


def test_osm_values_are_said_in_words_or_left_out():
    assert i18n.osm_word("surface", "paving_stones", "fr") == "dalles"
    assert i18n.osm_word("surface", "paving_stones", "en") == "paving stones"
    assert i18n.osm_word("surface", "asphalt", "fr") is None and i18n.osm_word("surface", None, "fr") is None
    assert i18n.osm_words("surface", "gravel, paving_stones, tarmac", "fr") == "gravier, dalles"
    assert i18n.osm_words("surface", "tarmac", "fr") == "autres revêtements"
    rough = {"code": "surface_rough", "params": {"length": 6.4, "surface": "gravel, paving_stones"}}
    assert render(rough, 1, "fr")["message"] == ("Revêtement difficile sur 6,4 km au total (gravier, dalles). "
                                                 "Vérifiez que votre vélo est adapté.")
    poi = {"code": "cultural_poi_suggestion", "params": {"name": "Chillon", "type": "castle", "distance": 120}}
    assert "(château," in render(poi, 2, "fr")["message"]
    assert "(place of interest," in render({**poi, "params": {**poi["params"], "type": "shrine"}}, 2, "en")["message"]


def test_french_and_english_page_words_fill_the_same_fields():
    en, fr = page_entries("en"), page_entries("fr")

    def fields(value):
        return [fields_of(form) for form in value] if isinstance(value, tuple) else fields_of(value)

    assert {k: fields(v) for k, v in fr.items()} == {k: fields(v) for k, v in en.items()}
    same = {"next.km_range", "share.max", "share.min", "osm.culture.fort", "osm.culture.monument", "osm.resupply.bar",
            "osm.resupply.restaurant", "osm.resupply.cafe", "share.cue_km", "share.km_of",
            "share.way_ferry"}  # French words too
    wordless = {k for k, v in en.items() if isinstance(v, str) and not re.search(r"[A-Za-z]", re.sub(r"{\w+}", "", v))}
    assert [k for k in en if en[k] == fr[k] and k not in same | wordless] == [], "left in English"


def test_a_page_word_falls_back_to_english_then_to_its_key(monkeypatch):
    assert i18n.t("share.day", "fr", day=3) == "Jour 3" and i18n.t("share.day", "de", day=3) == "Day 3"
    monkeypatch.delitem(i18n.keyed("fr"), "share.day")
    assert i18n.t("share.day", "fr", day=3) == "Day 3"
    assert i18n.t("share.nothing", "fr") == "share.nothing"


def test_the_weather_word_is_the_code_s_in_the_reader_s_language():
    assert words.describe({"weatherCode": 63, "description": "rain"}, "fr") == "pluie"
    assert words.describe({"weatherCode": 95}, "en") == "thunderstorm"
    assert words.describe({"weatherCode": 42}, "fr") == "inconnu"  # outside the WMO table
    assert words.describe({"description": "rain showers"}, "fr") == "averses"  # stored without a code
    assert words.describe({"description": "Sunny spells"}, "fr") == "Sunny spells"  # not ours: as stored


@pytest.fixture
def trip_with_weather(trip_with_alerts):
    from datetime import date

    from tests.trips.readmodels.test_readmodels_enriched import forecast
    from trips.models import Trip

    user, trip, stage_id = trip_with_alerts
    with atomic():
        stored = db.session.get(Trip, trip.id)
        stored.start_date = date.today()
        stage = db.session.get(Stage, stage_id)
        stage.enrichment = {**(stage.enrichment or {}), "weather": forecast(stored.start_date, stage.position)}
    return user, trip, stage_id


def test_get_stage_rest_and_the_digest_say_the_weather_in_the_reader_s_language(app, client, trip_with_weather):
    user, trip, stage_id = trip_with_weather
    token = mcp_token(app, user)

    def read():
        stage = payload(call(client, token, "get_stage", {"tripId": trip.id, "stageId": stage_id}))
        digest = payload(call(client, token, "get_trip", {"id": trip.id}))
        return stage["weather"]["description"], digest["stages"][0]["weather"]

    assert read() == ("rain", "rain 12–17°")
    rest = client.get(f"/api/trips/{trip.id}/stages/{stage_id}",
                      headers={**auth(make_token(user)), "Accept-Language": "fr"}).get_json()
    assert rest["weather"]["description"] == "pluie"
    set_locale(user, "fr")
    assert read() == ("pluie", "pluie 12–17°")
    stored = db.session.get(Stage, stage_id).enrichment["weather"]
    assert stored["description"] == "rain" and stored["weatherCode"] == 63  # no language stored


def test_the_share_page_words_are_the_owner_s(app, client, trip_with_weather):
    user, trip, _ = trip_with_weather
    code = client.post(f"/api/trips/{trip.id}/share", headers=auth(make_token(user))).get_json()["shortCode"]

    def page(**headers):
        g.pop("principal", None)
        return client.get(f"/s/{code}", headers=headers).get_data(as_text=True)

    english = page(**{"Accept-Language": "fr"})
    assert '<html lang="en">' in english and "Day 1" in english and ">rain<" in english
    assert "chance of rain" in english and "headwind" in english and "Jour" not in english
    set_locale(user, "fr")
    html = page(**{"Accept-Language": "en"})
    assert '<html lang="fr">' in html and "Jour 1" in html and ">pluie<" in html
    assert f"80{NBSP}% de risque de pluie" in html and "vent de face" in html and f"vent 28{NBSP}km/h" in html
    assert "Télécharger le fichier GPX" in html and f"Le voyage{NBSP}: altitude" in html
    for english_word in ("Day 1", ">rain<", "chance of", ">headwind<", "Download", "elevation", "m up"):
        assert english_word not in html, english_word
