#!/usr/bin/env bash
# End-to-end replication check on a 3-node cluster of real processes
# (scripts/cluster.sh, min.insync.replicas=2): records acknowledged with
# acks=all survive a kill -9 of their leader; the new leader takes more;
# the killed node restarts, catches up and rejoins the ISR; then the new
# leader is killed too, and the restarted node, now leading, still has
# every acknowledged record.
#
# Usage: scripts/e2e_cluster.sh   (QUIRE_BIN: the quire binary, built when unset)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

tmp=$(mktemp -d "${TMPDIR:-/tmp}/quire-e2e-cluster.XXXXXX")
export QUIRE_CLUSTER_DIR="$tmp/cluster"
step() { echo "e2e-cluster: $*"; }
fail() {
	echo "e2e-cluster: FAIL: $*" >&2
	for f in "$QUIRE_CLUSTER_DIR"/node*/quire.log; do
		[ -f "$f" ] && { echo "--- $f" >&2; tail -n 25 "$f" >&2; }
	done
	echo "e2e-cluster: FAIL (repeated after the logs): $*" >&2
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
base=$(free_ports 3)
[ -n "$base" ] || fail "no three free ports"
export QUIRE_CLUSTER_BASE_PORT=$base
e2e_cluster_timings
export QUIRE_BROKERS="127.0.0.1:$base,127.0.0.1:$((base + 1)),127.0.0.1:$((base + 2))"
q() { "$quire" "$@"; }

# leader_of TOPIC: the leader id of partition 0 (-1 while there is none).
leader_of() {
	q topic describe "$1" --format json 2>/dev/null | tr -d ' \n' | grep -o '"leader":-\?[0-9]*' | sed -n 1p | cut -d: -f2
}
# isr_size TOPIC: how many replicas of partition 0 are in sync.
isr_size() {
	q topic describe "$1" --format json 2>/dev/null | tr -d ' \n' | grep -o '"isr":\[[0-9,]*\]' | sed -n 1p | tr -cd ',' | wc -c | awk '{print $1 + 1}'
}
# consume_all TOPIC N: the first N records of partition 0, retried while the
# leader moves.
consume_all() {
	local out deadline=$((SECONDS + 60))
	until out=$(timeout 20 "$quire" consume "$1" -p 0 -o start -n "$2" 2>/dev/null) && [ "$(wc -l <<<"$out")" -eq "$2" ]; do
		[ "$SECONDS" -lt "$deadline" ] || fail "could not consume $2 records of $1"
		sleep 0.5
	done
	echo "$out"
}
# produce_range TOPIC FROM TO: produce FROM..TO with acks=all; every one
# must be acknowledged.
produce_range() {
	seq "$2" "$3" | q produce "$1" -p 0 --acks all >/dev/null 2>"$tmp/produce.err" ||
		fail "produce $2..$3 to $1: $(cat "$tmp/produce.err")"
}
# leader_is_not ID: partition 0 of $topic has a leader, and not ID.
leader_is_not() {
	local l
	l=$(leader_of "$topic")
	[ -n "$l" ] && [ "$l" -ge 1 ] && [ "$l" != "$1" ]
}
isr_is() { [ "$(isr_size "$topic")" -eq "$1" ]; }
# has_leader TOPIC: partition 0 of TOPIC has a leader.
has_leader() {
	local l
	l=$(leader_of "$1")
	[ -n "$l" ] && [ "$l" -ge 1 ]
}

step "starting a 3-node cluster on $QUIRE_BROKERS"
scripts/cluster.sh start >/dev/null || fail "cluster did not start"

topic=replicated
q topic create "$topic" routed -p 1 -r 3 >/dev/null || fail "topic create"
wait_for "a leader for $topic" 30 has_leader "$topic"

step "1000 records with acks=all"
produce_range "$topic" 1 1000
first=$(leader_of "$topic")

grpcurl=${GRPCURL:-$root/bin/grpcurl}
if [ -x "$grpcurl" ]; then
	step "grpcurl ProduceRecords to every node: each passes it on to the leader"
	wait_for "a leader for routed" 30 has_leader routed
	for n in 0 1 2; do
		out=$("$grpcurl" -plaintext -emit-defaults -d '{"topic": "routed", "acks": -1, "records": [{"value": "via node '$((n + 1))'", "partition": 0}]}' \
			"127.0.0.1:$((base + n))" quire.v1.Producer/ProduceRecords 2>&1) || fail "grpcurl ProduceRecords via node $((n + 1)): $out"
		grep -q "\"offset\": \"$n\"" <<<"$out" || fail "record via node $((n + 1)) not at offset $n: $out"
	done
	diff <(printf 'via node %s\n' 1 2 3) <(consume_all routed 3) >/dev/null || fail "the routed records are not all in routed-0"
fi
wait_for "a full ISR" 30 isr_is 3

step "kill -9 the leader, node $first"
scripts/cluster.sh kill "$first" >/dev/null
wait_for "a new leader" 60 leader_is_not "$first"
second=$(leader_of "$topic")
step "node $second leads; every acknowledged record is there"
diff <(seq 1 1000) <(consume_all "$topic" 1000) >/dev/null || fail "records lost after the failover to node $second"

step "500 more with acks=all on two in-sync replicas"
wait_for "an ISR of two" 30 isr_is 2
out=$(q topic describe --under-replicated "$topic") || fail "describe --under-replicated: $out"
grep -Eq "^$topic +0 .*UNDER-REPLICATED" <<<"$out" || fail "describe --under-replicated does not list $topic-0 with node $first down: $out"
produce_range "$topic" 1001 1500

step "restart node $first: it catches up and rejoins the ISR"
scripts/cluster.sh start-node "$first" >/dev/null || fail "restart node $first"
wait_for "node $first back in the ISR" 60 isr_is 3
out=$(q topic describe --under-replicated "$topic") || fail "describe --under-replicated: $out"
[ -z "$out" ] || fail "describe --under-replicated lists partitions with every replica in sync: $out"

step "kill -9 node $second, the leader"
scripts/cluster.sh kill "$second" >/dev/null
wait_for "a leader other than node $second" 60 leader_is_not "$second"
step "node $(leader_of "$topic") leads; all 1500 records are there"
diff <(seq 1 1500) <(consume_all "$topic" 1500) >/dev/null || fail "records lost after the second failover"
scripts/cluster.sh stop >/dev/null || fail "cluster stop"

step "the README's cluster block, exactly as printed, on a fresh cluster"
# From a directory whose bin/quire is this run's binary and whose scripts/
# are these, the paths the README names; the documented ports
# 19092-19094 are swapped for free ones.
export QUIRE_CLUSTER_DIR="$tmp/readme-cluster"
mkdir -p "$tmp/readme/bin"
ln -sf "$(cd "$(dirname "$quire")" && pwd)/$(basename "$quire")" "$tmp/readme/bin/quire"
ln -sfn "$root/scripts" "$tmp/readme/scripts"
ports="s/19092/$base/g; s/19093/$((base + 1))/g; s/19094/$((base + 2))/g"
out=$(run_readme_block cluster "$tmp/readme" "$ports" 2>&1) || fail "the README's cluster block failed: $out"
grep -Eq '^ *1000$' <<<"$out" || fail "README cluster block: consume did not print 1000 records after the kill: $out"
grep -Eq '^t +[0-5] .*(LEADER-UNREACHABLE|REPLICA-UNREACHABLE|UNDER-REPLICATED)' <<<"$out" ||
	fail "README cluster block: describe --under-replicated right after the kill listed nothing: $out"

step "ok"
