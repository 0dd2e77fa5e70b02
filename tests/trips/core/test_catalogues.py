"""One catalogue per surface, whole in both languages (trips/core/i18n.py): every key of every domain in English and
French with the same {fields} and plural forms, a key in one domain only and a surface's keys used by that surface
only, no "(s)" anywhere, and no reader's text built outside the catalogues (an AST scan of the product code that
fails on a literal or an f-string reaching a refusal, a field message, an edit answer or a next action)."""
import ast
import re
import string
from pathlib import Path

import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.plurals import get_plural
from babel.messages.pofile import read_po

from trips.core import i18n
from trips.readmodels import words

ROOT = Path(__file__).resolve().parents[3]
DOMAINS = (i18n.DOMAIN, *i18n.KEYED)
KEY = re.compile(r"[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)+\Z")


def entries(locale: str, domain: str, root: Path | None = None) -> dict:
    """{key: text} of a catalogue source, a plural entry as {key: (form 0, form 1, …)}."""
    with ((root or i18n.TRANSLATIONS) / locale / "LC_MESSAGES" / f"{domain}.po").open("rb") as handle:
        return {(m.id if isinstance(m.id, str) else m.id[0]): (m.string if isinstance(m.string, str) else tuple(m.string))
                for m in read_po(handle) if m.id}


def fields(value) -> list:
    def of(text):
        return sorted({name for _, name, _, _ in string.Formatter().parse(text) if name})

    return [of(form) for form in value] if isinstance(value, tuple) else of(value)


def parity_faults(en: dict, fr: dict) -> dict[str, set[str]]:
    """What keeps two catalogues of one domain from matching: keys in one only, texts missing, fields or plural
    forms that differ."""
    return {"only_en": set(en) - set(fr), "only_fr": set(fr) - set(en),
            "empty": {k for k, v in {**en, **fr}.items() if not v or (isinstance(v, tuple) and not all(v))},
            "fields": {k for k in set(en) & set(fr) if fields(en[k]) != fields(fr[k])
                       and not (isinstance(en[k], tuple) and isinstance(fr[k], tuple)
                                and set(map(tuple, fields(en[k]))) == set(map(tuple, fields(fr[k]))))},
            "plural": {k for k in set(en) & set(fr) if isinstance(en[k], tuple) != isinstance(fr[k], tuple)}}


NO_FAULT = {"only_en": set(), "only_fr": set(), "empty": set(), "fields": set(), "plural": set()}


@pytest.mark.parametrize("domain", DOMAINS)
def test_every_key_of_every_domain_is_in_both_languages(domain):
    assert parity_faults(entries("en", domain), entries("fr", domain)) == NO_FAULT


def test_the_parity_check_fails_on_a_key_missing_in_one_language():
    en, fr = entries("en", i18n.MESSAGES), dict(entries("fr", i18n.MESSAGES))
    dropped = next(iter(fr))
    del fr[dropped]
    fr["field.nobody_has_this"] = "Personne"
    assert parity_faults(en, fr)["only_en"] == {dropped}
    assert parity_faults(en, fr)["only_fr"] == {"field.nobody_has_this"}
    key = next(k for k, v in en.items() if isinstance(v, str) and fields(v))
    assert parity_faults(en, {**entries("fr", i18n.MESSAGES), key: "sans champ"})["fields"] == {key}


@pytest.mark.parametrize("domain", DOMAINS)
def test_plural_forms_are_the_language_s_own(domain):
    for locale in i18n.LOCALES:
        with (i18n.TRANSLATIONS / locale / "LC_MESSAGES" / f"{domain}.po").open("rb") as handle:
            catalog = read_po(handle)
        assert catalog.plural_forms == get_plural(locale).plural_forms, (domain, locale)
        plural = [v for v in entries(locale, domain).values() if isinstance(v, tuple)]
        assert all(len(v) == get_plural(locale).num_plurals for v in plural)


def test_a_key_lives_in_one_domain_only():
    seen: dict[str, str] = {}
    for domain in i18n.KEYED:
        for key in entries("en", domain):
            assert key not in seen, f"{key} is in {seen.get(key)} and {domain}"
            seen[key] = domain


@pytest.mark.parametrize("locale", i18n.LOCALES)
def test_no_catalogue_writes_a_plural_by_hand(locale):
    by_hand = re.compile(r"\w\((?:s|es|x|e|e\)\(s)\)")  # day(s), fois(s), reçu(e)(s)
    found = [(d, k) for d in DOMAINS for k, v in entries(locale, d).items() if by_hand.search(str(v))]
    assert found == []


