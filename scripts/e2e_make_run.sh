#!/usr/bin/env bash
# The README's first command, exactly as printed: `make run` in a copy of
# the working tree (so a developer's own ./quire-data is never touched)
# must build bin/quire and nothing else, start a dev broker on
# 127.0.0.1:9092 with its data in ./quire-data and metrics on
# 127.0.0.1:9404, take a record and give it back. Its other command,
# `make test`, is the one running this script.
#
# The README promises the fixed ports 9092 and 9404; when something
# already answers on either, the check is skipped with a notice (or fails
# with QUIRE_REQUIRE_MAKE_RUN=1, as .ci/run sets).
#
# Env: QUIRE_BIN (the CLI used as the client; default bin/quire), GRPCURL
# (default bin/grpcurl).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
quire="${QUIRE_BIN:-$root/bin/quire}"
grpcurl="${GRPCURL:-$root/bin/grpcurl}"

step() { echo "make-run: $*"; }
fail() {
	echo "make-run: FAIL: $*" >&2
	if [ -f "${tmp:-}/run.log" ]; then
		echo "---- make run output (last 40 lines) ----" >&2
		tail -n 40 "$tmp/run.log" >&2
	fi
	echo "make-run: FAIL (repeated after the log): $*" >&2
	exit 1
}
[ -x "$quire" ] || fail "quire not found at $quire (make build)"
[ -x "$grpcurl" ] || fail "grpcurl not found at $grpcurl (make tools)"

for p in 9092 9404; do
	if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
		if [ "${QUIRE_REQUIRE_MAKE_RUN:-0}" = 1 ]; then
			fail "127.0.0.1:$p is in use, so the README's make run cannot be checked"
		fi
		echo "make-run: SKIP: 127.0.0.1:$p is in use; the README's make run needs it"
		exit 0
	fi
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/quire-make-run.XXXXXX")
run_pid=""
cleanup() {
	if [ -n "$run_pid" ]; then
		kill -TERM -- "-$run_pid" 2>/dev/null || true
		wait "$run_pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

step "copying the working tree (without bin/, quire-data/ and .git)"
tree="$tmp/tree"
mkdir -p "$tree"
tar -C "$root" --exclude=./.git --exclude=./bin --exclude=./quire-data -cf - . | tar -C "$tree" -xf -

step "make run"
# Its own process group, so the cleanup stops make and the broker it started.
# make build compiles with -trimpath, so the copy's build, in a new
# directory, comes from the build cache that make test's own build filled
# (without it every package of the module was compiled again: 80 s of the
# script's 90 on 2 cores).
(cd "$tree" && exec setsid make run) >"$tmp/run.log" 2>&1 &
run_pid=$!

deadline=$((SECONDS + 300)) # the first build of a cold cache included
until "$grpcurl" -plaintext -max-time 2 127.0.0.1:9092 grpc.health.v1.Health/Check 2>/dev/null | grep -q '"SERVING"'; do
	kill -0 "$run_pid" 2>/dev/null || fail "make run exited before the broker answered"
	[ "$SECONDS" -lt "$deadline" ] || fail "no broker answered on 127.0.0.1:9092 within 300 s of make run"
	sleep 0.2
done
step "a broker answers on 127.0.0.1:9092"

ready=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 http://127.0.0.1:9404/readyz || true)
[ "$ready" = 200 ] || fail "http://127.0.0.1:9404/readyz answered $ready, not 200"

[ -d "$tree/quire-data" ] || fail "make run did not keep its data in ./quire-data"
built=$(cd "$tree/bin" && ls)
[ "$built" = quire ] || fail "make run left more than bin/quire in bin/: $built"

step "produce and consume a record (topics are created on first use in --dev)"
echo "hello from make run" | "$quire" produce readme-make-run --brokers 127.0.0.1:9092 >"$tmp/produce.out" 2>&1 ||
	fail "produce: $(cat "$tmp/produce.out")"
got=$("$quire" consume readme-make-run --brokers 127.0.0.1:9092 -p 0 -o 0 -n 1 2>&1) || fail "consume: $got"
case "$got" in
*"hello from make run"*) ;;
*) fail "consume gave back: $got" ;;
esac

step "stopping the broker"
kill -TERM -- "-$run_pid"
deadline=$((SECONDS + 30))
while kill -0 "$run_pid" 2>/dev/null; do
	[ "$SECONDS" -lt "$deadline" ] || fail "make run did not stop within 30 s of SIGTERM"
	sleep 0.1
done
wait "$run_pid" 2>/dev/null || true
run_pid=""
grep -q 'creating a new data directory\|new data directory' "$tmp/run.log" ||
	fail "the first start did not say it created a new data directory"
step "OK"
