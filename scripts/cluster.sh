#!/usr/bin/env bash
# A 3-node Quire cluster as local processes, for people (docs/operations.md).
#
#   scripts/cluster.sh start        start the nodes (if not running), wait for them
#   scripts/cluster.sh stop         SIGTERM every node, SIGKILL after a deadline
#   scripts/cluster.sh restart      stop, then start
#   scripts/cluster.sh status       which nodes are up, and the controller (exit 1 unless all serve)
#   scripts/cluster.sh logs [N] [-f]  last lines of every node's log (or node N's)
#   scripts/cluster.sh kill N       kill -9 node N (fault injection)
#   scripts/cluster.sh start-node N / stop-node N   one node only
#   scripts/cluster.sh env          print `export QUIRE_BROKERS=...`
#   scripts/cluster.sh settings     every node's settings (QUIRE_* variables)
#   scripts/cluster.sh add-node N   start broker-only node N (4 or more) and move
#                                   its share of replicas onto it
#   scripts/cluster.sh remove-node N  move every replica off node N, stop it,
#                                   unregister it and delete its directory
#
# Every node is broker and controller (a metadata quorum voter) with node ids
# 1..3 on 127.0.0.1:BASE, BASE+1, BASE+2. Files live under the cluster
# directory: nodeN/data (log.dirs), nodeN/quire.log, nodeN/quire.pid.
# Nodes added with add-node are broker-only (raft non-voters) on BASE+N-1,
# marked by nodeN/broker-only; stop, start, status, logs and kill take
# them as well.
#
# Env: QUIRE_CLUSTER_DIR (default ./.cluster), QUIRE_CLUSTER_BASE_PORT
# (default 19092), QUIRE_BIN (default ./bin/quire, built when missing),
# GRPCURL (default ./bin/grpcurl; without it health is asked through
# `quire cluster info`), QUIRE_CLUSTER_START_TIMEOUT (s, default 60),
# QUIRE_CLUSTER_STOP_TIMEOUT (s, default 40), QUIRE_CLUSTER_SECURE=1 (see
# below), QUIRE_CLUSTER_KAFKA_BASE_PORT (see below), GOMAXPROCS (each node's; default the cores divided by the
# nodes, at least 1). Other QUIRE_* config keys in the
# environment (QUIRE_LOG_LEVEL=debug, ...) reach every node, below the
# settings fixed here; QUIRE_CLUSTER_EXTRA_SETTINGS ("KEY=VALUE ...",
# QUIRE_* variables separated by spaces) are given to every node after
# them, and win (the end-to-end scripts shorten the broker session with
# it, scripts/lib.sh).
#
# Secured variant (QUIRE_CLUSTER_SECURE=1): a throwaway CA and certificates
# are made under the cluster directory (certs/, by `quire dev certs`) for
# node-1..3 and the clients admin and reader; every listener and
# node-to-node connection is TLS, client certificates are checked when
# given (tls.client.auth=request, so SCRAM users can connect without one),
# the nodes and admin are super.users, and authorizer.enable is on. `env` then also prints the
# QUIRE_TLS_* variables that make the CLI connect as admin.
#
# Kafka's protocol (QUIRE_CLUSTER_KAFKA_BASE_PORT=PORT): every node also
# has a listener KAFKA on 127.0.0.1:PORT, PORT+1, PORT+2 (node 1..3)
# serving Kafka's wire protocol (kafka.listener.names), beside its gRPC
# one (then named PLAINTEXT, the name a bare address has); with
# QUIRE_CLUSTER_SECURE=1 it is SASL_SSL, as docker-compose.secure.yml's
# KAFKA listeners are: TLS with the node's certificate, and SCRAM (the
# users of `quire user create`). `env` then also prints QUIRE_KAFKA_BROKERS,
# the Kafka bootstrap addresses.
#
# KEEP IN SYNC with docker-compose.yml: the same node ids, roles, voters and
# the settings in cluster_settings below, with the same key names and values
# (only addresses and paths differ). scripts/check_compose.sh checks it.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cluster_dir=${QUIRE_CLUSTER_DIR:-$root/.cluster}
base_port=${QUIRE_CLUSTER_BASE_PORT:-19092}
quire=${QUIRE_BIN:-$root/bin/quire}
grpcurl=${GRPCURL:-$root/bin/grpcurl}
start_timeout=${QUIRE_CLUSTER_START_TIMEOUT:-60}
stop_timeout=${QUIRE_CLUSTER_STOP_TIMEOUT:-40}
nodes=(1 2 3)

