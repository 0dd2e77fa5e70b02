# BTP — the two set-up commands: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat requirements.txt | cksum | cut -d' ' -f1)
PYTEST_ARGS ?=
# The message catalogues (trips/core/i18n.py: alerts.po, pages.po): .po sources in the repo, .mo compiled here
# (gitignored).
CATALOGUES := $(patsubst %.po,%.mo,$(wildcard translations/*/LC_MESSAGES/*.po))

.PHONY: run test bench lint clean catalogues

$(STAMP): requirements.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

catalogues: $(CATALOGUES)

# translations/<locale>/LC_MESSAGES/<domain>.po → .mo; the locale is the path's second part.
%.mo: %.po
	$(BIN)/pybabel compile --statistics -l $(word 2,$(subst /, ,$<)) -i $< -o $@

run: $(STAMP) catalogues
	$(BIN)/flask --app app serve

test: $(STAMP) catalogues
	$(BIN)/python -m pytest $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r bench/requirements.txt
	$(BIN)/python bench/bench_gpx.py
	$(BIN)/python bench/bench_osm.py
	$(BIN)/python bench/bench_analysis.py

lint: $(STAMP)
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) .pytest_cache
	rm -f $(CATALOGUES)
