#!/usr/bin/env bash
# Checks that the tree is tidy: gofmt, go vet, go.mod/go.sum tidy, generated
# code current, import boundaries, staticcheck, and no breaking change to the
# public protos (proto/quire/v1) since the previous commit. Every tool comes
# from scripts/tools.sh or go.mod at a pinned version; nothing is needed
# from the machine but Go and git.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/tools.sh staticcheck protoc-gen-go protoc-gen-go-grpc
fail=0

echo "verify: gofmt"
gofmt="$(go env GOROOT)/bin/gofmt"
unformatted=$("$gofmt" -l $(git ls-files -co --exclude-standard '*.go' 2>/dev/null || find . -name '*.go' -not -path './bin/*'))
if [ -n "$unformatted" ]; then
	echo "gofmt needed:"; echo "$unformatted"; fail=1
fi

echo "verify: go vet"
go vet ./... || fail=1
# The fault suite's test build of the server (-tags chaosfs).
go vet -tags chaosfs ./cmd/quire || fail=1

echo "verify: go mod tidy"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp go.mod go.sum "$tmp/"
go mod tidy
if ! diff -u "$tmp/go.mod" go.mod || ! diff -u "$tmp/go.sum" go.sum; then
	echo "go.mod/go.sum are not tidy (run go mod tidy)"; fail=1
fi
cp "$tmp/go.mod" "$tmp/go.sum" .

echo "verify: generated code"
GENPROTO_OUT="$tmp/gen" scripts/genproto.sh
if ! diff -ru api "$tmp/gen/api"; then
	echo "api/ is stale (run make proto)"; fail=1
fi

echo "verify: import boundaries"
go test -count=1 ./internal/lint || fail=1

echo "verify: staticcheck ($(bin/staticcheck -version))"
bin/staticcheck ./... || fail=1
bin/staticcheck -tags chaosfs ./cmd/quire || fail=1

echo "verify: breaking changes to proto/quire/v1"
if git rev-parse --verify -q HEAD~1 >/dev/null; then
	# The internal protos (raft transport, controller, metadata commands)
	# are checked by the metadata version gates instead.
	go run ./internal/protogen breaking -proto proto -dir quire/v1 -against HEAD~1 || {
		echo "proto/quire/v1 breaks compatibility with the previous commit"; fail=1
	}
else
	echo "skipped: no previous commit to compare with (a shallow clone or the first commit)"
fi

if [ "$fail" -ne 0 ]; then
	echo "verify: FAILED"; exit 1
fi
echo "verify: ok"