# cluster_settings: the settings every node shares, as environment
# variables (QUIRE_ + key upper-cased, dots as underscores).
# KEEP IN SYNC with the x-quire-settings block of docker-compose.yml.
# shellcheck disable=SC2054 # commas are inside values
cluster_settings=(
	QUIRE_CLUSTER_ID=quire-local
	QUIRE_PROCESS_ROLES=broker,controller
	QUIRE_NUM_PARTITIONS=3
	QUIRE_DEFAULT_REPLICATION_FACTOR=3
	QUIRE_MIN_INSYNC_REPLICAS=2
	QUIRE_AUTO_CREATE_TOPICS_ENABLE=true
	QUIRE_BROKER_HEARTBEAT_INTERVAL_MS=2000
	QUIRE_BROKER_SESSION_TIMEOUT_MS=9000
)

# kafka_base: the first KAFKA listener's port, or nothing for none.
kafka_base=${QUIRE_CLUSTER_KAFKA_BASE_PORT:-}
if [ -n "$kafka_base" ]; then
	cluster_settings+=(QUIRE_KAFKA_LISTENER_NAMES=KAFKA)
	# As docker-compose.secure.yml's x-secure-settings.
	[ "${QUIRE_CLUSTER_SECURE:-0}" != 1 ] || cluster_settings+=(QUIRE_KAFKA_LISTENER_SECURITY_PROTOCOL_MAP=KAFKA:SASL_SSL)
fi

# extra_settings: QUIRE_CLUSTER_EXTRA_SETTINGS, word by word.
extra_settings=()
read -r -a extra_settings <<<"${QUIRE_CLUSTER_EXTRA_SETTINGS:-}"

secure=${QUIRE_CLUSTER_SECURE:-0}
certs_dir=$cluster_dir/certs
if [ "$secure" = 1 ]; then
	cluster_settings+=(
		QUIRE_TLS_CLIENT_AUTH=request
		"QUIRE_TLS_CLIENT_CA_FILE=$certs_dir/ca.pem"
		"QUIRE_SUPER_USERS=User:CN=node-1,O=quire;User:CN=node-2,O=quire;User:CN=node-3,O=quire;User:CN=admin,O=quire"
		QUIRE_AUTHORIZER_ENABLE=true
	)
fi

# client_tls: the CLI's and grpcurl's TLS flags (admin's certificate).
client_tls=()
grpcurl_tls=(-plaintext)
if [ "$secure" = 1 ]; then
	client_tls=(--tls-ca "$certs_dir/ca.pem" --tls-cert "$certs_dir/admin.pem" --tls-key "$certs_dir/admin-key.pem")
	grpcurl_tls=(-cacert "$certs_dir/ca.pem" -cert "$certs_dir/admin.pem" -key "$certs_dir/admin-key.pem")
fi

# ensure_certs: the throwaway CA and certificates of the secured variant.
ensure_certs() {
	[ "$secure" = 1 ] || return 0
	[ -f "$certs_dir/ca.pem" ] && return 0
	say "making a throwaway CA and certificates in $certs_dir"
	"$quire" dev certs --out "$certs_dir" --nodes node-1,node-2,node-3 --clients admin,reader --hosts localhost,127.0.0.1 >/dev/null
}

case $base_port in
'' | *[!0-9]*) echo "cluster: QUIRE_CLUSTER_BASE_PORT must be a number, not '$base_port'" >&2; exit 2 ;;
esac
case $kafka_base in
*[!0-9]*) echo "cluster: QUIRE_CLUSTER_KAFKA_BASE_PORT must be a number, not '$kafka_base'" >&2; exit 2 ;;
esac

say() { echo "cluster: $*"; }
die() {
	echo "cluster: $*" >&2
	exit 1
}

addr_of() { echo "127.0.0.1:$((base_port + $1 - 1))"; }
kafka_addr_of() { echo "127.0.0.1:$((kafka_base + $1 - 1))"; }
node_dir() { echo "$cluster_dir/node$1"; }
pid_file() { echo "$(node_dir "$1")/quire.pid"; }
log_file() { echo "$(node_dir "$1")/quire.log"; }

# voters: controller.quorum.voters, id@host:port for every node.
voters() {
	local n out=""
	for n in "${nodes[@]}"; do out+="${out:+,}$n@$(addr_of "$n")"; done
	echo "$out"
}

