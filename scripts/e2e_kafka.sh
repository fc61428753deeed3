#!/usr/bin/env bash
# End-to-end check of the Kafka protocol listener with kcat (librdkafka),
# Debian's kcat, installed with apt-get when missing and running as root:
# the README's dev node with a gRPC listener and a KAFKA one
# (kafka.listener.names), run as printed there (ports swapped for free
# ones)
#
#   1. lists its metadata through kcat -L: the one broker at the KAFKA
#      address (not the gRPC one);
#   2. takes records from kcat (plain, keyed, with headers, gzip- and
#      zstd-compressed, and from an idempotent producer) that quire consume
#      reads back over gRPC;
#   3. serves records produced with quire produce to kcat -C, by offset
#      from the start and the end;
#   4. answers a fetch past the end of the log with OFFSET_OUT_OF_RANGE
#      (kcat -o 100 with no reset);
#   4b. takes a keyed changelog with tombstones from kcat into a compacted
#      topic, which the cleaner compacts, and serves a fresh kcat reader
#      from offset 0 the exact table;
#   5. shares a topic between two kcat -G members (the classic group
#      protocol, eager and cooperative): each record read once, both
#      members reading, the offsets committed, and a later member
#      starting at them;
#   6. runs the README's kcat block as printed;
#   7. finds the Kafka requests in quire_requests_total;
#
# then Kafka's admin API through librdkafka (scripts/kafka_admin.py), an
# exactly-once consume-transform-produce with librdkafka's transactional
# producer (scripts/kafka_txn.py), kafka-go's group consumer, franz-go's
# share consumer, a secured node's TLS and SCRAM with kcat, and the admin
# API and TLS+SCRAM again on a secured 3-node cluster of scripts/cluster.sh
# with KAFKA listeners (each part described where it runs).
#
# Without kcat (not installable) the script is skipped with a message;
# QUIRE_REQUIRE_KCAT=1 makes that an error.
#
# Env: QUIRE_BIN (default: build into a temp dir), E2E_KEEP=1 keeps the
# temp dir.
set -euo pipefail
cd "$(dirname "$0")/.."

tmp=$(mktemp -d "${TMPDIR:-/tmp}/quire-kafka.XXXXXX")
pid=
cleanup() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	if [ "${E2E_KEEP:-0}" = 1 ]; then echo "kafka: kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

step() { echo "kafka: $*"; }
fail() {
	echo "kafka: FAIL: $*" >&2
	for f in "$tmp"/*.log "$tmp"/cluster/node*/quire.log; do
		[ -f "$f" ] || continue
		echo "---- $f (last 30 lines) ----" >&2
		tail -n 30 "$f" >&2
	done
	echo "kafka: FAIL (repeated after the logs): $*" >&2
	exit 1
}

# shellcheck source=scripts/lib.sh
. scripts/lib.sh

command -v kcat >/dev/null || step "installing Debian's kcat with apt-get"
if ! have_kcat "$tmp/apt.log"; then
	[ "${QUIRE_REQUIRE_KCAT:-0}" = 1 ] && fail "kcat is not installed (apt-get install kcat)"
	step "SKIP: kcat is not installed (apt-get install kcat); the Kafka listener was not checked with librdkafka"
	exit 0
fi

quire="${QUIRE_BIN:-}"
if [ -z "$quire" ]; then
	step "building quire"
	go build -o "$tmp/quire" ./cmd/quire
	quire="$tmp/quire"
fi

base=$(free_ports 2)
[ -n "$base" ] || fail "no two free ports"
grpc="127.0.0.1:$base"
kafka="127.0.0.1:$((base + 1))"
ports="s/127\.0\.0\.1:9092/$grpc/g; s/127\.0\.0\.1:9093/$kafka/g"
# The README's blocks, exactly as printed but for the ports, from a
# directory whose bin/quire is this run's binary.
mkdir -p "$tmp/readme/bin"
ln -sf "$(cd "$(dirname "$quire")" && pwd)/$(basename "$quire")" "$tmp/readme/bin/quire"
step "the README's dev node: gRPC on $grpc, Kafka's protocol on $kafka"
run_readme_block kafkaserver "$tmp/readme" "$ports" >"$tmp/node.log" 2>&1 &
pid=$!
deadline=$((SECONDS + 60))
until "$quire" --brokers "$grpc" cluster info >/dev/null 2>&1; do
	kill -0 "$pid" 2>/dev/null || fail "the node exited"
	[ "$SECONDS" -lt "$deadline" ] || fail "the node did not serve within 60s"
	sleep 0.2
done
# The server runs under the block's shell: stop it by its data directory,
# the one in this run's directory (another run on the machine has its
# own, under the same relative name). It is waited for (10s at most), so
# the data directory is not being written as the temp dir is removed.
readme_dir=$(cd "$tmp/readme" && pwd -P)
node_pids() {
	local p
	for p in $(pgrep -f -- "--data-dir ./quire-kafka-data"); do
		if [ "$(readlink "/proc/$p/cwd" 2>/dev/null)" = "$readme_dir" ]; then echo "$p"; fi
	done
}
stop_node() {
	local pids
	pids=$(node_pids)
	[ -n "$pids" ] || return 0
	# shellcheck disable=SC2086 # one pid a word
	kill $pids 2>/dev/null || return 0
	local deadline=$((SECONDS + 10))
	while [ -n "$(node_pids)" ] && [ "$SECONDS" -lt "$deadline" ]; do
		sleep 0.1
	done
}
trap 'stop_node; cleanup' EXIT

