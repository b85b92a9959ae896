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
# (50 steps per run instead of the skill's procedure's 100, and every arm evaluated on the full
# 1000-example eval split so all arms pair on the same examples; both recorded in run.json)
BUDGET ?= 60m
DEMO_FLAGS ?= --model selfimprove/tiny-arith --batch-size 256 --steps-per-run 50 --eval-examples 1000 \
	--budget $(BUDGET) --max-iters 3

.PHONY: setup lock demo demo-record test test-deps test-quick test-latest test-faults bench student docs docs-reference docs-serve clean screenshots

setup: $(VENV)/.installed

# The extras `make setup` installs, at the versions in uv.lock (Linux x86_64, CPython 3.11, torch's
# CPU wheel from /opt/wheels as on the project's machines). uv itself is pip-installed into the venv
# first (it is in the dev extra, so the sync keeps it at the locked version). Where the lock cannot
# apply (another Python, another OS or machine, no wheel on disk), setup says so in one line and
# installs the ranges in pyproject.toml, with torch's CPU build (TORCH_PIP below), never the CUDA one.
EXTRAS ?= local plots dev docs
# PYTHON= picks the interpreter; selfimprove supports CPython 3.11 to 3.13 and refuses others in one line.
# PY_VER (e.g. 3.12) and UNAME_S / UNAME_M are read off the machine; tests/test_lock.py sets them to
# check each branch with `make -n`.
PY_VER ?= $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
PY_TAG  = cp$(subst .,,$(PY_VER))
PY_OK   = $(filter 3.11 3.12 3.13,$(PY_VER))
UNAME_S ?= $(shell uname -s)
UNAME_M ?= $(shell uname -m)
# The lock's torch is this file (uv.lock records its path), so the lock applies only with it and 3.11.
LOCK_WHEEL = $(if $(filter cp311,$(PY_TAG)),$(wildcard /opt/wheels/torch-2.13.0+cpu-cp311-cp311-*_$(UNAME_M).whl))
# Without the lock, torch 2.13.0's CPU build for this interpreter: the wheel on disk when there is one;
# on Linux from PyTorch's CPU index ONLY (it also serves torch's dependencies): PyPI's Linux x86_64 torch
# is a CUDA build of several GB with 17 nvidia packages, and with PyPI as an extra index pip could pick
# it; on macOS PyPI's (a CPU build already). torch is installed first and alone, so the extras' install
# after it finds torch==2.13.0 satisfied (a +cpu local version matches ==2.13.0) and fetches no other.
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
LOCAL_WHEEL = $(firstword $(wildcard /opt/wheels/torch-2.13.0+cpu-$(PY_TAG)-$(PY_TAG)-*_$(UNAME_M).whl))
TORCH_PIP = $(if $(LOCAL_WHEEL),$(LOCAL_WHEEL),$(if $(filter Darwin,$(UNAME_S)),torch==2.13.0,$(if $(filter Linux,$(UNAME_S)),torch==2.13.0 --index-url $(TORCH_INDEX))))
TORCH_FROM = $(if $(LOCAL_WHEEL),$(LOCAL_WHEEL),$(if $(filter Darwin,$(UNAME_S)),PyPI (its macOS torch is a CPU build),$(TORCH_INDEX) (PyTorch's CPU wheels)))
define CHECK_PYTHON
	@if [ -z "$(PY_OK)" ]; then echo "make setup: PYTHON=$(PYTHON) is $(if $(PY_VER),Python $(PY_VER),not a Python that runs here); selfimprove needs CPython 3.11, 3.12 or 3.13: give one, e.g. make setup PYTHON=python3.11"; exit 1; fi
	@if [ -z '$(TORCH_PIP)' ]; then echo "make setup: no CPU build of torch 2.13.0 is known for $(UNAME_S) $(UNAME_M); install torch 2.13.0 into $(VENV) by hand, then make setup again"; exit 1; fi
endef

# --compile-bytecode: uv, unlike pip, installs no .pyc files, and Python cannot write them where
# PYTHONDONTWRITEBYTECODE is set (as on the project's machines): then every process the tool starts (an
# engine job, a gate, the generator) compiles torch, transformers and verifiers again, ~16 CPU-s each
# (measured: the test suite's small whole loop took 286 s without them, 152 s with them).
$(VENV)/.installed: pyproject.toml uv.lock
	$(CHECK_PYTHON)
	$(PYTHON) -m venv $(VENV)
ifneq ($(LOCK_WHEEL),)
	$(BIN)/python -m pip install -q "uv>=0.9,<0.14"
	UV_PROJECT_ENVIRONMENT=$(VENV) $(BIN)/uv sync --locked --compile-bytecode $(addprefix --extra ,$(EXTRAS))
else
	@echo "make setup: uv.lock is for CPython 3.11 on Linux x86_64 with /opt/wheels' torch, not this Python $(PY_VER) on $(UNAME_S) $(UNAME_M); installing the version ranges of pyproject.toml instead, torch's CPU build from $(TORCH_FROM) (figures may differ from the README's in the last digits)"
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q $(TORCH_PIP)
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
	$(CHECK_PYTHON)
	$(PYTHON) -m venv $(LATEST)
	$(LATEST)/bin/python -m pip install -q $(TORCH_PIP)
	$(LATEST)/bin/python -m pip install -q --upgrade -e ".[$(subst $(space),$(comma),$(EXTRAS))]"
	$(LATEST)/bin/python -m pip list 2>/dev/null | grep -iE "^(torch|transformers|tokenizers|verifiers|datasets) "
	OMP_WAIT_POLICY=PASSIVE $(LATEST)/bin/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not slow"

demo: setup
	OMP_WAIT_POLICY=PASSIVE $(BIN)/selfimprove run selfimprove-arith $(DEMO_FLAGS) --teacher examples/arith_teacher.py:ArithTeacher

# Run the demo and record its verdict and table in bench/out/demo.txt and the README in one step
# (after `make lock`, or anything that moves the figures; tests/test_demo_record.py checks the two agree).
demo-record: setup
	$(BIN)/python bench/demo_record.py

# Two pytest workers, one test file each at a time (--dist loadfile keeps a module's shared
# fixtures in one worker). Most tests keep one core busy (training subprocesses, verifiers
# imports), so a second worker roughly halves the wall time on 2 cores. TEST_WORKERS=0 runs serially.
# --no-loadscope-reorder: files start in tests/conftest.py's longest-first order, not xdist's by test count.
TEST_WORKERS ?= 2
PYTEST = OMP_WAIT_POLICY=PASSIVE $(BIN)/python -m pytest $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)

# compileall first: the project's own sources change with every commit, so setup cannot compile them, and where
# PYTHONDONTWRITEBYTECODE is set each of the suite's hundreds of Python processes would compile them again. A file that
# does not compile is left to the tests to report.
COMPILE_SOURCES = $(BIN)/python -m compileall -q -j 0 src tests envs examples >/dev/null || true

test: setup test-deps
	$(COMPILE_SOURCES)
	$(PYTEST) --durations=30

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
	$(COMPILE_SOURCES)
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
# reference from the Typer app, the run-dir files from the pydantic models, the gate rules page
# from real gate runs); tests/test_docs.py and tests/test_gate_rules_doc.py fail while the
# committed ones differ from what the code generates.
# (NO_MKDOCS_2_WARNING: mkdocs-material's banner about its successor, not a build warning)
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

docs-reference: setup
	$(BIN)/python docs/gen_reference.py
	$(BIN)/python docs/gen_gate_rules.py

docs-serve: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

clean:
	rm -rf $(VENV) .pytest_cache site

# The report page's pictures in docs/img (report-1280.png, report-390.png) from the run dir you name, e.g.
# `make screenshots RUN=runs/<demo run>` after `make demo`. Needs chromium (make test-deps installs it).
# SHOTS_DIR= puts them elsewhere (the test suite's check of this target does).
SHOTS_DIR ?= docs/img
screenshots: setup
	@if [ -z "$(RUN)" ]; then echo "make screenshots: name the run dir, e.g. make screenshots RUN=runs/<demo run>"; exit 2; fi
	$(BIN)/python bench/report_screenshots.py --run-dir "$(RUN)" --out-dir "$(SHOTS_DIR)"
