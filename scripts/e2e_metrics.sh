#!/usr/bin/env bash
# End-to-end check of the metrics listener of a real `quire server --dev`
# (metrics.listen on a free loopback port): /healthz, /readyz and /metrics
# answered with curl, every quire_ series the deploy/ dashboard and alert
# rules use present, the alert rules and the Prometheus configuration
# checked with promtool, then Debian's prometheus server (installed with
# apt-get when missing and running as root) started on another loopback
# port, scraping the node, and series read back through its HTTP API: the
# records produced, the per-request latency histogram (the CLI produces
# over a stream), the broker's bytes in, the replication and election
# counters, and a consumer group's rates, time to drain and members
# needed.
# Without prometheus (not installable) those last checks are skipped with a
# message; QUIRE_REQUIRE_PROMETHEUS=1 makes that an error.
#
# Env: QUIRE_BIN (default: build into a temp dir), E2E_KEEP=1 keeps the
# temp dir.
set -euo pipefail
cd "$(dirname "$0")/.."

tmp=$(mktemp -d "${TMPDIR:-/tmp}/quire-metrics.XXXXXX")
pids=()
cleanup() {
	for p in "${pids[@]}"; do
		if kill -0 "$p" 2>/dev/null; then
			kill "$p" 2>/dev/null || true
			wait "$p" 2>/dev/null || true
		fi
	done
	if [ "${E2E_KEEP:-0}" = 1 ]; then echo "metrics: kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

step() { echo "metrics: $*"; }
fail() {
	echo "metrics: FAIL: $*" >&2
	for f in "$tmp"/*.log; do
		[ -f "$f" ] || continue
		echo "---- $f (last 40 lines) ----" >&2
		tail -n 40 "$f" >&2
	done
	echo "metrics: FAIL (repeated after the logs): $*" >&2
	exit 1
}

quire="${QUIRE_BIN:-}"
if [ -z "$quire" ]; then
	step "building quire"
	go build -o "$tmp/quire" ./cmd/quire
	quire="$tmp/quire"
fi

# shellcheck source=scripts/lib.sh
. scripts/lib.sh
port=$(free_ports 3)
[ -n "$port" ] || fail "no free ports found"
addr="127.0.0.1:$port"
metrics="127.0.0.1:$((port + 1))"
prom="127.0.0.1:$((port + 2))"

step "starting quire server --dev on $addr, metrics on $metrics"
"$quire" server --dev --data-dir "$tmp/data" --set "listeners=$addr" --set "metrics.listen=$metrics" \
	--set metrics.pprof.enable=true --set group.lag.refresh.ms=200 >"$tmp/server.log" 2>&1 &
pids+=($!)
server_pid=$!

# get PATH: the body of a 200 answer from the metrics listener.
get() { curl -fsS --max-time 5 "http://$metrics$1"; }

deadline=$((SECONDS + 60))
until get /readyz >/dev/null 2>&1; do
	kill -0 "$server_pid" 2>/dev/null || fail "server exited during start"
	[ "$SECONDS" -lt "$deadline" ] || fail "/readyz not 200 within 60s: $(curl -sS "http://$metrics/readyz" || true)"
	sleep 0.1
done
[ "$(get /healthz)" = ok ] || fail "/healthz did not answer ok"
[ "$(get /readyz)" = ready ] || fail "/readyz did not answer ready"
# Answers are read whole before grep: grep -q stops at its first match, and
# under pipefail the writer it leaves behind (SIGPIPE, curl exit 23) would
# fail the check.
pprof=$(get /debug/pprof/) || fail "/debug/pprof/ did not answer"
grep -q goroutine <<<"$pprof" || fail "/debug/pprof/ has no goroutine profile"

step "producing 3 records to topic metrics-e2e (one partition)"
"$quire" --brokers "$addr" topic create metrics-e2e -p 1 >"$tmp/create.log" 2>&1 || fail "topic create failed: $(cat "$tmp/create.log")"
printf 'a\nb\nc\n' | "$quire" --brokers "$addr" produce metrics-e2e >"$tmp/produce.log" 2>&1 || fail "produce failed: $(cat "$tmp/produce.log")"

step "scraping /metrics"
deadline=$((SECONDS + 30))
until get /metrics >"$tmp/metrics.txt" && grep -q '^quire_topic_records_in_total{topic="metrics-e2e"} 3$' "$tmp/metrics.txt"; do
	[ "$SECONDS" -lt "$deadline" ] || fail "no quire_topic_records_in_total{topic=\"metrics-e2e\"} 3 in /metrics: $(grep metrics-e2e "$tmp/metrics.txt" || true)"
	sleep 0.2
done
for want in '^quire_active_controller 1$' '^quire_ready 1$' '^quire_fenced_brokers 0$' '^quire_offline_partitions 0$' \
	'^quire_requests_total{code="[A-Za-z]*",rpc="quire.v1.Producer/ProduceStream"} ' '^go_goroutines ' '^process_resident_memory_bytes '; do
	grep -q "$want" "$tmp/metrics.txt" || fail "/metrics has no line matching $want"
done

step "group metrics-g reads and commits 1 of the 3 records: lag 2 on the coordinator"
"$quire" --brokers "$addr" consume metrics-e2e -p 0 --group metrics-g -n 1 >"$tmp/consume.log" 2>&1 || fail "consume failed: $(cat "$tmp/consume.log")"
lag='quire_group_lag_records{group="metrics-g",partition="0",topic="metrics-e2e"}'
deadline=$((SECONDS + 30))
until get /metrics >"$tmp/metrics.txt" && grep -qxF "$lag 2" "$tmp/metrics.txt" && grep -q '^quire_group_lag_seconds{group="metrics-g",' "$tmp/metrics.txt"; do
	[ "$SECONDS" -lt "$deadline" ] || fail "no $lag 2 and lag seconds in /metrics: $(grep quire_group "$tmp/metrics.txt" || true)"
	sleep 0.2
done
desc=$("$quire" --brokers "$addr" group describe metrics-g --format json) || fail "group describe: $desc"
grep -q '"lag": 2' <<<"$desc" || fail "group describe --format json shows no lag 2: $desc"

# Two lag refreshes later the group has rates: it consumes nothing more
# and nothing is produced, so its lag of 2 never drains (+Inf) and no
# member is needed to keep up.
step "group metrics-g's throughput: rates, time to drain, members needed"
deadline=$((SECONDS + 30))
until get /metrics >"$tmp/metrics.txt" && grep -qxF 'quire_group_consume_rate{group="metrics-g"} 0' "$tmp/metrics.txt" &&
	grep -qxF 'quire_group_drain_seconds{group="metrics-g"} +Inf' "$tmp/metrics.txt" &&
	grep -qxF 'quire_group_members_needed{group="metrics-g"} 0' "$tmp/metrics.txt"; do
	[ "$SECONDS" -lt "$deadline" ] || fail "no throughput of metrics-g in /metrics: $(grep 'quire_group_[a-z_]*{group="metrics-g"}' "$tmp/metrics.txt" || true)"
	sleep 0.2
done
desc=$("$quire" --brokers "$addr" group describe metrics-g) || fail "group describe: $desc"
grep -q '^lag 2 records; consumed 0.0/s, produced 0.0/s; not draining' <<<"$desc" || fail "group describe shows no throughput line: $desc"

# The CLI produced over a stream: each request counts in the Produce
# histogram; the records' bytes count as the broker's bytes in.
grep -qE '^quire_request_duration_seconds_count\{rpc="quire.v1.Producer/Produce",type="unary"\} [1-9]' "$tmp/metrics.txt" ||
	fail "the streamed produce is not in the Produce histogram: $(grep '^quire_request_duration_seconds_count' "$tmp/metrics.txt" || true)"
grep -qE '^quire_bytes_in_total [1-9]' "$tmp/metrics.txt" || fail "no bytes in counted: $(grep '^quire_bytes_' "$tmp/metrics.txt" || true)"
for want in '^quire_replication_bytes_out_total 0$' '^quire_replication_bytes_in_total 0$' '^quire_leader_elections_total [0-9]' \
	'^quire_unclean_leader_elections_total 0$'; do
	grep -q "$want" "$tmp/metrics.txt" || fail "/metrics has no line matching $want"
done

# Every quire_ series the dashboard and the alert rules use is exposed
# (follower lag needs followers: a single node has none).
names=$(grep -ohE 'quire_[A-Za-z_]+' deploy/grafana-dashboard.json deploy/quire-alerts.yml | sed -E 's/_(bucket|count|sum)$//' | sort -u)
for n in $names; do
	[ "$n" = quire_partition_follower_lag_records ] && continue
	grep -qE "^# TYPE $n " "$tmp/metrics.txt" || fail "deploy/ uses $n, which /metrics does not expose"
done
step "ok: $(grep -c '^quire_' "$tmp/metrics.txt") quire_ series; the $(wc -w <<<"$names") used in deploy/ are exposed"

if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		step "installing Debian's prometheus with apt-get"
		(apt-get install -y prometheus || { apt-get update && apt-get install -y prometheus; }) >"$tmp/apt.log" 2>&1 || true
	fi
fi
if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then
	[ "${QUIRE_REQUIRE_PROMETHEUS:-0}" = 1 ] && fail "prometheus and promtool are not installed"
	step "SKIP: prometheus is not installed (apt-get install prometheus); promtool and server checks not run"
	exit 0
fi

step "promtool check rules deploy/quire-alerts.yml"
promtool check rules deploy/quire-alerts.yml >"$tmp/promtool.log" 2>&1 || fail "promtool check rules: $(cat "$tmp/promtool.log")"
cat >"$tmp/prometheus.yml" <<CONF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $PWD/deploy/quire-alerts.yml
scrape_configs:
  - job_name: quire
    static_configs:
      - targets: ["$metrics"]
CONF
promtool check config "$tmp/prometheus.yml" >"$tmp/promtool.log" 2>&1 || fail "promtool check config: $(cat "$tmp/promtool.log")"
# deploy/prometheus.yml names compose hosts; its syntax is checked with the
# rules file at the path the compose service mounts it.
sed "s|/etc/prometheus/quire-alerts.yml|$PWD/deploy/quire-alerts.yml|" deploy/prometheus.yml >"$tmp/compose-prometheus.yml"
promtool check config "$tmp/compose-prometheus.yml" >"$tmp/promtool.log" 2>&1 || fail "deploy/prometheus.yml: $(cat "$tmp/promtool.log")"

step "starting prometheus on $prom scraping $metrics"
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/tsdb" --web.listen-address="$prom" >"$tmp/prometheus.log" 2>&1 &
pids+=($!)
prom_pid=$!
query='quire_topic_records_in_total{topic="metrics-e2e",job="quire"}'
deadline=$((SECONDS + 60))
until curl -fsS --max-time 5 "http://$prom/api/v1/query" --data-urlencode "query=$query" >"$tmp/query.json" 2>/dev/null &&
	grep -q '"value":\[[0-9.]*,"3"\]' "$tmp/query.json"; do
	kill -0 "$prom_pid" 2>/dev/null || fail "prometheus exited"
	[ "$SECONDS" -lt "$deadline" ] || fail "prometheus has no $query = 3 within 60s: $(cat "$tmp/query.json" 2>/dev/null || true)"
	sleep 0.5
done
up=$(curl -fsS --max-time 5 "http://$prom/api/v1/query" --data-urlencode 'query=up{job="quire"}') || fail "prometheus did not answer the up query"
grep -q '"value":\[[0-9.]*,"1"\]' <<<"$up" || fail "prometheus says the node is not up: $up"
step "ok: prometheus scraped the node; $query = 3 through its HTTP API"

# prom_value QUERY REGEX: the query's value (one series) matches REGEX
# (an extended regex of the whole value) through Prometheus' HTTP API.
prom_value() {
	curl -fsS --max-time 5 "http://$prom/api/v1/query" --data-urlencode "query=$1" >"$tmp/query.json" 2>/dev/null &&
		grep -qE "\"value\":\[[0-9.]*,\"$2\"\]" "$tmp/query.json"
}
for q in \
	'sum(quire_request_duration_seconds_count{rpc="quire.v1.Producer/Produce",type="unary",job="quire"})=[1-9][0-9]*' \
	'quire_bytes_in_total{job="quire"}=[1-9][0-9]*' \
	'quire_bytes_out_total{job="quire"}=[1-9][0-9]*' \
	'quire_replication_bytes_out_total{job="quire"}=0' \
	'quire_replication_bytes_in_total{job="quire"}=0' \
	'quire_leader_elections_total{job="quire"}=[0-9]+' \
	'quire_unclean_leader_elections_total{job="quire"}=0' \
	'quire_group_consume_rate{group="metrics-g",job="quire"}=0' \
	'quire_group_produce_rate{group="metrics-g",job="quire"}=0' \
	'quire_group_drain_seconds{group="metrics-g",job="quire"}=\+Inf' \
	'quire_group_members_needed{group="metrics-g",job="quire"}=0' \
	'quire_group_partitions{group="metrics-g",job="quire"}=1'; do
	query=${q%=*} want=${q##*=}
	deadline=$((SECONDS + 30))
	until prom_value "$query" "$want"; do
		[ "$SECONDS" -lt "$deadline" ] || fail "prometheus has no $query matching $want within 30s: $(cat "$tmp/query.json" 2>/dev/null || true)"
		sleep 0.5
	done
done
step "ok: the request, traffic, election and group throughput series read back through prometheus"
