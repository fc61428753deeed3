#!/usr/bin/env bash
# End-to-end partition reassignment on a cluster of real processes
# (scripts/cluster.sh, min.insync.replicas=2): records acknowledged with
# acks=all; `cluster.sh add-node 4` starts a broker-only node and moves
# its share of the replicas onto it (quire partition reassign --plan,
# --execute --wait); `cluster.sh remove-node 4` decommissions it (every
# replica moved off), stops and unregisters it. Every record is there
# after each step, and node 4's logs are gone.
#
# Usage: scripts/e2e_reassign.sh   (QUIRE_BIN: the quire binary, built when unset)
set -euo pipefail
cd "$(dirname "$0")/.."

tmp=$(mktemp -d "${TMPDIR:-/tmp}/quire-e2e-reassign.XXXXXX")
export QUIRE_CLUSTER_DIR="$tmp/cluster"
step() { echo "e2e-reassign: $*"; }
fail() {
	echo "e2e-reassign: FAIL: $*" >&2
	for f in "$QUIRE_CLUSTER_DIR"/node*/quire.log; do
		[ -f "$f" ] && { echo "--- $f" >&2; tail -n 25 "$f" >&2; }
	done
	echo "e2e-reassign: FAIL (repeated after the logs): $*" >&2
	exit 1
}
cleanup() {
	scripts/cluster.sh stop >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
trap cleanup EXIT

quire=${QUIRE_BIN:-}
if [ -z "$quire" ]; then
	step "building quire"
	go build -o "$tmp/quire" ./cmd/quire
	quire="$tmp/quire"
fi
export QUIRE_BIN=$quire

# shellcheck source=scripts/lib.sh
. scripts/lib.sh
base=$(free_ports 4)
[ -n "$base" ] || fail "no four free ports"
export QUIRE_CLUSTER_BASE_PORT=$base
e2e_cluster_timings
export QUIRE_BROKERS="127.0.0.1:$base,127.0.0.1:$((base + 1)),127.0.0.1:$((base + 2))"
q() { "$quire" "$@"; }

# hosted ID: how many partition replicas broker ID hosts.
hosted() {
	q cluster info --format json | tr -d ' \n' | grep -o "\"id\":$1,[^}]*" | grep -o '"partitions":[0-9]*' | cut -d: -f2
}
# count TOPIC P: the records of partition P, read from the start.
count() {
	local out
	out=$(timeout 20 "$quire" consume "$1" -p "$2" -o start -n "$3" 2>/dev/null) || return 1
	[ "$(wc -l <<<"$out")" -eq "$3" ]
}
check_all() {
	local p deadline
	for p in 0 1 2 3 4 5; do
		deadline=$((SECONDS + 60))
		until count moving "$p" 200; do
			[ "$SECONDS" -lt "$deadline" ] || fail "partition $p: not every acknowledged record is there ($*)"
			sleep 0.5
		done
	done
}

step "starting a 3-node cluster on $QUIRE_BROKERS"
scripts/cluster.sh start >/dev/null || fail "cluster did not start"
q topic create moving -p 6 -r 3 >/dev/null || fail "topic create"
for p in 0 1 2 3 4 5; do
	seq 1 200 | q produce moving -p "$p" --acks all >/dev/null 2>"$tmp/produce.err" || fail "produce to $p: $(cat "$tmp/produce.err")"
done

step "add-node 4: a broker-only node gets its share of the replicas"
out=$(scripts/cluster.sh add-node 4 2>&1) || fail "add-node 4: $out"
grep -q "every move completed" <<<"$out" || fail "add-node 4 moved nothing: $out"
n=$(hosted 4)
[ "$n" -ge 4 ] || fail "node 4 hosts $n replicas after add-node, want its share (18 over 4 brokers)"
step "node 4 hosts $n replicas; every record is there"
check_all "after add-node"
scripts/cluster.sh status >/dev/null || fail "status: not every node serves"

step "remove-node 4: every replica moves off, the node leaves"
out=$(scripts/cluster.sh remove-node 4 2>&1) || fail "remove-node 4: $out"
grep -q "hosts no replica" <<<"$out" || fail "remove-node 4: $out"
[ ! -d "$QUIRE_CLUSTER_DIR/node4" ] || fail "node 4's directory is still there"
q cluster info --format json | tr -d ' \n' | grep -q '"id":4,' && fail "node 4 is still registered"
check_all "after remove-node"
step "ok"
