# Usage ledger for fleets of LLM agents. `make run` and `make test` are the
# two commands a newcomer needs; see README.md.

GO      ?= go
BIN     := bin
RUN_DIR ?= data/run

.PHONY: all build run test race vet fmt fmt-check tidy-check fuzz bench gobench clean node-deps

all: build

build:
	$(GO) build -o $(BIN)/ ./cmd/...

# Starts the embedded NATS server and the aggregator, runs a simulated fleet
# that produces retries with billed failed attempts, waits until the ledger
# has caught up, prints the report and stops everything cleanly.
run: build
	RUN_DIR=$(RUN_DIR) BIN=$(BIN) ./scripts/run.sh

# The example modules: an agent and a test in other modules, which use
# only the public packages (the Go toolchain refuses internal/ imports
# across modules).
EXAMPLES := examples/agent examples/embedded-test

# go vet, then every test with the race detector, of the module and of
# each example module. The tests wait on conditions, not time; the only
# clock is go test's per-package timeout, raised from 10 to 30 minutes:
# internal/projection takes about 2.5 minutes on 2 idle cores, but over
# 10 when other jobs keep the cores busy (GOMAXPROCS=1 and two CPU hogs
# on a shared machine), and go test then panics instead of failing a test.
TEST_TIMEOUT ?= 30m
test: vet
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...
	for d in $(EXAMPLES); do (cd $$d && $(GO) vet ./... && $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...) || exit 1; done

# The npm packages of the gateway's Node test (e2e/node: the official
# clients of OpenAI, Anthropic and Gemini), from its package-lock.json.
# Without them (or without node) that test skips, except under
# LEDGER_REQUIRE_NODE=1, as in CI.
node-deps:
	cd e2e/node && npm ci --no-audit --no-fund

vet:
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

tidy-check:
	$(GO) mod tidy -diff
	for d in $(EXAMPLES); do (cd $$d && $(GO) mod tidy -diff) || exit 1; done

# A minute of fuzzing of the event decoder (seed corpus in
# internal/events/testdata/fuzz).
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzDecode -fuzztime 60s ./internal/events/

# The benchmark harness of the performance targets (cmd/bench): publish,
# raw consume, aggregator catch-up, rebuild, verify (the built aggregator
# verify command, as it ships), peak RSS, middleware overhead, the
# gateway's overhead against the fake provider called directly (about a
# minute; BENCH_GATEWAY=only runs just that, =off skips it); results
# under bench/results/. Quick run: make bench BENCH_SCALE=0.1 (also
# BENCH_EVENTS, BENCH_WORKLOADS=a,b,c). The fleet headline (8 publisher
# processes against a tier limit and through an outage, fleet limits off
# and on; about 45 s) and the fleet cases (three providers, Gemini's limit
# inferred then configured; a healthy run after one ended mid-outage;
# BENCH_FLEET_RUNS times each, default 5, about 40 s a time) run too:
# BENCH_FLEET=off skips them, BENCH_FLEET=only runs them alone,
# BENCH_FLEET_PARTS=cases|headline one part. The upload flood (20 chunked
# 100 MiB uploads at once, then two rounds more with 200 connections
# declaring 32 MiB held; the gateway's peak RSS; about 10 s) runs too:
# BENCH_UPLOAD=off skips it, =only runs it alone; BENCH_GATEWAY_BIN=path
# measures another build of the gateway. Each workload is also published
# and caught up on a server with sync_interval always (the durable
# default) to compare with the old default (fsync every 2 minutes) in the
# same run: BENCH_DURABLE=false skips it. The costs of pricing (at most 5 %
# of the catch-up rate) and of rollups (10 %) compare the catch-up with
# and without each, interleaved over BENCH_ROUNDS rounds (default 3): the
# verdict is the median paired cost, inconclusive when the rounds disagree
# by more than the target. BENCH_LABELS=team or team,user labels every
# event (ten teams; a user for every ten sessions besides): the rollups'
# cost grows with the label sets a batch touches. BENCH_LEASE_TTL sets the children's lease TTL
# (default: the production 10 s). Go benchmarks: make gobench.
bench:
	BENCH_SCALE=$(BENCH_SCALE) BENCH_EVENTS=$(BENCH_EVENTS) BENCH_WORKLOADS=$(BENCH_WORKLOADS) BENCH_GATEWAY=$(BENCH_GATEWAY) BENCH_FLEET=$(BENCH_FLEET) BENCH_UPLOAD=$(BENCH_UPLOAD) BENCH_GATEWAY_BIN=$(BENCH_GATEWAY_BIN) BENCH_DURABLE=$(BENCH_DURABLE) BENCH_ROUNDS=$(BENCH_ROUNDS) BENCH_LEASE_TTL=$(BENCH_LEASE_TTL) BENCH_LABELS=$(BENCH_LABELS) $(GO) run ./cmd/bench

clean:
	rm -rf $(BIN) data

# Go benchmarks of the hot pieces (decode, merge, middleware, publisher,
# catch-up, rebuild, and report --by on the rollups of a 1M-request
# ledger: read, group, order and print).
gobench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 1x ./internal/projection/
	$(GO) test -run '^$$' -bench . -benchmem ./internal/events/ ./internal/retry/ ./internal/breaker/
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 3x ./internal/report/
