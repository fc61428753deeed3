#!/usr/bin/env bash
# End-to-end check of the compose cluster (docker-compose.yml) on a real
# Docker engine: the image is built without a registry (`make image`) and
# holds only the binary and its data directory, run as a non-root user; the
# three containers come up healthy, a host client (bin/quire, through the
# EXTERNAL listeners on 127.0.0.1) creates a replication factor 3 topic and
# produces with acks=all; the leader's container is killed and every
# partition fails over with each acknowledged record still readable; it is
# started again and rejoins the ISR; one node is cut off the compose network
# (docker network disconnect), is fenced, and recovers once reconnected;
# then every container is recreated in turn, as an upgrade does, with every
# record still there.
# A client in another container on the compose network sees the INTERNAL
# addresses; kcat on the host sees the KAFKA ones and produces through
# them. Each node's metrics listener answers on its published host port,
# and counts the replication and the leader elections of the failover.
# Timings are printed as "e2e-compose: time ...".
#
# It runs under its own compose project name, image tag and free host
# ports, and removes its containers, network, volumes and image on every
# exit, failures included.
#
# Without a Docker engine (or a compose tool) it prints why and skips,
# unless QUIRE_REQUIRE_DOCKER=1 (set by .ci/run), which makes that an error.
#
# Usage: scripts/e2e_compose.sh   (QUIRE_BIN: the host CLI, built when unset)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

step() { echo "e2e-compose: $*"; }
skip() {
	if [ "${QUIRE_REQUIRE_DOCKER:-0}" = 1 ]; then
		echo "e2e-compose: FAIL: $* (QUIRE_REQUIRE_DOCKER=1: the compose test must run)" >&2
		exit 1
	fi
	echo "e2e-compose: SKIP: $*; the compose cluster was not tested"
	exit 0
}

command -v docker >/dev/null 2>&1 || skip "no docker command"
if ! err=$(docker info 2>&1 >/dev/null); then
	skip "the Docker engine does not answer ($(tail -n 1 <<<"$err"))"
fi
project=quire-e2e-$$-$RANDOM
readme_project=$project-readme
had_local_image=0
if docker image inspect quire:local >/dev/null 2>&1; then had_local_image=1; fi
if command -v docker-compose >/dev/null 2>&1; then
	compose_cmd=(docker-compose)
	compose=(docker-compose -p "$project" -f "$root/docker-compose.yml")
elif docker compose version >/dev/null 2>&1; then
	compose_cmd=(docker compose)
	compose=(docker compose -p "$project" -f "$root/docker-compose.yml")
else
	skip "neither docker-compose nor docker compose is installed (apt-get install docker-compose)"
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/quire-e2e-compose.XXXXXX")
# The nodes heartbeat every 500 ms and are fenced after 4 s of silence
# instead of docker-compose.yml's 2 s and 9 s (scripts/lib.sh,
# e2e_cluster_timings): the kill, the cut-off node and the stops of the
# rolling upgrade and of `down` each waited out the 9 s. Laid over
# docker-compose.yml with a second -f, which merges each service's
# environment; README.md's compose block runs the file alone.
for n in 1 2 3; do
	printf '  quire%s:\n    environment:\n      QUIRE_BROKER_HEARTBEAT_INTERVAL_MS: "500"\n      QUIRE_BROKER_SESSION_TIMEOUT_MS: "4000"\n' "$n"
done | sed '1i services:' >"$tmp/timings.yml"
compose+=(-f "$tmp/timings.yml")
network=${project}_default
image=quire:$project
client_name=$project-client
export QUIRE_IMAGE=$image

# shellcheck source=scripts/lib.sh
. scripts/lib.sh
compose_ports e2e-compose || exit 1
all_brokers=$QUIRE_BROKERS

