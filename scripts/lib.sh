# Helpers shared by the end-to-end scripts; source it.

# e2e_cluster_timings: the clusters of scripts/cluster.sh that the
# end-to-end scripts start from now on heartbeat every 500 ms and are
# fenced after 4 s of silence instead of 2 s and 9 s (what chaos/ and the
# in-process clusters of the tests use, which a loaded 2-core machine
# does not trip): a killed node's partitions move, and a stopping node
# whose peers are gone gives up, in 4 s rather than 9.
e2e_cluster_timings() {
	export QUIRE_CLUSTER_EXTRA_SETTINGS="QUIRE_BROKER_HEARTBEAT_INTERVAL_MS=500 QUIRE_BROKER_SESSION_TIMEOUT_MS=4000"
}

# free_ports N: the first of N consecutive loopback ports nothing answers
# on, or nothing if 50 random tries found none. They are taken below the
# kernel's ephemeral range (ip_local_port_range): a port there that nothing
# listens on may still be the local end of some connection, and binding it
# then fails (docker's port publishing did, "address already in use").
# E2E_PORTS=LO-HI keeps them within LO..HI: make test runs several
# scripts at once, each in a range of its own, so that two cannot pick
# the same free port before either listens on it.
free_ports() {
	local n=$1 candidate i free lo=32768 span base=20000
	if [ -n "${E2E_PORTS:-}" ]; then
		base=${E2E_PORTS%-*}
		span=$((${E2E_PORTS#*-} - base + 1 - n))
	else
		if [ -r /proc/sys/net/ipv4/ip_local_port_range ]; then
			read -r lo _ </proc/sys/net/ipv4/ip_local_port_range
		fi
		span=$((lo - 20000 - n))
		[ "$span" -ge 1000 ] || span=40000 # an unusual range: any port from 20000
	fi
	for _ in $(seq 1 50); do
		candidate=$((base + RANDOM % span))
		free=1
		for ((i = 0; i < n; i++)); do
			if (exec 3<>"/dev/tcp/127.0.0.1/$((candidate + i))") 2>/dev/null; then free=0; fi
		done
		if [ $free = 1 ]; then
			echo "$candidate"
			return 0
		fi
	done
}

# compose_ports NAME: nine distinct free loopback ports for the compose
# nodes' host listeners, exported as QUIRE1_PORT, QUIRE2_PORT and
# QUIRE3_PORT (gRPC, EXTERNAL), with QUIRE_BROKERS naming all three,
# QUIRE1_KAFKA_PORT..QUIRE3_KAFKA_PORT (Kafka's protocol) and
# QUIRE1_METRICS_PORT..QUIRE3_METRICS_PORT (metrics); NAME prefixes the
# message when there are none.
compose_ports() {
	local ports=() p tries=0
	# Nine random picks in a script's range of a few hundred ports meet
	# twice often enough to matter (about one run in sixteen): a port
	# already taken is picked again.
	while [ ${#ports[@]} -lt 9 ]; do
		tries=$((tries + 1))
		if [ $tries -gt 200 ]; then
			echo "$1: FAIL: found only ${#ports[@]} distinct free ports: ${ports[*]}" >&2
			return 1
		fi
		p=$(free_ports 1)
		[ -n "$p" ] || { echo "$1: FAIL: no free port" >&2; return 1; }
		case " ${ports[*]} " in *" $p "*) continue ;; esac
		ports+=("$p")
	done
	export QUIRE1_PORT=${ports[0]} QUIRE2_PORT=${ports[1]} QUIRE3_PORT=${ports[2]}
	export QUIRE1_KAFKA_PORT=${ports[3]} QUIRE2_KAFKA_PORT=${ports[4]} QUIRE3_KAFKA_PORT=${ports[5]}
	export QUIRE1_METRICS_PORT=${ports[6]} QUIRE2_METRICS_PORT=${ports[7]} QUIRE3_METRICS_PORT=${ports[8]}
	export QUIRE_BROKERS="127.0.0.1:$QUIRE1_PORT,127.0.0.1:$QUIRE2_PORT,127.0.0.1:$QUIRE3_PORT"
}

# readme_block NAME [FILE]: the shell block of README.md (or of FILE) that
# follows the line `<!-- e2e: NAME -->`, as printed there.
readme_block() {
	awk -v mark="<!-- e2e: $1 -->" '
		$0 == mark { found = 1; next }
		found && !open && /^```/ { open = 1; next }
		open && /^```/ { exit }
		open { print }
	' "${2:-README.md}"
}

# run_readme_block NAME DIR [SED]: runs README block NAME exactly as
# printed, with bash -e, from DIR (which has the bin/ it names); SED, if
# given, is applied first (the scripts use it only to swap in a free port
# for the documented one). Prints the block's output.
run_readme_block() {
	local name=$1 dir=$2 expr=${3:-}
	local script
	script=$(readme_block "$name")
	[ -n "$script" ] || { echo "README.md has no block marked <!-- e2e: $name -->" >&2; return 1; }
	if [ -n "$expr" ]; then script=$(sed "$expr" <<<"$script"); fi
	(cd "$dir" && bash -euo pipefail -c "$script")
}

# have_kcat LOG: true once kcat is on PATH, installing Debian's package
# with apt-get first (as root) when it is missing; apt's output goes to
# LOG.
have_kcat() {
	if ! command -v kcat >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		(apt-get install -y kcat || (apt-get update && apt-get install -y kcat)) >"$1" 2>&1 || true
	fi
	command -v kcat >/dev/null
}

# scratch_pages FILE BYTES: write FILE of a little over BYTES and delete it,
# so that the next writes in its filesystem get pages the kernel has just
# freed rather than pages a VM's host took back (scripts/bench.sh,
# "Page-cache pages").
scratch_pages() {
	dd if=/dev/zero of="$1" bs=1M count=$(($2 / 1048576 + 1)) status=none && rm -f "$1"
}

# wait_for WHAT SECONDS CMD...: poll CMD until it succeeds; the caller's
# fail says what did not happen, with wait_last when CMD left it (the last
# answer it read).
wait_for() {
	local what=$1 secs=$2
	shift 2
	local deadline=$((SECONDS + secs))
	wait_last=
	until "$@"; do
		[ "$SECONDS" -lt "$deadline" ] || fail "$what not within ${secs}s${wait_last:+; last answer: $wait_last}"
		sleep 0.5
	done
}

# live NAME PORT_OF CMD...: CMD (a cluster info) answers and lists exactly
# three brokers, node n live (unfenced) at NAME:port where `PORT_OF n`
# prints its port. A metadata election (a loaded machine can cost the
# controller its lease) makes cluster info answer "no active controller"
# for a moment, so the compose scripts wait for this rather than ask once.
live() {
	local name=$1 port_of=$2 n
	shift 2
	wait_last=$("$@" 2>&1) || return 1
	for n in 1 2 3; do
		grep -Eq "^$n\*? +$name:$($port_of "$n") .* no +[0-9]+ +([0-9]+|-) +(no|yes)$" <<<"$wait_last" || return 1
	done
	[ "$(grep -Ec "^[0-9]+\*? +$name:" <<<"$wait_last")" = 3 ]
}
# external_port N / internal_port N: node N's gRPC port published on the
# host (QUIREN_PORT) / inside the compose network (19091 + N).
external_port() {
	local port_var=QUIRE${1}_PORT
	echo "${!port_var}"
}
internal_port() { echo $((19091 + $1)); }
