#!/usr/bin/env bash
# Many partitions on one node: for each count in BENCH_PARTITION_COUNTS
# (default "1000 5000") a dev node on a fresh data directory gets a topic
# of that many partitions and one record in each, then the script prints
# one row: the node's idle CPU (its user and system time over
# BENCH_IDLE_SECS, default 20, as a share of one core), its resident
# memory, the data directory's disk use (du), and, after kill -9 and a
# restart, the seconds until the last partition takes a write and the CPU
# time the node spent to get there. Every partition is then written once
# more, to check that all of them are writable (not timed: that is the
# CLI's speed). scripts/bench.sh runs it after its table (not in its quick
# pass); it runs alone too:
#
#   scripts/bench_partitions.sh
#   BENCH_PARTITION_COUNTS=1000 scripts/bench_partitions.sh
#
# Env: QUIRE_BIN (default ./bin/quire, built when missing).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

counts=${BENCH_PARTITION_COUNTS:-1000 5000}
idle_secs=${BENCH_IDLE_SECS:-20}
quire=${QUIRE_BIN:-$root/bin/quire}
if [ ! -x "$quire" ]; then
	echo "bench-partitions: building $quire"
	go build -o "$quire" ./cmd/quire
fi
dir=$(mktemp -d)
pid=

cleanup() {
	local rc=$?
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$dir"
	exit $rc
}
trap cleanup EXIT INT TERM

fail() {
	echo "bench-partitions: FAIL: $*" >&2
	[ -f "$dir/node.log" ] && tail -n 20 "$dir/node.log" >&2
	exit 1
}

# shellcheck source=scripts/lib.sh
. scripts/lib.sh

tck=$(getconf CLK_TCK)
# cpu_ticks: the node's user and system time so far, in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }

# start_node: the dev node on $data and $addr, in the background.
start_node() {
	"$quire" server --dev --data-dir "$data" --set "listeners=$addr" --set metrics.listen= \
		>>"$dir/node.log" 2>&1 &
	pid=$!
}

# write_each N: one record into each of partitions 0..N-1, four at a time.
write_each() {
	seq 0 $(($1 - 1)) | xargs -P 4 -I{} sh -c \
		'echo r | "$0" --brokers "$1" produce many -p {} >/dev/null' "$quire" "$addr" ||
		fail "a partition refused a write"
}

rows=()
for n in $counts; do
	data="$dir/data-$n"
	port=$(free_ports 1)
	[ -n "$port" ] || fail "no free port"
	addr="127.0.0.1:$port"
	start_node
	deadline=$((SECONDS + 60))
	until "$quire" --brokers "$addr" cluster info >/dev/null 2>&1; do
		[ "$SECONDS" -lt "$deadline" ] || fail "node not serving within 60s"
		sleep 0.2
	done
	# On a loaded machine the CLI may give up (context deadline) while the
	# node goes on creating the partitions: ask again until it exists,
	# then wait for its last partition to take a write.
	deadline=$((SECONDS + 120))
	until "$quire" --brokers "$addr" topic create many -p "$n" >"$dir/create.out" 2>&1; do
		grep -q TOPIC_ALREADY_EXISTS "$dir/create.out" && break
		[ "$SECONDS" -lt "$deadline" ] || { cat "$dir/create.out" >&2; fail "create topic of $n partitions"; }
		sleep 1
	done
	until echo r | "$quire" --brokers "$addr" produce many -p $((n - 1)) >/dev/null 2>&1; do
		[ "$SECONDS" -lt "$deadline" ] || fail "partition $((n - 1)) not writable within 120s of its creation"
		sleep 0.2
	done
	echo "bench-partitions: $n partitions, writing one record to each" >&2
	write_each "$n"

	a=$(cpu_ticks)
	sleep "$idle_secs"
	b=$(cpu_ticks)
	idle=$(awk -v t=$((b - a)) -v s="$idle_secs" -v hz="$tck" 'BEGIN { printf "%.2f", 100 * t / hz / s }')
	rss=$(awk '/VmRSS/ { printf "%.0f", $2 / 1024 }' "/proc/$pid/status")
	disk=$(du -sk "$data" | awk '{ printf "%.0f", $1 / 1024 }')

	kill -9 "$pid"
	wait "$pid" 2>/dev/null || true
	t0=$(date +%s.%N)
	start_node
	deadline=$((SECONDS + 120))
	until echo r | "$quire" --brokers "$addr" produce many -p $((n - 1)) >/dev/null 2>&1; do
		[ "$SECONDS" -lt "$deadline" ] || fail "partition $((n - 1)) not writable within 120s of a restart"
		sleep 0.1
	done
	t1=$(date +%s.%N)
	start_cpu=$(awk -v t="$(cpu_ticks)" -v hz="$tck" 'BEGIN { printf "%.2f", t / hz }')
	start_secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
	write_each "$n"

	rows+=("$(printf '%10s %12s %8s %9s %16s %14s' "$n" "$idle" "$rss" "$disk" "$start_secs" "$start_cpu")")
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	pid=
	rm -rf "$data"
done

printf '%10s %12s %8s %9s %16s %14s\n' partitions "idle %core" "rss MiB" "disk MiB" "kill-9 to write s" "start cpu s"
printf '%s\n' "${rows[@]}"