# kc ARGS...: kcat against the Kafka listener, bounded in time.
kc() { timeout 60 kcat -b "$kafka" "$@" 2>>"$tmp/kcat.log"; }

step "kcat -L lists the broker at its Kafka address"
kc -L >"$tmp/meta.txt" || fail "kcat -L failed"
grep -q "broker 1 at $kafka" "$tmp/meta.txt" || fail "kcat -L: no broker 1 at $kafka: $(cat "$tmp/meta.txt")"

step "kcat produces (plain, keyed with headers, gzip, zstd, idempotent); quire consume reads it over gRPC"
"$quire" --brokers "$grpc" topic create kt -p 1 >/dev/null || fail "create topic kt"
seq 1 100 | kc -P -t kt -p 0 || fail "kcat -P plain"
printf 'k1:v1\nk2:v2\n' | kc -P -t kt -p 0 -K: -H h1=x -H h2=y || fail "kcat -P keyed"
seq 101 200 | kc -P -t kt -p 0 -z gzip || fail "kcat -P gzip"
seq 201 300 | kc -P -t kt -p 0 -z zstd || fail "kcat -P zstd"
seq 301 400 | kc -P -t kt -p 0 -X enable.idempotence=true || fail "kcat -P idempotent"
"$quire" --brokers "$grpc" consume kt -o start -n 402 -f '%o %k %v %h\n' >"$tmp/consumed.txt" || fail "quire consume kt"
want=$( (seq 1 100 | awk '{print NR-1, "", $1, ""}'
	echo "100 k1 v1 h1=x,h2=y"
	echo "101 k2 v2 h1=x,h2=y"
	seq 101 400 | awk '{print NR+101, "", $1, ""}') | sed 's/  */ /g')
got=$(sed 's/  */ /g' "$tmp/consumed.txt")
[ "$got" = "$want" ] || fail "quire consume read back: $(diff <(echo "$want") <(echo "$got") | head -20)"

step "quire produce; kcat -C reads it from the start and from the end"
"$quire" --brokers "$grpc" topic create kq -p 1 >/dev/null || fail "create topic kq"
printf 'a\nb\nc\n' | "$quire" --brokers "$grpc" produce kq -p 0 -k key >/dev/null || fail "quire produce"
got=$(kc -C -t kq -p 0 -o beginning -e -f '%o %k %s\n') || fail "kcat -C kq"
[ "$got" = "$(printf '0 key a\n1 key b\n2 key c')" ] || fail "kcat -C read: $got"
got=$(kc -C -t kq -p 0 -o -1 -e -f '%o %s\n') || fail "kcat -C -o -1 kq"
[ "$got" = "2 c" ] || fail "kcat -C -o -1 read: $got"

step "a fetch past the log's end is OFFSET_OUT_OF_RANGE"
set +e
timeout 60 kcat -b "$kafka" -C -t kq -p 0 -o 100 -e -X auto.offset.reset=error -f '%s\n' >"$tmp/oor.txt" 2>"$tmp/oor.log"
set -e
grep -qi "out of range" "$tmp/oor.log" || fail "kcat -o 100: no offset out of range error: $(tail -5 "$tmp/oor.log")"
[ ! -s "$tmp/oor.txt" ] || fail "kcat -o 100 printed records: $(cat "$tmp/oor.txt")"

step "kcat writes a keyed changelog to a compacted topic; a fresh kcat reader rebuilds the table"
# Compacted topics need metadata.version 14, finalized once the node registered.
deadline=$((SECONDS + 60))
until "$quire" --brokers "$grpc" cluster features 2>/dev/null | grep -Eq '^METADATA.VERSION  (1[4-9]|[2-9][0-9])$'; do
	[ "$SECONDS" -lt "$deadline" ] || fail "the node did not reach metadata.version 14 within 60s"
	sleep 0.2
done
"$quire" --brokers "$grpc" topic create kv -p 1 -c cleanup.policy=compact -c segment.bytes=1024 \
	-c min.cleanable.dirty.ratio=0.01 >/dev/null || fail "create topic kv"
# 20 rounds of the 10 keys (a batch, and so a segment, each), then
# tombstones (-Z: an empty value is a null) for k3 and k7.
for r in $(seq 1 20); do
	seq 1 10 | awk -v r="$r" '{print "k" $1 ":v" $1 "-" r}' | kc -P -t kv -p 0 -K: || fail "kcat -P kv round $r"
done
printf 'k3:\nk7:\n' | kc -P -t kv -p 0 -K: -Z || fail "kcat -P kv tombstones"
# The dev node's cleaner looks every log.cleaner.backoff.ms (15 s).
deadline=$((SECONDS + 90))
until [ "$(kc -C -t kv -p 0 -o beginning -e -f '%o\n' | wc -l)" -lt 202 ]; do
	[ "$SECONDS" -lt "$deadline" ] || fail "kv was not compacted within 90s"
	sleep 1
