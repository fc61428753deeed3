#!/usr/bin/env bash
# Regenerates api/ from proto/ with pinned tools, so every machine produces
# the same bytes: buf compiles the protos (no protoc from the machine) and
# runs protoc-gen-go and protoc-gen-go-grpc from ./bin (scripts/tools.sh
# pins all three). GENPROTO_OUT writes the tree somewhere else (verify
# compares it with api/).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/tools.sh buf protoc-gen-go protoc-gen-go-grpc

out="${GENPROTO_OUT:-$PWD}"
mkdir -p "$out/api"
find "$out/api" -name '*.pb.go' -delete
bin/buf generate proto --template buf.gen.yaml --output "$out"
