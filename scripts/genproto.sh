#!/usr/bin/env bash
# Regenerates api/ from proto/ with pinned tools, so every machine produces
# the same bytes: internal/protogen (protocompile, pinned in go.mod)
# compiles the protos, with no protoc from the machine, and runs
# protoc-gen-go and protoc-gen-go-grpc from ./bin (scripts/tools.sh pins
# both) through protoc's plugin protocol. GENPROTO_OUT writes the tree
# somewhere else (verify compares it with api/).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/tools.sh protoc-gen-go protoc-gen-go-grpc

out="${GENPROTO_OUT:-$PWD}"
mkdir -p "$out/api"
find "$out/api" -name '*.pb.go' -delete
opt=module=github.com/quirelog/quire
go run ./internal/protogen generate -proto proto -out "$out" \
	-plugin "bin/protoc-gen-go=$opt" \
	-plugin "bin/protoc-gen-go-grpc=$opt"