failed=0
fail() {
	failed=1
	echo "e2e-compose: FAIL: $*" >&2
	"${compose[@]}" ps >&2 2>&1 || true
	"${compose[@]}" logs --no-color --tail 30 >&2 2>&1 || true
	echo "e2e-compose: FAIL (repeated after the logs): $*" >&2
	exit 1
}
# cleanup removes everything this run created, and checks that it did.
cleanup() {
	local rc=$? left
	trap - EXIT INT TERM
	docker rm -f "$client_name" >/dev/null 2>&1 || true
	"${compose[@]}" down -v --remove-orphans -t 5 >/dev/null 2>&1 || true
	docker image rm -f "$image" >/dev/null 2>&1 || true
	COMPOSE_PROJECT_NAME=$readme_project QUIRE_IMAGE=quire:local "${compose_cmd[@]}" -f "$root/docker-compose.yml" down -v --remove-orphans -t 5 >/dev/null 2>&1 || true
	if [ "$had_local_image" = 0 ]; then docker image rm -f quire:local >/dev/null 2>&1 || true; fi
	left=$(
		for p in "$project" "$readme_project"; do
			docker ps -aq --filter "label=com.docker.compose.project=$p"
			docker volume ls -q --filter "label=com.docker.compose.project=$p"
			docker network ls -q --filter "label=com.docker.compose.project=$p"
		done
	)
	rm -rf "$tmp"
	if [ -n "$left" ]; then
		echo "e2e-compose: FAIL: left behind: $left" >&2
		exit 1
	fi
	[ "$rc" = 0 ] && [ "$failed" = 0 ] && step "cleaned up: no container, network, volume or image of $project left"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

quire=${QUIRE_BIN:-}
if [ -z "$quire" ]; then
	step "building the host CLI"
	go build -o "$tmp/quire" ./cmd/quire
	quire="$tmp/quire"
fi
q() { "$quire" "$@"; }

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1fs", b - a }'; }
cid() { "${compose[@]}" ps -q "quire$1"; }
# metric_sum NAME: the sum of series NAME (no labels) over the nodes whose
# published metrics port answers.
metric_sum() {
	local n port_var body total=0
	for n in 1 2 3; do
		port_var=QUIRE${n}_METRICS_PORT
		body=$(curl -fsS --max-time 5 "http://127.0.0.1:${!port_var}/metrics" 2>/dev/null) || continue
		total=$(awk -v t="$total" -v name="$1" '$1 == name { t += $2 } END { print t + 0 }' <<<"$body")
	done
	echo "$total"
}
# metric_above NAME MIN: metric_sum NAME is above MIN.
metric_above() { awk -v v="$(metric_sum "$1")" -v min="$2" 'BEGIN { exit !(v > min) }'; }
healthy() {
	local n c
	for n in "$@"; do
		c=$(cid "$n")
		[ -n "$c" ] && [ "$(docker inspect -f '{{.State.Health.Status}}' "$c" 2>/dev/null)" = healthy ] || return 1
	done
}
# parts: "PARTITION LEADER ISR" lines of $topic.
parts() {
	q topic describe "$topic" 2>/dev/null | awk '/^PARTITION +LEADER/ { on = 1; next } NF == 0 { on = 0 } on { print $1, $2, $5 }'
}
leader_of() { parts | awk -v p="$1" '$1 == p { print $2 }'; }
# all_led_not ID: every partition has a leader, none of them ID.
all_led_not() {
	local out
	out=$(parts) && [ "$(wc -l <<<"$out")" -eq "$partitions" ] &&
		awk -v x="$1" '$2 < 1 || $2 == x { bad = 1 } END { exit bad }' <<<"$out"
}
# all_isr N: every partition has N in-sync replicas.
all_isr() {
	local out
	out=$(parts) && [ "$(wc -l <<<"$out")" -eq "$partitions" ] &&
		awk -v n="$1" '{ if (split($3, r, ",") != n) bad = 1 } END { exit bad }' <<<"$out"
}
# fenced ID yes|no: node ID's FENCED column in cluster info (fourth from
# the end, before PARTITIONS, MAX and CORDONED; RACK may be empty), asked
# through the given brokers.
fenced_is() {
	local id=$1 want=$2 brokers=$3
	q --brokers "$brokers" cluster info 2>/dev/null | awk -v id="$id" -v w="$want" '
		$1 == id || $1 == id "*" { found = ($(NF - 3) == w) } END { exit !found }'
}
# produce_all FROM TO: records p<P>-<I> for I in FROM..TO to every
# partition P with acks=all; every one must be acknowledged.
produce_all() {
	local p
	for ((p = 0; p < partitions; p++)); do
		seq "$1" "$2" | sed "s/^/p$p-/" | q produce "$topic" -p "$p" --acks all >/dev/null 2>"$tmp/produce.err" ||
			fail "produce $1..$2 to $topic-$p: $(cat "$tmp/produce.err")"
	done
}
# check_all N: every partition holds exactly its records 1..N, in order.
check_all() {
	local p out deadline
	for ((p = 0; p < partitions; p++)); do
		deadline=$((SECONDS + 60))
		until out=$(timeout 20 "$quire" consume "$topic" -p "$p" -o start -n "$1" 2>/dev/null) &&
			[ "$(wc -l <<<"$out")" -eq "$1" ]; do
			[ "$SECONDS" -lt "$deadline" ] || fail "could not read $1 records of $topic-$p"
			sleep 0.5
		done
		diff <(seq 1 "$1" | sed "s/^/p$p-/") <(echo "$out") >/dev/null || fail "$topic-$p does not hold exactly records 1..$1"
	done
}

t=$(now)
step "building image $image (make image)"
make -s image IMAGE="$image" >"$tmp/build.log" 2>&1 || { tail -n 30 "$tmp/build.log" >&2; fail "make image"; }
t_build=$(since "$t")
step "time image build: $t_build"

step "the image: nothing but the static binary and its data directory (FROM scratch), run as a non-root user"
user=$(docker image inspect -f '{{.Config.User}}' "$image") || fail "docker image inspect $image"
case $user in '' | 0 | 0:* | root | root:*) fail "the image runs as root (User '$user')" ;; esac
docker create --name "$client_name" "$image" >/dev/null || fail "docker create $image"
# What the engine adds to every container (/.dockerenv, /dev, /proc, /sys,
# /etc's hosts, hostname, resolv.conf, mtab) is not the image's.
files=$(docker export "$client_name" | tar -t | grep -Ev '^(\.dockerenv|dev/.*|proc/|sys/|etc/|etc/(hostname|hosts|mtab|resolv\.conf))$' | sort | tr '\n' ' ')
docker rm -f "$client_name" >/dev/null 2>&1 || true
[ "$files" = "usr/ usr/local/ usr/local/bin/ usr/local/bin/quire var/ var/lib/ var/lib/quire/ " ] ||
	fail "the image holds more than the binary and its data directory: $files"

