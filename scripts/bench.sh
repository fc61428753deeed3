#!/usr/bin/env bash
# Process-level benchmark: starts its own null broker, single dev node and
# 3-node cluster (RF 3, min.insync.replicas 2) on free loopback ports, runs
# `quire perf` against each and prints one table, every figure beside the
# bare gRPC ceiling measured in the same run (absolute figures drift 2-3x
# between runs on a shared 2-core machine; the ratios are what to compare).
#
#   scripts/bench.sh             the full run (about 5 minutes, then about
#                                10 for the many-partitions rows)
#   BENCH_LONG_SECS=600 scripts/bench.sh   with the ten-minute e2e row
#   BENCH_QUICK=1 scripts/bench.sh   small counts, to check that it works
#
# After the table come:
#   - the node's CPU per record on its two doors, gRPC and the Kafka
#     listener, produce and fetch, in the same run (BenchmarkDoorsNodeCPU
#     in broker/, its test binary built with go test -c; the node runs in
#     a process of its own, its CPU read from /proc);
#   - scripts/bench_partitions.sh's rows for a node of 1,000, 5,000 and
#     20,000 partitions (idle CPU, memory, disk, kill -9 to every
#     partition writable);
#   - with BENCH_LONG_SECS set (600 for ten minutes), a long e2e run: RF 3
#     acks=all, min.insync.replicas 2, at BENCH_LONG_RATE records/s
#     (default 50000), its p50, p99, p99.9 and max (not part of make
#     test).
# The quick pass runs each of them tiny (20 ops a door, 50 partitions
# idling 1 s, a 1 s long run): their figures mean nothing, the paths run.
#
# The two ratios the table ends with (single-node produce against the
# ceiling, RF 3 acks=all against single-node acks=1) swing 2x between runs
# here, so after the table they are measured again in BENCH_ROUNDS rounds
# (default 5), the five runs of a round back to back, and printed as the
# median and range of the rounds.
#
# Page-cache pages: on a VM whose free memory the host takes back (as this
# one's), a write into pages the guest has not used lately faults on the
# host at every page and runs 5-10x slower than one into pages the kernel
# has just freed, which is what a node whose page cache is full (any node
# that has run a while) writes into. The null broker writes nothing, so it
# never pays this; a node pays it for every byte, RF 3 three times. So the
# run measures both: the page cache's write speed into fresh pages and into
# just-freed ones (dd, in the data's filesystem), and the produce rows and
# rounds once as they come ("fresh pages") and once right after a scratch
# file as large as the run's log was written and deleted there ("reused
# pages"). The host takes freed memory back a few seconds after the
# guest frees it (free page reporting), so a reused-pages run is only
# partly into resident pages, more or less from one run to the next: it
# shows the direction, not a fixed state.
#
# Env: QUIRE_BIN (default ./bin/quire, built when missing), BENCH_LONG_SECS,
# BENCH_LONG_RATE, BENCH_DOORS_OPS (ops of each door benchmark, default
# 3000), BENCH_PARTITION_COUNTS (scripts/bench_partitions.sh), BENCH_DIR
# (default a temporary directory, removed afterwards), BENCH_RATES (e2e rates,
# default "5000 20000 50000"; the e2e rows beside idle partitions run at
# the first), BENCH_IDLE_TOPICS (idle 3-partition topics for those,
# default 200), BENCH_ROUNDS.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

quick=${BENCH_QUICK:-}
rates=${BENCH_RATES:-5000 20000 50000}
rounds=${BENCH_ROUNDS:-5}
n_produce=5000000
n_consume=5000000
e2e_secs=10
idle_topics=${BENCH_IDLE_TOPICS:-200}
if [ -n "$quick" ]; then
	n_produce=200000
	n_consume=200000
	# One second of each e2e run and one round: every path of the script
	# still runs once, which is what the quick pass (make test) checks.
	e2e_secs=1
	idle_topics=${BENCH_IDLE_TOPICS:-5}
	rates=${BENCH_RATES:-5000}
	rounds=${BENCH_ROUNDS:-1}
fi
long_secs=${BENCH_LONG_SECS:-}
long_rate=${BENCH_LONG_RATE:-50000}
doors_ops=${BENCH_DOORS_OPS:-3000}
part_counts=${BENCH_PARTITION_COUNTS:-1000 5000 20000}
part_idle=${BENCH_IDLE_SECS:-20}
if [ -n "$quick" ]; then
	long_secs=1
	doors_ops=${BENCH_DOORS_OPS:-20}
	part_counts=${BENCH_PARTITION_COUNTS:-50}
	part_idle=${BENCH_IDLE_SECS:-1}
