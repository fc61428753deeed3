#!/usr/bin/env bash
# Installs the build's tools into ./bin at pinned versions, each only when
# ./bin lacks it or holds another version (go version -m tells which module
# version a binary was built from). With no arguments it installs them all;
# otherwise only those named (grpcurl staticcheck protoc-gen-go
# protoc-gen-go-grpc).
#
# The protobuf compiler is not among them: internal/protogen compiles
# proto/ (for the plugins, and to check breaking changes) with protocompile,
# a module dependency pinned by go.mod, so api/ depends on no protoc from the
# machine, only on these versions.
#
# Each is built from source through the Go module proxy; no prebuilt binary
# is fetched from anywhere else, and flags such as -trimpath build the same
# packages at the same cost. Most of the time goes to grpcurl's and
# staticcheck's own dependencies (grpcurl's grpc, protobuf and xDS modules,
# staticcheck's x/tools), at versions the module's build does not share:
# keeping ./bin, or the Go build cache, between runs is what saves it.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$PWD/bin"
mkdir -p "$bin"

declare -A pkg=(
	[grpcurl]=github.com/fullstorydev/grpcurl/cmd/grpcurl
	[staticcheck]=honnef.co/go/tools/cmd/staticcheck
	[protoc-gen-go]=google.golang.org/protobuf/cmd/protoc-gen-go
	[protoc-gen-go-grpc]=google.golang.org/grpc/cmd/protoc-gen-go-grpc
)
# staticcheck v0.8.2 is its release 2026.2.2, the first line to support go1.26.
declare -A version=(
	[grpcurl]=v1.9.3
	[staticcheck]=v0.8.2
	[protoc-gen-go]=v1.36.12
	[protoc-gen-go-grpc]=v1.5.1
)
# The module each one is built from, which go version -m names.
declare -A module=(
	[grpcurl]=github.com/fullstorydev/grpcurl
	[staticcheck]=honnef.co/go/tools
	[protoc-gen-go]=google.golang.org/protobuf
	[protoc-gen-go-grpc]=google.golang.org/grpc/cmd/protoc-gen-go-grpc
)
order=(grpcurl staticcheck protoc-gen-go protoc-gen-go-grpc)

install() {
	local name=$1 p=${pkg[$1]:-} v=${version[$1]:-}
	if [ -z "$p" ]; then
		echo "tools: no tool named $name (known: ${order[*]})" >&2
		exit 2
	fi
	local m=${module[$1]}
	if go version -m "$bin/$name" 2>/dev/null | awk -v m="$m" -v v="$v" '$1 == "mod" && $2 == m && $3 == v { ok = 1 } END { exit !ok }'; then
		return
	fi
	echo "tools: installing $name $v into $bin"
	GOBIN="$bin" go install "$p@$v"
}

if [ "$#" -eq 0 ]; then
	set -- "${order[@]}"
fi
for t in "$@"; do
	install "$t"
done
