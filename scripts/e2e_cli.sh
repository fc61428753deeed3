#!/usr/bin/env bash
# End-to-end checks of the quire CLI against a real server: topic create,
# list and describe, produce from stdin (plain, keyed, explicit partition),
# consume -o start -n N and compare, consume formats and JSON, alter-config,
# add-partitions, error exit codes, cluster info and features, a short perf
# run, delete.
#
# Usage: scripts/e2e_cli.sh [QUIRE_BIN [BROKER_ADDR]]
# Both default to the environment (QUIRE_BIN, QUIRE_BROKERS), which is how
# scripts/e2e.sh calls it. Without a broker address the script builds (if
# needed) and starts its own `quire server --dev` on a free port.
set -euo pipefail
cd "$(dirname "$0")/.."

quire=${1:-${QUIRE_BIN:-}}
brokers=${2:-${QUIRE_BROKERS:-}}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/quire-e2e-cli.XXXXXX")
server_pid=""
cleanup() {
	if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
		kill -TERM "$server_pid" 2>/dev/null || true
		wait "$server_pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

step() { echo "e2e-cli: $*"; }
fail() {
	echo "e2e-cli: FAIL: $*" >&2
	[ -f "$tmp/server.log" ] && tail -n 40 "$tmp/server.log" >&2
	echo "e2e-cli: FAIL (repeated after the logs): $*" >&2
	exit 1
}

if [ -z "$quire" ]; then
	step "building quire"
	go build -o "$tmp/quire" ./cmd/quire
	quire="$tmp/quire"
fi
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
if [ -z "$brokers" ]; then
	port=$(free_ports 1)
	[ -n "$port" ] || fail "no free port"
	brokers="127.0.0.1:$port"
	step "starting quire server --dev on $brokers"
	"$quire" server --dev --data-dir "$tmp/data" --set "listeners=$brokers" --set metrics.listen= >"$tmp/server.log" 2>&1 &
	server_pid=$!
	deadline=$((SECONDS + 60))
	until "$quire" --brokers "$brokers" cluster info 2>/dev/null | grep "$brokers" >/dev/null; do
		kill -0 "$server_pid" 2>/dev/null || fail "server exited during start"
		[ "$SECONDS" -lt "$deadline" ] || fail "server not up within 60s"
		sleep 0.2
	done
fi
export QUIRE_BROKERS="$brokers"
q() { "$quire" "$@"; }
topic="cli-e2e-$RANDOM$RANDOM"

step "cluster info"
deadline=$((SECONDS + 30))
until out=$(q cluster info 2>&1) && grep -q "$brokers" <<<"$out"; do
	[ "$SECONDS" -lt "$deadline" ] || fail "cluster info: $out"
	sleep 0.2
done
grep -q "$brokers" <<<"$out" || fail "cluster info does not list $brokers: $out"

step "cluster features"
deadline=$((SECONDS + 30))
until out=$(q cluster features 2>&1) && grep -Eq "^METADATA.VERSION  ([2-9]|[1-9][0-9])$" <<<"$out"; do
	[ "$SECONDS" -lt "$deadline" ] || fail "cluster features: metadata.version not raised past 1: $out"
	sleep 0.2
done
if out=$(q cluster features --upgrade 99 2>&1); then fail "upgrade to 99 succeeded: $out"; fi
grep -q "FEATURE_UPDATE_FAILED" <<<"$out" || fail "upgrade to 99 did not print the server's error: $out"

step "topic create $topic -p 3"
q topic create "$topic" -p 3 -c retention.ms=3600000 >/dev/null || fail "topic create"
if out=$(q topic create "$topic" -p 3 2>&1); then fail "creating $topic twice succeeded: $out"; fi
grep -q "TOPIC_ALREADY_EXISTS" <<<"$out" || fail "duplicate create did not print the server's error: $out"

step "topic list"
q topic list | grep -E "^$topic +3 " >/dev/null || fail "topic list lacks $topic with 3 partitions"

step "produce 300 keyed lines from stdin"
seq 1 300 | awk '{print "key" ($1 % 17) ":value-" $1}' >"$tmp/in.txt"
q produce "$topic" --key-separator : --acks all <"$tmp/in.txt" || fail "produce"

step "consume -o start -n 300 and compare"
q consume "$topic" -o start -n 300 -f '%k:%v\n' | sort >"$tmp/out.txt"
sort "$tmp/in.txt" | cmp -s - "$tmp/out.txt" || fail "consumed records differ from produced ones"

step "per-partition order and key placement"
q consume "$topic" -o start -n 300 -f '%p %o %k %v\n' >"$tmp/fmt.txt"
awk '{ if (($1 in last) && $2 != last[$1] + 1) { print "gap on " $1 ": " last[$1] " -> " $2; bad = 1 } last[$1] = $2;
       if (($3 in kp) && kp[$3] != $1) { print "key " $3 " on two partitions"; bad = 1 } kp[$3] = $1 }
     END { exit bad }' "$tmp/fmt.txt" || fail "offsets not contiguous per partition or a key split"

step "produce -p 2 -v and consume that partition from its offset"
out=$(printf 'explicit-a\nexplicit-b\n' | q produce "$topic" -p 2 -v --acks 1) || fail "produce -p"
first=$(awk 'NR==1 {print $NF}' <<<"$out")
grep -q "$topic/2 at offset" <<<"$out" || fail "produce -v output: $out"
got=$(q consume "$topic" -p 2 -o "$first" -n 2)
[ "$got" = $'explicit-a\nexplicit-b' ] || fail "consume -p 2 -o $first: $got"

