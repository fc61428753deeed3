#!/usr/bin/env bash
# Regenerates api/ from proto/ with pinned code generators.
#
# protoc comes from Debian's protobuf-compiler package (apt-get install
# protobuf-compiler); the Go plugins are installed at pinned versions into
# ./bin so every machine produces identical output.
set -euo pipefail
cd "$(dirname "$0")/.."

PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.5.1

bin="$PWD/bin"
mkdir -p "$bin"
if ! command -v protoc >/dev/null 2>&1; then
	echo "genproto: protoc not found; install it with: apt-get install -y protobuf-compiler" >&2
	exit 1
fi
want_go="protoc-gen-go $PROTOC_GEN_GO_VERSION"
if [ ! -x "$bin/protoc-gen-go" ] || [ "$("$bin/protoc-gen-go" --version 2>/dev/null)" != "$want_go" ]; then
	GOBIN="$bin" go install "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION"
fi
want_grpc="protoc-gen-go-grpc ${PROTOC_GEN_GO_GRPC_VERSION#v}"
if [ ! -x "$bin/protoc-gen-go-grpc" ] || [ "$("$bin/protoc-gen-go-grpc" --version 2>/dev/null)" != "$want_grpc" ]; then
	GOBIN="$bin" go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION"
fi

out="${GENPROTO_OUT:-$PWD}"
mkdir -p "$out/api"; find "$out/api" -name '*.pb.go' -delete 2>/dev/null || true
mapfile -t files < <(cd proto && find . -name '*.proto' | sed 's|^\./||' | sort)
PATH="$bin:$PATH" protoc -I proto \
	--go_out="$out" --go_opt=module=github.com/quirelog/quire \
	--go-grpc_out="$out" --go-grpc_opt=module=github.com/quirelog/quire \
	"${files[@]}"