t=$(now)
step "docker compose up -d (project $project, host ports $all_brokers)"
"${compose[@]}" up -d --no-build >"$tmp/up.log" 2>&1 || { cat "$tmp/up.log" >&2; fail "compose up"; }
wait_for "three healthy containers" 120 healthy 1 2 3
t_ready=$(since "$t")
step "time cluster ready (up -d to three healthy nodes): $t_ready"

step "the host sees every node at its EXTERNAL address"
wait_for "cluster info from the host listing the three brokers live at 127.0.0.1" 60 live '127\.0\.0\.1' external_port q cluster info

step "each node's metrics listener on its published host port"
for n in 1 2 3; do
	port_var=QUIRE${n}_METRICS_PORT
	body=$(curl -fsS --max-time 5 "http://127.0.0.1:${!port_var}/metrics") || fail "node $n: no /metrics on 127.0.0.1:${!port_var}"
	grep -q '^quire_ready 1$' <<<"$body" || fail "node $n: /metrics on 127.0.0.1:${!port_var} has no quire_ready 1"
done

step "a client in another container on the compose network sees the INTERNAL addresses"
wait_for "cluster info from a container listing the three brokers live at quireN" 60 live 'quire[1-3]' internal_port \
	docker run --rm --name "$client_name" --network "$network" --entrypoint quire "$image" --brokers quire1:19092 cluster info