brokers() {
	local n out=""
	for n in "${nodes[@]}"; do out+="${out:+,}$(addr_of "$n")"; done
	echo "$out"
}

kafka_brokers() {
	local n out=""
	for n in "${nodes[@]}"; do out+="${out:+,}$(kafka_addr_of "$n")"; done
	echo "$out"
}

# added: the broker-only nodes added with add-node, sorted.
added() {
	local d n
	for d in "$cluster_dir"/node*/broker-only; do
		[ -f "$d" ] || continue
		n=${d%/broker-only}
		echo "${n##*/node}"
	done | sort -n
}

# all_nodes: the voters, then the added nodes.
all_nodes() {
	printf '%s\n' "${nodes[@]}"
	added
}

check_node() {
	case ${1:-} in
	1 | 2 | 3) ;;
	*)
		if [[ ${1:-} =~ ^[0-9]+$ ]] && [ -f "$(node_dir "$1")/broker-only" ]; then
			return 0
		fi
		die "no node '${1:-}' (nodes are $(all_nodes | paste -sd ' '))"
		;;
	esac
}

# node_env N: node N's settings, KEY=VALUE a line, as it gets them.
node_env() {
	local n=$1 addr
	addr=$(addr_of "$n")
	[ -z "$kafka_base" ] || addr="PLAINTEXT://$addr,KAFKA://$(kafka_addr_of "$n")"
	printf '%s\n' "${cluster_settings[@]}" ${extra_settings[@]+"${extra_settings[@]}"} \
		"QUIRE_NODE_ID=$n" \
		"QUIRE_LISTENERS=$addr" \
		"QUIRE_ADVERTISED_LISTENERS=$addr" \
		"QUIRE_CONTROLLER_QUORUM_VOTERS=$(voters)" \
		"QUIRE_LOG_DIRS=$(node_dir "$n")/data"
	if [ "$n" -gt 3 ]; then
		echo "QUIRE_PROCESS_ROLES=broker" # after the shared settings: it wins
	fi
	if [ "$secure" = 1 ]; then
		printf '%s\n' "QUIRE_TLS_CERT_FILE=$certs_dir/node-$n.pem" "QUIRE_TLS_KEY_FILE=$certs_dir/node-$n-key.pem"
	fi
}

# cmd_settings: every node's settings, "N KEY=VALUE" a line (read by
# scripts/check_compose.sh).
cmd_settings() {
	local n line
	for n in "${nodes[@]}"; do
		while IFS= read -r line; do echo "$n $line"; done < <(node_env "$n")
	done
}

# node_pid N: the pid of node N if it runs (its pid file names a live
# `quire server`), else nothing. A stale pid file is removed.
node_pid() {
	local f pid
	f=$(pid_file "$1")
	[ -f "$f" ] || return 0
	pid=$(<"$f")
	if [ -n "$pid" ] && is_quire "$pid"; then
		echo "$pid"
		return 0
	fi
	rm -f "$f"
}

# is_quire PID: PID is a live `quire server` process.
is_quire() {
	kill -0 "$1" 2>/dev/null &&
		tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep 'quire.* server' >/dev/null
}

# port_open ADDR: something accepts TCP connections there.
port_open() {
	local host=${1%:*} port=${1##*:}
	(exec 3<>"/dev/tcp/$host/$port") 2>/dev/null
}

# healthy ADDR: the node answers its gRPC health check with SERVING.
healthy() {
	if [ -x "$grpcurl" ]; then
		"$grpcurl" ${grpcurl_tls[@]+"${grpcurl_tls[@]}"} -max-time 2 "$1" grpc.health.v1.Health/Check 2>/dev/null | grep '"SERVING"' >/dev/null
	else
		timeout 5 "$quire" cluster info --brokers "$1" ${client_tls[@]+"${client_tls[@]}"} >/dev/null 2>&1
	fi
}

# controller_of ADDR: the controller id that node reports, if any.
controller_of() {
	local out id
	if [ -x "$grpcurl" ]; then
		out=$("$grpcurl" ${grpcurl_tls[@]+"${grpcurl_tls[@]}"} -max-time 3 -d '{}' "$1" quire.v1.Admin/DescribeCluster 2>/dev/null) || return 0
		id=$(sed -n 's/.*"controllerId": *\(-\{0,1\}[0-9]*\).*/\1/p' <<<"$out" | head -n 1)
	else
		out=$(timeout 5 "$quire" cluster info --brokers "$1" ${client_tls[@]+"${client_tls[@]}"} --format json 2>/dev/null) || return 0
		id=$(sed -n 's/.*"controller_id": *\(-\{0,1\}[0-9]*\).*/\1/p' <<<"$out" | head -n 1)
	fi
	case $id in
	'' | -* | 0) ;; # none elected (node ids start at 1)
	*) echo "$id" ;;
	esac
}

