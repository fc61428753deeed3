#!/usr/bin/env bash
# CPU per record of the whole produce path, client and brokers together:
# starts a single dev node or a 3-node cluster (RF 3, min.insync.replicas 2)
# on free loopback ports with /debug/pprof on, runs `quire perf produce`
# (one producer, one partition, 100-byte records) and prints the CPU seconds
# every process used per million records, from /proc/PID/stat before and
# after. On a machine shared with other work, CPU per record drifts far less
# than records/s. With PERF_PROFILE_DIR, it also writes CPU profiles of the
# client and of every node over the run there (client.pprof, nodeN.pprof);
# with PERF_RECORD=FILE, a system-wide `perf record -g` of the run (kernel
# time included: page-cache copies, loopback TCP) into FILE.
#
#   scripts/perf_cpu.sh single 1     one node, acks=1
#   scripts/perf_cpu.sh rf3 all      three nodes, acks=all
#   scripts/perf_cpu.sh null 1       the null broker (quire perf null-broker)
#
# PERF_TOOL=ceiling runs `quire perf ceiling` (pre-built requests over one
# bare gRPC stream, no client library) instead of `perf produce`.
#
# PERF_PAGES=reused writes and deletes a scratch file as large as the run's
# log just before it, so that the nodes append into pages the kernel has
# just freed, as a node whose page cache is full does, rather than into
# pages a VM's host took back (scripts/bench.sh, "Page-cache pages").
#
# Env: QUIRE_BIN (default ./bin/quire, built when missing), PERF_N (records,
# default 5000000), PERF_PROFILE_DIR, PERF_EXTRA (more `perf produce` flags),
# PERF_PAGES (fresh, the default, or reused).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

mode=${1:-single}
acks=${2:-1}
n=${PERF_N:-5000000}
prof=${PERF_PROFILE_DIR:-}
quire=${QUIRE_BIN:-$root/bin/quire}
if [ ! -x "$quire" ]; then
	go build -o "$quire" ./cmd/quire
