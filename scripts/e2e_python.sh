#!/usr/bin/env bash
# Runs the Python examples (examples/python) against a broker: the one at
# QUIRE_BROKERS (scripts/e2e.sh passes its dev server), else a
# `quire server --dev` started here on a free port.
#
# It needs Debian's python3-grpcio, python3-grpc-tools and python3-protobuf
# under /usr/bin/python3 (a python3 earlier on PATH may not see Debian's
# modules). When they are missing and this runs as root with apt-get, it
# installs them (apt-get update, then apt-get install); otherwise it fails
# and says what to install. The stubs are generated from proto/ into a
# temp dir by grpc_tools.protoc, as examples/python/README.md shows.
#
# Env: QUIRE_BROKERS, QUIRE_BIN (default: build into the temp dir),
# PYTHON (default /usr/bin/python3).
set -euo pipefail
cd "$(dirname "$0")/.."

py="${PYTHON:-/usr/bin/python3}"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/quire-e2e-python.XXXXXX")
server_pid=""
cleanup() {
	if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
		kill -TERM "$server_pid" 2>/dev/null || true
		wait "$server_pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

step() { echo "e2e-python: $*"; }
fail() {
	echo "e2e-python: FAIL: $*" >&2
	if [ -f "$tmp/server.log" ]; then tail -n 40 "$tmp/server.log" >&2; fi
	exit 1
}

have_modules() { "$py" -c 'import grpc, grpc_tools.protoc, google.protobuf' 2>/dev/null; }
if ! have_modules; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		step "installing python3-grpcio python3-grpc-tools python3-protobuf with apt-get"
		apt-get update -qq || fail "apt-get update"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-grpcio python3-grpc-tools python3-protobuf >/dev/null ||
			fail "apt-get install python3-grpcio python3-grpc-tools python3-protobuf"
	fi
	have_modules || fail "$py cannot import grpc, grpc_tools and google.protobuf; install python3-grpcio python3-grpc-tools python3-protobuf"
fi

step "generating Python stubs from proto/ with grpc_tools.protoc"
mkdir -p "$tmp/gen"
mapfile -t protos < <(cd proto && find quire/v1 -name '*.proto' | sort)
(cd proto && "$py" -m grpc_tools.protoc -I . --python_out="$tmp/gen" --grpc_python_out="$tmp/gen" "${protos[@]}") ||
	fail "grpc_tools.protoc rejected proto/quire/v1"
(cd examples/python && "$py" -m grpc_tools.protoc -I . --python_out="$tmp/gen" status.proto) || fail "grpc_tools.protoc rejected status.proto"

addr="${QUIRE_BROKERS:-}"
if [ -z "$addr" ]; then
	quire="${QUIRE_BIN:-}"
	if [ -z "$quire" ]; then
		step "building quire"
		go build -o "$tmp/quire" ./cmd/quire
		quire="$tmp/quire"
	fi
	# shellcheck source=scripts/lib.sh
	. scripts/lib.sh
	port=$(free_ports 1)
	[ -n "$port" ] || fail "no free port found"
	addr="127.0.0.1:$port"
	step "starting quire server --dev on $addr"
	"$quire" server --dev --data-dir "$tmp/data" --set "listeners=$addr" --set metrics.listen= >>"$tmp/server.log" 2>&1 &
	server_pid=$!
fi

step "running examples/python/quire_example.py against $addr"
PYTHONPATH="$tmp/gen:$PWD/examples/python" "$py" examples/python/quire_example.py --brokers "${addr%%,*}" ||
	fail "examples/python/quire_example.py"
step "running examples/python/quire_subscribe.py (a consumer group over one Subscribe stream) against $addr"
PYTHONPATH="$tmp/gen:$PWD/examples/python" "$py" examples/python/quire_subscribe.py --brokers "${addr%%,*}" ||
	fail "examples/python/quire_subscribe.py"
step "PASS"
