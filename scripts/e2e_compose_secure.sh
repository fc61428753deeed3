#!/usr/bin/env bash
# End-to-end check of the secured compose cluster (docker-compose.secure.yml
# laid over docker-compose.yml) on a real Docker engine: the certs service
# makes the throwaway CA and exits 0 before the nodes start, the three
# nodes come up healthy on TLS, and the certificates copied out of the
# certs volume (docker cp, as documented) let a host client (bin/quire)
# connect as admin: cluster info shows the three brokers at their EXTERNAL
# addresses; a plaintext client is refused on every listener, a TLS client
# without a certificate and the reader certificate are refused by the
# authorizer; admin creates a replication factor 3 topic, produces with
# acks=all and reads the records back; kcat on the host, as a SCRAM user,
# produces and consumes over TLS on the KAFKA listeners; the CLI inside a
# container connects to quireN (the node certificates' host names). A second `up -d` runs the
# certs service again and keeps the CA. Then README.md's securecompose
# block runs as printed. Timings are printed as "e2e-compose-secure: time ...".
#
# Like scripts/e2e_compose.sh: its own compose project names, image tag and
# free host ports; containers, networks, volumes, image and copied
# certificates are removed on every exit, failures included, and that
# nothing is left is checked. Without a Docker engine (or a compose tool)
# it prints why and skips, unless QUIRE_REQUIRE_DOCKER=1, which makes that
# an error.
#
# Usage: scripts/e2e_compose_secure.sh   (QUIRE_BIN: the host CLI, built when unset)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

step() { echo "e2e-compose-secure: $*"; }
skip() {
	if [ "${QUIRE_REQUIRE_DOCKER:-0}" = 1 ]; then
		echo "e2e-compose-secure: FAIL: $* (QUIRE_REQUIRE_DOCKER=1: the compose test must run)" >&2
		exit 1
	fi
	echo "e2e-compose-secure: SKIP: $*; the secured compose cluster was not tested"
	exit 0
}

command -v docker >/dev/null 2>&1 || skip "no docker command"
if ! err=$(docker info 2>&1 >/dev/null); then
	skip "the Docker engine does not answer ($(tail -n 1 <<<"$err"))"
fi
project=quire-e2es-$$-$RANDOM
readme_project=$project-readme
files=(-f "$root/docker-compose.yml" -f "$root/docker-compose.secure.yml")
if command -v docker-compose >/dev/null 2>&1; then
	compose_cmd=(docker-compose)
elif docker compose version >/dev/null 2>&1; then
	compose_cmd=(docker compose)
else
	skip "neither docker-compose nor docker compose is installed (apt-get install docker-compose)"
fi
compose=("${compose_cmd[@]}" -p "$project" "${files[@]}")

tmp=$(mktemp -d "${TMPDIR:-/tmp}/quire-e2e-compose-secure.XXXXXX")
network=${project}_default
image=quire:$project
client_name=$project-client
certs=$tmp/certs
# IMAGE for `make image`, QUIRE_IMAGE for the compose files: the README
# block's `make image` builds this run's tag, and quire:local is left alone.
# (Variables given to an outer make on its command line would override
# IMAGE: they are dropped.)
export QUIRE_IMAGE=$image IMAGE=$image
unset MAKEFLAGS MAKEOVERRIDES MFLAGS
unset QUIRE_TLS_CA QUIRE_TLS_CERT QUIRE_TLS_KEY QUIRE_USER QUIRE_PASSWORD COMPOSE_FILE COMPOSE_PROJECT_NAME

# shellcheck source=scripts/lib.sh
. scripts/lib.sh
compose_ports e2e-compose-secure || exit 1
all_brokers=$QUIRE_BROKERS