done
kc -C -t kv -p 0 -o beginning -e -Z -f '%o %k %s\n' >"$tmp/kv.txt" || fail "kcat -C kv"
awk 'NR > 1 && $1 <= prev { exit 1 } { prev = $1 }' "$tmp/kv.txt" || fail "kv offsets not increasing: $(cat "$tmp/kv.txt")"
got=$(awk '{ if ($3 == "NULL") delete t[$2]; else t[$2] = $3 } END { for (k in t) print k, t[k] }' "$tmp/kv.txt" | sort)
want=$(seq 1 10 | grep -vx -e 3 -e 7 | awk '{print "k" $1, "v" $1 "-20"}' | sort)
[ "$got" = "$want" ] || fail "the table rebuilt from kv: $(diff <(echo "$want") <(echo "$got") | head -20)"
[ "$(wc -l <"$tmp/kv.txt")" -lt 202 ] || fail "kv read back uncompacted"
step "kv: $(wc -l <"$tmp/kv.txt") records of 202 left, the table exact"

# kcat's -o would restart every partition it is given at that offset;
# auto.offset.reset starts only those never committed. exec: a member's
# pid is its timeout, which passes a TERM on.
# member TOPIC STRATEGY [ARGS...]: a kcat -G member reading TOPIC, in the
# group named after it.
member() {
	local topic=$1 strategy=$2
	shift 2
	exec timeout 120 kcat -b "$kafka" -G "$topic-group" -X auto.offset.reset=earliest \
		-X partition.assignment.strategy="$strategy" -f '%p %s\n' "$@" "$topic" 2>>"$tmp/kcat.log"
}
# settled GROUP PATTERN: waits (60s at most) for the first line of
# quire group describe GROUP to match PATTERN.
settled() {
	local deadline=$((SECONDS + 60)) line
	while :; do
		# A describe that fails (the group not there yet) is polled
		# again: under pipefail it would end the script without a word.
		line=$("$quire" --brokers "$grpc" group describe "$1" 2>/dev/null | sed -n 1p) || line=
		grep -q "$2" <<<"$line" && return 0
		[ "$SECONDS" -lt "$deadline" ] || fail "group $1: '$line', waited 60s for /$2/"
		sleep 0.2
	done
}
# produce_kg TOPIC FROM TO: records pP-FROM..pP-TO to each partition P of
# TOPIC's four.
produce_kg() {
	for p in 0 1 2 3; do
		seq "$2" "$3" | sed "s/^/p$p-/" | "$quire" --brokers "$grpc" produce "$1" -p "$p" >/dev/null || fail "quire produce $1 -p $p"
	done
}
# share TOPIC STRATEGY: two kcat -G members with STRATEGY share TOPIC (4
# partitions): its 200 records (half produced once they share it) read
# once each, all committed as they leave; a third member starts at the
# commits.
share() {
	local topic=$1 strategy=$2 group=$1-group m1 m2 deadline want got
	"$quire" --brokers "$grpc" topic create "$topic" -p 4 >/dev/null || fail "create topic $topic"
	produce_kg "$topic" 1 25
	member "$topic" "$strategy" >"$tmp/$topic-1.txt" &
	m1=$!
	member "$topic" "$strategy" >"$tmp/$topic-2.txt" &
	m2=$!
	settled "$group" "stable.* 2 members"
	produce_kg "$topic" 26 50
	# Every partition committed at its end (auto-commit, every 5s), then
	# both leave.
	deadline=$((SECONDS + 60))
	until [ "$("$quire" --brokers "$grpc" group describe "$group" | awk -v t="$topic" '$2 == t && $4 == 50' | wc -l)" = 4 ]; do
		[ "$SECONDS" -lt "$deadline" ] || fail "$group did not commit offset 50 on all 4 partitions: $("$quire" --brokers "$grpc" group describe "$group")"
		sleep 0.2
	done
	kill -TERM "$m1" "$m2"
	wait "$m1" "$m2" || true
	settled "$group" "empty, .* 0 members"
	want=$(for p in 0 1 2 3; do seq 1 50 | sed "s/^/$p p$p-/"; done | sort)
	got=$(cat "$tmp/$topic-1.txt" "$tmp/$topic-2.txt" | sort)
	[ "$got" = "$want" ] || fail "$strategy: the two members read (diff want got): $(diff <(echo "$want") <(echo "$got") | head -20)"
	[ -s "$tmp/$topic-1.txt" ] && [ -s "$tmp/$topic-2.txt" ] || fail "$strategy: one member read nothing: $(wc -l "$tmp/$topic-"*.txt)"
	seq 51 60 | "$quire" --brokers "$grpc" produce "$topic" -p 1 >/dev/null || fail "quire produce $topic -p 1"
	got=$(member "$topic" "$strategy" -e) || fail "$strategy: a third kcat -G member failed"
	[ "$(sort <<<"$got")" = "$(seq 51 60 | sed 's/^/1 /' | sort)" ] || fail "$strategy: a new member did not start at the committed offsets: $got"
}
step "two kcat -G members (the classic group protocol, eager: range) share a topic: every record read once, offsets committed"
share kg-range range
step "the same with the cooperative protocol (cooperative-sticky, incremental rebalances)"
share kg-coop cooperative-sticky

