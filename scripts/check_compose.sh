#!/usr/bin/env bash
# Checks docker-compose.yml: it parses (`docker-compose config -q`, which
# needs no Docker engine), and it runs the same cluster as scripts/cluster.sh:
# per node the same QUIRE_* keys with the same values (node.id, process.roles,
# controller.quorum.voters ids and ports, and every shared setting); only
# hosts and paths may differ. The compose nodes have two listeners
# (INTERNAL, advertised inside the compose network, and EXTERNAL, published
# on the host): their bind addresses are not compared, and of the
# advertised ones EXTERNAL, what the host dials, is compared with the
# script's. It also checks that docker-compose.secure.yml's header and
# docs/security.md give only commands of README.md's securecompose block.
# Run by `make test`.
#
# Without docker-compose: installs Debian's package when running as root,
# else prints a skip notice and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "check_compose: $*"; }
fail() {
	echo "check_compose: FAIL: $*" >&2
	exit 1
}

# 0. docker-compose.secure.yml's header and docs/security.md give the
# secured cluster's commands as README.md's securecompose block does (which
# scripts/e2e_compose_secure.sh runs): each of their command lines is one
# of the block's. Needs no compose tool.
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
block=$(readme_block securecompose)
[ -n "$block" ] || fail "README.md has no block marked <!-- e2e: securecompose -->"
header=$(awk '/^[^#]/ { exit } /^#   / { print substr($0, 5) }' docker-compose.secure.yml)
[ -n "$header" ] || fail "docker-compose.secure.yml's header gives no commands (lines \"#   COMMAND\")"
doc=$(readme_block securecompose docs/security.md)
[ -n "$doc" ] || fail "docs/security.md has no block marked <!-- e2e: securecompose -->"
for where in "docker-compose.secure.yml's header" docs/security.md; do
	if [ "$where" = docs/security.md ]; then lines=$doc; else lines=$header; fi
	while IFS= read -r line; do
		grep -Fxq -- "$line" <<<"$block" ||
			fail "$where gives \"$line\", which README.md's securecompose block (run by scripts/e2e_compose_secure.sh) does not"
	done <<<"$lines"
done

compose=()
if command -v docker-compose >/dev/null 2>&1; then
	compose=(docker-compose)
elif command -v docker >/dev/null 2>&1 && docker compose version >/dev/null 2>&1; then
	compose=(docker compose)
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
	say "installing docker-compose (Debian package)"
	if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose >/dev/null; then
		apt-get update -qq >/dev/null
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose >/dev/null
	fi
	compose=(docker-compose)
else
	say "SKIP: docker-compose not installed (apt-get install docker-compose)"
	exit 0
fi

# 1. It parses.
"${compose[@]}" -f docker-compose.yml config -q || fail "docker-compose.yml does not parse"
"${compose[@]}" -f docker-compose.yml -f docker-compose.secure.yml config -q || fail "docker-compose.secure.yml does not parse over docker-compose.yml"

# normalize: "N KEY=VALUE" lines with hosts dropped from host:port values
# (quire1:19092, 127.0.0.1:19092, 0.0.0.0:19092 -> :19092), paths hidden,
# and keys that exist on one side only by design left out; sorted. Of
# named advertised listeners only EXTERNAL (what the host dials) is kept.
normalize() {
	awk '
		{ n = $1; kv = substr($0, length($1) + 2); i = index(kv, "=")
		  k = substr(kv, 1, i - 1); v = substr(kv, i + 1) }
		k == "QUIRE_BROKERS" { next }              # CLI default, compose only
		k == "QUIRE_INTER_BROKER_LISTENER_NAME" { next } # compose only
		k == "QUIRE_LISTENERS" { next }            # bind addresses, per side
		k == "QUIRE_METRICS_LISTEN" { next }       # compose only (one port per container)
		k == "QUIRE_KAFKA_LISTENER_NAMES" { next } # compose only (a listener of its own)
		k == "QUIRE_LOG_DIRS" { v = "<path>" }     # a path on each side
		k == "QUIRE_ADVERTISED_LISTENERS" && v ~ /:\/\// {
			ext = ""
			m = split(v, parts, ",")
			for (j = 1; j <= m; j++) if (parts[j] ~ /^EXTERNAL:\/\//) ext = substr(parts[j], 12)
			v = ext
		}
		{ out = ""
		  while (match(v, /[A-Za-z0-9._-]*:[0-9]+/)) {
			hp = substr(v, RSTART, RLENGTH); c = index(hp, ":")
			out = out substr(v, 1, RSTART - 1) substr(hp, c)
			v = substr(v, RSTART + RLENGTH)
		  }
		  print n " " k "=" out v }
	' | sort
}

# 2. The script's settings (with its default ports).
script=$(env -u QUIRE_CLUSTER_BASE_PORT scripts/cluster.sh settings | normalize)

# 3. The compose file's settings: the environment of services quireN, as
# docker-compose resolves them (anchors merged, values unquoted).
compose_env=$("${compose[@]}" -f docker-compose.yml config | awk '
	/^[^ ]/ { top = $1 }
	top == "services:" && /^  [^ ]/ { svc = $1; sub(/:$/, "", svc); inenv = 0; next }
	top == "services:" && /^    [^ ]/ { inenv = ($1 == "environment:"); next }
	top == "services:" && inenv && /^      [A-Z_]+:/ {
		k = $1; sub(/:$/, "", k)
		v = substr($0, index($0, ":") + 1); sub(/^ +/, "", v)
		if (v ~ /^".*"$/ || v ~ /^\x27.*\x27$/) v = substr(v, 2, length(v) - 2)
		n = svc; sub(/^quire/, "", n)
		print n " " k "=" v
	}
' | normalize)

[ -n "$compose_env" ] || fail "no quireN service environment found in docker-compose.yml"
for what in QUIRE_NODE_ID QUIRE_PROCESS_ROLES QUIRE_CONTROLLER_QUORUM_VOTERS QUIRE_ADVERTISED_LISTENERS; do
	grep -q " $what=" <<<"$compose_env" || fail "docker-compose.yml sets no $what"
done
# Each service quireN is node N.
while read -r n kv; do
	[ "${kv#QUIRE_NODE_ID=}" = "$n" ] || fail "service quire$n has $kv"
done < <(grep ' QUIRE_NODE_ID=' <<<"$compose_env")

if ! diff <(echo "$script") <(echo "$compose_env") >/dev/null; then
	echo "check_compose: docker-compose.yml and scripts/cluster.sh differ (< script, > compose; hosts and paths ignored):" >&2
	diff <(echo "$script") <(echo "$compose_env") >&2 || true
	fail "keep docker-compose.yml in sync with scripts/cluster.sh"
fi
say "ok: docker-compose.yml parses; nodes $(awk '{print $1}' <<<"$script" | sort -u | paste -sd, -) match scripts/cluster.sh ($(grep -c '^1 ' <<<"$script") settings each)"