def docstrings(tree) -> set[int]:
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def test_no_product_string_writes_a_plural_by_hand():
    by_hand = re.compile(r"(?<!http)(?<=[a-zé])\((?:s|es|x)\)")  # day(s), not http(s)
    found = []
    for path in product_files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = docstrings(tree)
        found += [f"{path.relative_to(ROOT)}:{node.lineno}" for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
                  and by_hand.search(node.value)]
    assert found == []


@pytest.mark.parametrize("domain", (i18n.MESSAGES, i18n.MCP, i18n.API))
def test_french_typography(domain):
    # A no-break space before ':' and '%', a narrow one before ';', '?' and '!' (the pages' rule, pages.po header).
    plain = re.compile(r" [:;?!%]")
    bad = {k: v for k, v in entries("fr", domain).items() if plain.search(" ".join(v) if isinstance(v, tuple) else v)}
    assert bad == {}


# --- which surface says a key ------------------------------------------------------------------------------------

def extraction_keywords() -> tuple[str, ...]:
    made = re.search(r"^messages:.*?(?=^\S)", (ROOT / "Makefile").read_text(), re.S | re.M).group(0)
    return tuple(re.findall(r"-k (\w+)", made))


def uses() -> dict[str, set[str]]:
    """{key: the files that name it}, as pybabel extracts them (babel.cfg, the Makefile's keywords): the key-shaped
    strings only."""
    with (ROOT / "babel.cfg").open() as handle:
        method_map, options_map = parse_mapping_cfg(handle)
    found: dict[str, set[str]] = {}
    for filename, _, message, _, _ in extract_from_dir(str(ROOT), method_map, options_map,
                                                       keywords=dict.fromkeys(extraction_keywords())):
        key = message if isinstance(message, str) else message[0]
        if key and KEY.match(key):
            found.setdefault(key, set()).add(filename)
    return found


# The files each transport-specific catalogue speaks from (everything shared is in messages.po).
SURFACES = {i18n.MCP: ("mcp/",), i18n.API: ("trips/api/", "trips/core/problems.py")}


@pytest.fixture(scope="module")
def used() -> dict[str, set[str]]:
    return uses()


def test_a_transport_s_catalogue_holds_only_what_that_transport_says(used):
    for domain, where in SURFACES.items():
        for key in entries("en", domain):
            files = used.get(key, set())
            assert files and all(f.startswith(where) for f in files), (domain, key, files)


def test_every_key_the_code_names_is_in_a_catalogue_and_every_entry_is_named(used):
    known = {k for d in i18n.KEYED for k in entries("en", d)}
    assert set(used) - known == set(), "keys named in the code without an entry"
    assert known - set(used) - words.DYNAMIC_KEYS == set(), "entries no code names"


# --- no reader's text built outside the catalogues -------------------------------------------------------------------

# What hands a text to a reader: a domain error (its text; Invalid's field messages), marshmallow's ValidationError
# (a field message), an MCP tool's answer (`ack`), a REST problem's detail, a dict of an answer whose key is read as
# words, and the functions that build a next action, a digest line or an edit answer.
ERRORS = {"NotFound", "Locked", "PreconditionRequired", "PreconditionFailed", "Conflict", "RateLimited", "Unavailable",
          "ServiceUnavailable", "BadRequest", "Invalid", "InvalidQuery"}
# Where each reader-facing constructor comes from: a name counts only when the module imports it from there (or is
# that module), so a package's own internal exception of the same name (the gazetteer's Unavailable) does not.
SOURCES = {"trips.errors": ERRORS, "marshmallow": {"ValidationError"}, "mcp.answers": {"ack"},
           "trips.core.problems": {"problem"}}
SINKS = {**dict.fromkeys(ERRORS, (0,)), "ValidationError": (0,), "Invalid": (0, 1), "InvalidQuery": (0, 1),
         "ack": (0, 2), "problem": (1,)}