step "the README's kcat block, exactly as printed"
out=$(QUIRE_BROKERS=$grpc run_readme_block kafka "$tmp/readme" "$ports" 2>&1) || fail "the README's kcat block failed: $out"
grep -q "^0/0 k1=hello$" <<<"$out" || fail "README kcat block: kcat -C output: $out"
grep -q "^k2=world$" <<<"$out" || fail "README kcat block: quire consume output: $out"
grep -q "broker 1 at $kafka" <<<"$out" || fail "README kcat block: kcat -L output: $out"
grep -q "^readers *greetings *0 *2 *2 *0 " <<<"$out" || fail "README kcat block: the group's committed offset: $out"

grep -q 'protocol=kafka' "$tmp/node.log" || fail "the node's log does not say which listener speaks Kafka's protocol"

step "Kafka requests are counted with the gRPC calls (quire_requests_total, --dev's /metrics)"
metrics=$(curl -fsS --max-time 5 http://127.0.0.1:9404/metrics) || fail "no /metrics on the dev node's 127.0.0.1:9404"
for api in Produce Fetch JoinGroup SyncGroup Heartbeat OffsetCommit; do
	grep -Eq "^quire_requests_total\{code=\"OK\",rpc=\"kafka/$api\"\} [1-9]" <<<"$metrics" ||
		fail "no kafka/$api in quire_requests_total: $(grep 'rpc="kafka/' <<<"$metrics" | head -20)"
done
step "ok"

# ---- Kafka's admin API: librdkafka's AdminClient (python3-confluent-kafka)
# scripts/kafka_admin.py runs create/describe/alter/delete of topics,
# partitions, configs, groups and ACLs against the node's Kafka listener
# (through librdkafka's C API where the binding lacks a call). Debian's python3-confluent-kafka is installed with
# apt-get when missing and running as root; without it this part is
# skipped with a message, an error with QUIRE_REQUIRE_KCAT=1.
have_confluent_kafka() {
	/usr/bin/python3 -c 'import confluent_kafka' 2>/dev/null && return 0
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		step "installing Debian's python3-confluent-kafka with apt-get"
		(apt-get install -y python3-confluent-kafka || (apt-get update && apt-get install -y python3-confluent-kafka)) >"$tmp/apt-confluent.log" 2>&1 || true
	fi
	/usr/bin/python3 -c 'import confluent_kafka' 2>/dev/null
}
if have_confluent_kafka; then
	step "librdkafka's admin API (scripts/kafka_admin.py): topics, partitions, configs, groups, ACLs"
	timeout 120 /usr/bin/python3 scripts/kafka_admin.py "$kafka" >"$tmp/admin.log" 2>&1 || fail "scripts/kafka_admin.py: $(tail -5 "$tmp/admin.log")"
	grep '^kafka admin: (' "$tmp/admin.log" || true
	metrics=$(curl -fsS --max-time 5 http://127.0.0.1:9404/metrics) || fail "no /metrics on the dev node's 127.0.0.1:9404"
	for api in CreateTopics DeleteTopics CreatePartitions DescribeConfigs AlterConfigs; do
		grep -Eq "^quire_requests_total\{code=\"OK\",rpc=\"kafka/$api\"\} [1-9]" <<<"$metrics" ||
			fail "no kafka/$api in quire_requests_total: $(grep 'rpc="kafka/' <<<"$metrics" | head -30)"
	done
	step "ok (admin)"
	# Exactly-once consume-transform-produce with librdkafka's
	# transactional producer (scripts/kafka_txn.py): 200 inputs on ktx-in
	# (2 partitions) become out-I on ktx-out in transactions that commit
	# the group's offsets with them, one aborted on purpose; a
	# read_committed reader sees each input once and nothing aborted, a
	# read_uncommitted one sees the aborted records. quire consume
	# --isolation read_committed over gRPC reads the same.
	step "librdkafka's transactional producer (scripts/kafka_txn.py): consume-transform-produce, exactly once"
	"$quire" --brokers "$grpc" topic create ktx-in -p 2 >/dev/null || fail "create topic ktx-in"
	"$quire" --brokers "$grpc" topic create ktx-out -p 2 >/dev/null || fail "create topic ktx-out"
	timeout 120 /usr/bin/python3 scripts/kafka_txn.py "$kafka" ktx-in ktx-out ktx-group 200 >"$tmp/txn.log" 2>&1 ||
		fail "scripts/kafka_txn.py: $(tail -20 "$tmp/txn.log")"
	grep '^kafka txn: ' "$tmp/txn.log"
	naborted=$(sed -n 's/.* 1 aborted (\([0-9]*\) records).*/\1/p' "$tmp/txn.log")
	[ -n "$naborted" ] && [ "$naborted" -gt 0 ] || fail "scripts/kafka_txn.py aborted no records: $(cat "$tmp/txn.log")"
	want=$(seq 0 199 | sed 's/^/out-/' | sort)
	got=$("$quire" --brokers "$grpc" consume ktx-out -o start -n 200 --isolation read_committed -f '%v\n' | sort) ||
		fail "quire consume --isolation read_committed ktx-out"
	[ "$got" = "$want" ] || fail "quire consume --isolation read_committed (diff want got): $(diff <(echo "$want") <(echo "$got") | head -20)"
	got=$("$quire" --brokers "$grpc" consume ktx-out -o start -n $((200 + naborted)) --isolation read_uncommitted -f '%v\n') ||
		fail "quire consume --isolation read_uncommitted ktx-out"
	[ "$(grep -c '^aborted-' <<<"$got")" = "$naborted" ] || fail "quire consume --isolation read_uncommitted: not the $naborted aborted records: $(grep -c '^aborted-' <<<"$got")"
	"$quire" --brokers "$grpc" tx describe kafka-txn-ktx-group >"$tmp/tx.txt" || fail "quire tx describe kafka-txn-ktx-group"
	grep -q 'CompleteCommit' "$tmp/tx.txt" || fail "quire tx describe: $(cat "$tmp/tx.txt")"
	metrics=$(curl -fsS --max-time 5 http://127.0.0.1:9404/metrics) || fail "no /metrics on the dev node's 127.0.0.1:9404"
	for api in InitProducerID AddPartitionsToTxn AddOffsetsToTxn TxnOffsetCommit EndTxn; do
		grep -Eq "^quire_requests_total\{code=\"OK\",rpc=\"kafka/$api\"\} [1-9]" <<<"$metrics" ||
			fail "no kafka/$api in quire_requests_total: $(grep 'rpc="kafka/' <<<"$metrics" | head -40)"
	done
	step "ok (transactions)"
elif [ "${QUIRE_REQUIRE_KCAT:-0}" = 1 ]; then
	fail "python3-confluent-kafka is not installed (apt-get install python3-confluent-kafka)"
else
	step "SKIP: python3-confluent-kafka is not installed (apt-get install python3-confluent-kafka); Kafka's admin API was not checked with librdkafka"
fi
# ---- end of Kafka's admin API
# ---- segmentio/kafka-go's group consumer ------------------------------
# Two kafka-go group readers (internal/kafkaclients/kafkagoe2e: JoinGroup
# v1 with kafka-go's subscription, OffsetFetch v1, OffsetCommit v2) join
# one group on a four-partition topic; once it is stable they read the
# 200 records a kafka-go writer then writes, each once, committing as
# they read. quire sees every partition committed at its end.
step "two segmentio/kafka-go group readers share a topic: every record read once, offsets committed"
"$quire" --brokers "$grpc" topic create kgo -p 4 >/dev/null || fail "create topic kgo"
QUIRE_KAFKAGO_ADDR=$kafka QUIRE_KAFKAGO_TOPIC=kgo QUIRE_KAFKAGO_GROUP=kgo-group \
	QUIRE_KAFKAGO_PARTITIONS=4 QUIRE_KAFKAGO_PER_PARTITION=50 \
	timeout 300 go test -count=1 -v -run '^TestKafkaGoGroupE2E$' ./internal/kafkaclients/kafkagoe2e/ >"$tmp/kafkago.log" 2>&1 ||
	fail "kafka-go group readers: $(tail -30 "$tmp/kafkago.log")"
grep -q "^kafka-go: 200 records read once by two readers" "$tmp/kafkago.log" || fail "kafka-go: no summary: $(tail -30 "$tmp/kafkago.log")"
committed=$("$quire" --brokers "$grpc" group describe kgo-group | awk '$2 == "kgo" && $4 == 50' | wc -l)
[ "$committed" = 4 ] || fail "kgo-group did not commit offset 50 on all 4 partitions: $("$quire" --brokers "$grpc" group describe kgo-group)"
step "kafka-go: ok"
# ---- franz-go's share consumer -----------------------------------------
# Three franz-go share members (internal/kafkaclients/sharee2e:
# ShareGroupHeartbeat, ShareFetch and ShareAcknowledge as kgo.ShareGroup
# sends them) join one share group on a one-partition topic. Once quire
# group describe shows the three members and the share-partition (made
# at the log's end: share.auto.offset.reset is latest), kcat writes 300
# records and quire produce 100 more; the members accept each exactly
# once between them, at least two of them reading, every acceptance
# confirmed. quire then sees the share-partition finished at offset 400,
# nothing in flight.
step "three franz-go share members read a topic kcat and quire produce write: every record accepted exactly once"
"$quire" --brokers "$grpc" topic create ksh -p 1 >/dev/null || fail "create topic ksh"
QUIRE_SHARE_ADDR=$kafka QUIRE_SHARE_TOPIC=ksh QUIRE_SHARE_GROUP=ksh-group QUIRE_SHARE_MEMBERS=3 QUIRE_SHARE_RECORDS=400 \
	timeout 300 go test -count=1 -v -run '^TestFranzShareE2E$' ./internal/kafkaclients/sharee2e/ >"$tmp/share.log" 2>&1 &
share_pid=$!
deadline=$((SECONDS + 180)) # go test builds the package first
until "$quire" --brokers "$grpc" group describe ksh-group 2>/dev/null >"$tmp/share-describe.txt" &&
	grep -q ': 3 members' "$tmp/share-describe.txt" && awk '$1 == "ksh-group" && $2 == "ksh" && $3 == 0 { ok = 1 } END { exit !ok }' "$tmp/share-describe.txt"; do
	kill -0 "$share_pid" 2>/dev/null || fail "franz-go share members exited early: $(tail -30 "$tmp/share.log")"
	[ "$SECONDS" -lt "$deadline" ] || fail "ksh-group: no 3 members fetching ksh within 180s: $(cat "$tmp/share-describe.txt")"
	sleep 0.2
done
for r in 0 1 2; do
	seq $((r * 100 + 1)) $((r * 100 + 100)) | kc -P -t ksh -p 0 || fail "kcat -P ksh"
done
seq 301 400 | "$quire" --brokers "$grpc" produce ksh -p 0 >/dev/null || fail "quire produce ksh"
wait "$share_pid" || fail "franz-go share members: $(tail -30 "$tmp/share.log")"
grep -q "^franz-go share: 400 records accepted once by 3 members" "$tmp/share.log" || fail "franz-go share: no summary: $(tail -30 "$tmp/share.log")"
grep '^franz-go share: ' "$tmp/share.log"
deadline=$((SECONDS + 30))
until "$quire" --brokers "$grpc" group describe ksh-group >"$tmp/share-describe.txt" 2>&1 &&
	awk '$1 == "ksh-group" && $2 == "ksh" && $3 == 0 && $4 == 400 && $6 == 0 { ok = 1 } END { exit !ok }' "$tmp/share-describe.txt"; do
	[ "$SECONDS" -lt "$deadline" ] || fail "ksh-group's share-partition not finished at 400 within 30s: $(cat "$tmp/share-describe.txt")"
	sleep 0.2
done
step "franz-go share: ok"
# ---- TLS and SASL/SCRAM on a Kafka listener ---------------------------
# A second dev node, secured as scripts/e2e_security.sh's cluster is (a
# throwaway CA and certificates from quire dev certs, TLS with client
# certificates checked when given, the node and admin as super.users, the
# authorizer on), serving Kafka's protocol on a SASL_SSL listener. Admin
# (by certificate, over gRPC) creates two topics, the SCRAM user alice and
# ACLs letting her write and read one of them; kcat, over TLS as alice,
# sees only that topic, produces with SCRAM-SHA-256 and reads back with
# SCRAM-SHA-512; a wrong password is refused with the broker's reason.
sec=$tmp/secure
"$quire" dev certs --out "$sec/certs" --nodes node-1 --clients admin >/dev/null || fail "quire dev certs"
sbase=$(free_ports 2)
[ -n "$sbase" ] || fail "no two free ports for the secured node"
sgrpc="127.0.0.1:$sbase"
skafka="127.0.0.1:$((sbase + 1))"
step "a secured node: gRPC with TLS on $sgrpc, Kafka's protocol with TLS and SCRAM (SASL_SSL) on $skafka"
"$quire" server --dev --data-dir "$sec/data" --set metrics.listen= \
	--set "listeners=PLAINTEXT://$sgrpc,KAFKA://$skafka" --set kafka.listener.names=KAFKA \
	--set kafka.listener.security.protocol.map=KAFKA:SASL_SSL --set sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512 \
	--set tls.cert.file="$sec/certs/node-1.pem" --set tls.key.file="$sec/certs/node-1-key.pem" \
	--set tls.client.ca.file="$sec/certs/ca.pem" --set tls.client.auth=request \
	--set "super.users=User:CN=node-1,O=quire;User:CN=admin,O=quire" --set authorizer.enable=true \
	>"$tmp/secure-node.log" 2>&1 &
sec_pid=$!
stop_secure_node() {
	if kill -0 "$sec_pid" 2>/dev/null; then
		kill "$sec_pid" 2>/dev/null || true
		wait "$sec_pid" 2>/dev/null || true
	fi
}
trap 'stop_secure_node; stop_node; cleanup' EXIT
# sq ARGS...: the CLI as admin on the secured node.
sq() { "$quire" --brokers "$sgrpc" --tls-ca "$sec/certs/ca.pem" --tls-cert "$sec/certs/admin.pem" --tls-key "$sec/certs/admin-key.pem" "$@"; }
# Users and ACLs need metadata.version 3, finalized once the node registered.
deadline=$((SECONDS + 60))
until sq cluster features 2>/dev/null | grep -Eq '^METADATA.VERSION  ([3-9]|[1-9][0-9])$'; do
	kill -0 "$sec_pid" 2>/dev/null || fail "the secured node exited"
	[ "$SECONDS" -lt "$deadline" ] || fail "the secured node did not reach metadata.version 3 within 60s"
	sleep 0.2
done
sq topic create secured -p 1 >/dev/null || fail "create topic secured"
sq topic create hidden -p 1 >/dev/null || fail "create topic hidden"
sq user create alice --new-password-stdin <<<"alice-pw" >/dev/null || fail "create user alice"
for op in Write Read; do
	sq acl create --principal User:alice --operation "$op" --topic secured >/dev/null || fail "acl $op for alice"
done
# skc MECHANISM PASSWORD ARGS...: kcat over TLS as alice.
skc() {
	local mech=$1 pw=$2
	shift 2
	timeout 60 kcat -b "$skafka" -X security.protocol=SASL_SSL -X ssl.ca.location="$sec/certs/ca.pem" \
		-X sasl.mechanisms="$mech" -X sasl.username=alice -X sasl.password="$pw" "$@"
}
step "kcat -L over TLS as alice (SCRAM-SHA-256): the broker at its Kafka address, only the topic her ACLs describe"
skc SCRAM-SHA-256 alice-pw -L >"$tmp/secure-meta.txt" 2>>"$tmp/kcat.log" || fail "kcat -L over SASL_SSL: $(tail -3 "$tmp/kcat.log")"
grep -q "broker 1 at $skafka" "$tmp/secure-meta.txt" || fail "kcat -L over SASL_SSL: no broker 1 at $skafka: $(cat "$tmp/secure-meta.txt")"
grep -q 'topic "secured"' "$tmp/secure-meta.txt" || fail "kcat -L over SASL_SSL does not list secured: $(cat "$tmp/secure-meta.txt")"
if grep -q 'topic "hidden"' "$tmp/secure-meta.txt"; then fail "alice sees a topic no ACL lets her describe: $(cat "$tmp/secure-meta.txt")"; fi
step "kcat produces as alice with SCRAM-SHA-256 and reads back with SCRAM-SHA-512"
seq 1 50 | skc SCRAM-SHA-256 alice-pw -P -t secured -p 0 2>>"$tmp/kcat.log" || fail "kcat -P over SASL_SSL: $(tail -3 "$tmp/kcat.log")"
got=$(skc SCRAM-SHA-512 alice-pw -C -t secured -p 0 -o beginning -e -f '%s\n' 2>>"$tmp/kcat.log") || fail "kcat -C over SASL_SSL: $(tail -3 "$tmp/kcat.log")"
[ "$got" = "$(seq 1 50)" ] || fail "kcat -C over SASL_SSL read: $got"
step "a wrong password is refused with the broker's reason"
if skc SCRAM-SHA-256 wrong -L -m 10 >/dev/null 2>"$tmp/secure-wrong.txt"; then fail "kcat -L with a wrong password succeeded"; fi
grep -q 'invalid credentials for user "alice"' "$tmp/secure-wrong.txt" || fail "wrong password: $(tail -3 "$tmp/secure-wrong.txt")"
step "ok (TLS and SCRAM)"
# ---- a 3-node cluster: Kafka's admin API and TLS+SCRAM -----------------
# The secured cluster of scripts/cluster.sh (QUIRE_CLUSTER_SECURE=1) with
# a KAFKA listener on every node (QUIRE_CLUSTER_KAFKA_BASE_PORT), SASL_SSL
# as docker-compose.secure.yml's are; replication factor 3 and
# min.insync.replicas 2 by default. Admin (by certificate, over gRPC)
# creates the SCRAM users ops and alice; ops may do anything through
# ACLs (All on the cluster, every topic and every group), not as a super
# user. scripts/kafka_admin.py runs as ops over TLS with SCRAM-SHA-512;
# then kcat, as alice, lists the three brokers at their Kafka addresses
# and only the topic her ACLs describe, produces to its three partitions
# with SCRAM-SHA-256 (each to its leader, acks=all) and reads back with
# SCRAM-SHA-512.
cbase=$(free_ports 6)
[ -n "$cbase" ] || fail "no six free ports for the cluster"
ckbase=$((cbase + 3))
export QUIRE_CLUSTER_DIR="$tmp/cluster" QUIRE_CLUSTER_BASE_PORT=$cbase QUIRE_CLUSTER_KAFKA_BASE_PORT=$ckbase QUIRE_CLUSTER_SECURE=1 QUIRE_BIN=$quire
e2e_cluster_timings
stop_cluster() { scripts/cluster.sh stop >/dev/null 2>&1 || true; }
trap 'stop_cluster; stop_secure_node; stop_node; cleanup' EXIT
step "a secured 3-node cluster (scripts/cluster.sh): gRPC on 127.0.0.1:$cbase.., Kafka's protocol (SASL_SSL) on 127.0.0.1:$ckbase.."
# start waits for the three brokers registered and unfenced: until then
# a topic of replication factor 3 is INVALID_REPLICATION_FACTOR.
scripts/cluster.sh start >"$tmp/cluster-start.log" 2>&1 || fail "scripts/cluster.sh start: $(tail -20 "$tmp/cluster-start.log")"
ckafka="127.0.0.1:$ckbase,127.0.0.1:$((ckbase + 1)),127.0.0.1:$((ckbase + 2))"
ccerts=$QUIRE_CLUSTER_DIR/certs
# cq ARGS...: the CLI as admin on the cluster.
cq() { "$quire" --brokers "127.0.0.1:$cbase,127.0.0.1:$((cbase + 1)),127.0.0.1:$((cbase + 2))" --tls-ca "$ccerts/ca.pem" --tls-cert "$ccerts/admin.pem" --tls-key "$ccerts/admin-key.pem" "$@"; }
deadline=$((SECONDS + 60))
until cq cluster features 2>/dev/null | grep -Eq '^METADATA.VERSION  ([3-9]|[1-9][0-9])$'; do
	[ "$SECONDS" -lt "$deadline" ] || fail "the cluster did not reach metadata.version 3 within 60s"
	sleep 0.2
done
cq user create ops --new-password-stdin <<<"ops-pw" >/dev/null || fail "cluster: create user ops"
cq user create alice --new-password-stdin <<<"alice-pw" >/dev/null || fail "cluster: create user alice"
cq acl create --principal User:ops --operation All --cluster >/dev/null || fail "cluster: ACL for ops on the cluster"
cq acl create --principal User:ops --operation All --topic '*' >/dev/null || fail "cluster: ACL for ops on topics"
cq acl create --principal User:ops --operation All --group '*' >/dev/null || fail "cluster: ACL for ops on groups"
# The ACLs and users reach every node as it applies the log: wait for the
# last one everywhere, so that whichever node a client reaches knows them.
for n in 0 1 2; do
	deadline=$((SECONDS + 30))
	until "$quire" --brokers "127.0.0.1:$((cbase + n))" --tls-ca "$ccerts/ca.pem" --tls-cert "$ccerts/admin.pem" --tls-key "$ccerts/admin-key.pem" \
		acl list 2>/dev/null | grep -q 'User:ops.*Group'; do
		[ "$SECONDS" -lt "$deadline" ] || fail "node $((n + 1)) does not list ops's ACLs within 30s"
		sleep 0.2
	done
done
step "cluster: librdkafka's admin API (scripts/kafka_admin.py) as ops, over TLS with SCRAM-SHA-512"
timeout 120 /usr/bin/python3 scripts/kafka_admin.py "$ckafka" security.protocol=SASL_SSL sasl.mechanisms=SCRAM-SHA-512 \
	sasl.username=ops sasl.password=ops-pw ssl.ca.location="$ccerts/ca.pem" >"$tmp/cluster-admin.log" 2>&1 ||
	fail "cluster: scripts/kafka_admin.py: $(tail -5 "$tmp/cluster-admin.log")"
step "ok (cluster admin)"
cq topic create csecured -p 3 >/dev/null || fail "cluster: create topic csecured"
cq topic create chidden -p 1 >/dev/null || fail "cluster: create topic chidden"
for op in Write Read; do
	cq acl create --principal User:alice --operation "$op" --topic csecured >/dev/null || fail "cluster: acl $op for alice"
done
# ckc MECHANISM ARGS...: kcat over TLS as alice on the cluster.
ckc() {
	local mech=$1
	shift
	timeout 60 kcat -b "$ckafka" -X security.protocol=SASL_SSL -X ssl.ca.location="$ccerts/ca.pem" \
		-X sasl.mechanisms="$mech" -X sasl.username=alice -X sasl.password=alice-pw "$@"
}
step "cluster: kcat -L over TLS as alice: three brokers at their Kafka addresses, only the topic her ACLs describe"
# Every node has the ACLs once kcat sees csecured with its three
# partitions led: poll until then.
deadline=$((SECONDS + 30))
until ckc SCRAM-SHA-256 -L -t csecured >"$tmp/cluster-meta.txt" 2>>"$tmp/kcat.log" &&
	grep -q '3 partitions' "$tmp/cluster-meta.txt" && ! grep -q 'leader -1' "$tmp/cluster-meta.txt"; do
	[ "$SECONDS" -lt "$deadline" ] || fail "cluster: kcat -L -t csecured: $(cat "$tmp/cluster-meta.txt"; tail -3 "$tmp/kcat.log")"
	sleep 0.2
done
ckc SCRAM-SHA-256 -L >"$tmp/cluster-meta.txt" 2>>"$tmp/kcat.log" || fail "cluster: kcat -L over SASL_SSL: $(tail -3 "$tmp/kcat.log")"
for n in 1 2 3; do
	grep -q "broker $n at 127.0.0.1:$((ckbase + n - 1))" "$tmp/cluster-meta.txt" ||
		fail "cluster: kcat -L: no broker $n at 127.0.0.1:$((ckbase + n - 1)): $(cat "$tmp/cluster-meta.txt")"
done
grep -q 'topic "csecured" with 3 partitions' "$tmp/cluster-meta.txt" || fail "cluster: kcat -L does not list csecured: $(cat "$tmp/cluster-meta.txt")"
if grep -q 'topic "chidden"' "$tmp/cluster-meta.txt"; then fail "cluster: alice sees a topic no ACL lets her describe: $(cat "$tmp/cluster-meta.txt")"; fi
step "cluster: kcat produces as alice to each partition's leader with SCRAM-SHA-256 (acks=all), reads back with SCRAM-SHA-512"
for p in 0 1 2; do
	seq 1 20 | sed "s/^/p$p-/" | ckc SCRAM-SHA-256 -P -t csecured -p "$p" -X acks=all 2>>"$tmp/kcat.log" ||
		fail "cluster: kcat -P -p $p over SASL_SSL: $(tail -3 "$tmp/kcat.log")"
done
for p in 0 1 2; do
	got=$(ckc SCRAM-SHA-512 -C -t csecured -p "$p" -o beginning -e -f '%s\n' 2>>"$tmp/kcat.log") ||
		fail "cluster: kcat -C -p $p over SASL_SSL: $(tail -3 "$tmp/kcat.log")"
	[ "$got" = "$(seq 1 20 | sed "s/^/p$p-/")" ] || fail "cluster: kcat -C -p $p read: $got"
done
step "ok (cluster TLS and SCRAM)"
