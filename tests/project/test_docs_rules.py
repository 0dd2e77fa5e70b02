"""The project carries its own rules: no comment, docstring or text file sends the reader to a document outside the
repository (the product's digests and decision records; a section sign that names no public standard), every
`docs/RULES.md "<heading>"` citation names a heading of docs/RULES.md, and every path the docs name exists."""
from __future__ import annotations

import ast
import io
import os
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "docs" / "RULES.md"
THIS = Path(__file__).resolve()

DIRECTORIES = ("trips", "mcp", "oauth", "jobs", "migrations", "templates", "tests", "bench", "deploy", "docs",
               "static", ".ci")
TOP_FILES = ("app.py", "wsgi.py", "gunicorn.conf.py", "README.md", "Makefile")
PRUNED = {"node_modules", "__pycache__", "out", "instance", ".cache"}  # generated, never written by hand
TEXT_SUFFIXES = {".md", ".html", ".txt", ".conf", ".service", ".example", ".ini", ".toml", ".cfg", ".sh",
                 ".mjs", ".js", ".lua", ".mako", ".yml", ".yaml", ".css"}
TEXT_NAMES = {"Makefile", "run"}

OUTSIDE = re.compile(
    r"\bdomain\.md\b|\bcontracts\.md\b|\bmcp-protocol\.md\b|\bPRODUCT\.md\b|(?<!docs/)\bARCHITECTURE(?:-anchors)?\.md\b"
    r"|\bADR[- ]?\d{2,3}\b"
    r"|(?<![\w%/-])C\d{1,3}(?![\w/-])")  # contract numbers: C8, C42, C107
# Not contract numbers: the C0/C1 control sets and percent-encoded bytes (%C3%B4).
NOT_CONTRACTS = re.compile(r"\bC0/C1\b|%[0-9A-Fa-f]{2}")
SECTION = re.compile(r"§")
# A section sign is fine in a text that names the public standard it belongs to.
STANDARD = re.compile(r"\bRFC ?\d{3,5}\b|\bOAuth 2\.1\b|\bCSP ?3\b|\bOpenAPI 3\.\d\b|\bJSON-RPC 2\.0\b"
                      r"|\b2020-12\b|\bI-JSON\b|\bMCP specification\b|\bJSON Schema\b")
CITATION = re.compile(r'docs/RULES\.md "([^"\n]+)"')
BARE = re.compile(r'RULES\.md(?! ")')  # in code comments a citation always names its heading
# A path into the repository as the docs write it (`trips/core/epochs.py`, tests/oauth/), not followed by a wildcard.
DOC_PATH = re.compile(r"(?<![\w./<{$-])((?:trips|mcp|oauth|jobs|httpworker|tests|bench|docs|deploy|templates|static"
                      r"|migrations|translations|\.ci)/[\w./-]*[\w/])(?![\w*])")