SINK_KEYWORDS = {"next_action", "text", "error"}
READ_AS_WORDS = {"nextAction", "result", "message", "reason", "how", "elevationReason", "accommodation"}
BUILDERS = {"next_action", "_off_map", "digest_accommodation", "moved", "answer", "refusal_reason"}
# Out of scope: the CLI (a sysadmin's English) and JSON-RPC's own protocol errors (mcp/protocol.py RpcError: read by
# the SDKs, many before a token names an account; README "Languages").
NOT_SCANNED = ("trips/cli/", "oauth/web/cli.py", "mcp/protocol.py")


def product_files() -> list[Path]:
    return sorted(p for package in ("trips", "mcp", "oauth", "jobs") for p in (ROOT / package).rglob("*.py")
                  if not str(p.relative_to(ROOT)).startswith(NOT_SCANNED))


@pytest.fixture(scope="module")
def known_keys() -> set[str]:
    return {k for d in DOMAINS for k in entries("en", d)}


def outside(node, constants: dict, known: set[str]) -> bool:
    """True when `node` builds a text without the catalogue: a string that is no catalogue key, an f-string, a
    concatenation or format of a string, str() of something, an exception's English `.message`, or a module
    constant bound to any of those."""
    if isinstance(node, ast.Constant):  # the empty string says nothing
        return isinstance(node.value, str) and node.value != "" and node.value not in known
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp):
        return outside(node.left, constants, known) or outside(node.right, constants, known) or any(
            isinstance(side, (ast.Constant, ast.JoinedStr)) and isinstance(getattr(side, "value", ""), str)
            for side in (node.left, node.right))
    if isinstance(node, ast.IfExp):
        return outside(node.body, constants, known) or outside(node.orelse, constants, known)
    if isinstance(node, ast.BoolOp):
        return any(outside(v, constants, known) for v in node.values)
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name) and func.id == "str":
            return True
        return isinstance(func, ast.Attribute) and func.attr in ("format", "join") and isinstance(
            func.value, (ast.Constant, ast.JoinedStr))
    if isinstance(node, ast.Attribute):
        return node.attr == "message"
    if isinstance(node, ast.Name) and node.id in constants:
        return outside(constants[node.id], {}, known)
    return False


def sink_names(tree, module: str) -> tuple[set[str], set[str]]:
    """(the sink names callable in this module, the names of modules whose attributes are sinks: `errors.Invalid`)."""
    names = set().union(*(names for source, names in SOURCES.items() if source == module))
    modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                if alias.name in SOURCES.get(node.module, ()):
                    names.add(alias.asname or alias.name)
                if f"{node.module}.{alias.name}" in SOURCES:
                    modules.add(alias.asname or alias.name)
    return names, modules


def findings(source: str, known: set[str], module: str = "") -> list[int]:
    """The lines of `source` where a reader's text is built outside the catalogue (see `outside`)."""
    tree = ast.parse(source)
    constants = {target.id: node.value for node in tree.body if isinstance(node, ast.Assign)
                 for target in node.targets if isinstance(target, ast.Name)}
    names, modules = sink_names(tree, module)
    found = []

    def judge(node):
        if isinstance(node, ast.Dict):  # a field → message map (Invalid's)
            for value in node.values:
                judge(value)
        elif outside(node, constants, known):
            found.append(node.lineno)

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in names:
                name = func.id
            elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in modules:
                name = func.attr
            else:
                continue
            for index in SINKS.get(name, ()):
                if index < len(node.args):
                    judge(node.args[index])
            if name in SINKS:
                for keyword in node.keywords:
                    if keyword.arg in SINK_KEYWORDS:
                        judge(keyword.value)
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and key.value in READ_AS_WORDS:
                    judge(value)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in BUILDERS:
            for inner in ast.walk(node):
                if isinstance(inner, ast.Return) and inner.value is not None:
                    judge(inner.value)
    return sorted(set(found))


def scan(known: set[str]) -> dict[str, list[int]]:
    out = {}
    for path in product_files():
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        lines = findings(path.read_text(encoding="utf-8"), known, module)
        if lines:
            out[str(path.relative_to(ROOT))] = lines
    return out


def test_no_reader_text_is_built_outside_the_catalogues(known_keys):
    assert scan(known_keys) == {}, "texts built outside the catalogues (file: lines)"