step "consume --format json and @timestamp"
q --format json consume "$topic" -p 2 -o "$first" -n 1 | grep '"value":"explicit-a"' >/dev/null || fail "json consume"
q consume "$topic" -p 2 -o "@0" -n 1 >/dev/null || fail "consume -o @0"

step "topic describe"
out=$(q topic describe "$topic") || fail "describe"
grep -q "PARTITIONS  3" <<<"$out" || fail "describe: $out"
grep -q "retention.ms" <<<"$out" || fail "describe lacks the topic config: $out"
total=$(q --format json topic describe "$topic" | awk -F': ' '/"high_watermark"/ {gsub(/,/, "", $2); s += $2} END {print s}')
[ "$total" = 302 ] || fail "high watermarks sum to $total, want 302"

step "alter-config and add-partitions"
q topic alter-config "$topic" -c retention.ms=7200000 >/dev/null || fail "alter-config"
q topic describe "$topic" | grep "7200000" >/dev/null || fail "alter-config not visible"
q topic add-partitions "$topic" -n 2 >/dev/null || fail "add-partitions"
q topic describe "$topic" | grep "PARTITIONS  5" >/dev/null || fail "add-partitions not visible"

step "errors exit non-zero with the server's message"
if out=$(q topic describe "no-such-topic-$RANDOM" 2>&1); then fail "describe of a missing topic succeeded"; fi
for bad in "-p -3" "-p 0" "-r -1"; do
	# shellcheck disable=SC2086 # $bad is two words on purpose
	if out=$(q topic create "cli-bad-$RANDOM" $bad 2>&1); then fail "topic create $bad succeeded: $out"; fi
	grep -q "must be" <<<"$out" || fail "topic create $bad: no reason given: $out"
done

step "--dev: produce and consume both create a missing topic, and say so"
missing="cli-new-$RANDOM$RANDOM"
if out=$(q consume "$missing" -p 0 -o 5 -n 1 2>&1); then fail "consume at offset 5 of a new topic succeeded: $out"; fi
grep -q "created topic $missing" <<<"$out" || fail "consume of a missing topic did not say it created it: $out"
grep -q "the log is empty" <<<"$out" || fail "consume at offset 5 of an empty topic: $out"
printf 'a\nb\nc\n' | q produce "$missing" -p 0 || fail "produce to $missing"
step "consume -o past the end fails with the valid range, unless --reset"
if out=$(q consume "$missing" -p 0 -o 1000000 -n 1 2>&1); then fail "consume past the end succeeded: $out"; fi
grep -q "valid offsets are 0 to 2 (log end 3)" <<<"$out" || fail "consume past the end: $out"
got=$(q consume "$missing" -p 0 -o 1000000 -n 1 --reset earliest) || fail "consume --reset earliest"
[ "$got" = "a" ] || fail "consume --reset earliest printed $got"
out=$(echo x | q produce "$missing-p" 2>&1) || fail "produce to a missing topic: $out"
grep -q "created topic $missing-p" <<<"$out" || fail "produce to a missing topic did not say it created it: $out"
q topic delete "$missing" "$missing-p" >/dev/null || fail "delete the created topics"

step "perf produce / consume (small)"
q perf produce --topic "$topic-perf" --partitions 2 -n 20000 --size 100 --acks 1 >"$tmp/perf.txt" 2>&1 || fail "perf produce: $(cat "$tmp/perf.txt")"
grep -q "20000 records" "$tmp/perf.txt" || fail "perf produce summary: $(cat "$tmp/perf.txt")"
q perf consume --topic "$topic-perf" -n 20000 >"$tmp/perf.txt" 2>&1 || fail "perf consume"
grep -q "20000 records" "$tmp/perf.txt" || fail "perf consume summary: $(cat "$tmp/perf.txt")"

step "the README's CLI block, exactly as printed"
# From a directory whose bin/quire is this run's binary, the path the
# README names; QUIRE_BROKERS points it at this server.
mkdir -p "$tmp/readme/bin"
ln -sf "$(cd "$(dirname "$quire")" && pwd)/$(basename "$quire")" "$tmp/readme/bin/quire"
q topic delete orders perf >/dev/null 2>&1 || true # left by an earlier run on this server
out=$(run_readme_block cli "$tmp/readme" 2>&1) || fail "the README's CLI block failed: $out"
grep -q "^orders  *OK" <<<"$out" || fail "README CLI block: no topic created: $out"
grep -Eq "^[0-2]/[0-9]+ k1=hello$" <<<"$out" || fail "README CLI block: consume -f output: $out"
grep -q "200000 records" <<<"$out" || fail "README CLI block: perf summary: $out"
grep -Eq "^[0-2] +[0-9]+ +[0-9]+ +0 +[0-9]+ " <<<"$out" || fail "README CLI block: no producer from topic describe --producers: $out"
grep -Eq "^billing +orders +[0-2] +[0-9-]+ +0$" <<<"$out" || fail "README CLI block: group seek --to start: $out"
grep -Eq "^jobs +orders +[0-2] +[0-9-]+ +0$" <<<"$out" || fail "README CLI block: group share-seek --to start: $out"
q topic delete orders perf >/dev/null || fail "delete the README's topics"

step "topic delete"
q topic delete "$topic" "$topic-perf" >/dev/null || fail "delete"
if q topic list | grep "^$topic " >/dev/null; then fail "$topic still listed"; fi
step "ok"
