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

# Everything, in two parts. First the unit and simulator tests in one worker (about 5 min: the
# simulator's tests run real processes on real clocks, and beside the integration tests, at a load of
# 20-30 on 2 cores, some lost races) and lint + sanity in a second, on the core the first leaves idle (half the
# machine was idle in that part, measured 2026-12-03), then EARLY below. Then the rehearsal
# platform's tests (walkthrough fidelity, deploy failure paths, fleet, faults, molecule
# scenarios, the docs' commands over SSH) in six pytest-xdist workers, over six groups that share nothing: node 1's tests,
# the fleet's (nodes 2-4), the fault matrix's sweep cases (node 5), its deploy cases, the secrets
# and Infera lifecycle tests (node 6), molecule's own nodes with the etcd role's test (node 7), and the user's path
# over SSH (node infera-ssh-1)
# (tests/conftest.py groups them).
# The platform comes up first, once, so no two workers build it. TEST_WORKERS=0 runs each part
# in one process.
TEST_WORKERS ?= 6
# Node 1's walkthrough, tags and preflight tests run in the first part, after lint, beside the unit
# tests: the walkthrough is the safety net, so it fails first, and they take node 1's group that
# much shorter in the second part, where both cores are busy throughout.
EARLY := tests/integration/test_walkthrough_fidelity.py \
  tests/integration/test_walkthrough_conformance.py tests/integration/test_tags.py \
  tests/integration/test_preflight.py
test: bootstrap
	@$(PLATFORM) up 7
	python -m pytest -q -p no:cacheprovider -ra --durations=10 \
	  $(if $(filter 0,$(TEST_WORKERS)),,-n 2 --dist loadscope) \
	  tests/unit tests/rehearsal/sim_tests tests/lint $(EARLY)
	python -m pytest -q -p no:cacheprovider -ra --durations=60 \
	  $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadscope) \
	  tests/integration $(addprefix --ignore=,$(EARLY))
