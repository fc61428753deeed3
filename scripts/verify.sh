#!/usr/bin/env bash
# Checks that the tree is tidy: gofmt, go vet, go.mod/go.sum tidy, generated
# code current, import boundaries. Needs protoc for the generated-code check.
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0

echo "verify: gofmt"
unformatted=$(gofmt -l $(git ls-files -co --exclude-standard '*.go' 2>/dev/null || find . -name '*.go' -not -path './bin/*'))
if [ -n "$unformatted" ]; then
	echo "gofmt needed:"; echo "$unformatted"; fail=1
fi

echo "verify: go vet"
go vet ./... || fail=1

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

if [ "$fail" -ne 0 ]; then
	echo "verify: FAILED"; exit 1
fi
echo "verify: ok"
