#!/usr/bin/env bash
# The hostile sweep: a dev node with a gRPC and a Kafka listener is sent
# well over 100 malformed and hostile requests over both (scripts/hostile
# says which, and prints each with its outcome): every one must be answered
# with a clear error (a gRPC status with a quire.v1.Error that is not
# INTERNAL or UNKNOWN; a Kafka error code) or a closed connection. Records
# written before the sweep must read back byte for byte the same after it,
# the node must still produce and fetch, and its process must still run.
#
# Env: QUIRE_BIN (default: build into a temp dir), HOSTILE_BIN (the
# sweep, go build ./scripts/hostile; default: build into the temp dir),
# E2E_KEEP=1 keeps the temp dir, HOSTILE_FLAGS adds flags to the sweep (-strict: a case the node
# is known not to answer right yet fails instead of being PENDING).
set -euo pipefail
cd "$(dirname "$0")/.."

tmp=$(mktemp -d "${TMPDIR:-/tmp}/quire-hostile.XXXXXX")
pid=
cleanup() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	if [ "${E2E_KEEP:-0}" = 1 ]; then echo "hostile: kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

step() { echo "hostile: $*"; }
fail() {
	echo "hostile: FAIL: $*" >&2
	if [ -f "$tmp/node.log" ]; then
		echo "---- node log (last 40 lines) ----" >&2
		tail -n 40 "$tmp/node.log" >&2
	fi
	echo "hostile: FAIL (repeated after the logs): $*" >&2
	exit 1
}

# shellcheck source=scripts/lib.sh
. scripts/lib.sh

quire="${QUIRE_BIN:-}"
if [ -z "$quire" ]; then
	step "building quire"
	go build -o "$tmp/quire" ./cmd/quire
	quire="$tmp/quire"
fi
# The sweep: HOSTILE_BIN when given (make e2e builds bin/hostile, which go
# build leaves as it is while it is up to date; linking a new one into a
# temporary directory took 7-12 s of the script's 20 here), else built
# here.
hostile="${HOSTILE_BIN:-}"
if [ -z "$hostile" ]; then
	step "building the sweep"
	go build -o "$tmp/hostile" ./scripts/hostile
	hostile="$tmp/hostile"
fi

base=$(free_ports 3)
[ -n "$base" ] || fail "no three free ports"
grpc="127.0.0.1:$base"
kafka="127.0.0.1:$((base + 1))"
metrics="127.0.0.1:$((base + 2))"
step "dev node: gRPC on $grpc, Kafka's protocol on $kafka, metrics on $metrics"
"$quire" server --dev --data-dir "$tmp/data" --set "listeners=PLAINTEXT://$grpc,KAFKA://$kafka" \
	--set kafka.listener.names=KAFKA --set "metrics.listen=$metrics" --set metrics.pprof.enable=true >"$tmp/node.log" 2>&1 &
pid=$!
deadline=$((SECONDS + 60))
until "$quire" --brokers "$grpc" cluster info >/dev/null 2>&1; do
	kill -0 "$pid" 2>/dev/null || fail "the node exited during start"
	[ "$SECONDS" -lt "$deadline" ] || fail "the node did not serve within 60s"
	sleep 0.2
done

# shellcheck disable=SC2086 # HOSTILE_FLAGS is a list of flags
"$hostile" -grpc "$grpc" -kafka "$kafka" -metrics "$metrics" ${HOSTILE_FLAGS:-} | tee "$tmp/sweep.txt" ||
	fail "the sweep failed: $(grep -c '^FAIL' "$tmp/sweep.txt") unclear answers (lines starting FAIL above), or see its last line"
kill -0 "$pid" 2>/dev/null || fail "the node is no longer running"
step "ok: $(tail -n 1 "$tmp/sweep.txt")"