@pytest.mark.parametrize("planted", [
    'from trips.errors import Conflict\ndef _planted(trip):\n    raise Conflict("The trip is busy.")\n',
    'from trips.errors import Invalid\ndef _planted(trip):\n    raise Invalid({"stageId": f"day {trip} is wrong"})\n',
    'def _planted(trip):\n    raise NotFound(GONE)\nGONE = "It is gone."\n',
    'from trips import errors\ndef _planted(trip):\n    raise errors.BadRequest("Send JSON.")\n',
    'def next_action(trip):\n    return "Parts of " + str(trip) + " day(s) lie outside"\n',
    'def _planted():\n    return {"nextAction": f"Wait {3} s."}\n',
    'from mcp.answers import ack\ndef _planted():\n    return ack("Done.", 3, None)\n',
    'from trips.errors import Invalid\ndef _planted(exc):\n    raise Invalid({"gpxFile": str(exc)})\n',
    'from marshmallow import ValidationError\ndef _planted():\n    raise ValidationError("Give a date.", "x")\n',
])
def test_the_scan_finds_a_literal_planted_in_a_copy(tmp_path, known_keys, planted):
    source = (ROOT / "trips/services/sharing.py").read_text(encoding="utf-8")
    copy = tmp_path / "sharing.py"
    copy.write_text(source + "\n\n" + planted, encoding="utf-8")
    before = findings(source, known_keys)
    after = findings(copy.read_text(encoding="utf-8"), known_keys)
    assert len(after) > len(before)


def test_the_scan_lets_keys_and_messages_through(known_keys):
    clean = ('from trips.errors import Conflict, Invalid, Msg, NotFound\nGONE = N_("field.invalid")\n'
             'def _a(x):\n    raise NotFound(GONE)\n'
             'def _b(x):\n    raise Invalid({"stageId": Msg("field.invalid", x=x)})\n'
             'def _c(x):\n    raise Conflict("field.invalid")\n'
             'def _d(x):\n    return {"nextAction": Msg("field.invalid")}\n'
             'class Unavailable(RuntimeError):\n    pass\ndef _e():\n    raise Unavailable("not ours: internal")\n')
    assert findings(clean, known_keys) == []


# --- marshmallow's own messages ----------------------------------------------------------------------------------

def marshmallow_messages() -> set[str]:
    """Every message marshmallow gives for the fields, validators and schema options BTP's schemas use, as it writes
    them (its English)."""
    from marshmallow import RAISE, Schema, ValidationError, fields, validate

    said = set()
    for field in (fields.String, fields.Integer, fields.Float, fields.Boolean, fields.Date, fields.DateTime,
                  fields.List, fields.Nested, fields.Dict, fields.Url, fields.Email, fields.Field):
        messages = {}
        for klass in reversed(field.__mro__):
            messages.update(getattr(klass, "default_error_messages", {}))
        for name, template in messages.items():
            if name == "format":  # said when dumping an answer, never when loading a request
                continue
            said.add(template.format(obj_type=getattr(field, "OBJ_TYPE", "datetime"), awareness="naive",
                                     input="x"))
    checks = [(validate.Range(0.5, 1.0), 3), (validate.Range(min=0, min_inclusive=False), -1),
              (validate.Range(min=0, max=1, min_inclusive=False, max_inclusive=False), 2),
              (validate.Range(max=10), 11), (validate.Range(max=10, max_inclusive=False), 10),
              (validate.Range(min=1), 0), (validate.Length(max=3), "abcd"), (validate.Length(min=2), "a"),
              (validate.Length(min=1, max=3), ""), (validate.Length(equal=2), "a"), (validate.OneOf(["a", "b"]), "c"),
              (validate.Regexp(r"\d"), "x"), (validate.Email(), "x"), (validate.URL(), "x")]
    for check, value in checks:
        with pytest.raises(ValidationError) as caught:
            check(value)
        said.update(caught.value.messages)

    class Strict(Schema):
        class Meta:
            unknown = RAISE

    for data in ("not an object", {"nope": 1}):
        with pytest.raises(ValidationError) as caught:
            Strict().load(data)
        said.update(m for v in caught.value.messages.values() for m in v)
    return said


def test_every_marshmallow_message_has_its_key(known_keys):
    from trips.core.validation import keyed

    unkeyed = {text for text in marshmallow_messages() if keyed(text).key not in known_keys}
    assert unkeyed == set()
    said = keyed("Must be greater than or equal to 0.5 and less than or equal to 1.0.")
    assert i18n.say(said, "fr") == "Doit être supérieur ou égal à 0,5 et inférieur ou égal à 1."
    assert keyed("A sentence marshmallow never wrote.").key == "A sentence marshmallow never wrote."