if have_kcat /dev/null; then
	step "kcat on the host: every node at its KAFKA address; records in through Kafka's protocol (acks=all), out through gRPC"
	out=$(timeout 60 kcat -b "127.0.0.1:$QUIRE1_KAFKA_PORT" -L 2>&1) || fail "kcat -L: $out"
	for n in 1 2 3; do
		port_var=QUIRE${n}_KAFKA_PORT
		grep -q "broker $n at 127.0.0.1:${!port_var}" <<<"$out" || fail "kcat -L: no broker $n at 127.0.0.1:${!port_var}: $out"
	done
	q topic create from-kafka -p 1 -r 3 >/dev/null || fail "topic create from-kafka"
	seq 1 100 | timeout 60 kcat -b "127.0.0.1:$QUIRE2_KAFKA_PORT" -P -t from-kafka -p 0 -X acks=all 2>&1 || fail "kcat -P to the compose cluster"
	got=$(q consume from-kafka -o start -n 100 -f '%v\n') || fail "quire consume from-kafka: $got"
	[ "$got" = "$(seq 1 100)" ] || fail "quire consume read back what kcat produced: $(head -5 <<<"$got")"
else
	[ "${QUIRE_REQUIRE_KCAT:-0}" = 1 ] && fail "kcat is not installed (apt-get install kcat)"
	step "SKIP: kcat is not installed; the compose cluster's KAFKA listeners were not checked"
fi

topic=failover
partitions=3
q topic create "$topic" -p "$partitions" -r 3 >/dev/null || fail "topic create"
wait_for "a full ISR on every partition" 60 all_isr 3
step "1000 records to each of $partitions partitions with acks=all, from the host"
produce_all 1 1000
check_all 1000
wait_for "replication bytes counted by the followers" 30 metric_above quire_replication_bytes_in_total 0
elections_before=$(metric_sum quire_leader_elections_total)

victim=$(leader_of 0)
[ -n "$victim" ] && [ "$victim" -ge 1 ] || fail "no leader for $topic-0"
before=$(parts)
step "docker compose kill quire$victim, leader of $(awk -v v="$victim" '$2 == v { printf "%s%s", s, $1; s = "," }' <<<"$before")"
t=$(now)
"${compose[@]}" kill "quire$victim" >/dev/null 2>&1 || fail "compose kill quire$victim"
wait_for "leaders off node $victim" 60 all_led_not "$victim"
t_leaders=$(since "$t")
check_all 1000
t_failover=$(since "$t")
step "time failover (kill to new leaders everywhere): $t_leaders; to every acknowledged record read back: $t_failover"
# The controller alone exposes the count; a new controller (the killed
# node was the old one) counts the elections it applied since it started.
wait_for "the failover's elections counted" 30 metric_above quire_leader_elections_total 0
step "leader elections counted: $(metric_sum quire_leader_elections_total) (before the kill: $elections_before)"

step "500 more each with acks=all on two in-sync replicas"
wait_for "ISRs of two" 30 all_isr 2
produce_all 1001 1500

step "docker compose start quire$victim: it catches up and rejoins the ISR"
t=$(now)
"${compose[@]}" start "quire$victim" >/dev/null 2>&1 || fail "compose start quire$victim"
wait_for "quire$victim healthy" 90 healthy "$victim"
wait_for "node $victim back in every ISR" 90 all_isr 3
t_rejoin=$(since "$t")
step "time rejoin (start to full ISRs): $t_rejoin"
check_all 1500

cut=$(leader_of 0)
[ -n "$cut" ] && [ "$cut" -ge 1 ] || fail "no leader for $topic-0"
others=""
for n in 1 2 3; do
	if [ "$n" != "$cut" ]; then
		port_var=QUIRE${n}_PORT
		others="$others${others:+,}127.0.0.1:${!port_var}"
	fi