failed=0
fail() {
	failed=1
	echo "e2e-compose-secure: FAIL: $*" >&2
	"${compose[@]}" ps >&2 2>&1 || true
	"${compose[@]}" logs --no-color --tail 30 >&2 2>&1 || true
	echo "e2e-compose-secure: FAIL (repeated after the logs): $*" >&2
	exit 1
}
# cleanup removes everything this run created, and checks that it did.
cleanup() {
	local rc=$? left
	trap - EXIT INT TERM
	docker rm -f "$client_name" >/dev/null 2>&1 || true
	"${compose[@]}" down -v --remove-orphans -t 5 >/dev/null 2>&1 || true
	"${compose_cmd[@]}" -p "$readme_project" "${files[@]}" down -v --remove-orphans -t 5 >/dev/null 2>&1 || true
	docker image rm -f "$image" >/dev/null 2>&1 || true
	left=$(
		for p in "$project" "$readme_project"; do
			docker ps -aq --filter "label=com.docker.compose.project=$p"
			docker volume ls -q --filter "label=com.docker.compose.project=$p"
			docker network ls -q --filter "label=com.docker.compose.project=$p"
		done
		docker image ls -q "$image"
	)
	rm -rf "$tmp"
	if [ -n "$left" ]; then
		echo "e2e-compose-secure: FAIL: left behind: $left" >&2
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
# q: the host CLI as admin, with the certificates copied out.
q() { "$quire" --tls-ca "$certs/ca.pem" --tls-cert "$certs/admin.pem" --tls-key "$certs/admin-key.pem" "$@"; }

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1fs", b - a }'; }
healthy() {
	local n c
	for n in 1 2 3; do
		c=$("${compose[@]}" ps -q "quire$n")
		[ -n "$c" ] && [ "$(docker inspect -f '{{.State.Health.Status}}' "$c" 2>/dev/null)" = healthy ] || return 1
	done
}
# copy_certs DIR: the certs service's files, copied out as documented.
copy_certs() {
	local c
	c=$("${compose[@]}" ps -aq certs) && [ -n "$c" ] || fail "no certs container"
	docker cp "$c":/var/lib/quire/. "$1" || fail "docker cp of the certificates"
}
full_isr() {
	local out
	out=$(q topic describe "$topic" 2>/dev/null | awk '/^PARTITION +LEADER/ { on = 1; next } NF == 0 { on = 0 } on { print $5 }') &&
		[ "$(wc -l <<<"$out")" -eq 3 ] && ! grep -qv '^\[[0-9],[0-9],[0-9]\]$' <<<"$out"
}

t=$(now)
step "building image $image (make image)"
make -s image >"$tmp/build.log" 2>&1 || { tail -n 30 "$tmp/build.log" >&2; fail "make image"; }
step "time image build: $(since "$t")"

t=$(now)
step "${compose_cmd[*]} -f docker-compose.yml -f docker-compose.secure.yml up -d (project $project, host ports $all_brokers)"
"${compose[@]}" up -d --no-build >"$tmp/up.log" 2>&1 || { cat "$tmp/up.log" >&2; fail "compose up"; }
certs_c=$("${compose[@]}" ps -aq certs)
[ -n "$certs_c" ] || fail "no certs container"
[ "$(docker inspect -f '{{.State.Status}} {{.State.ExitCode}}' "$certs_c")" = "exited 0" ] ||
	fail "the certs service had not completed successfully when the nodes were started: $(docker inspect -f '{{.State.Status}} {{.State.ExitCode}}' "$certs_c")"
wait_for "three healthy containers (healthcheck over TLS as admin)" 120 healthy
t_ready=$(since "$t")
step "time secured cluster ready (up -d to three healthy nodes): $t_ready"

copy_certs "$certs"
for f in ca.pem admin.pem admin-key.pem reader.pem reader-key.pem; do
	[ -s "$certs/$f" ] || fail "docker cp brought no $f"
done

step "admin from the host: cluster info shows the three brokers at their EXTERNAL addresses"
wait_for "cluster info as admin listing the three brokers live at 127.0.0.1" 60 live '127\.0\.0\.1' external_port q cluster info

step "a plaintext client is refused on every EXTERNAL listener and on an INTERNAL one"
for b in ${all_brokers//,/ }; do
	if out=$("$quire" --brokers "$b" cluster info 2>&1); then fail "a plaintext client was answered by $b: $out"; fi
	grep -q "connect to $b.*give --tls-ca" <<<"$out" || fail "plaintext client at $b: $out"
done
if out=$(docker run --rm --name "$client_name" --network "$network" --entrypoint quire "$image" --brokers quire1:19092 cluster info 2>&1); then
	fail "a plaintext client was answered by quire1:19092: $out"
fi
grep -q "connect to quire1:19092" <<<"$out" || fail "plaintext client at quire1:19092: $out"

step "a TLS client without a certificate, and the reader, are refused by the authorizer"
if out=$("$quire" --tls-ca "$certs/ca.pem" cluster info 2>&1); then fail "an anonymous TLS client was answered: $out"; fi
grep -q 'CLUSTER_AUTHORIZATION_FAILED.*User:ANONYMOUS lacks Describe on cluster' <<<"$out" || fail "anonymous TLS client: $out"
if out=$("$quire" --tls-ca "$certs/ca.pem" --tls-cert "$certs/reader.pem" --tls-key "$certs/reader-key.pem" topic create nope -p 1 -r 3 2>&1); then
	fail "the reader created a topic: $out"
fi
grep -q 'User:CN=reader,O=quire lacks Create' <<<"$out" || fail "reader topic create: $out"

topic=secured
step "admin creates $topic with replication factor 3, produces with acks=all and consumes"
q topic create "$topic" -p 3 -r 3 >/dev/null || fail "topic create as admin"
wait_for "a full ISR on every partition of $topic" 60 full_isr
for p in 0 1 2; do
	seq 1 100 | sed "s/^/p$p-/" | q produce "$topic" -p "$p" --acks all >/dev/null 2>"$tmp/produce.err" ||
		fail "produce to $topic-$p: $(cat "$tmp/produce.err")"
done
for p in 0 1 2; do
	out=$(timeout 30 "$quire" --tls-ca "$certs/ca.pem" --tls-cert "$certs/admin.pem" --tls-key "$certs/admin-key.pem" \
		consume "$topic" -p "$p" -o start -n 100 2>&1) || fail "consume $topic-$p: $out"
	diff <(seq 1 100 | sed "s/^/p$p-/") <(echo "$out") >/dev/null || fail "$topic-$p does not hold exactly its 100 records: $out"
done

# Kafka's protocol on the KAFKA listeners, with TLS and SCRAM (SASL_SSL):
# admin makes the SCRAM user alice and lets her write and read a topic;
# kcat on the host, as alice, lists the three brokers at their published
# KAFKA addresses, produces with SCRAM-SHA-256 and reads back with
# SCRAM-SHA-512; a wrong password is refused.
if have_kcat "$tmp/apt.log"; then
	step "kcat from the host over TLS and SCRAM (SASL_SSL) on the KAFKA listeners"
	deadline=$((SECONDS + 30))
	until q cluster features 2>/dev/null | grep -Eq '^METADATA.VERSION  ([3-9]|[1-9][0-9])$'; do
		[ "$SECONDS" -lt "$deadline" ] || fail "metadata.version did not reach 3 (users and ACLs)"
		sleep 0.5
	done
	q user create alice --new-password-stdin <<<"alice-pw" >/dev/null || fail "user create alice"
	q topic create kafka-secured -p 1 -r 3 >/dev/null || fail "topic create kafka-secured"
	for op in Write Read; do
		q acl create --principal User:alice --operation "$op" --topic kafka-secured >/dev/null || fail "acl $op for alice"
	done
	kc() {
		local mech=$1 pw=$2
		shift 2
		timeout 60 kcat -b "127.0.0.1:$QUIRE1_KAFKA_PORT" -X security.protocol=SASL_SSL -X ssl.ca.location="$certs/ca.pem" \
			-X sasl.mechanisms="$mech" -X sasl.username=alice -X sasl.password="$pw" "$@"
	}
	out=$(kc SCRAM-SHA-256 alice-pw -L 2>&1) || fail "kcat -L as alice: $out"
	for n in 1 2 3; do
		port_var=QUIRE${n}_KAFKA_PORT
		grep -q "broker $n at 127.0.0.1:${!port_var}" <<<"$out" || fail "kcat -L: no broker $n at 127.0.0.1:${!port_var}: $out"
	done
	seq 1 100 | kc SCRAM-SHA-256 alice-pw -P -t kafka-secured -p 0 -X acks=all 2>"$tmp/kcat.err" || fail "kcat -P as alice: $(tail -3 "$tmp/kcat.err")"
	out=$(kc SCRAM-SHA-512 alice-pw -C -t kafka-secured -p 0 -o beginning -e -f '%s\n' 2>"$tmp/kcat.err") || fail "kcat -C as alice: $(tail -3 "$tmp/kcat.err")"
	[ "$out" = "$(seq 1 100)" ] || fail "kcat -C as alice read: $out"
	if kc SCRAM-SHA-256 wrong -L -m 10 >/dev/null 2>"$tmp/kcat.err"; then fail "kcat with a wrong password was answered"; fi
	grep -q 'invalid credentials for user "alice"' "$tmp/kcat.err" || fail "kcat with a wrong password: $(tail -3 "$tmp/kcat.err")"
else
	step "SKIP: kcat is not installed (apt-get install kcat); the KAFKA listeners' TLS and SCRAM were not checked"
fi

step "the CLI inside a container connects as admin to quireN (the node certificates' host names)"
wait_for "cluster info inside quire1 listing the three brokers live at quireN" 60 live 'quire[1-3]' internal_port "${compose[@]}" exec -T quire1 quire cluster info

step "up -d again: the certs service runs again and keeps the CA"
"${compose[@]}" up -d --no-build >"$tmp/up.log" 2>&1 || { cat "$tmp/up.log" >&2; fail "second compose up"; }
[ "$(docker inspect -f '{{.State.Status}} {{.State.ExitCode}}' "$certs_c")" = "exited 0" ] || fail "the certs service failed on its second run"
"${compose[@]}" logs --no-color certs 2>&1 | grep -q "kept:" || fail "the certs service did not say it kept the files"
copy_certs "$tmp/certs-again"
cmp -s "$certs/ca.pem" "$tmp/certs-again/ca.pem" || fail "a second up -d replaced the CA"
wait_for "cluster info with the first copy of the certificates after a second up -d" 60 live '127\.0\.0\.1' external_port q cluster info

step "down -v"
"${compose[@]}" down -v --remove-orphans -t 30 >/dev/null 2>&1 || fail "compose down"
left=$(docker volume ls -q --filter "label=com.docker.compose.project=$project")
[ -z "$left" ] || fail "down -v left volumes: $left"

# README.md's securecompose block, as printed: the compose file's own
# project (named for this run), free host ports for the documented ones and
# a directory of this run for .compose-certs; with Compose v2 only,
# `docker compose` for `docker-compose`.
step "the README's securecompose block (project $readme_project)"
t=$(now)
expr="s/127.0.0.1:19092/127.0.0.1:$QUIRE1_PORT/g; s/127.0.0.1:19093/127.0.0.1:$QUIRE2_PORT/g; s/127.0.0.1:19094/127.0.0.1:$QUIRE3_PORT/g; s|\\.compose-certs|$tmp/readme-certs|g"
if [ "${compose_cmd[0]}" != docker-compose ]; then expr="$expr; s/docker-compose /docker compose /g"; fi
out=$(
	unset QUIRE_BROKERS
	COMPOSE_PROJECT_NAME=$readme_project run_readme_block securecompose "$root" "$expr" 2>&1
) ||
	{ echo "$out" >&2; fail "README securecompose block"; }
grep -Eq "^1\*? +127\.0\.0\.1:$QUIRE1_PORT " <<<"$out" || { echo "$out" >&2; fail "README securecompose block: cluster info did not show node 1 at 127.0.0.1:$QUIRE1_PORT"; }
grep -qx hello <<<"$out" || { echo "$out" >&2; fail "README securecompose block: the record was not read back"; }
step "time README securecompose block: $(since "$t")"
step "ok"
