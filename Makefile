# Quire's build. `make run` starts a single-node dev broker; `make test` is
# what CI runs (.ci/run): verify (gofmt, vet, go mod tidy, generated code,
# import boundaries, staticcheck, breaking proto changes), the unit tests
# with -race, and the end-to-end scripts (one node, then a 3-node cluster
# with leader kills). Every tool it needs is installed into ./bin at pinned
# versions by scripts/tools.sh.

GO        ?= go
BIN       := $(CURDIR)/bin
GRPCURL   := $(BIN)/grpcurl
PKGS      := ./...
TEST_TIMEOUT ?= 12m
FUZZTIME  ?= 20s

.PHONY: all build run test unit e2e compose vet bench fuzz proto verify docs tools clean

all: build

build:
	$(GO) build -o $(BIN)/quire ./cmd/quire

run: build
	$(BIN)/quire server --dev

test: verify unit e2e compose

unit:
	$(GO) test -race -timeout $(TEST_TIMEOUT) $(PKGS)

e2e: build
	scripts/tools.sh grpcurl
	QUIRE_BIN=$(BIN)/quire GRPCURL=$(GRPCURL) scripts/e2e.sh
	QUIRE_BIN=$(BIN)/quire GRPCURL=$(GRPCURL) scripts/e2e_cluster.sh

# docker-compose.yml parses and runs the same cluster as scripts/cluster.sh.
compose:
	scripts/check_compose.sh

# gofmt and go vet alone, a quick subset of verify.
vet:
	@unformatted=$$("$$($(GO) env GOROOT)/bin/gofmt" -l $$(git ls-files -co --exclude-standard '*.go' 2>/dev/null || find . -name '*.go' -not -path './bin/*')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet $(PKGS)

# grpcurl, staticcheck, buf and the protoc plugins at their pinned versions
# (scripts/tools.sh), each reinstalled when ./bin holds another version.
tools:
	scripts/tools.sh

bench:
	$(GO) test -run '^$$' -bench . -benchmem -timeout 30m $(PKGS)

fuzz:
	FUZZTIME=$(FUZZTIME) scripts/fuzz.sh

proto:
	scripts/genproto.sh

docs:
	$(GO) test ./broker -run TestBrokerConfigDocs -update-docs

verify:
	scripts/verify.sh

clean:
	rm -f $(BIN)/quire
