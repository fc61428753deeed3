#!/usr/bin/env bash
# End-to-end check of a real `quire server --dev` through grpcurl: services,
# health, create a topic, produce JSON records, fetch them back decoded,
# check offsets, commit a consumer group's offset; then kill -9 the server,
# restart it and find every record and the committed offset; then consume
# with `quire consume --group` and check `quire group describe`; then consume
# a group through Groups/Subscribe streams (grpcurl -d @ reading a fifo):
# one stream of batches acknowledging each partition with next_offset and
# closing, two streams of the older per-record form splitting a topic.
#
# Env: QUIRE_BIN (default: build into a temp dir), GRPCURL (default
# ./bin/grpcurl), E2E_KEEP=1 keeps the temp dir.
#
# Hook for more checks: if scripts/e2e_cli.sh exists it runs at the end,
# against the running server, with QUIRE_BIN and QUIRE_BROKERS set; then
# scripts/e2e_python.sh runs the Python example against it (installing
# Debian's python3-grpcio and python3-grpc-tools with apt-get if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

tmp=$(mktemp -d "${TMPDIR:-/tmp}/quire-e2e.XXXXXX")
server_pid=""
sub_pids=()
cleanup() {
	for p in "${sub_pids[@]}"; do kill "$p" 2>/dev/null || true; done
	if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
		kill -9 "$server_pid" 2>/dev/null || true
		wait "$server_pid" 2>/dev/null || true
	fi
	if [ "${E2E_KEEP:-0}" = 1 ]; then echo "e2e: kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

step() { echo "e2e: $*"; }
fail() {
	echo "e2e: FAIL: $*" >&2
	if [ -f "$tmp/server.log" ]; then
		echo "---- server log (last 60 lines) ----" >&2
		tail -n 60 "$tmp/server.log" >&2
	fi
	echo "e2e: FAIL (repeated after the logs): $*" >&2
	exit 1
}

quire="${QUIRE_BIN:-}"
if [ -z "$quire" ]; then
	step "building quire"
	go build -o "$tmp/quire" ./cmd/quire
	quire="$tmp/quire"
fi
grpcurl="${GRPCURL:-$root/bin/grpcurl}"
[ -x "$grpcurl" ] || fail "grpcurl not found at $grpcurl (make tools installs it)"

# shellcheck source=scripts/lib.sh
. scripts/lib.sh
port=$(free_ports 1)
[ -n "$port" ] || fail "no free port found"
addr="127.0.0.1:$port"

start_server() {
	"$quire" server --dev --data-dir "$tmp/data" --set "listeners=$addr" --set metrics.listen= \
		--set group.consumer.heartbeat.interval.ms=300 >>"$tmp/server.log" 2>&1 &
	server_pid=$!
	# Poll health with a deadline; no fixed sleeps.
	local deadline=$((SECONDS + 60))
	until "$grpcurl" -plaintext -max-time 2 "$addr" grpc.health.v1.Health/Check 2>/dev/null | grep '"SERVING"' >/dev/null; do
		kill -0 "$server_pid" 2>/dev/null || fail "server exited during start"
		[ "$SECONDS" -lt "$deadline" ] || fail "server not healthy within 60s"
		sleep 0.1
	done
}

# call METHOD JSON: one grpcurl call; prints the response.
call() {
	"$grpcurl" -plaintext -emit-defaults -max-time 20 -d "$2" "$addr" "$1"
}

expect() { # expect PATTERN TEXT...
	local pattern=$1
	shift
	grep -q -- "$pattern" <<<"$*" || fail "expected /$pattern/ in: $*"
}

step "starting quire server --dev on $addr"
start_server

step "listing services"
services=$("$grpcurl" -plaintext "$addr" list)
for s in quire.v1.Admin quire.v1.Producer quire.v1.Consumer quire.v1.Metadata quire.v1.Groups grpc.health.v1.Health; do
	expect "^$s\$" "$services"
done
expect "rpc ProduceRecords" "$("$grpcurl" -plaintext "$addr" describe quire.v1.Producer)"

# ---- README examples: the README's grpcurl block, exactly as printed ----
# It runs from a directory whose bin/ holds this run's grpcurl and quire,
# the paths the README names, with the documented 127.0.0.1:9092 swapped
# for this server's address.
mkdir -p "$tmp/readme/bin"
ln -sf "$grpcurl" "$tmp/readme/bin/grpcurl"
ln -sf "$quire" "$tmp/readme/bin/quire"
step "running the README's grpcurl block"
out=$(run_readme_block grpcurl "$tmp/readme" "s/127\.0\.0\.1:9092/$addr/g") || fail "the README's grpcurl block failed: $out"
for s in quire.v1.Admin quire.v1.Producer quire.v1.Consumer; do expect "^$s\$" "$out"; done
expect '"SERVING"' "$out"
expect '"name": "e2e-orders"' "$out"
expect '"partition": 1' "$out"
[ "$(grep -c '"offset": "[0-3]"' <<<"$out")" -ge 4 ] || fail "want 4 produced offsets: $out"
for v in first second third; do expect "\"value\": \"$v\"" "$out"; done
expect '"key": "k1"' "$out"
expect '"nextOffset": "3"' "$out"
expect '"highWatermark": "3"' "$out"
expect '"commitTimeMs"' "$out"
expect '"offset": "-1"' "$out"
expect '"group": "e2e-billing"' "$out"
expect '"logEndOffset": "3"' "$out"
expect '"brokers"' "$out"
# ---- README examples end ----


step "checking bad input is rejected"
if out=$(call quire.v1.Admin/CreateTopic '{"name": "bad/name"}' 2>&1); then fail "invalid topic name accepted: $out"; fi
expect "InvalidArgument" "$out"
if out=$(call quire.v1.Consumer/FetchRecords '{"topic": "e2e-orders", "partition": 7}' 2>&1); then fail "partition past the count accepted: $out"; fi
expect "InvalidArgument" "$out"
expect '"retriable": false' "$out"
if out=$(call quire.v1.Consumer/FetchRecords '{"topic": "", "partition": 0}' 2>&1); then fail "empty topic name accepted: $out"; fi
expect "InvalidArgument" "$out"
expect "topic name is empty" "$out"
if out=$(call quire.v1.Consumer/FetchRecords '{"topic": "e2e-orders", "partition": 0, "offset": 1000000}' 2>&1); then fail "offset past the end accepted: $out"; fi
expect "valid offsets are 0 to 2 (log end 3)" "$out"
if out=$(call quire.v1.Groups/CommitOffsets '{"group": "e2e-billing", "offsets": [{"topic": "e2e-orders", "partition": 0, "offset": -1}]}' 2>&1); then fail "negative committed offset accepted: $out"; fi
expect "InvalidArgument" "$out"
if out=$(call quire.v1.Groups/CommitOffsets '{"group": "e2e-billing", "offsets": [{"topic": "e2e-nope", "partition": 0, "offset": 1}]}' 2>&1); then fail "offset of an unknown topic accepted: $out"; fi
expect "NotFound" "$out"

step "producing more with broker-side partitioning (keys and keyless)"
out=$(call quire.v1.Producer/ProduceRecords '{"topic": "e2e-orders", "records": [{"key": "a", "value": "ka"}, {"key": "b", "value": "kb"}, {"value": "nokey"}]}')
expect '"results"' "$out"
total_before=$(call quire.v1.Admin/DescribeTopics '{"names": ["e2e-orders"]}' | grep -o '"logEndOffset": "[0-9]*"' | grep -o '[0-9]*' | awk '{s += $1} END {print s + 0}')
[ "$total_before" -eq 7 ] || fail "want 7 records in all, have $total_before"

step "kill -9 and restart"
kill -9 "$server_pid"
wait "$server_pid" 2>/dev/null || true
server_pid=""
start_server

step "fetching after restart"
out=$(call quire.v1.Consumer/FetchRecords '{"topic": "e2e-orders", "partition": 0, "offset": 0}')
for v in first second third; do expect "\"value\": \"$v\"" "$out"; done
total_after=$(call quire.v1.Admin/DescribeTopics '{"names": ["e2e-orders"]}' | grep -o '"highWatermark": "[0-9]*"' | grep -o '[0-9]*' | awk '{s += $1} END {print s + 0}')
[ "$total_after" -eq "$total_before" ] || fail "had $total_before records before the crash, $total_after after"

step "producing after restart continues the offsets"
latest=$(call quire.v1.Consumer/ListOffsets '{"partitions": [{"topic": "e2e-orders", "partition": 0, "timestampMs": -1}]}' | grep -o '"offset": "[0-9]*"' | grep -o '[0-9]*')
out=$(call quire.v1.Producer/ProduceRecords '{"topic": "e2e-orders", "records": [{"value": "after", "partition": 0}]}')
expect "\"offset\": \"$latest\"" "$out"

step "committed offsets survive the restart"
out=$(call quire.v1.Groups/FetchOffsets '{"group": "e2e-billing"}')
expect '"offset": "3"' "$out"

step "consume --group commits what it printed; group describe shows it with lag 0"
q() { "$quire" --brokers "$addr" "$@"; }
end0=$(call quire.v1.Consumer/ListOffsets '{"partitions": [{"topic": "e2e-orders", "partition": 0, "timestampMs": -1}]}' | grep -o '"offset": "[0-9]*"' | grep -o '[0-9]*')
q consume e2e-orders -p 0 --group e2e-cli -n "$end0" >"$tmp/group-consumed.txt" || fail "consume --group"
[ "$(wc -l <"$tmp/group-consumed.txt")" -eq "$end0" ] || fail "consume --group printed $(wc -l <"$tmp/group-consumed.txt") records, want $end0"
desc=$(q group describe e2e-cli) || fail "group describe: $desc"
awk -v want="$end0" '$1 == "e2e-cli" && $2 == "e2e-orders" && $3 == 0 { found = 1; if ($4 != want || $5 != want || $6 != 0) bad = 1 }
     END { exit !(found && !bad) }' <<<"$desc" || fail "group describe: want offset $end0, log end $end0 and lag 0 in: $desc"
call quire.v1.Producer/ProduceRecords '{"topic": "e2e-orders", "records": [{"value": "for-the-group", "partition": 0}]}' >/dev/null
got=$(q consume e2e-orders -p 0 --group e2e-cli -n 1) || fail "second consume --group"
[ "$got" = "for-the-group" ] || fail "second consume --group did not continue after the commit: $got"
groups=$(q group list) || fail "group list"
expect '^e2e-cli$' "$groups"
expect '^e2e-billing$' "$groups"
q group delete e2e-cli >/dev/null || fail "group delete"
groups=$(q group list) || fail "group list"
if grep -q '^e2e-cli$' <<<"$groups"; then fail "e2e-cli still listed after delete: $groups"; fi
if out=$(q group describe e2e-cli 2>&1); then fail "describe of a deleted group succeeded: $out"; fi

# ---- hook: client engineer's CLI checks ----
if [ -x scripts/e2e_cli.sh ]; then
	step "running scripts/e2e_cli.sh"
	QUIRE_BIN="$quire" QUIRE_BROKERS="$addr" GRPCURL="$grpcurl" scripts/e2e_cli.sh || fail "scripts/e2e_cli.sh failed"
fi

step "plain records: a null value (tombstone) and an empty one, bytes; FetchRecordsMulti over two partitions"
call quire.v1.Admin/CreateTopic '{"name": "e2e-plain", "partitions": 2}' >/dev/null
out=$(call quire.v1.Producer/ProduceRecords '{"topic": "e2e-plain", "records": [{"key": "gone", "partition": 0}, {"key": "blank", "value": "", "partition": 0}, {"valueBytes": "/wA=", "partition": 1}]}')
[ "$(grep -c '"offset"' <<<"$out")" -eq 3 ] || fail "want 3 offsets: $out"
out=$(call quire.v1.Consumer/FetchRecordsMulti '{"partitions": [{"topic": "e2e-plain", "partition": 0}, {"topic": "e2e-plain", "partition": 1}], "maxWaitMs": 5000}')
expect '"key": "gone"' "$out"
expect '"valueBytes": "/wA="' "$out"
# The tombstone shows no value at all, even with -emit-defaults; the empty
# value shows "value": "".
[ "$(grep -c '"value": ""' <<<"$out")" -eq 1 ] || fail "want one empty value and one tombstone: $out"
expect '"nextOffset": "2"' "$out"
expect '"nextOffset": "1"' "$out"
# Both fields of a pair: grpcurl does not refuse it and sends the last one
# (docs/grpc-api.md says so).
out=$(call quire.v1.Producer/ProduceRecords '{"topic": "e2e-plain", "records": [{"value": "as-text", "valueBytes": "YXMtYnl0ZXM=", "partition": 1}]}')
expect '"offset": "1"' "$out"
out=$(call quire.v1.Consumer/FetchRecords '{"topic": "e2e-plain", "partition": 1, "offset": 1}')
expect '"value": "as-bytes"' "$out"
out=$(call quire.v1.Consumer/FetchRecordsMulti '{"partitions": [{"topic": "e2e-plain", "partition": 9}]}')
expect '"code": "INVALID_REQUEST"' "$out" # a partition past the count: not retriable

step "idempotent plain gRPC: a retried ProduceRecords is written once and answered with the same offsets"
call quire.v1.Admin/CreateTopic '{"name": "e2e-idem", "partitions": 1}' >/dev/null
pid=$(call quire.v1.Producer/InitProducerId '{}')
id=$(grep -o '"producerId": "[0-9]*"' <<<"$pid" | grep -o '[0-9][0-9]*')
epoch=$(grep -o '"producerEpoch": [0-9]*' <<<"$pid" | grep -o '[0-9][0-9]*$')
[ -n "$id" ] && [ -n "$epoch" ] || fail "InitProducerId: $pid"
req='{"topic": "e2e-idem", "producerId": "'"$id"'", "producerEpoch": '"$epoch"', "baseSequence": 0, "records": [{"value": "once", "partition": 0}, {"value": "only", "partition": 0}]}'
first=$(call quire.v1.Producer/ProduceRecords "$req")
again=$(call quire.v1.Producer/ProduceRecords "$req")
offs() { grep -o '"offset": "[0-9]*"' <<<"$1" | tr '\n' ' '; }
[ "$(offs "$first")" = '"offset": "0" "offset": "1" ' ] || fail "first write: $first"
[ "$(offs "$again")" = "$(offs "$first")" ] || fail "the retry got other offsets: $again (first: $first)"
leo=$(call quire.v1.Admin/DescribeTopics '{"names": ["e2e-idem"]}' | grep -o '"logEndOffset": "[0-9]*"' | grep -o '[0-9][0-9]*')
[ "$leo" -eq 2 ] || fail "the retried request was written twice: log end $leo"
# The next request goes on from sequence 2; a gap is refused.
out=$(call quire.v1.Producer/ProduceRecords '{"topic": "e2e-idem", "producerId": "'"$id"'", "producerEpoch": '"$epoch"', "baseSequence": 5, "records": [{"value": "gap", "partition": 0}]}')
expect '"code": "OUT_OF_ORDER_SEQUENCE_NUMBER"' "$out"

step "topic describe --producers lists the idempotent producer: its id, epoch, last sequence and last offset"
q() { "$quire" --brokers "$addr" "$@"; }
desc=$(q topic describe --producers e2e-idem) || fail "topic describe --producers: $desc"
awk -v id="$id" -v epoch="$epoch" '$1 == 0 && $3 == id { found = 1; if ($4 != epoch || $5 != 1 || $7 != 1) bad = 1 }
     END { exit !(found && !bad) }' <<<"$desc" ||
	fail "topic describe --producers: want producer $id at epoch $epoch, last sequence 1, last offset 1 on partition 0 in: $desc"
if out=$(q topic describe --producers e2e-idem --partition 3 2>&1); then fail "--partition 3 of 1 succeeded: $out"; fi
expect "no partition 3 in topic e2e-idem, which has 1" "$out"
if out=$(q topic describe --producers e2e-nope 2>&1); then fail "an unknown topic succeeded: $out"; fi
expect 'does not exist' "$out"
step "Subscribe with grpcurl: a group consumed over one stream of batches, acknowledged, committed on close, left at once"
call quire.v1.Admin/CreateTopic '{"name": "e2e-sub", "partitions": 4}' >/dev/null
for p in 0 1 2 3; do
	call quire.v1.Producer/ProduceRecords '{"topic": "e2e-sub", "records": [{"value": "s'$p'-0", "partition": '$p'}, {"value": "s'$p'-1", "partition": '$p'}]}' >/dev/null
done
# sub_start NAME FD GROUP [START_FIELDS]: a Subscribe stream whose messages
# grpcurl reads from the fifo $tmp/NAME.in, held open on FD; its output in
# $tmp/NAME.out. START_FIELDS are more fields of the start, JSON.
sub_start() {
	mkfifo "$tmp/$1.in"
	"$grpcurl" -plaintext -emit-defaults -d @ "$addr" quire.v1.Groups/Subscribe <"$tmp/$1.in" >"$tmp/$1.out" 2>&1 &
	sub_pids+=($!)
	eval "exec $2>\"\$tmp/\$1.in\""
	echo '{"start": {"group": "'"$3"'", "subscription": {"topics": ["e2e-sub"]}, "commitIntervalMs": 100'"${4:+, $4}"'}}' >&"$2"
}
# sub_wait FILE N PATTERN: until FILE has N lines matching PATTERN.
sub_wait() {
	local deadline=$((SECONDS + 30)) n
	# The file is there once grpcurl's shell has opened it.
	until n=$(grep -c -- "$3" "$1" 2>/dev/null); [ "${n:-0}" -ge "$2" ]; do
		[ "$SECONDS" -lt "$deadline" ] || fail "want $2 lines /$3/ in $1: $(cat "$1")"
		sleep 0.1
	done
}
sub_start suba 7 e2e-sub '"batches": true'
sub_wait "$tmp/suba.out" 8 '"value": "s[0-3]-[01]"'
out=$(cat "$tmp/suba.out")
expect '"memberEpoch": 1' "$out"
expect '"batch": {' "$out"
expect '"nextOffset": "2"' "$out"
if grep -q '"records": {' <<<"$out"; then fail "a stream of batches got the per-record form: $out"; fi
# Everything of each partition below offset 2 (its batch's nextOffset).
acks='{"ack": {"partitions": ['
for p in 0 1 2 3; do acks+='{"topic": "e2e-sub", "partition": '$p', "nextOffset": 2}'; [ $p = 3 ] || acks+=', '; done
echo "$acks]}}" >&7
exec 7>&- # a clean close: grpcurl half-closes the stream
wait "${sub_pids[0]}" || fail "the Subscribe stream did not end OK: $(cat "$tmp/suba.out")"
out=$(call quire.v1.Groups/FetchOffsets '{"group": "e2e-sub"}')
[ "$(grep -c '"offset": "2"' <<<"$out")" -eq 4 ] || fail "want offset 2 committed on each of 4 partitions: $out"
out=$(call quire.v1.Groups/DescribeGroup '{"group": "e2e-sub"}')
expect '"state": "empty"' "$out"

step "Subscribe with grpcurl: an acknowledgement past what was sent is refused INVALID_REQUEST on the stream, which goes on"
sub_start subx 7 e2e-bad '"batches": true'
sub_wait "$tmp/subx.out" 8 '"value": "s[0-3]-[01]"'
echo '{"ack": {"partitions": [{"topic": "e2e-sub", "partition": 0, "nextOffset": 9}]}}' >&7
sub_wait "$tmp/subx.out" 1 '"ackRefused"'
exec 7>&- # a clean close: the stream went on after the refusal
wait "${sub_pids[1]}" || fail "the stream did not end OK after a refused ack: $(cat "$tmp/subx.out")"
out=$(cat "$tmp/subx.out")
expect 'INVALID_REQUEST' "$out"
expect 'ack of e2e-sub-0 below next_offset 9, past 2' "$out"

step "two concurrent Subscribe streams (the per-record form, acknowledged by offset) split the topic's partitions"
# The first stream is sent the partitions' records before the second
# joins and acknowledges nothing yet: a partition it gives up waits for
# those acknowledgements for 3/4 of the rebalance timeout, then goes to
# the second stream, which reads it from the start.
sub_start subb 7 e2e-split '"rebalanceTimeoutMs": 4000'
sub_start subc 8 e2e-split '"rebalanceTimeoutMs": 4000'
deadline=$((SECONDS + 30))
until out=$(call quire.v1.Groups/DescribeGroup '{"group": "e2e-split"}' 2>&1) && grep -q '"state": "stable"' <<<"$out" &&
	[ "$(grep -c '"memberEpoch"' <<<"$out")" -eq 2 ]; do # members only: partitions name their owner by memberId
	[ "$SECONDS" -lt "$deadline" ] || fail "two Subscribe streams not stable in one group within 30s: $out"
	sleep 0.2
done
for p in 0 1 2 3; do
	call quire.v1.Producer/ProduceRecords '{"topic": "e2e-sub", "records": [{"value": "split-'$p'", "partition": '$p'}]}' >/dev/null
done
deadline=$((SECONDS + 30))
until [ "$(cat "$tmp/subb.out" "$tmp/subc.out" | grep -c '"value": "split-')" -ge 4 ]; do
	[ "$SECONDS" -lt "$deadline" ] || fail "the two streams did not get the 4 new records: $(cat "$tmp/subb.out" "$tmp/subc.out")"
	sleep 0.1
done
nb=$(grep -c '"value": "split-' "$tmp/subb.out")
nc=$(grep -c '"value": "split-' "$tmp/subc.out")
[ "$nb" -eq 2 ] && [ "$nc" -eq 2 ] || fail "want the 4 partitions' new records split 2 and 2, got $nb and $nc"
expect '"records": {' "$(cat "$tmp/subb.out" "$tmp/subc.out")"
# Each acknowledges, by offset, everything of the partitions it owns now:
# those it read split-P of (P the partition), from offset 0 (the group had
# committed nothing) to 2.
for s in subb:7 subc:8; do
	name=${s%:*} fd=${s#*:}
	acks='{"ack": {"partitions": ['
	sep=
	for p in $(grep -o '"value": "split-[0-3]"' "$tmp/$name.out" | sed 's/.*split-//; s/"//' | sort -u); do
		acks+=$sep'{"topic": "e2e-sub", "partition": '$p', "offsets": [0, 1, 2]}'
		sep=', '
	done
	echo "$acks]}}" >&"$fd"
done
exec 7>&- 8>&-
wait "${sub_pids[2]}" || fail "the first split stream did not end OK: $(cat "$tmp/subb.out")"
wait "${sub_pids[3]}" || fail "the second split stream did not end OK: $(cat "$tmp/subc.out")"
out=$(call quire.v1.Groups/FetchOffsets '{"group": "e2e-split"}')
[ "$(grep -c '"offset": "3"' <<<"$out")" -eq 4 ] || fail "want offset 3 committed on each of 4 partitions (the split streams' acks): $out"

# ---- the Python example (examples/python) against the same server ----
step "running scripts/e2e_python.sh"
QUIRE_BROKERS="$addr" scripts/e2e_python.sh || fail "scripts/e2e_python.sh failed"

step "graceful shutdown (SIGTERM)"
kill -TERM "$server_pid"
deadline=$((SECONDS + 30))
while kill -0 "$server_pid" 2>/dev/null; do
	[ "$SECONDS" -lt "$deadline" ] || fail "server did not stop within 30s of SIGTERM"
	sleep 0.1
done
wait "$server_pid" || fail "server exited non-zero after SIGTERM"
server_pid=""
grep -q "broker stopped" "$tmp/server.log" || fail "no clean stop in the log"

echo "e2e: PASS"
