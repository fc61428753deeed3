# Quire's build. `make run` starts a single-node dev broker; `make test` is
# what CI runs (.ci/run): verify (gofmt, vet, go mod tidy, generated code,
# import boundaries, staticcheck, breaking proto changes), the unit tests
# with -race, and the end-to-end scripts (one node, then a 3-node cluster
# with leader kills). Every tool it needs is installed into ./bin at pinned
# versions by scripts/tools.sh.

GO        ?= go
BIN       := $(CURDIR)/bin
GRPCURL   := $(BIN)/grpcurl
CHAOS_BIN := $(BIN)/quire-chaosfs
PKGS      := ./...
TEST_TIMEOUT ?= 12m
FUZZTIME  ?= 20s

.PHONY: all build run test unit e2e e2e-python compose image vet bench perf chaos chaos-bin fuzz stress proto verify docs tools clean

all: build

# Every build that is not -race (verify's vet and staticcheck, the
# binary, the fault suite's server, the image) compiles with the same
# settings, so each package is compiled once on a fresh machine and the
# rest come from the build cache: CGO_ENABLED=0 (the image's binary is
# static) and -trimpath (the binary names its sources by module path,
# not by where the tree is, so a build in another copy of the tree,
# as scripts/e2e_make_run.sh runs `make run` in a new temporary one,
# comes from the cache too; without it go keys each package's compile
# on its directory). The -race tests need cgo and are compiled apart.
NOCGO := CGO_ENABLED=0 GOFLAGS=-trimpath

build:
	$(NOCGO) $(GO) build -o $(BIN)/quire ./cmd/quire

run: build
	$(BIN)/quire server --dev

test: verify unit e2e compose

# make test's verify has run go vet ./... (every analyzer), so its unit
# tests skip the subset of vet that go test runs before each package.
test: UNIT_VET := -vet=off

# go test starts packages in the order they are named (two at a time on 2
# cores), so the slowest, testcluster (over two minutes of in-process
# clusters), goes first instead of near the end of ./..., where it could
# run on alone after the rest had finished; named twice, it runs once.
UNIT_PKGS = $(if $(filter ./...,$(PKGS)),./testcluster $(PKGS),$(PKGS))

unit:
	$(GO) test -race $(UNIT_VET) -timeout $(TEST_TIMEOUT) $(UNIT_PKGS)

e2e: build chaos-bin
	scripts/tools.sh grpcurl
	QUIRE_BIN=$(BIN)/quire GRPCURL=$(GRPCURL) scripts/e2e_make_run.sh
	QUIRE_BIN=$(BIN)/quire GRPCURL=$(GRPCURL) scripts/e2e.sh
	QUIRE_BIN=$(BIN)/quire GRPCURL=$(GRPCURL) scripts/e2e_cluster.sh
	QUIRE_BIN=$(BIN)/quire scripts/e2e_reassign.sh
	QUIRE_BIN=$(BIN)/quire GRPCURL=$(GRPCURL) scripts/e2e_security.sh
	QUIRE_BIN=$(BIN)/quire scripts/e2e_metrics.sh
	QUIRE_BIN=$(BIN)/quire scripts/e2e_console.sh
	QUIRE_BIN=$(BIN)/quire scripts/e2e_kafka.sh
	$(NOCGO) $(GO) build -o $(BIN)/hostile ./scripts/hostile
	QUIRE_BIN=$(BIN)/quire HOSTILE_BIN=$(BIN)/hostile scripts/e2e_hostile.sh
	QUIRE_BIN=$(BIN)/quire BENCH_QUICK=1 scripts/bench.sh
	$(NOCGO) $(GO) run ./chaos/cmd/chaos run -quire $(CHAOS_BIN) -duration $(CHAOS_SHORT)

# The Python example alone (scripts/e2e.sh also runs it): against a dev
# server of its own; installs python3-grpcio and python3-grpc-tools with
# apt-get when they are missing and it runs as root.
e2e-python: build
	QUIRE_BIN=$(BIN)/quire scripts/e2e_python.sh