# live_brokers ADDR: the ids of the brokers that node reports registered
# and not fenced, one a line; nothing when it does not answer (asked
# again at the next poll).
live_brokers() {
	local out
	out=$(timeout 5 "$quire" cluster info --brokers "$1" ${client_tls[@]+"${client_tls[@]}"} --format json 2>/dev/null) || return 0
	awk '/"id":/ { id = $2; gsub(/[^0-9]/, "", id) } /"fenced": false/ { print id }' <<<"$out"
}

ensure_binary() {
	if [ -z "${QUIRE_BIN:-}" ] && [ ! -x "$quire" ]; then
		say "building $quire"
		(cd "$root" && go build -o bin/quire ./cmd/quire)
	fi
	[ -x "$quire" ] || die "no quire binary at $quire"
}

# with_lock CMD...: run CMD holding the cluster directory's lock, so that
# two starts or stops at once do not race.
with_lock() {
	mkdir -p "$cluster_dir"
	if command -v flock >/dev/null 2>&1; then
		exec 9>"$cluster_dir/.lock"
		flock -w "$((start_timeout + stop_timeout))" 9 || die "another cluster.sh holds $cluster_dir/.lock"
	fi
	"$@"
}

# node_procs: each node's GOMAXPROCS, the machine's cores shared out
# between the nodes (at least one each), unless GOMAXPROCS is set. Three
# Go processes that each run as many threads as there are cores keep
# more threads runnable than there are cores, and the runtime's idle
# threads spin looking for work the others hold: on 2 cores the nodes
# used 15 % more CPU for the same records and the end-to-end p99 at
# 50,000 records/s was 1.6x (docs/operations.md).
node_procs() {
	if [ -n "${GOMAXPROCS:-}" ]; then
		echo "$GOMAXPROCS"
		return
	fi
	local cores quota period
	cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
	# A cgroup CPU quota (cgroup v2's cpu.max, "max" for none) caps the
	# cores as Go's own default does.
	if read -r quota period 2>/dev/null </sys/fs/cgroup/cpu.max && [ "$quota" != max ] && [ "${period:-0}" -gt 0 ]; then
		quota=$(((quota + period - 1) / period))
		[ "$quota" -ge "$cores" ] || cores=$quota
	fi
	echo $((cores / ${#nodes[@]} > 0 ? cores / ${#nodes[@]} : 1))
}

start_node() {
	local n=$1 pid addr dir
	addr=$(addr_of "$n")
	dir=$(node_dir "$n")
	pid=$(node_pid "$n")
	if [ -n "$pid" ]; then
		say "node $n already running (pid $pid, $addr)"
		return 0
	fi
	if port_open "$addr"; then
		die "node $n: $addr is in use by another process (set QUIRE_CLUSTER_BASE_PORT)"
	fi
	if [ -n "$kafka_base" ] && port_open "$(kafka_addr_of "$n")"; then
		die "node $n: $(kafka_addr_of "$n") is in use by another process (set QUIRE_CLUSTER_KAFKA_BASE_PORT)"
	fi
	mkdir -p "$dir/data"
	local settings
	mapfile -t settings < <(node_env "$n")
	# nohup: the node outlives the shell that started it. Settings go in as
	# environment variables, exactly as in docker-compose.yml.
	env "${settings[@]}" GOMAXPROCS="$(node_procs)" nohup "$quire" server >>"$(log_file "$n")" 2>&1 </dev/null 9>&- &
	pid=$!
	# Record the pid once env and nohup have exec'd into quire, so that
	# node_pid never mistakes the starting process for a stale pid.
	local deadline=$((SECONDS + 10))
	until is_quire "$pid"; do
		kill -0 "$pid" 2>/dev/null || break
		[ "$SECONDS" -lt "$deadline" ] || break
		sleep 0.02
	done
	echo "$pid" >"$(pid_file "$n")"
	say "node $n started (pid $pid, $addr, log $(log_file "$n"))"
}

# wait_ready N...: nodes N... answer SERVING, a controller is elected and
# the first of them reports every one of them registered and unfenced;
# fails when one of them exits or the deadline passes.
wait_ready() {
	local deadline=$((SECONDS + start_timeout)) n pid ctl waiting live
	while :; do
		waiting=""
		for n in "$@"; do
			pid=$(node_pid "$n")
			if [ -z "$pid" ]; then
				echo "---- node $n log (last 30 lines) ----" >&2
				tail -n 30 "$(log_file "$n")" >&2 || true
				die "node $n is not running"
			fi
			healthy "$(addr_of "$n")" || waiting+=" $n"
		done
		ctl=""
		if [ -z "$waiting" ]; then
			ctl=$(controller_of "$(addr_of "$1")")
			[ -n "$ctl" ] || waiting=" (controller)"
		fi
		if [ -z "$waiting" ]; then
			# Serving is not yet registered: until the controller has
			# unfenced a node, a topic of replication factor 3 is refused
			# (INVALID_REPLICATION_FACTOR) and nothing is placed on it.
			live=" $(live_brokers "$(addr_of "$1")" | paste -sd ' ') "
			for n in "$@"; do
				[[ $live == *" $n "* ]] || waiting+=" $n (unfenced)"
			done
		fi
		if [ -z "$waiting" ]; then
			say "ready: node(s) $* serving, controller is node $ctl"
			return 0
		fi
		if [ "$SECONDS" -ge "$deadline" ]; then
			for n in "$@"; do
				echo "---- node $n log (last 20 lines) ----" >&2
				tail -n 20 "$(log_file "$n")" >&2 || true
			done
			die "not ready within ${start_timeout}s; waiting for node(s)$waiting"
		fi
		sleep 0.2
	done
}

print_env() {
	echo "export QUIRE_BROKERS=$(brokers)"
	if [ "$secure" = 1 ]; then
		echo "export QUIRE_TLS_CA=$certs_dir/ca.pem QUIRE_TLS_CERT=$certs_dir/admin.pem QUIRE_TLS_KEY=$certs_dir/admin-key.pem"
	fi
	[ -z "$kafka_base" ] || echo "export QUIRE_KAFKA_BROKERS=$(kafka_brokers)"
}

cmd_start() {
	local n
	ensure_binary
	ensure_certs
	local all
	mapfile -t all < <(all_nodes)
	for n in "${all[@]}"; do start_node "$n"; done
	wait_ready "${all[@]}"
	say "brokers: $(brokers)"
	print_env
}

# stop_pids PID...: SIGTERM, wait up to stop_timeout, then SIGKILL.
stop_pids() {
	local pid deadline=$((SECONDS + stop_timeout)) alive
	for pid in "$@"; do kill -TERM "$pid" 2>/dev/null || true; done
	while :; do
		alive=()
		for pid in "$@"; do
			if kill -0 "$pid" 2>/dev/null; then alive+=("$pid"); fi
		done
		[ "${#alive[@]}" -gt 0 ] || return 0
		if [ "$SECONDS" -ge "$deadline" ]; then
			say "still running after ${stop_timeout}s, sending SIGKILL to ${alive[*]}"
			for pid in "${alive[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
			return 0
		fi
		sleep 0.1
	done
}

stop_node() {
	local n=$1 pid
	pid=$(node_pid "$n")
	if [ -z "$pid" ]; then
		say "node $n not running"
		return 0
	fi
	say "stopping node $n (pid $pid)"
	stop_pids "$pid"
	rm -f "$(pid_file "$n")"
}

cmd_stop() {
	local n pid pids=() ids=()
	for n in $(all_nodes); do
		pid=$(node_pid "$n")
		if [ -n "$pid" ]; then
			pids+=("$pid")
			ids+=("$n")
		fi
	done
	if [ "${#pids[@]}" -eq 0 ]; then
		say "not running"
		return 0
	fi
	# All at once: a node stopping alone while the others already left would
	# wait on its controlled shutdown with no quorum to answer it.
	say "stopping node(s) ${ids[*]} (pids ${pids[*]})"
	stop_pids "${pids[@]}"
	for n in "${ids[@]}"; do rm -f "$(pid_file "$n")"; done
	say "stopped"
}

cmd_status() {
	local n pid addr state ctl="" up=0
	printf '%-5s %-8s %-17s %s\n' NODE PID ADDRESS STATE
	for n in $(all_nodes); do
		addr=$(addr_of "$n")
		pid=$(node_pid "$n")
		if [ -z "$pid" ]; then
			state=down
			pid=-
		elif healthy "$addr"; then
			state=serving
			up=$((up + 1))
			[ -n "$ctl" ] || ctl=$(controller_of "$addr")
		else
			state="running, not serving"
		fi
		printf '%-5s %-8s %-17s %s\n' "$n" "$pid" "$addr" "$state"
	done
	echo "controller: ${ctl:-none}"
	echo "brokers: $(brokers)"
	[ "$up" -eq "$(all_nodes | wc -l)" ]
}

cmd_logs() {
	local follow=0 which=() n arg lines=${QUIRE_CLUSTER_LOG_LINES:-50}
	for arg in "$@"; do
		case $arg in
		-f | --follow) follow=1 ;;
		*) check_node "$arg"; which+=("$arg") ;;
		esac
	done
	[ "${#which[@]}" -gt 0 ] || mapfile -t which < <(all_nodes)
	local files=()
	for n in "${which[@]}"; do
		[ -f "$(log_file "$n")" ] && files+=("$(log_file "$n")")
	done
	[ "${#files[@]}" -gt 0 ] || die "no logs under $cluster_dir"
	if [ "$follow" = 1 ]; then
		exec tail -n "$lines" -F "${files[@]}"
	fi
	tail -n "$lines" "${files[@]}"
}

cmd_kill() {
	local n=$1 pid
	check_node "$n"
	pid=$(node_pid "$n")
	[ -n "$pid" ] || die "node $n not running"
	kill -KILL "$pid"
	while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
	rm -f "$(pid_file "$n")"
	say "node $n killed (pid $pid)"
}

# cli ARGS...: the quire CLI against the cluster's voters.
cli() {
	"$quire" --brokers "$(brokers)" ${client_tls[@]+"${client_tls[@]}"} "$@"
}

# cmd_add_node N: start broker-only node N, wait until it serves, then
# move its share of the replicas onto it (a plan, executed and followed).
cmd_add_node() {
	local n=$1 plan
	[[ $n =~ ^[0-9]+$ ]] && [ "$n" -gt 3 ] || die "add-node N: N is a new node id, 4 or more (1..3 are the voters)"
	[ "$secure" = 0 ] || die "add-node: not with QUIRE_CLUSTER_SECURE=1 (the certificates name node-1..3 only)"
	ensure_binary
	mkdir -p "$(node_dir "$n")"
	touch "$(node_dir "$n")/broker-only"
	start_node "$n"
	wait_ready "$n"
	plan="$(node_dir "$n")/plan.json"
	cli partition reassign --plan --output "$plan"
	if grep -q '"topic"' "$plan"; then
		cli partition reassign --execute "$plan" --wait
	fi
	say "node $n added (broker-only, $(addr_of "$n"))"
}

# cmd_remove_node N: move every replica off added node N (decommission),
# stop it, unregister it once fenced, and delete its directory.
cmd_remove_node() {
	local n=$1 deadline
	[ -f "$(node_dir "$n")/broker-only" ] || die "remove-node N: node '$n' was not added with add-node (the voters 1..3 stay)"
	ensure_binary
	if [ -n "$(node_pid "$n")" ]; then
		cli broker decommission "$n"
	fi
	stop_node "$n"
	deadline=$((SECONDS + start_timeout))
	until cli broker unregister "$n" 2>/dev/null; do
		# Refused until the controller fenced it (broker.session.timeout.ms).
		[ "$SECONDS" -lt "$deadline" ] || { cli broker unregister "$n"; die "node $n not unregistered"; }
		sleep 1
	done
	rm -rf "$(node_dir "$n")"
	say "node $n removed"
}

usage() {
	sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

case ${1:-} in
start) with_lock cmd_start ;;
stop) with_lock cmd_stop ;;
restart) with_lock cmd_stop && with_lock cmd_start ;;
status) cmd_status ;;
logs) shift; cmd_logs "$@" ;;
kill) check_node "${2:-}"; with_lock cmd_kill "$2" ;;
start-node)
	check_node "${2:-}"
	ensure_binary
	with_lock start_node "$2"
	wait_ready "$2"
	;;
stop-node) check_node "${2:-}"; with_lock stop_node "$2" ;;
env) print_env ;;
settings) cmd_settings ;;
add-node) with_lock cmd_add_node "${2:-}" ;;
remove-node) with_lock cmd_remove_node "${2:-}" ;;
*) usage ;;
esac
