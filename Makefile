# quorate — run `make help` for the targets.
SHELL := /bin/bash
export PATH := $(PATH):/usr/local/go/bin:$(shell go env GOPATH 2>/dev/null)/bin

GO        ?= go
BIN       := bin/quorate
# The binary's version (quorate version, GET /v1/cluster): git's name for
# the commit, or the source's own when there is no git history.
VERSION       ?= $(shell git describe --tags --always --dirty 2>/dev/null)
GOFLAGS_BUILD := -trimpath $(if $(VERSION),-ldflags "-X github.com/quorate/quorate/internal/version.Binary=$(VERSION)")

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build bin/quorate.
	$(GO) build $(GOFLAGS_BUILD) -o $(BIN) ./cmd/quorate

.PHONY: run
run: build ## Run a single-node quorate on 127.0.0.1:7070 with data in ./quorate-data.
	./$(BIN) serve

STATICCHECK_VERSION := v0.8.2
MAX_FILE_LINES      := 600

.PHONY: lint
lint: ## gofmt, go vet and staticcheck (pinned, installed if missing), and no non-test Go file over 600 lines.
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags faultinject,unsafe_decide ./...
	$(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	staticcheck ./...
	staticcheck -tags faultinject,unsafe_decide ./...
	@long=$$(for f in $$(git ls-files '*.go' | grep -v '_test\.go$$'); do \
	    n=$$(wc -l < "$$f"); [ "$$n" -gt $(MAX_FILE_LINES) ] && echo "  $$f: $$n lines"; done); \
	  if [ -n "$$long" ]; then echo "files over $(MAX_FILE_LINES) lines (split them by responsibility):"; echo "$$long"; exit 1; fi

.PHONY: test
test: lint ## Lint, then every test with the race detector, including the model test and the fuzz seed corpus.
	GO=$(GO) ./scripts/gotest.sh -race -count=1 -timeout 8m ./...
	GO=$(GO) ./scripts/gotest.sh -race -count=1 -tags faultinject -run Fault ./cmd/quorate
	GO=$(GO) ./scripts/gotest.sh -race -count=1 -tags unsafe_decide -run Unsafe ./cluster

.PHONY: fuzz
fuzz: ## Fuzz the command decoder for FUZZTIME (default 60s).
	$(GO) test ./fsm -run '^$$' -fuzz FuzzDecode -fuzztime $(or $(FUZZTIME),60s)

.PHONY: bench
bench: ## Run the Go micro-benchmarks (bucket, fsm) COUNT times (default 6) into bench.out.
	$(GO) test -run '^$$' -bench . -benchmem -count $(or $(COUNT),6) ./bucket ./fsm | tee bench.out

.PHONY: loadtest
loadtest: build ## Start a throwaway node and drive it with scripts/loadgen (64 connections, 20 s).
	./scripts/loadtest.sh

.PHONY: image
image: ## Build the container image localhost/quorate:VERSION with podman (installed if missing): a static binary on an empty base, nothing pulled.
	VERSION=$(VERSION) ./scripts/image.sh

.PHONY: backup-bench
backup-bench: ## Back up a node holding CLIENTS clients (default 1,000,000), restore it, and require identical groups; prints times and sizes.
	./scripts/backup-bench.sh

.PHONY: fmt
fmt: ## Format the code; fails if anything was unformatted (for CI).
	gofmt -w $$(git ls-files '*.go')
	git diff --exit-code -- '*.go'

.PHONY: vet
vet: ## go vet.
	$(GO) vet ./...

.PHONY: tidy
tidy: ## go mod tidy; fails if go.mod or go.sum changed.
	$(GO) mod tidy
	git diff --exit-code -- go.mod go.sum

.PHONY: clean
clean: ## Remove build output (not data directories).
	rm -rf bin bench.out

.PHONY: id-window
id-window: ## Request ids at one group's top rate for 130 s (past their 2-minute window): none forgotten early, bytes per id.
	./scripts/idwindow.sh

.PHONY: flood
flood: ## The connection attacks against a throwaway secure 3-node cluster: ClientHello replay at RATE/s (4,000) on a raft port, CONNS (20,000) idle HTTP connections, GOSSIP_CONNS (1,000) oversized streams on a gossip port.
	./scripts/flood.sh

.PHONY: client-memory
client-memory: ## A node filled with CLIENTS clients (default 1,000,000), then reclaimed: live heap fresh, full (bytes per bucket) and after.
	./scripts/clientmem.sh

.PHONY: memattack
memattack: ## The decide-token memory attack against a throwaway node (DURATION=60s, MAX_MEMORY bytes, default 512 MiB).
	./scripts/memattack.sh

.PHONY: failover
failover: ## Kill a group leader of a throwaway 3-node cluster and time the failover (FAILOVER_ARGS="-runs 10").
	./scripts/failover.sh

.PHONY: bench-peers
bench-peers: ## In-memory ceiling vs quorate on 1 node (each log store) and 3, one load generator; PEERS=1 adds Redis, Gubernator (~12 min).
	./scripts/bench-peers.sh

.PHONY: bench-cluster
bench-cluster: bench-peers ## Alias of bench-peers, which also compares 1 node with 3.

.PHONY: jepsen
jepsen: ## Full fault suite: every nemesis mix on 3 and 5 nodes, then the negative control (root; ~18 min; SEED=n replays).
	$(GO) run ./jepsen/cmd/jepsen -mix full $(if $(SEED),-seed $(SEED))
	$(GO) run ./jepsen/cmd/jepsen -mix smoke -unsafe $(if $(SEED),-seed $(SEED))

# The release a rolling upgrade starts from: v0.14.0, the last one before
# cluster versions (a commit id, so that a clone without tags works too).
UPGRADE_FROM ?= 67142fb

.PHONY: jepsen-soak
jepsen-soak: ## SOAK seeds (default 3) of every mix and the upgrade roll, 25 s each, then one table of violations, worst ratios and unknown rates (root; ~6 min a seed).
	$(GO) run ./jepsen/cmd/jepsen -soak $(or $(SOAK),3) -upgrade-from $(UPGRADE_FROM) $(if $(SEED),-seed $(SEED))

.PHONY: upgrade-test
upgrade-test: ## Roll a 3-node cluster of UPGRADE_FROM (default 67142fb) to this tree's binary under load, with the fault suite's checkers (root; ~2 min).
	$(GO) run ./jepsen/cmd/jepsen -mix upgrade -upgrade-from $(UPGRADE_FROM) $(if $(SEED),-seed $(SEED))

.PHONY: jepsen-smoke
jepsen-smoke: ## One short fault run: 3 nodes, kill + partition + clock (root; about a minute).
	$(GO) run ./jepsen/cmd/jepsen -mix smoke $(if $(SEED),-seed $(SEED))