# docker-compose.yml parses and runs the same cluster as scripts/cluster.sh;
# with a Docker engine, the compose cluster is started and put through
# failures (scripts/e2e_compose.sh), and the secured variant
# (docker-compose.secure.yml) is started and checked from the host
# (scripts/e2e_compose_secure.sh); QUIRE_REQUIRE_DOCKER=1 makes a missing
# engine an error instead of a skip.
compose: build
	scripts/check_compose.sh
	QUIRE_BIN=$(BIN)/quire scripts/e2e_compose.sh
	QUIRE_BIN=$(BIN)/quire scripts/e2e_compose_secure.sh

# The node image, built without pulling anything: the static binary and an
# empty data directory are staged in bin/image, and the Dockerfile copies
# them onto an empty (scratch) base.
IMAGE     ?= quire:local
image:
	rm -rf $(BIN)/image && mkdir -p $(BIN)/image/data
	$(NOCGO) GOOS=linux $(GO) build -ldflags "-s -w" -o $(BIN)/image/quire ./cmd/quire
	docker build -t $(IMAGE) .

# gofmt and go vet alone, a quick subset of verify.
vet:
	@unformatted=$$("$$($(GO) env GOROOT)/bin/gofmt" -l $$(git ls-files -co --exclude-standard '*.go' 2>/dev/null || find . -name '*.go' -not -path './bin/*')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(NOCGO) $(GO) vet $(PKGS)

# grpcurl, staticcheck and the protoc plugins at their pinned versions
# (scripts/tools.sh), each reinstalled when ./bin holds another version.
# No protobuf compiler: internal/protogen compiles proto/ (make proto, and
# verify's breaking-change check) with protocompile from go.mod.
tools:
	scripts/tools.sh

bench:
	$(GO) test -run '^$$' -bench . -benchmem -timeout 30m $(PKGS)

# Process-level figures: a null broker, one node and a 3-node cluster,
# every figure beside the bare gRPC ceiling of the same run.
perf: build
	QUIRE_BIN=$(BIN)/quire scripts/bench.sh

# The fault-injection suite against real processes (chaos/): faults for
# CHAOS_DURATION, then the history checked. CHAOS_FLAGS adds flags
# (-nodes 5, -seed N to replay a run, -faults kill,pause).
CHAOS_DURATION ?= 3m
# make test runs the same suite for this long (every fault kind can come up).
CHAOS_SHORT    ?= 45s
chaos: chaos-bin
	$(GO) run ./chaos/cmd/chaos run -quire $(CHAOS_BIN) -duration $(CHAOS_DURATION) $(CHAOS_FLAGS)

# The suite's servers are a test build (-tags chaosfs) that fails its
# disk and steps its clock on demand (cmd/quire/diskfault_chaosfs.go,
# clockjump_chaosfs.go); otherwise the same.
chaos-bin:
	$(NOCGO) $(GO) build -tags chaosfs -o $(CHAOS_BIN) ./cmd/quire

fuzz:
	FUZZTIME=$(FUZZTIME) scripts/fuzz.sh

# A package's tests COUNT times with -race under a busy loop on every
# core, printing the tests that failed (docs/testing.md):
# make stress PKG=./testcluster COUNT=5 [RUN=regexp].
PKG   ?= ./testcluster
COUNT ?= 5
RUN   ?=
stress:
	PKG="$(PKG)" COUNT="$(COUNT)" RUN="$(RUN)" GO="$(GO)" scripts/stress.sh

# api/ from proto/: internal/protogen compiles the protos and runs the
# pinned protoc-gen-go and protoc-gen-go-grpc from ./bin.
proto:
	scripts/genproto.sh

docs:
	$(GO) test ./config -run TestBrokerConfigDocs -update-docs

verify:
	$(NOCGO) scripts/verify.sh

clean:
	rm -f $(BIN)/quire $(CHAOS_BIN) $(BIN)/hostile
