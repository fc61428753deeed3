#!/usr/bin/env bash
# Runs a package's tests COUNT times with -race while a busy loop keeps
# every core busy, to find the tests that fail on a loaded machine:
#
#   scripts/stress.sh                      # PKG=./testcluster COUNT=5
#   PKG=./client COUNT=3 RUN='TestCluster' scripts/stress.sh
#   make stress PKG=./testcluster COUNT=5 RUN=TestReplication
#
# PKG      packages to test (go test patterns, space-separated), ./testcluster
# COUNT    -count, 5
# RUN      -run regexp, all tests when empty
# HOGS     busy loops to start, one per core (nproc) by default
# TIMEOUT  go test -timeout, 60m
#
# The hogs run for the whole run and are stopped however it ends. It
# prints each failed test with how many times it failed, keeps the whole
# output in a log file (named at the end) and exits non-zero on any
# failure.
set -u

PKG=${PKG:-./testcluster}
COUNT=${COUNT:-5}
RUN=${RUN:-}
HOGS=${HOGS:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || nproc)}
TIMEOUT=${TIMEOUT:-60m}
GO=${GO:-go}

hogs=()
stop_hogs() {
	for pid in "${hogs[@]}"; do
		kill "$pid" 2>/dev/null
	done
	for pid in "${hogs[@]}"; do
		wait "$pid" 2>/dev/null
	done
	hogs=()
}
trap stop_hogs EXIT
trap 'exit 130' INT TERM

read -r -a pkgs <<<"$PKG"
args=(-race -count="$COUNT" -timeout "$TIMEOUT")
if [ -n "$RUN" ]; then
	args+=(-run "$RUN")
fi

# Build first, without the hogs: the run times the tests, not the compiler.
if ! "$GO" test -race -count=1 -run '^$' "${pkgs[@]}" >/dev/null; then
	echo "stress: build of ${PKG} failed" >&2
	exit 2
fi

for _ in $(seq "$HOGS"); do
	(while :; do :; done) &
	hogs+=($!)
done
echo "stress: ${HOGS} busy loops (pids ${hogs[*]}), load $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
echo "stress: go test ${args[*]} ${pkgs[*]}"

log=$(mktemp "${TMPDIR:-/tmp}/quire-stress.XXXXXX")
start=$(date +%s)
"$GO" test "${args[@]}" "${pkgs[@]}" >"$log" 2>&1
rc=$?
took=$(($(date +%s) - start))
stop_hogs

grep -E '^(ok|FAIL)[[:space:]]' "$log"
if [ "$rc" -ne 0 ]; then
	echo "stress: failed tests (times failed, name):"
	grep -E '^[[:space:]]*--- FAIL: ' "$log" | sed -E 's/^[[:space:]]*--- FAIL: ([^ ]+).*/\1/' | sort | uniq -c | sort -rn
	grep -E '^panic:|test timed out' "$log" | head -5
	echo "stress: FAILED after ${took}s (exit ${rc}); full output in ${log}"
	exit "$rc"
fi
echo "stress: passed ${COUNT} times in ${took}s; output in ${log}"
