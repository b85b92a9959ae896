# Two entry points for a fresh clone (see README):
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

.PHONY: setup demo test test-deps test-quick test-faults bench student clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e ".[local,plots,dev]"
	touch $@

demo: setup
	OMP_WAIT_POLICY=PASSIVE $(BIN)/selfimprove run selfimprove-arith $(DEMO_FLAGS) --teacher examples/arith_teacher.py:ArithTeacher

# Two pytest workers, one test file each at a time (--dist loadfile keeps a module's shared
# fixtures in one worker). Most tests keep one core busy (training subprocesses, verifiers
# imports), so a second worker roughly halves the wall time on 2 cores. TEST_WORKERS=0 runs serially.
TEST_WORKERS ?= 2
PYTEST = OMP_WAIT_POLICY=PASSIVE $(BIN)/python -m pytest $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile)

test: setup test-deps
	$(PYTEST)

# The one-node SLURM cluster of tests/slurm_cluster.py needs slurm-wlm and munge (Debian). Installed
# here when missing and we are root (CI runs `make test` as root on a fresh machine); elsewhere the
# SLURM tests skip with one line saying why.
test-deps:
	@if ! command -v sbatch >/dev/null 2>&1 || ! test -x /usr/sbin/munged; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge; } \
	      || echo "test-deps: apt-get could not install slurm-wlm/munge: the SLURM tests will skip"; \
	  else echo "test-deps: slurm-wlm/munge missing and not root with apt-get: the SLURM tests will skip"; fi; \
	fi

test-quick: setup
	$(PYTEST) -m "not slow"

# The kill -9 fault suite alone (README "What a crash costs"); `make test` runs it too.
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

clean:
	rm -rf $(VENV) .pytest_cache
