# Two entry points for a fresh clone (see README.md; the docs site: make docs):
#   make demo   set up .venv, then run the whole loop on the embedded CPU default
#   make test   set up .venv, then run the full test suite
# Everything installs into ./.venv; torch is the CPU wheel pinned in pyproject.

PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
# Demo knobs (override on the command line, e.g. make demo BUDGET=20m)
# (50 steps per run instead of the seed's 100, and every arm evaluated on the full
# 1000-example eval split so all arms pair on the same examples; both recorded in run.json)
BUDGET ?= 12m
DEMO_FLAGS ?= --model selfimprove/tiny-arith --batch-size 256 --steps-per-run 50 --eval-examples 1000 \
	--budget $(BUDGET) --max-iters 3

.PHONY: setup demo test test-quick test-faults bench student docs docs-reference docs-serve clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e ".[local,plots,dev,docs]"
	touch $@

demo: setup
	OMP_WAIT_POLICY=PASSIVE $(BIN)/selfimprove run selfimprove-arith $(DEMO_FLAGS) --teacher examples/arith_teacher.py:ArithTeacher

# Two pytest workers, one test file each at a time (--dist loadfile keeps a module's shared
# fixtures in one worker). Most tests keep one core busy (training subprocesses, verifiers
# imports), so a second worker roughly halves the wall time on 2 cores. TEST_WORKERS=0 runs serially.
TEST_WORKERS ?= 2
PYTEST = OMP_WAIT_POLICY=PASSIVE $(BIN)/python -m pytest $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile)

test: setup
	$(PYTEST)

test-quick: setup
	$(PYTEST) -m "not slow"

# The kill -9 fault suite alone (docs/how-to/resume.md); `make test` runs it too.
test-faults: setup
	$(BIN)/python -m pytest -m fault -rA

# Rebuild the shipped built-in student from its warm-up recipe (after changing
# src/selfimprove_arith/student/warmup.py; ~5 min on 2 cores) and re-measure its profile.json.
student: setup
	OMP_WAIT_POLICY=PASSIVE $(BIN)/selfimprove student build

bench: setup
	$(BIN)/python bench/engine.py
	$(BIN)/python bench/latency.py
	$(BIN)/python bench/iterate.py
	OMP_WAIT_POLICY=PASSIVE $(BIN)/python bench/lift.py

# The docs site (mkdocs.yml, docs/) into site/, failing on any warning (a broken link, a page
# missing from the nav). docs-reference regenerates the pages made from the code (the CLI
# reference from the Typer app, the run-dir files from the pydantic models); tests/test_docs.py
# fails while the committed ones differ from what the code generates.
# (NO_MKDOCS_2_WARNING: mkdocs-material's banner about its successor, not a build warning)
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

docs-reference: setup
	$(BIN)/python docs/gen_reference.py

docs-serve: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

clean:
	rm -rf $(VENV) .pytest_cache site
