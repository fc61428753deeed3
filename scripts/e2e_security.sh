#!/usr/bin/env bash
# End-to-end check of the secured 3-node cluster (scripts/cluster.sh with
# QUIRE_CLUSTER_SECURE=1: TLS everywhere, nodes and admin as super.users,
# authorizer.enable): plaintext is refused; admin (by certificate) creates
# a topic, a SCRAM user and ACLs with the CLI; the user produces by
# password, a wrong password is refused; the reader certificate consumes
# and may neither produce nor delete; a deleted user is refused.
#
# Usage: scripts/e2e_security.sh   (QUIRE_BIN: the quire binary, built when unset)
set -euo pipefail
cd "$(dirname "$0")/.."

tmp=$(mktemp -d "${TMPDIR:-/tmp}/quire-e2e-security.XXXXXX")
export QUIRE_CLUSTER_DIR="$tmp/cluster" QUIRE_CLUSTER_SECURE=1
step() { echo "e2e-security: $*"; }
fail() {
	echo "e2e-security: FAIL: $*" >&2
	for f in "$QUIRE_CLUSTER_DIR"/node*/quire.log; do
		[ -f "$f" ] && { echo "--- $f" >&2; tail -n 25 "$f" >&2; }
	done
	echo "e2e-security: FAIL (repeated after the logs): $*" >&2
	exit 1
}
cleanup() {
	scripts/cluster.sh stop >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
trap cleanup EXIT

quire=${QUIRE_BIN:-}
if [ -z "$quire" ]; then
	step "building quire"
	go build -o "$tmp/quire" ./cmd/quire
	quire="$tmp/quire"
fi
export QUIRE_BIN=$quire

# shellcheck source=scripts/lib.sh
. scripts/lib.sh
base=$(free_ports 3)
[ -n "$base" ] || fail "no three free ports"
export QUIRE_CLUSTER_BASE_PORT=$base
# The short broker session of the end-to-end clusters: the stop at the end
# waited out most of the 9 s one.
e2e_cluster_timings
scripts/cluster.sh start >/dev/null || fail "the secured cluster did not start"
eval "$(scripts/cluster.sh env)" # QUIRE_BROKERS and admin's QUIRE_TLS_*
certs=$QUIRE_CLUSTER_DIR/certs
q() { "$quire" "$@"; }
as_reader() { q --tls-cert "$certs/reader.pem" --tls-key "$certs/reader-key.pem" "$@"; }
as_alice() { QUIRE_PASSWORD=$1 q --tls-cert '' --tls-key '' --user alice "${@:2}"; }

step "plaintext is refused"
if QUIRE_TLS_CA='' QUIRE_TLS_CERT='' QUIRE_TLS_KEY='' timeout 20 "$quire" topic list >/dev/null 2>&1; then
	fail "a plaintext client was answered"
fi

# Users and ACLs need metadata.version 3 (or later), which the controller
# finalizes once every node has registered.
deadline=$((SECONDS + 30))
until q cluster features 2>/dev/null | grep -Eq '^METADATA.VERSION  ([3-9]|[1-9][0-9])$'; do
	[ "$SECONDS" -lt "$deadline" ] || fail "metadata.version did not reach 3"
	sleep 0.2
done

step "admin creates a topic, a user and ACLs"
q topic create orders >/dev/null || fail "topic create"
q user create alice --new-password-stdin <<<"alice-pw" >/dev/null || fail "user create"
q user list | grep -q '^alice *SCRAM-SHA-256' || fail "alice not listed"
q acl create --principal User:alice --operation Write --topic orders >/dev/null || fail "acl create"
q acl create --principal 'User:CN=reader,O=quire' --operation Read --topic orders >/dev/null || fail "acl create"
[ "$(q acl list --principal User:alice --format json | grep -c '"operation"')" = 1 ] || fail "acl list"

step "alice produces by password; a wrong password is refused"
[ "$(as_alice alice-pw user whoami)" = "User:alice (authenticated by scram)" ] || fail "whoami as alice"
echo hello | as_alice alice-pw produce orders >/dev/null || fail "alice's produce"
if out=$(echo x | as_alice wrong produce orders 2>&1); then fail "a wrong password was accepted"; fi
grep -q SASL_AUTHENTICATION_FAILED <<<"$out" || fail "wrong password: $out"

step "the reader consumes, and may neither produce nor delete"
[ "$(timeout 30 "$quire" --tls-cert "$certs/reader.pem" --tls-key "$certs/reader-key.pem" consume orders -o start -n 1)" = hello ] || fail "reader's consume"
if out=$(echo x | as_reader produce orders 2>&1); then fail "the reader produced"; fi
# The CLI's producer is idempotent: with Write on no topic it is refused
# at InitProducerId, before any record, as Kafka refuses it.
grep -q 'CLUSTER_AUTHORIZATION_FAILED.*User:CN=reader,O=quire lacks IdempotentWrite on cluster' <<<"$out" || fail "reader produce: $out"
if out=$(as_reader topic delete orders 2>&1); then fail "the reader deleted a topic"; fi
grep -q 'lacks Delete' <<<"$out" || fail "reader delete: $out"
if out=$(as_reader acl create --principal 'User:CN=reader,O=quire' --operation All --cluster 2>&1); then fail "the reader granted itself"; fi
grep -q CLUSTER_AUTHORIZATION_FAILED <<<"$out" || fail "reader acl: $out"

if [ -n "${GRPCURL:-}" ]; then
	# docs/security.md's grpcurl commands, against the first node.
	node=${QUIRE_BROKERS%%,*}
	step "grpcurl with the admin certificate, then as alice by password"
	out=$("$GRPCURL" -cacert "$certs/ca.pem" -cert "$certs/admin.pem" -key "$certs/admin-key.pem" "$node" quire.v1.Admin/ListTopics 2>&1) ||
		fail "grpcurl ListTopics: $out"
	grep -q '"name": "orders"' <<<"$out" || fail "grpcurl ListTopics does not list orders: $out"
	out=$("$GRPCURL" -cacert "$certs/ca.pem" -H 'quire-user: alice' -H 'quire-password: alice-pw' "$node" quire.v1.Security/WhoAmI 2>&1) ||
		fail "grpcurl WhoAmI: $out"
	grep -q 'User:alice' <<<"$out" || fail "grpcurl WhoAmI as alice: $out"
fi

step "a deleted user is refused"
q user delete alice >/dev/null || fail "user delete"
# The node answering alice refuses her once it has applied the deletion
# from the metadata log (the node that took the delete has; another may
# be a moment behind).
deadline=$((SECONDS + 15))
while out=$(echo x | as_alice alice-pw produce orders 2>&1); do
	[ "$SECONDS" -lt "$deadline" ] || fail "a deleted user still produced 15s after the deletion"
	sleep 0.2
done
grep -q SASL_AUTHENTICATION_FAILED <<<"$out" || fail "deleted user: $out"
step "ok"
