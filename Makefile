# The README's three commands: `make setup`, `make demo`, `make test`.
# demo and test run the set-up first when the environment is missing or its recipe changed.
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.hvdbench-setup-ok
# Open MPI refuses to start as root without these; CI and the emulated cluster run as root.
export OMPI_ALLOW_RUN_AS_ROOT = 1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM = 1

.PHONY: setup demo test test-unit test-integration test-oldest test-newest bench clean-demo

setup:
	bash scripts/setup.sh
	@touch $(STAMP)

$(STAMP): setup.cfg scripts/setup.sh scripts/build_horovod.sh scripts/patch_horovod.py
	bash scripts/setup.sh
	@touch $(STAMP)

demo: $(STAMP)
	bash scripts/demo.sh

# The suite on every core (README, "Tests"; tests/conftest.py says how the tests are shared out): one
# pytest call on $(WORKERS) pytest-xdist workers. WORKERS=0: in one process.
WORKERS ?= 2
# hvdbench's bytecode is compiled first (compileall redoes only what changed): where
# PYTHONDONTWRITEBYTECODE is set, as on the machine the suite is timed on, Python caches none, and
# every hvdbench process compiled what it imported (measured: a rank's 60 modules 0.11 CPU-s, a
# report's 97 0.25; one `make test` starts 497 hvdbench processes).
# $(call suite,FOLDERS,OPTIONS)
suite = $(PY) -m compileall -q hvdbench && $(PY) -m pytest -n $(WORKERS) --dist loadgroup --no-loadscope-reorder $(2) $(1)

test: $(STAMP)
	@$(call suite,tests/unit tests/integration,--durations=40)

test-unit: $(STAMP)
	@$(call suite,tests/unit)

test-integration: $(STAMP)
	@$(call suite,tests/integration)

bench: $(STAMP)
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

# CI's torch tiers: the oldest (2.11) and the newest (2.15) supported torch and no Horovod, each in a
# venv cached under ~/.cache/hvdbench; `pip install .[torch,dev]` into it, the engine unit tests, a
# ddp/fsdp sweep with its report, bench compute/flops; the newest also the levers' tests.
test-oldest:
	bash scripts/test_torch_tier.sh oldest

test-newest:
	bash scripts/test_torch_tier.sh newest
