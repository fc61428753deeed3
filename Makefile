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

# The Debian packages and grpcurl the end-to-end stage needs are
# installed in the background while verify runs (scripts/testdeps.sh);
# then the unit tests and the end-to-end stage (e2e-stage, below) run
# side by side, each one's output printed whole when it ends: both wait
# on clusters more than they compute, so the CPU one leaves idle the
# other uses. make test's verify has run go vet ./... (every analyzer),
# so its unit tests skip the subset of vet that go test runs before each
# package.
# The console's check is the exception: headless chromium renders its
# tail pages under a virtual time budget that stalled twice with the
# unit tests' CPU beside it (docs/testing.md), so it runs after them.
test: testdeps-start verify testdeps-wait e2e-bins
	$(MAKE) --no-print-directory -j2 -O unit e2e-stage UNIT_VET=-vet=off E2E_LATER=e2e-console
	$(MAKE) --no-print-directory -O e2e-console

# go test starts packages in the order they are named (two at a time on 2
# cores), so the slowest, testcluster (over two minutes of in-process
# clusters), goes first instead of near the end of ./..., where it could
# run on alone after the rest had finished; named twice, it runs once.
UNIT_PKGS = $(if $(filter ./...,$(PKGS)),./testcluster $(PKGS),$(PKGS))

unit:
	$(GO) test -race $(UNIT_VET) -timeout $(TEST_TIMEOUT) $(UNIT_PKGS)

# The end-to-end scripts, each a target of its own (e2e-*), run up to
# E2E_JOBS at once with each one's output printed whole, and how long it
# took, when it ends (make -O): they wait on processes, elections and
# session timeouts far more than they compute. Each takes its free ports
# from a range of its own (E2E_PORTS, scripts/lib.sh), so two cannot
# pick the same one. e2e_make_run.sh and e2e_kafka.sh both need --dev's
# fixed 127.0.0.1:9404, so the second waits for the first. The longest
# are named first so that they start first.
E2E_JOBS ?= 4
E2E_SCRIPTS := e2e-console e2e-chaos e2e-make-run e2e-kafka e2e-metrics e2e-cluster e2e-main e2e-bench \
	e2e-reassign e2e-security e2e-hostile
E2E_ENV = QUIRE_BIN=$(BIN)/quire GRPCURL=$(GRPCURL)
E2E_PAR = $(MAKE) --no-print-directory -k -j$(E2E_JOBS) -O
COMPOSE_SCRIPTS := e2e-compose e2e-compose-secure
.PHONY: e2e-stage e2e-bins $(COMPOSE_SCRIPTS) $(E2E_SCRIPTS) testdeps-start testdeps-wait

e2e: e2e-bins
	$(E2E_PAR) $(E2E_SCRIPTS)

# make test's last stage: the end-to-end scripts and the compose
# cluster's together.
e2e-stage: e2e-bins
	$(E2E_PAR) $(COMPOSE_SCRIPTS) $(filter-out $(E2E_LATER),$(E2E_SCRIPTS))

e2e-bins: build chaos-bin
	scripts/tools.sh grpcurl
	$(NOCGO) $(GO) build -o $(BIN)/hostile ./scripts/hostile

e2e-make-run:
	@E2E_PORTS=20000-20799 $(E2E_ENV) scripts/timed.sh e2e_make_run.sh scripts/e2e_make_run.sh
e2e-main:
	@E2E_PORTS=20800-21599 $(E2E_ENV) scripts/timed.sh e2e.sh scripts/e2e.sh
e2e-cluster:
	@E2E_PORTS=21600-22399 $(E2E_ENV) scripts/timed.sh e2e_cluster.sh scripts/e2e_cluster.sh
e2e-reassign:
	@E2E_PORTS=22400-23199 $(E2E_ENV) scripts/timed.sh e2e_reassign.sh scripts/e2e_reassign.sh
e2e-security:
	@E2E_PORTS=23200-23999 $(E2E_ENV) scripts/timed.sh e2e_security.sh scripts/e2e_security.sh
e2e-metrics:
	@E2E_PORTS=24000-24799 $(E2E_ENV) scripts/timed.sh e2e_metrics.sh scripts/e2e_metrics.sh
e2e-console:
	@E2E_PORTS=24800-25599 $(E2E_ENV) scripts/timed.sh e2e_console.sh scripts/e2e_console.sh
e2e-kafka: e2e-make-run
	@E2E_PORTS=25600-26399 $(E2E_ENV) scripts/timed.sh e2e_kafka.sh scripts/e2e_kafka.sh
e2e-hostile:
	@E2E_PORTS=26400-27199 $(E2E_ENV) HOSTILE_BIN=$(BIN)/hostile scripts/timed.sh e2e_hostile.sh scripts/e2e_hostile.sh
e2e-bench:
	@E2E_PORTS=27200-27999 $(E2E_ENV) BENCH_QUICK=1 scripts/timed.sh "bench.sh (quick)" scripts/bench.sh
e2e-chaos:
	@$(NOCGO) scripts/timed.sh "chaos run ($(CHAOS_SHORT))" $(GO) run ./chaos/cmd/chaos run -quire $(CHAOS_BIN) -duration $(CHAOS_SHORT)
e2e-compose:
	@E2E_PORTS=28000-28799 $(E2E_ENV) scripts/timed.sh "check_compose.sh, e2e_compose.sh" \
		sh -c 'scripts/check_compose.sh && scripts/e2e_compose.sh'
e2e-compose-secure:
	@E2E_PORTS=28800-29599 $(E2E_ENV) scripts/timed.sh e2e_compose_secure.sh scripts/e2e_compose_secure.sh

testdeps-start:
	scripts/testdeps.sh start
testdeps-wait:
	scripts/testdeps.sh wait

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
	$(E2E_PAR) $(COMPOSE_SCRIPTS)

# The node image, built without pulling anything: the static binary and an
# empty data directory are staged in bin/image, and the Dockerfile copies
# them onto an empty (scratch) base. The compose checks build their
# images at the same time, so bin/image is held under a lock.
IMAGE     ?= quire:local
image:
	@mkdir -p $(BIN)
	flock $(BIN)/image.lock sh -c 'rm -rf $(BIN)/image && mkdir -p $(BIN)/image/data && \
		$(NOCGO) GOOS=linux $(GO) build -ldflags "-s -w" -o $(BIN)/image/quire ./cmd/quire && \
		docker build -t $(IMAGE) .'

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