GENERATED = ("bench/out", "translations/keys.pot")  # made by `make bench` and `make messages`, never committed
DOCS = ("README.md", "bench/README.md", *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")))
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def project_files() -> list[Path]:
    files = [ROOT / name for name in TOP_FILES if (ROOT / name).is_file()]
    for top in DIRECTORIES:
        for folder, dirs, names in os.walk(ROOT / top):
            dirs[:] = sorted(d for d in dirs if d not in PRUNED and not d.startswith(".venv"))
            files += [Path(folder) / n for n in sorted(names)]
    return [f for f in files if f.resolve() != THIS and (f.suffix == ".py" or f.suffix in TEXT_SUFFIXES
                                                          or f.name in TEXT_NAMES)]


def python_texts(path: Path) -> list[tuple[int, str]]:
    """(first line, text) of each comment block (consecutive comment lines) and each docstring."""
    source = path.read_text(encoding="utf-8")
    out: list[tuple[int, str]] = []
    block_start, block, last = 0, [], -2
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type != tokenize.COMMENT:
            continue
        line = tok.start[0]
        if line != last + 1 and block:
            out.append((block_start, "\n".join(block)))
            block = []
        if not block:
            block_start = line
        block.append(tok.string)
        last = line
    if block:
        out.append((block_start, "\n".join(block)))
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc is not None:
                out.append((node.body[0].lineno, doc))
    return out


def other_texts(path: Path) -> list[tuple[int, str]]:
    """(first line, paragraph) of a text file, paragraphs split on blank lines."""
    out, start, lines = [], 1, []
    for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
        if line.strip():
            if not lines:
                start = number
            lines.append(line)
        elif lines:
            out.append((start, "\n".join(lines)))
            lines = []
    if lines:
        out.append((start, "\n".join(lines)))
    return out


def texts():
    """(path relative to the root, first line, text, is Python) of every comment, docstring and paragraph."""
    for path in project_files():
        python = path.suffix == ".py"
        for line, text in (python_texts(path) if python else other_texts(path)):
            yield path.relative_to(ROOT).as_posix(), line, text, python


def outside_citations(text: str) -> list[str]:
    found = [m.group() for m in OUTSIDE.finditer(NOT_CONTRACTS.sub(" ", text))]
    if SECTION.search(text) and not STANDARD.search(text):
        found.append("§ without a standard's name")
    return found


def rules_headings() -> set[str]:
    return {m.group(1).strip() for m in HEADING.finditer(RULES.read_text(encoding="utf-8"))}


def test_the_rules_page_exists_and_its_headings_are_unique():
    text = RULES.read_text(encoding="utf-8")
    headings = [m.group(1).strip() for m in HEADING.finditer(text)]
    assert len(headings) > 20
    assert len(headings) == len(set(headings)), sorted(h for h in headings if headings.count(h) > 1)


def test_no_comment_or_docstring_cites_a_document_outside_the_repository():
    hits = [f"{path}:{line}: {', '.join(found)}" for path, line, text, _ in texts()
            if (found := outside_citations(text))]
    assert not hits, "cite docs/RULES.md \"<heading>\" (or a public standard) instead:\n" + "\n".join(hits)


def test_every_rules_citation_names_a_heading_of_the_rules_page():
    headings = rules_headings()
    wrong = []
    for path, line, text, python in texts():
        if path == "docs/RULES.md":
            continue  # the page describes the citation form with a placeholder
        wrong += [f"{path}:{line}: no heading {m.group(1)!r}" for m in CITATION.finditer(text)
                  if m.group(1) not in headings]
        if python:
            wrong += [f"{path}:{line}: cite a heading, on the same line: docs/RULES.md \"<heading>\""
                      for _ in BARE.finditer(text)]
    assert not wrong, "\n".join(wrong)


def test_the_checks_see_what_they_are_meant_to():
    """The negative control: the patterns catch each form of outside citation and leave the look-alikes."""
    for cited in ("see domain.md §5.4", "(ADR-068: an absent group)", "C42: ownership first", "contracts C107",
                  "Contracts C8's formula", "PRODUCT.md \"Configuration\"", "ARCHITECTURE.md", "mcp-protocol.md",
                  "the riding rules (§6)"):
        assert outside_citations(cited), cited
    for fine in ("RFC 9110 §13.1.1: a strong tag", "C0/C1 controls", "h%C3%B4tel", "°C or km/h", "RFC 8259\n§8.2",
                 'docs/RULES.md "Pacing"', "the CO2 of a ride", "OAuth 2.1 §7.5.2", "docs/ARCHITECTURE.md"):
        assert not outside_citations(fine), fine
    assert CITATION.findall('a day (docs/RULES.md "Rider time") and docs/RULES.md "Pacing"') == ["Rider time", "Pacing"]
    assert BARE.search("see docs/RULES.md\n# \"Pacing\"") and not BARE.search('docs/RULES.md "Pacing"')
    assert rules_headings() >= {"Pacing", "Write guards", "Differences from the original product"}


def named_paths(text: str) -> list[str]:
    """The repository paths a doc names, generated outputs left out."""
    return [p for m in DOC_PATH.finditer(text) if not (p := m.group(1).rstrip(".")).startswith(GENERATED)]


def test_every_path_the_docs_name_exists():
    missing = [f"{doc}:{number}: {path}" for doc in DOCS
               for number, line in enumerate((ROOT / doc).read_text(encoding="utf-8").split("\n"), start=1)
               for path in named_paths(line) if not (ROOT / path).exists()]
    assert not missing, "a doc names a path the tree does not have:\n" + "\n".join(missing)


def test_the_path_check_sees_what_it_is_meant_to():
    """The negative control: a moved file is caught; outputs, wildcards and placeholders are not paths."""
    assert named_paths("the worker (trips/core/httpworker.py, `tests/test_x.py`)") == ["trips/core/httpworker.py",
                                                                                         "tests/test_x.py"]
    assert named_paths("bench/out/mcp.json, every bench/bench_*.py, tests/trips/<package>/") == ["tests/trips/"]
    assert not (ROOT / "trips/core/httpworker.py").exists()