fi

quire=${QUIRE_BIN:-$root/bin/quire}
if [ ! -x "$quire" ]; then
	echo "bench: building $quire"
	go build -o "$quire" ./cmd/quire
fi
dir=${BENCH_DIR:-}
own_dir=
if [ -z "$dir" ]; then
	dir=$(mktemp -d)
	own_dir=1
fi
# Absolute: the door rows run the broker's test binary from broker/.
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
pids=()
cleanup() {
	local rc=$?
	QUIRE_CLUSTER_DIR="$dir/cluster" QUIRE_BIN="$quire" QUIRE_CLUSTER_STOP_TIMEOUT=20 \
		scripts/cluster.sh stop >/dev/null 2>&1 || true
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	if [ -n "$own_dir" ]; then rm -rf "$dir"; fi
	exit $rc
}
trap cleanup EXIT INT TERM

fail() {
	echo "bench: FAIL: $*" >&2
	for f in "$dir"/*.log "$dir"/cluster/node*/quire.log; do
		[ -f "$f" ] && { echo "---- $f (last 20 lines) ----" >&2; tail -n 20 "$f" >&2; }
	done
	echo "bench: FAIL (repeated after the logs): $*" >&2
	exit 1
}

# shellcheck source=scripts/lib.sh
. scripts/lib.sh

# wait_serving ADDR: poll `quire cluster info` until the node answers.
wait_serving() {
	local deadline=$((SECONDS + 60))
	until "$quire" --brokers "$1" cluster info >/dev/null 2>&1; do
		[ "$SECONDS" -lt "$deadline" ] || fail "$1 not serving within 60s"
		sleep 0.2
	done
}

# field NAME JSON: a number from perf's --format json output.
field() { tr -d ' \n' <<<"$2" | grep -o "\"$1\":[-0-9.e+]*" | head -n 1 | cut -d: -f2; }

# perf BROKERS ARGS...: one perf run, its JSON summary on stdout.
perf() {
	local brokers=$1 extra=()
	shift
	[ "$1" = ceiling ] || extra=(--interval 1h)
	"$quire" --brokers "$brokers" --format json perf "$@" "${extra[@]}" 2>>"$dir/perf.log" ||
		fail "quire perf $* against $brokers"
}

null_port=$(free_ports 1)
[ -n "$null_port" ] || fail "no free port"
null="127.0.0.1:$null_port"
"$quire" perf null-broker --listen "$null" --topic ceiling >"$dir/null.log" 2>&1 &
pids+=($!)

single_port=$(free_ports 1)
[ -n "$single_port" ] || fail "no free port"
single="127.0.0.1:$single_port"
"$quire" server --dev --data-dir "$dir/single" --set "listeners=$single" --set metrics.listen= >"$dir/single.log" 2>&1 &
pids+=($!)

base=$(free_ports 3)
[ -n "$base" ] || fail "no three free ports"
cluster="127.0.0.1:$base,127.0.0.1:$((base + 1)),127.0.0.1:$((base + 2))"
QUIRE_CLUSTER_DIR="$dir/cluster" QUIRE_CLUSTER_BASE_PORT=$base QUIRE_BIN="$quire" \
	scripts/cluster.sh start >"$dir/cluster.log" 2>&1 || fail "cluster did not start"

deadline=$((SECONDS + 30))
until (exec 3<>"/dev/tcp/127.0.0.1/$null_port") 2>/dev/null; do
	[ "$SECONDS" -lt "$deadline" ] || fail "null broker not listening within 30s"
	sleep 0.1
done
wait_serving "$single"
"$quire" --brokers "$single" topic create bench -p 1 >/dev/null || fail "create topic bench"
# The cluster serves once it has a controller; its brokers may still be
# fenced a moment longer (INVALID_REPLICATION_FACTOR until three are live).
deadline=$((SECONDS + 60))
until "$quire" --brokers "$cluster" topic create bench3 -p 1 -r 3 -c min.insync.replicas=2 >"$dir/create.log" 2>&1; do
	grep -q TOPIC_ALREADY_EXISTS "$dir/create.log" && break
	[ "$SECONDS" -lt "$deadline" ] || { cat "$dir/create.log" >&2; fail "create topic bench3"; }
	sleep 0.2
done

