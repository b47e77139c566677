# llmops.sglang: developer entry points. `make lab` runs the main job on a one-host lab,
# `make test` runs every test. Both install what they need (needs root: the lab boots
# systemd-nspawn hosts).
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
ROOT := $(abspath .)
VENV := $(ROOT)/.venv
BIN := $(VENV)/bin
LAB := $(ROOT)/tests/lab/bin/lab
export LLMOPS_CACHE ?= $(ROOT)/.cache
export ANSIBLE_COLLECTIONS_PATH := $(ROOT)/collections
export PATH := $(BIN):$(PATH)
LAB_PROFILE ?= rtxpro6000x8
# Empty: every scenario, longest first (tests/bin/molecule-all orders them).
SCENARIOS ?=
MOLECULE_JOBS ?= 2

.PHONY: help host-packages setup lab security-report lab-down test lint sanity units units-oldest molecule integration build-check bench bench-scale profile-site clean

help:
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

$(BIN)/ansible-playbook: requirements.txt
	python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements.txt
	touch $@

host-packages: ## Install the lab's host packages (debootstrap, systemd-nspawn, nftables, zstd, rsync, systemd-journal-remote, promtool)
	@command -v debootstrap >/dev/null && command -v systemd-nspawn >/dev/null && command -v nft >/dev/null && command -v rsync >/dev/null \
	  && command -v zstd >/dev/null && command -v promtool >/dev/null \
	  && [ -x /lib/systemd/systemd-journal-remote ] || \
	  { apt-get update -qq && apt-get install -y -qq --no-install-recommends debootstrap systemd-container nftables zstd rsync systemd-journal-remote \
	    prometheus; }

setup: host-packages $(BIN)/ansible-playbook ## Install host packages, the venv and the dependency collections
	@# Four independent installs, mostly downloads: at once, beside the longest (SGLang's venv); fails if any failed.
	rc=0; tests/lab/bin/install-collections & c=$$!; \
	  tests/lab/bin/fetch-sglang-source $(ROOT)/.cache/sglang-0.5.16-source & f=$$!; \
	  tests/bin/make-oldest-venv $(LLMOPS_CACHE)/ansible-oldest-venv & o=$$!; \
	  tests/lab/bin/make-sglang-venv $(ROOT)/.cache/sglang-venv || rc=$$?; \
	  for pid in $$c $$f $$o; do wait $$pid || rc=$$?; done; exit $$rc

lab: setup ## Boot a one-host lab (GPU profile $(LAB_PROFILE)) and run site.yml against it
	$(LAB) down lab1 >/dev/null
	$(LAB) up lab1 1 $(LAB_PROFILE)
	@# The lab host gets the runtime's stand-in wheels as an air-gapped wheelhouse.
	pip download -q --no-deps --only-binary=:all: -d $(LLMOPS_CACHE)/wheels/lab packaging==25.0
	install -d $(ROOT)/.lab/run/lab1/root/opt/sglang/wheelhouse
	cp $(LLMOPS_CACHE)/wheels/lab/*.whl $(ROOT)/.lab/run/lab1/root/opt/sglang/wheelhouse/
	$(LAB) inventory $(ROOT)/.lab/inventory.yml sglang_servers lab1
	ansible-playbook site.yml -i $(ROOT)/.lab/inventory.yml -i tests/lab/inventory/lab-vars.yml -e lab_root=$(ROOT)

security-report: lab ## systemd-analyze security of the deployed unit on the lab host (target <= 4.0)
	$(LAB) ssh lab1 systemd-analyze security --no-pager sglang-qwen.service | tail -n 1

lab-down: ## Destroy every lab host
	$(LAB) down-all

test: ## Run every test: setup, then the stages in two lanes at once (what CI runs)
	tests/bin/test-all

lint: setup ## ansible-lint (production profile)
	ansible-lint --offline

sanity: setup ## ansible-test sanity for Python 3.11
	tests/bin/sanity

units: setup ## Unit tests (pytest)
	pytest -q -n 2 tests/unit tests/real_gpu/sglang/test_harness.py

units-oldest: setup ## The oldest supported ansible-core (2.18): every playbook's syntax check, the plugin and module unit tests
	tests/bin/units-oldest $(LLMOPS_CACHE)/ansible-oldest-venv

molecule: setup ## Every molecule scenario (lab hosts), $(MOLECULE_JOBS) at a time
	JOBS=$(MOLECULE_JOBS) tests/bin/molecule-all $(SCENARIOS)

integration: setup ## Lab integration tests (8 hosts, SSH, clean destroy)
	pytest -q tests/integration

build-check: setup ## Build the collection, install it into an empty path, use it from there
	tests/bin/build-check

bench: security-report ## Benchmarks (printed numbers), after the lab's security report
	python tests/bench/bench_log_audit.py --size-mb $${BENCH_LOG_MB:-1024}
	python tests/bench/bench_wait_ready.py --size-mb $${BENCH_LOG_MB:-1024}
	python tests/bench/bench_journal.py --size-mb $${BENCH_JOURNAL_MB:-1024}
	python tests/bench/bench_sgl_kernel.py --repeat 3
	python tests/bench/bench_cuda_binary.py --repeat 3
	python tests/bench/bench_scale.py $(BENCH_SCALE_ARGS)

profile-site: setup ## Controller CPU and wall time per task of a no-change site.yml re-run on 8 lab hosts
	python tests/bench/profile_site.py

bench-scale: setup ## Play time of site.yml on 1, 4 and 8 lab hosts (serial, forks, pipelining) and a 100-host projection
	python tests/bench/bench_scale.py $(BENCH_SCALE_ARGS)

clean: lab-down
	rm -rf build .lab tests/output

.PHONY: real-gpu-wheels
real-gpu-wheels: ## Wheel folder for the real-SGLang run on a GPU machine without network (.real-gpu/, in parts)
	tests/real_gpu/sglang/wheels.sh $(ROOT)/.real-gpu
