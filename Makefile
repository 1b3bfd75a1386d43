# The two commands a newcomer needs are `make demo` and `make test` (see README.md).
SHELL := /bin/bash
export LANG := C.UTF-8
export LC_ALL := C.UTF-8
export PATH := $(CURDIR)/.venv/bin:$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
PLATFORM := tests/rehearsal/platform
CONC ?= 16 64 256

.PHONY: bootstrap platform-up platform-down demo test test-unit test-sim test-integration test-lint

bootstrap:
	@scripts/bootstrap

platform-up: bootstrap
	@$(PLATFORM) up 1

platform-down:
	@$(PLATFORM) down

demo: platform-up
	@scripts/demo $(CONC)

test-unit: bootstrap
	python -m pytest -q tests/unit

test-sim: bootstrap
	python -m pytest -q tests/rehearsal/sim_tests

test-integration: platform-up
	python -m pytest -q tests/integration

test-lint: bootstrap
	python -m pytest -q tests/lint

# Everything: unit and simulator tests first, alone (about 4 min: their waits run on real
# clocks, and beside the integration tests, at a load of 20-30 on 2 cores, some lost races);
# then lint + sanity and the rehearsal platform (walkthrough fidelity, deploy failure paths,
# fleet, faults, molecule scenarios) in five pytest-xdist workers, over six groups that share
# nothing: node 1's tests, the fleet's (nodes 2-4), the fault matrix's sweep cases (node 5), its
# deploy cases, the secrets and Infera lifecycle tests (node 6), molecule's own nodes, and lint (tests/conftest.py
# groups them; the sixth group goes to the first worker nearly done). The platform comes up
# first, once, so no two workers build it. TEST_WORKERS=0 runs the second part in one process too.
TEST_WORKERS ?= 5
test: bootstrap
	@$(PLATFORM) up 6
	python -m pytest -q -p no:cacheprovider -ra tests/unit tests/rehearsal/sim_tests
	python -m pytest -q -p no:cacheprovider -ra --durations=60 $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadscope) \
	  tests/lint tests/integration