# scratch BYTES: scratch_pages in the data's filesystem, before a reused-pages run.
scratch() { scratch_pages "$dir/scratch" "$1" || fail "scratch file"; }
# log_bytes N REPLICAS: a little over what N records of the run's size
# write to disk over REPLICAS replicas (record framing and indexes
# included), for scratch.
log_bytes() { echo $(($1 * 128 * $2 * 5 / 4)); }
# dd_rate: GB/s of dd's write of dd_mib MiB in 1 MiB writes into a new
# file in the data's filesystem, from dd's own summary line.
dd_mib=1024
[ -z "$quick" ] || dd_mib=256
dd_rate() {
	local t
	t=$(dd if=/dev/zero of="$dir/ddtest" bs=1M count=$dd_mib 2>&1 >/dev/null | awk '/copied/ { print $(NF-3) }')
	rm -f "$dir/ddtest"
	awk -v t="$t" -v m="$dd_mib" 'BEGIN { if (t > 0) printf "%.2f", m * 1048576 / 1e9 / t; else print "-" }'
}

rows=()
# row NAME RECORDS/S CEILING [P50 P99 P99.9]; CEILING - for none
row() {
	local ratio=- ceiling=-
	if [ "$3" != - ]; then
		ratio=$(awk -v a="$2" -v b="$3" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')
		ceiling=$(printf '%.0f' "$3")
	fi
	rows+=("$(printf '%-42s %12.0f %12s %6s %9s %9s %9s' "$1" "$2" "$ceiling" "$ratio" "${4:--}" "${5:--}" "${6:--}")")
}

echo "bench: measuring (results in one table at the end)" >&2
# The page cache's write speed into pages the guest has not used lately,
# then (the first file just deleted) into pages the kernel has just freed.
pc_fresh=$(dd_rate)
pc_reused=$(dd_rate)
ceil_null=$(field records_per_sec "$(perf "$null" ceiling --topic ceiling -n "$n_produce")")
ceil_single=$(field records_per_sec "$(perf "$single" ceiling --topic bench -n "$n_produce")")
row "ceiling: bare gRPC, null broker" "$ceil_null" "$ceil_null"
row "ceiling: bare gRPC, 1 node" "$ceil_single" "$ceil_null"

scratch "$(log_bytes "$n_produce" 1)"
row "ceiling: bare gRPC, 1 node, reused pages" \
	"$(field records_per_sec "$(perf "$single" ceiling --topic bench -n "$n_produce")")" "$ceil_null"

out=$(perf "$single" produce --topic bench -n "$n_produce" --acks 1)
single_acks1=$(field records_per_sec "$out")
row "produce 1 node acks=1" "$single_acks1" "$ceil_null"
scratch "$(log_bytes "$n_produce" 1)"
out=$(perf "$single" produce --topic bench -n "$n_produce" --acks 1)
single_acks1_reused=$(field records_per_sec "$out")
row "produce 1 node acks=1, reused pages" "$single_acks1_reused" "$ceil_null"
out=$(perf "$single" produce --topic bench -n "$n_produce" --acks 1 --max-in-flight 5)
row "produce 1 node acks=1, 5 in flight" "$(field records_per_sec "$out")" "$ceil_null"
out=$(perf "$single" produce --topic bench -n "$n_produce" --acks all)
idem_on=$(field records_per_sec "$out")
row "produce 1 node acks=all idempotent" "$idem_on" "$ceil_null"
out=$(perf "$single" produce --topic bench -n "$n_produce" --acks all --idempotent=false)
idem_off=$(field records_per_sec "$out")
row "produce 1 node acks=all plain" "$idem_off" "$ceil_null"
out=$(perf "$cluster" produce --topic bench3 -n "$n_produce" --acks all)
rf3_all=$(field records_per_sec "$out")
row "produce RF3 acks=all" "$rf3_all" "$ceil_null"
scratch "$(log_bytes "$n_produce" 3)"
out=$(perf "$cluster" produce --topic bench3 -n "$n_produce" --acks all)
rf3_all_reused=$(field records_per_sec "$out")
row "produce RF3 acks=all, reused pages" "$rf3_all_reused" "$ceil_null"
out=$(perf "$cluster" produce --topic bench3 -n "$n_produce" --acks 1)
row "produce RF3 acks=1" "$(field records_per_sec "$out")" "$ceil_null"
out=$(perf "$single" consume --topic bench -n "$n_consume" -o start)
row "consume 1 node" "$(field records_per_sec "$out")" "$ceil_null"

for rate in $rates; do
	for acks in 1 all; do
		out=$(perf "$cluster" e2e --topic "e2e-$rate-$acks" --partitions 3 --acks "$acks" --rate "$rate" -n $((rate * e2e_secs)))
		row "e2e RF3 acks=$acks at $rate/s" "$(field records_per_sec "$out")" - \
			"$(field latency_p50_ms "$out")" "$(field latency_p99_ms "$out")" "$(field latency_p999_ms "$out")"
	done
done

# The same beside many idle partitions, as most of a real cluster's are:
# every append still ends the followers' long polls, whose fetches name
# every partition they follow from that leader.
for ((i = 1; i <= idle_topics; i++)); do
	"$quire" --brokers "$cluster" topic create "idle-$i" -p 3 -r 3 >/dev/null || fail "create topic idle-$i"
done
rate=${rates%% *}
for acks in 1 all; do
	out=$(perf "$cluster" e2e --topic "e2e-idle-$acks" --partitions 3 --acks "$acks" --rate "$rate" -n $((rate * e2e_secs)))
	row "e2e RF3 acks=$acks at $rate/s, $((3 * idle_topics)) idle" "$(field records_per_sec "$out")" - \
		"$(field latency_p50_ms "$out")" "$(field latency_p99_ms "$out")" "$(field latency_p999_ms "$out")"
done

# The long run (BENCH_LONG_SECS): the tail over minutes, where writeback,
# segment rolls and checkpoints show.
long_line=
if [ -n "$long_secs" ]; then
	"$quire" --brokers "$cluster" topic create e2e-long -p 3 -r 3 -c min.insync.replicas=2 >/dev/null ||
		fail "create topic e2e-long"
	out=$(perf "$cluster" e2e --topic e2e-long --acks all --rate "$long_rate" -n $((long_rate * long_secs)))
	row "e2e RF3 acks=all at $long_rate/s, $long_secs s" "$(field records_per_sec "$out")" - \
		"$(field latency_p50_ms "$out")" "$(field latency_p99_ms "$out")" "$(field latency_p999_ms "$out")"
	long_line="e2e RF3 acks=all at $long_rate/s over $long_secs s: max $(field latency_max_ms "$out") ms, $(field errors "$out") errors"
fi

# Rounds of the two ratios: each round measures the ceiling, then
# single-node acks=1 and RF 3 acks=all into fresh pages, then the same two
# into reused pages, back to back, so the machine is alike for all five.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }
# Each round writes to topics of its own and deletes the ones before: the
# logs of every run kept would fill the memory with page cache in a few
# rounds, and from then on each write reclaims first, which swings the
# figures more than anything measured.
ratios_single=() ratios_rf3=() ratios_single_reused=() ratios_rf3_reused=()
prev_single=bench prev_rf3=bench3
for ((r = 1; r <= rounds; r++)); do
	"$quire" --brokers "$single" topic delete "$prev_single" >/dev/null || fail "delete topic $prev_single"
	"$quire" --brokers "$cluster" topic delete "$prev_rf3" >/dev/null || fail "delete topic $prev_rf3"
	prev_single=round-$r prev_rf3=round3-$r
	"$quire" --brokers "$single" topic create "$prev_single" -p 1 >/dev/null || fail "create topic $prev_single"
	"$quire" --brokers "$cluster" topic create "$prev_rf3" -p 1 -r 3 -c min.insync.replicas=2 >/dev/null ||
		fail "create topic $prev_rf3"
	c=$(field records_per_sec "$(perf "$null" ceiling --topic ceiling -n "$n_produce")")
	s1=$(field records_per_sec "$(perf "$single" produce --topic "$prev_single" -n "$n_produce" --acks 1)")
	r3=$(field records_per_sec "$(perf "$cluster" produce --topic "$prev_rf3" -n "$n_produce" --acks all)")
	scratch "$(log_bytes "$n_produce" 1)"
	s1w=$(field records_per_sec "$(perf "$single" produce --topic "$prev_single" -n "$n_produce" --acks 1)")
	scratch "$(log_bytes "$n_produce" 3)"
	r3w=$(field records_per_sec "$(perf "$cluster" produce --topic "$prev_rf3" -n "$n_produce" --acks all)")
	ratios_single+=("$(ratio "$s1" "$c")")
	ratios_rf3+=("$(ratio "$r3" "$s1")")
	ratios_single_reused+=("$(ratio "$s1w" "$c")")
	ratios_rf3_reused+=("$(ratio "$r3w" "$s1w")")
done

printf '%-42s %12s %12s %6s %9s %9s %9s\n' "measure" "records/s" "ceiling" "ratio" "p50 ms" "p99 ms" "p99.9 ms"
printf '%s\n' "${rows[@]}"
awk -v a="$rf3_all" -v b="$single_acks1" 'BEGIN { printf "RF3 acks=all / 1 node acks=1: %.2f\n", a / b }'
awk -v a="$rf3_all_reused" -v b="$single_acks1_reused" 'BEGIN { printf "RF3 acks=all / 1 node acks=1, reused pages: %.2f\n", a / b }'
echo "page cache, $dd_mib MiB in 1 MiB writes (dd): fresh pages $pc_fresh GB/s, just-freed pages $pc_reused GB/s"
awk -v a="$idem_on" -v b="$idem_off" 'BEGIN { printf "1 node acks=all, idempotent / plain: %.2f\n", a / b }'
# median NAME VALUES...: "NAME: median M (min A, max B, N rounds: V V ...)".
median() {
	local name=$1
	shift
	printf '%s\n' "$@" | sort -g | awk -v name="$name" '{ v[NR] = $1 } END {
		m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		printf "%s: median %.2f (min %.2f, max %.2f, %d rounds:", name, m, v[1], v[NR], NR
		for (i = 1; i <= NR; i++) printf " %.2f", v[i]
		print ")" }'
}
median "rounds, 1 node acks=1 / ceiling" "${ratios_single[@]}"
median "rounds, RF3 acks=all / 1 node acks=1" "${ratios_rf3[@]}"
median "rounds, reused pages, 1 node acks=1 / ceiling" "${ratios_single_reused[@]}"
median "rounds, reused pages, RF3 acks=all / 1 node acks=1" "${ratios_rf3_reused[@]}"

