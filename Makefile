# Two entry points for a fresh clone (see README.md; the docs site: make docs):
#   make demo   set up .venv, then run the whole loop on the embedded CPU default
#   make test   set up .venv, then run the full test suite
# Everything installs into ./.venv; torch is the CPU wheel pinned in pyproject.

PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
comma  := ,
space  := $(subst ,, )
# Demo knobs (override on the command line, e.g. make demo BUDGET=20m). max-iters is what ends the
# demo's Phase 3; the budget is only a safety net, set wide so that a slow or busy host runs the same
# iterations and prints the same digits (a wall-clock stop would make the figures depend on the host).
# (50 steps per run instead of the seed's 100, and every arm evaluated on the full
# 1000-example eval split so all arms pair on the same examples; both recorded in run.json)
BUDGET ?= 60m
DEMO_FLAGS ?= --model selfimprove/tiny-arith --batch-size 256 --steps-per-run 50 --eval-examples 1000 \
	--budget $(BUDGET) --max-iters 3

.PHONY: setup lock demo demo-record test test-deps test-quick test-latest test-faults bench student docs docs-reference docs-serve clean

setup: $(VENV)/.installed

# The extras `make setup` installs, at the versions in uv.lock (Linux x86_64, CPython 3.11, torch's
# CPU wheel from /opt/wheels as on the project's machines). uv itself is pip-installed into the venv
# first (it is in the dev extra, so the sync keeps it at the locked version). Where the CPU wheel is not
# on disk, the lock cannot apply: setup says so in one line and installs the ranges in pyproject.toml.
EXTRAS ?= local plots dev docs
TORCH_WHEEL = $(wildcard /opt/wheels/torch-2.13.0+cpu-cp311-*.whl)

$(VENV)/.installed: pyproject.toml uv.lock
	$(PYTHON) -m venv $(VENV)
ifneq ($(TORCH_WHEEL),)
	$(BIN)/python -m pip install -q "uv>=0.9,<0.14"
	UV_PROJECT_ENVIRONMENT=$(VENV) $(BIN)/uv sync --locked $(addprefix --extra ,$(EXTRAS))
else
	@echo "make setup: no /opt/wheels/torch-2.13.0+cpu wheel here, so uv.lock (made for it) does not apply; installing the version ranges of pyproject.toml instead (figures may differ from the README's in the last digits)"
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e ".[$(subst $(space),$(comma),$(EXTRAS))]"
endif
	touch $@

# Refresh uv.lock: the newest versions the ranges allow, released at least 7 days ago
# ([tool.uv] exclude-newer in pyproject.toml). Then re-run `make test` and `make demo-record`.
lock:
	uv lock --upgrade

# Early warning for the next transformers (not part of CI): a second venv with the NEWEST versions
# the ranges allow (no lock, no cooldown), then the quick tests in it.
LATEST ?= .venv-latest
test-latest:
	rm -rf $(LATEST)
	$(PYTHON) -m venv $(LATEST)
	$(LATEST)/bin/python -m pip install -q torch==2.13.0
	$(LATEST)/bin/python -m pip install -q --upgrade -e ".[$(subst $(space),$(comma),$(EXTRAS))]"
	$(LATEST)/bin/python -m pip list 2>/dev/null | grep -iE "^(torch|transformers|tokenizers|verifiers|datasets) "
	OMP_WAIT_POLICY=PASSIVE $(LATEST)/bin/python -m pytest -n $(TEST_WORKERS) --dist loadfile -m "not slow"

demo: setup
	OMP_WAIT_POLICY=PASSIVE $(BIN)/selfimprove run selfimprove-arith $(DEMO_FLAGS) --teacher examples/arith_teacher.py:ArithTeacher

# Run the demo and record its verdict and table in bench/out/demo.txt and the README in one step
# (after `make lock`, or anything that moves the figures; tests/test_demo_record.py checks the two agree).
demo-record: setup
	$(BIN)/python bench/demo_record.py

# Two pytest workers, one test file each at a time (--dist loadfile keeps a module's shared
# fixtures in one worker). Most tests keep one core busy (training subprocesses, verifiers
# imports), so a second worker roughly halves the wall time on 2 cores. TEST_WORKERS=0 runs serially.
TEST_WORKERS ?= 2
PYTEST = OMP_WAIT_POLICY=PASSIVE $(BIN)/python -m pytest $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile)

test: setup test-deps
	$(PYTEST)

# What the tests need from Debian, installed when missing and we are root with apt-get (CI runs
# `make test` as root on a fresh machine): slurm-wlm and munge for the one-node SLURM cluster of
# tests/slurm_cluster.py, chromium for the report page's browser test (tests/test_report_page.py).
# Anywhere else this says so in one line and those tests skip, each with one line saying why.
TEST_DEBS = $(if $(shell command -v sbatch >/dev/null 2>&1 && test -x /usr/sbin/munged && echo y),,slurm-wlm munge) \
	$(if $(shell command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 && echo y),,chromium)
test-deps:
	@if [ -z "$(strip $(TEST_DEBS))" ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "test-deps: installing $(strip $(TEST_DEBS)) (apt-get)"; \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(TEST_DEBS) >/dev/null; } \
	    || echo "test-deps: apt-get could not install $(strip $(TEST_DEBS)): the tests that need them will skip"; \
	else echo "test-deps: $(strip $(TEST_DEBS)) missing and not root with apt-get: the tests that need them will skip"; fi

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
