#!/usr/bin/env bash
# Many partitions on one node: for each count in BENCH_PARTITION_COUNTS
# (default "1000 5000 20000") a dev node on a fresh data directory gets
# that many partitions (topics of at most 10,000, the most one request may
# add) and one record in each, then the script prints one row: the node's
# idle CPU (its user and system time over BENCH_IDLE_SECS, default 20, as
# a share of one core), its resident memory, that less what the node held
# before the partitions, per partition, the data directory's disk use
# (du), and, after kill -9 and a restart, the seconds until every
# partition took a write (one record each, `quire perf produce
# --round-robin`, retried until none fails) and the CPU time the node spent
# to get there. The node's max.partitions.per.broker is set to the count
# (the one derived from the open-file limit is 5,000 at 20,000 files; the
# node's file cache keeps the descriptors within the limit whatever the
# count). scripts/bench.sh runs it after its table (its quick pass with
# 50 partitions and 1 s of idling); it runs alone too:
#
#   scripts/bench_partitions.sh
#   BENCH_PARTITION_COUNTS=1000 scripts/bench_partitions.sh
#
# Env: QUIRE_BIN (default ./bin/quire, built when missing).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

counts=${BENCH_PARTITION_COUNTS:-1000 5000 20000}
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

# start_node N: the dev node on $data and $addr, allowed N partitions, in
# the background.
start_node() {
	"$quire" server --dev --data-dir "$data" --set "listeners=$addr" --set metrics.listen= \
		--set "max.partitions.per.broker=$1" >>"$dir/node.log" 2>&1 &
	pid=$!
}

# wait_serving: until the node answers, 60 s at most.
wait_serving() {
	local deadline=$((SECONDS + 60))
	until "$quire" --brokers "$addr" cluster info >/dev/null 2>&1; do
		[ "$SECONDS" -lt "$deadline" ] || fail "node not serving within 60s"
		sleep 0.1
	done
}

# rss_kib: the node's resident memory in KiB.
rss_kib() { awk '/VmRSS/ { print $2 }' "/proc/$pid/status"; }

# write_all: one record into each partition of every topic of $topics
# (topic:partitions), one `quire perf produce --round-robin` each; false
# when a record failed or a run did not end.
write_all() {
	local t out errs
	for t in $topics; do
		out=$(timeout 120 "$quire" --brokers "$addr" --format json perf produce --topic "${t%%:*}" --round-robin \
			-n "${t##*:}" --acks 1 --size 10 --interval 1h 2>>"$dir/perf.log") || return 1
		errs=$(tr -d ' \n' <<<"$out" | grep -o '"errors":[0-9]*' | cut -d: -f2)
		[ "${errs:-1}" = 0 ] || return 1
	done
}

rows=()
for n in $counts; do
	data="$dir/data-$n"
	port=$(free_ports 1)
	[ -n "$port" ] || fail "no free port"
	addr="127.0.0.1:$port"
	start_node "$n"
	wait_serving
	sleep 2
	base_rss=$(rss_kib)
	# Topics of at most 10,000 partitions. On a loaded machine the CLI may
	# give up (context deadline) while the node goes on creating the
	# partitions: ask again until the topic exists.
	topics=
	left=$n
	k=0
	while [ "$left" -gt 0 ]; do
		p=$((left < 10000 ? left : 10000))
		topics="$topics many-$k:$p"
		deadline=$((SECONDS + 300))
		until "$quire" --brokers "$addr" topic create "many-$k" -p "$p" >"$dir/create.out" 2>&1; do
			grep -q TOPIC_ALREADY_EXISTS "$dir/create.out" && break
			[ "$SECONDS" -lt "$deadline" ] || { cat "$dir/create.out" >&2; fail "create topic of $p partitions"; }
			sleep 1
		done
		left=$((left - p))
		k=$((k + 1))
	done
	echo "bench-partitions: $n partitions, writing one record to each" >&2
	deadline=$((SECONDS + 300))
	until write_all; do
		[ "$SECONDS" -lt "$deadline" ] || fail "not every one of $n partitions writable within 300s of its creation"
		sleep 1
	done

	a=$(cpu_ticks)
	sleep "$idle_secs"
	b=$(cpu_ticks)
	idle=$(awk -v t=$((b - a)) -v s="$idle_secs" -v hz="$tck" 'BEGIN { printf "%.2f", 100 * t / hz / s }')
	rss=$(rss_kib)
	per=$(awk -v r="$rss" -v b="$base_rss" -v n="$n" 'BEGIN { printf "%.1f", (r - b) / n }')
	rss=$(awk -v r="$rss" 'BEGIN { printf "%.0f", r / 1024 }')
	disk=$(du -sk "$data" | awk '{ printf "%.0f", $1 / 1024 }')
	fds=$(find "/proc/$pid/fd" -mindepth 1 2>/dev/null | wc -l)

	kill -9 "$pid"
	wait "$pid" 2>/dev/null || true
	t0=$(date +%s.%N)
	start_node "$n"
	deadline=$((SECONDS + 300))
	until write_all; do
		[ "$SECONDS" -lt "$deadline" ] || fail "not every one of $n partitions writable within 300s of a restart"
		sleep 0.1
	done
	t1=$(date +%s.%N)
	start_cpu=$(awk -v t="$(cpu_ticks)" -v hz="$tck" 'BEGIN { printf "%.2f", t / hz }')
	start_secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')

	rows+=("$(printf '%10s %11s %8s %14s %9s %6s %18s %12s' "$n" "$idle" "$rss" "$per" "$disk" "$fds" "$start_secs" "$start_cpu")")
	echo "bench-partitions: ${rows[-1]} (load $(cut -d' ' -f1 /proc/loadavg))" >&2
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	pid=
	rm -rf "$data"
done

echo "bench-partitions: load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%10s %11s %8s %14s %9s %6s %18s %12s\n' partitions "idle %core" "rss MiB" "KiB/partition" "disk MiB" fds "kill-9 to all w s" "start cpu s"
printf '%s\n' "${rows[@]}"