[ -z "$long_line" ] || echo "$long_line"

# The table's servers are done with: stopped, so that they take no CPU
# from the rows that follow.
QUIRE_CLUSTER_DIR="$dir/cluster" QUIRE_BIN="$quire" QUIRE_CLUSTER_STOP_TIMEOUT=20 \
	scripts/cluster.sh stop >/dev/null 2>&1 || true
for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
pids=()

# The node's CPU per record on each door, the same batches (1,000 records
# of 100 bytes) over gRPC and the Kafka listener.
echo "bench: node CPU per record on the two doors (BenchmarkDoorsNodeCPU, ${doors_ops}x)" >&2
go test -c -o "$dir/broker.test" ./broker/ || fail "build the broker's test binary"
(cd broker && "$dir/broker.test" -test.run '^$' -test.bench '^BenchmarkDoorsNodeCPU$' \
	-test.benchtime "${doors_ops}x") >"$dir/doors.txt" 2>&1 || { cat "$dir/doors.txt" >&2; fail "BenchmarkDoorsNodeCPU"; }
# door NAME: node-cpu-ns/record of sub-benchmark NAME (its name ends in
# -GOMAXPROCS, or not at all when that is 1).
door() {
	awk -v n="BenchmarkDoorsNodeCPU/$1" '$1 == n || index($1, n "-") == 1 {
		for (i = 2; i <= NF; i++) if ($i == "node-cpu-ns/record") print $(i - 1) }' "$dir/doors.txt" | head -n 1
}
door_row() {
	local g k
	g=$(door "$2") k=$(door "$3")
	[ -n "$g" ] && [ -n "$k" ] || fail "no figure for $2 or $3 in BenchmarkDoorsNodeCPU's output"
	printf '%-42s %12s %12s %6s\n' "$1" "$g" "$k" "$(awk -v a="$k" -v b="$g" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')"
}
printf '%-42s %12s %12s %6s\n' "node CPU ns/record (load $(cut -d' ' -f1 /proc/loadavg))" "gRPC" "Kafka" "K/gRPC"
door_row "produce, 1 batch" produce/grpc produce/kafka
door_row "fetch, 1 batch, gRPC Fetch" fetch/grpc fetch/kafka
door_row "fetch, 1 batch, gRPC FetchStream" fetch/grpcstream fetch/kafka
door_row "fetch, 8 batches, gRPC Fetch" fetch8/grpc fetch8/kafka

# Many partitions on one node (idle CPU, memory, disk, kill -9 to every
# partition writable).
QUIRE_BIN="$quire" BENCH_PARTITION_COUNTS="$part_counts" BENCH_IDLE_SECS="$part_idle" \
	scripts/bench_partitions.sh || fail "many-partitions bench"
