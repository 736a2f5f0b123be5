# doclog — `make` prints this help.
.DEFAULT_GOAL := help
SHELL := /bin/bash
GO ?= go

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[1m%-12s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: run
run: ## Run doclog locally with embedded defaults (installs what is missing)
	@scripts/run.sh

.PHONY: test
test: ## Run every test against real Postgres, Kafka and ClickHouse (installs and starts them)
	@scripts/test.sh

.PHONY: build
build: ## Build the binaries into bin/
	$(GO) build -o bin/ ./cmd/...

.PHONY: lint
lint: ## gofmt and go vet
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...

.PHONY: bench
bench: ## Run the Go benchmarks against a real Postgres with fsync on
	@scripts/bench.sh

.PHONY: bench-pipeline
bench-pipeline: ## Pipeline benchmark (docs/benchmarks.md): doclogctl bench --embedded --baseline, both modes, 3 runs each, on throwaway Postgres (fsync on) and Kafka
	@scripts/bench-pipeline.sh

.PHONY: bench-latency
bench-latency: ## Latency target (p99 to READ_READY at half the peak rate): closed-loop single runs, then open-loop runs at half their median rate
	@HALF_PEAK=1 MODES=single scripts/bench-pipeline.sh

.PHONY: bench-w1
bench-w1: ## W1 fixed (200 × 50 = 10,000 operations), the Powerhouse reactor and doclog side by side on one Postgres, both modes; DATABASE_URL and KAFKA_SEEDS to reuse running services
	@scripts/bench-reference.sh

.PHONY: bench-rebuild
bench-rebuild: ## Rebuild of docview and the indexer from a log of OPS operations (default 1,000,000) against a raw COPY of the same rows, in one run
	@scripts/bench-rebuild.sh

.PHONY: soak
soak: ## Soak (docs/benchmarks.md): roles as processes at half the peak for DURATION (default 30m), CSV and PNG of memory, CPU, p99 and lag, flat or exit 1; RATE= skips the peak run
	@DURATION="$(DURATION)" RATE="$(RATE)" scripts/soak.sh

.PHONY: bench-cluster
bench-cluster: ## Pipeline benchmark on three brokers (replication 3) with every link through a 1 ms proxy, alternated with loopback runs: ratios and p99 at half the cluster's peak
	@scripts/bench-cluster.sh

.PHONY: chaos
chaos: ## Chaos run (docs/reliability.md): roles as processes under kill -9, broker and Postgres restarts, a rebalance, cuts; SEED=n or CHAOS_SEEDS="1 2 3 4 5"
	@SEED="$(SEED)" CHAOS_SEEDS="$(CHAOS_SEEDS)" scripts/chaos.sh

.PHONY: clean
clean: ## Remove build output and cached downloads
	rm -rf bin .cache