fi
dir=$(mktemp -d)
pids=()
cleanup() {
	local rc=$?
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$dir"
	exit $rc
}
trap cleanup EXIT INT TERM
fail() {
	echo "perf_cpu: FAIL: $*" >&2
	for f in "$dir"/*.log; do [ -f "$f" ] && tail -n 20 "$f" >&2; done
	exit 1
}

case $mode in
single | null) count=1 ;;
rf3) count=3 ;;
*) fail "mode is single, rf3 or null, not $mode" ;;
esac
base=$(free_ports $((2 * count)))
[ -n "$base" ] || fail "no free ports"
brokers="" voters="" metrics=()
for ((i = 1; i <= count; i++)); do
	brokers+="${brokers:+,}127.0.0.1:$((base + i - 1))"
	voters+="${voters:+,}$i@127.0.0.1:$((base + i - 1))"
	metrics+=("127.0.0.1:$((base + count + i - 1))")
done
for ((i = 1; i <= count; i++)); do
	addr=127.0.0.1:$((base + i - 1))
	if [ "$mode" = null ]; then
		"$quire" perf null-broker --listen "$addr" --topic perf >"$dir/node1.log" 2>&1 &
	elif [ "$count" = 1 ]; then
		"$quire" server --dev --data-dir "$dir/node1" --set "listeners=$addr" \
			--set "metrics.listen=${metrics[0]}" --set metrics.pprof.enable=true >"$dir/node1.log" 2>&1 &
	else
		env QUIRE_CLUSTER_ID=quire-perf QUIRE_PROCESS_ROLES=broker,controller QUIRE_NODE_ID=$i \
			QUIRE_LISTENERS="$addr" QUIRE_ADVERTISED_LISTENERS="$addr" QUIRE_CONTROLLER_QUORUM_VOTERS="$voters" \
			QUIRE_LOG_DIRS="$dir/node$i" QUIRE_METRICS_LISTEN="${metrics[$((i - 1))]}" QUIRE_METRICS_PPROF_ENABLE=true \
			"$quire" server >"$dir/node$i.log" 2>&1 &
	fi
	pids+=($!)
done

deadline=$((SECONDS + 60))
until [ "$mode" = null ] || "$quire" --brokers "$brokers" topic create perf -p 1 -r "$count" -c min.insync.replicas=$((count > 1 ? 2 : 1)) >"$dir/create.log" 2>&1; do
	grep -q TOPIC_ALREADY_EXISTS "$dir/create.log" && break
	[ "$SECONDS" -lt "$deadline" ] || fail "create topic: $(cat "$dir/create.log")"
	sleep 0.2
done

tool=${PERF_TOOL:-produce}
case $tool in
produce) tool_args=(produce --acks "$acks" --interval 1h) ;;
ceiling) tool_args=(ceiling --acks "$([ "$acks" = all ] && echo -1 || echo "$acks")") ;;
*) fail "PERF_TOOL is produce or ceiling, not $tool" ;;
esac
if [ "$mode" = null ]; then
	deadline=$((SECONDS + 30))
	until (exec 3<>"/dev/tcp/${brokers%:*}/${brokers##*:}") 2>/dev/null; do
		[ "$SECONDS" -lt "$deadline" ] || fail "null broker not listening"
		sleep 0.1
	done
fi
# shellcheck disable=SC2086 # PERF_EXTRA is split into flags
produce() {
	"$quire" --brokers "$brokers" --format json perf "${tool_args[@]}" --topic perf "$@" ${PERF_EXTRA:-}
}
# Warm up: connections, the partition's leader known everywhere, segment
# files and the page cache.
produce -n $((n / 10)) >/dev/null 2>>"$dir/perf.log" || fail "warm-up"

case ${PERF_PAGES:-fresh} in
fresh) ;;
reused)
	scratch_pages "$dir/scratch" $((n * 160 * count)) || fail "scratch file"
	;;
*) fail "PERF_PAGES is fresh or reused, not $PERF_PAGES" ;;
esac

# ticks PID: utime+stime of PID in clock ticks.
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
before=()
for p in "${pids[@]}"; do before+=("$(ticks "$p")"); done
profs=()
if [ -n "$prof" ]; then
	mkdir -p "$prof"
	for ((i = 0; i < count; i++)); do
		[ "$mode" = null ] && break
		curl -s -o "$prof/node$((i + 1)).pprof" "http://${metrics[$i]}/debug/pprof/profile?seconds=${PERF_PROFILE_SECS:-20}" &
		profs+=($!)
	done
	extra=(--cpuprofile "$prof/client.pprof")
else
	extra=()
fi
rec=
if [ -n "${PERF_RECORD:-}" ]; then
	perf record -a -g -F 999 -o "$PERF_RECORD" >"$dir/perf-record.log" 2>&1 &
	rec=$!
	sleep 0.5
fi
# shellcheck disable=SC2086
out=$(/usr/bin/time -f "%U %S" -o "$dir/client.time" "$quire" --brokers "$brokers" --format json perf "${tool_args[@]}" \
	--topic perf -n "$n" "${extra[@]}" ${PERF_EXTRA:-} 2>>"$dir/perf.log") || fail "perf $tool"
after=()
for p in "${pids[@]}"; do after+=("$(ticks "$p")"); done
if [ -n "$rec" ]; then
	kill -INT "$rec"
	wait "$rec" || true
fi
for p in "${profs[@]}"; do wait "$p" || true; done

tck=$(getconf CLK_TCK)
recs=$(tr -d ' \n' <<<"$out" | grep -o '"records_per_sec":[0-9.e+]*' | cut -d: -f2)
errs=$(tr -d ' \n' <<<"$out" | grep -o '"errors":[0-9]*' | cut -d: -f2)
read -r cu cs <"$dir/client.time"
line=$(awk -v u="$cu" -v s="$cs" -v n="$n" 'BEGIN { printf "client %.3f", (u + s) / n * 1e6 }')
total=$(awk -v u="$cu" -v s="$cs" 'BEGIN { print u + s }')
for ((i = 0; i < count; i++)); do
	secs=$(awk -v a="${before[$i]}" -v b="${after[$i]}" -v t="$tck" 'BEGIN { print (b - a) / t }')
	line+=$(awk -v c="$secs" -v n="$n" -v i=$((i + 1)) 'BEGIN { printf ", node%d %.3f", i, c / n * 1e6 }')
	total=$(awk -v a="$total" -v b="$secs" 'BEGIN { print a + b }')
done
printf '%s %s acks=%s: %.0f records/s, %s errors; CPU s per M records: %s, total %.3f\n' "$tool" "$mode" "$acks" "$recs" "${errs:-0}" \
	"$line" "$(awk -v t="$total" -v n="$n" 'BEGIN { print t / n * 1e6 }')"