done
step "docker network disconnect quire$cut (leader of $topic-0) from $network"
t=$(now)
docker network disconnect "$network" "$(cid "$cut")" || fail "network disconnect quire$cut"
export QUIRE_BROKERS=$others
wait_for "node $cut fenced" 60 fenced_is "$cut" yes "$others"
wait_for "leaders off node $cut" 60 all_led_not "$cut"
t_fenced=$(since "$t")
step "time fencing (disconnect to fenced, leaders moved): $t_fenced"
wait_for "ISRs of two" 30 all_isr 2
step "500 more each with acks=all while node $cut is cut off"
produce_all 1501 2000
check_all 2000

step "docker network connect quire$cut: it is unfenced and catches up"
t=$(now)
docker network connect --alias "quire$cut" "$network" "$(cid "$cut")" || fail "network connect quire$cut"
wait_for "node $cut unfenced" 90 fenced_is "$cut" no "$others"
wait_for "node $cut back in every ISR" 90 all_isr 3
t_recover=$(since "$t")
step "time recovery (reconnect to full ISRs): $t_recover"
export QUIRE_BROKERS=$all_brokers
port_var=QUIRE${cut}_PORT
wait_for "node $cut answering on its host port" 30 fenced_is "$cut" no "127.0.0.1:${!port_var}"
check_all 2000

step "rolling upgrade: each container in turn recreated on its volume (up -d --no-deps --force-recreate)"
t=$(now)
for n in 1 2 3; do
	"${compose[@]}" up -d --no-deps --no-build --force-recreate "quire$n" >"$tmp/up.log" 2>&1 ||
		{ cat "$tmp/up.log" >&2; fail "recreate quire$n"; }
	wait_for "the new quire$n healthy" 90 healthy "$n"
	wait_for "node $n back in every ISR" 90 all_isr 3
done
t_rolling=$(since "$t")
step "time rolling upgrade (three nodes, one at a time): $t_rolling"
check_all 2000

step "docker compose down -v"
"${compose[@]}" down -v --remove-orphans -t 30 >/dev/null 2>&1 || fail "compose down"

# The README's compose block, as printed: the default image tag, the
# compose file's own project (named for this run) and the host ports swapped
# for free ones.
if [ "${compose_cmd[0]}" = docker-compose ]; then
	step "the README's compose block (project $readme_project)"
	t=$(now)
	out=$(COMPOSE_PROJECT_NAME=$readme_project QUIRE_IMAGE=quire:local run_readme_block compose "$root" \
		"s/127.0.0.1:19092/127.0.0.1:$QUIRE1_PORT/; s/127.0.0.1:19093/127.0.0.1:$QUIRE2_PORT/; s/127.0.0.1:19094/127.0.0.1:$QUIRE3_PORT/; s/127.0.0.1:19404/127.0.0.1:$QUIRE1_METRICS_PORT/" 2>&1) ||
		{ echo "$out" >&2; fail "README compose block"; }
	grep -q "127.0.0.1:$QUIRE1_PORT" <<<"$out" || { echo "$out" >&2; fail "README compose block: the host was not given 127.0.0.1 addresses"; }
	grep -q "quire1:19092" <<<"$out" || { echo "$out" >&2; fail "README compose block: a container was not given quireN addresses"; }
	grep -q "^quire_ready 1$" <<<"$out" || { echo "$out" >&2; fail "README compose block: no quire_ready 1 from node 1's metrics port"; }
	step "time README compose block: $(since "$t")"
else
	step "README compose block skipped: it uses docker-compose, and only docker compose is installed"
fi
step "timings: image build $t_build, cluster ready $t_ready, failover $t_leaders (records readable $t_failover), rejoin $t_rejoin, fencing $t_fenced, recovery $t_recover, rolling upgrade $t_rolling"
step "ok"
