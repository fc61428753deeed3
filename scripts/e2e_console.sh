#!/usr/bin/env bash
# End-to-end check of `quire console` in headless Chromium (Debian's
# chromium, installed with apt-get when missing and running as root):
#
#   1. against a dev node: the topic page shows the high watermarks
#      `quire topic describe` answers for a topic made here; the group pages
#      show the lag `quire group describe` answers for a group that has not
#      consumed every record; the live tail shows a record produced after
#      the page opened; a topic created through the console's form (posted
#      with curl, confirmed) exists afterwards and is listed.
#   2. against a 3-node cluster (scripts/cluster.sh): after one node is
#      stopped, the overview lists the partitions `quire topic describe`
#      shows with fewer in-sync replicas than replicas, highlighted.
#
# Pages are read with --dump-dom and a screenshot of each is saved in the
# output folder. Without chromium (not installable) the script is skipped
# with a message; QUIRE_REQUIRE_CHROMIUM=1 makes that an error.
#
# Env: QUIRE_BIN (default: build into a temp dir), E2E_CONSOLE_OUT (output
# folder for the screenshots and pages; default: a temp dir, printed),
# E2E_KEEP=1 keeps the temp dir.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

tmp=$(mktemp -d "${TMPDIR:-/tmp}/quire-console.XXXXXX")
out=${E2E_CONSOLE_OUT:-$tmp/out}
mkdir -p "$out"
pids=()
cluster_up=0
cleanup() {
	for p in "${pids[@]}"; do
		if kill -0 "$p" 2>/dev/null; then
			kill "$p" 2>/dev/null || true
			wait "$p" 2>/dev/null || true
		fi
	done
	if [ "$cluster_up" = 1 ]; then cluster stop >/dev/null 2>&1 || true; fi
	if [ "${E2E_KEEP:-0}" = 1 ] || [ -n "${E2E_CONSOLE_OUT:-}" ]; then
		echo "console: kept $tmp (pages and screenshots in $out)"
	else
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT

step() { echo "console: $*"; }
fail() {
	echo "console: FAIL: $*" >&2
	for f in "$tmp"/*.log "$tmp"/cluster/node*/quire.log; do
		[ -f "$f" ] || continue
		echo "---- $f (last 30 lines) ----" >&2
		tail -n 30 "$f" >&2
	done
	echo "console: FAIL (repeated after the logs): $*" >&2
	exit 1
}

if ! command -v chromium >/dev/null; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		step "installing Debian's chromium with apt-get"
		(apt-get update && apt-get install -y chromium) >"$tmp/apt.log" 2>&1 || true
	fi
fi
if ! command -v chromium >/dev/null; then
	[ "${QUIRE_REQUIRE_CHROMIUM:-0}" = 1 ] && fail "chromium is not installed (apt-get install chromium)"
	step "SKIP: chromium is not installed (apt-get install chromium); the console was not checked in a browser"
	exit 0
fi

quire="${QUIRE_BIN:-}"
if [ -z "$quire" ]; then
	step "building quire"
	go build -o "$tmp/quire" ./cmd/quire
	quire="$tmp/quire"
fi

# shellcheck source=scripts/lib.sh
. scripts/lib.sh

# chrome ARGS...: headless chromium, its chatter in chromium.log.
chrome() {
	timeout 60 chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
		--user-data-dir="$tmp/chrome" --window-size=1280,900 --hide-scrollbars "$@" 2>>"$tmp/chromium.log"
}
# page NAME PATH [ARGS]: the DOM of the console page at PATH, as Chromium
# built it (scripts run), saved as NAME.html; a screenshot in NAME.png.
page() {
	local name=$1 path=$2
	shift 2
	chrome "$@" --screenshot="$out/$name.png" --dump-dom "$console_url$path" >"$out/$name.html" || fail "chromium could not load $path"
	[ -s "$out/$name.png" ] || fail "chromium saved no screenshot of $path"
}
# has NAME TEXT: the page NAME holds TEXT.
has() { grep -qF -- "$2" "$out/$1.html" || fail "page $1 lacks: $2"; }

wait_http() {
	local url=$1 pid=$2 deadline=$((SECONDS + 30))
	until curl -fsS --max-time 2 -o /dev/null "$url" 2>/dev/null; do
		kill -0 "$pid" 2>/dev/null || fail "the process serving $url exited"
		[ "$SECONDS" -lt "$deadline" ] || fail "$url did not answer within 30s"
		sleep 0.1
	done
}

# start_console BROKERS: quire console for BROKERS on a free port.
start_console() {
	local port
	port=$(free_ports 1)
	[ -n "$port" ] || fail "no free port for the console"
	console_url="http://127.0.0.1:$port"
	console_log="$tmp/console-$port.log"
	"$quire" --brokers "$1" console --listen "127.0.0.1:$port" --tail-stream-max 1s >"$console_log" 2>&1 &
	pids+=($!)
	wait_http "$console_url/static/console.css" $!
}

# --- 1. a dev node -----------------------------------------------------------
port=$(free_ports 1)
[ -n "$port" ] || fail "no free ports found"
addr="127.0.0.1:$port"
step "starting quire server --dev on $addr"
"$quire" server --dev --data-dir "$tmp/data" --set "listeners=$addr" --set metrics.listen= >"$tmp/server.log" 2>&1 &
pids+=($!)
server_pid=$!
q() { "$quire" --brokers "$addr" "$@"; }
deadline=$((SECONDS + 60))
until q cluster info >/dev/null 2>&1; do
	kill -0 "$server_pid" 2>/dev/null || fail "server exited during start"
	[ "$SECONDS" -lt "$deadline" ] || fail "server did not answer within 60s"
	sleep 0.2
done
start_console "$addr"
step "console on $console_url"

step "topic e2e-orders: 3 partitions, 10 records by key"
q topic create e2e-orders -p 3 >/dev/null || fail "topic create failed"
seq 1 10 | sed 's/.*/k&:v&/' | q produce e2e-orders --key-separator : >"$tmp/produce.log" 2>&1 || fail "produce: $(cat "$tmp/produce.log")"
q topic describe e2e-orders >"$tmp/orders.txt" || fail "topic describe failed"
# The partition rows: PARTITION LEADER EPOCH REPLICAS ISR LOG-START HW LEO.
hw_of() { awk -v p="$1" '$1 == p && NF == 8 { print $7 }' "$tmp/orders.txt"; }
page topic /topics/e2e-orders
for p in 0 1 2; do
	hw=$(hw_of "$p")
	[ -n "$hw" ] || fail "quire topic describe shows no partition $p: $(cat "$tmp/orders.txt")"
	# The row of partition p, up to its end.
	row=$(tr -d '\n' <"$out/topic.html" | grep -o "data-partition=\"$p\">[^/]*</td>.*" | sed 's|</tr>.*||')
	grep -qF "class=\"num hw\">$hw<" <<<"$row" || fail "topic page: partition $p does not show high watermark $hw: $row"
done
[ $(($(hw_of 0) + $(hw_of 1) + $(hw_of 2))) = 10 ] || fail "the 10 records are not all below the high watermarks: $(cat "$tmp/orders.txt")"
has topic 'live tail'
step "ok: the topic page shows the high watermarks of quire topic describe"
page topics /topics
has topics 'data-topic="e2e-orders"'

step "group e2e-readers: 6 records, 2 consumed and committed"
printf 'r1\nr2\nr3\nr4\nr5\nr6\n' | q produce e2e-lag >"$tmp/produce.log" 2>&1 || fail "produce: $(cat "$tmp/produce.log")"
q consume e2e-lag -p 0 -g e2e-readers -n 2 -o start >"$tmp/consume.log" 2>&1 || fail "consume: $(cat "$tmp/consume.log")"
# GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG
read -r committed lag < <(q group describe e2e-readers | awk '$1 == "e2e-readers" { print $4, $6 }') || true
[ "$lag" = 4 ] && [ "$committed" = 2 ] || fail "quire group describe: committed $committed, lag $lag; want 2 and 4"
page group /groups/e2e-readers
has group 'data-partition="e2e-lag/0"'
has group "class=\"num committed\">$committed<"
has group 'class="num hw">6<'
has group "class=\"num lag\">$lag<"
has group "id=\"total-lag\">$lag<"
has group 'id="lag-chart"'
page groups /groups
has groups 'data-group="e2e-readers"'
has groups "class=\"num lag\">$lag<"
step "ok: the group pages show committed offset $committed and lag $lag"

step "live tail of e2e-tail: a record produced after the page opened"
q topic create e2e-tail -p 1 >/dev/null || fail "topic create e2e-tail failed"
# Virtual time stands still while a stream is open; it moves on each time
# the tail's stream ends (--tail-stream-max) and the page reconnects.
chrome --virtual-time-budget=4000 --screenshot="$out/tail.png" --dump-dom "$console_url/topics/e2e-tail/tail" >"$out/tail.html" &
chrome_pid=$!
pids+=($chrome_pid)
deadline=$((SECONDS + 30))
until grep -q 'tail reading: topic=e2e-tail' "$console_log"; do
	kill -0 "$chrome_pid" 2>/dev/null || fail "chromium exited before the tail page opened its stream"
	[ "$SECONDS" -lt "$deadline" ] || fail "the tail page did not open its stream within 30s"
	sleep 0.1
done
echo 'after-open' | q produce e2e-tail -k tail-key -H source=e2e >"$tmp/produce.log" 2>&1 || fail "produce: $(cat "$tmp/produce.log")"
wait "$chrome_pid" || fail "chromium failed on the tail page"
has tail 'class="value">after-open<'
has tail 'class="key">tail-key<'
has tail 'source=e2e'
printf '\377\001binary' | q produce e2e-tail >/dev/null 2>&1 || fail "produce of a binary record failed"
page tail-start '/topics/e2e-tail/tail?from=start' --virtual-time-budget=2000
has tail-start 'class="value hex" title="binary, shown as hex">ff0162696e617279<'
has tail-start 'class="value">after-open<'
step "ok: the tail showed the record produced after it opened (and binary as hex)"

step "create topic e2e-made through the console's form"
curl -sS -o "$out/confirm.html" -w '%{http_code}' -d name=e2e-made -d partitions=2 "$console_url/actions/create-topic" >"$tmp/code" || fail "curl"
[ "$(cat "$tmp/code")" = 200 ] && grep -qF 'name="confirm" value="yes"' "$out/confirm.html" || fail "the form did not ask for a confirmation"
q topic describe e2e-made >/dev/null 2>&1 && fail "e2e-made exists before the confirmation"
code=$(curl -sS -o "$tmp/created.html" -w '%{http_code} %{redirect_url}' -d name=e2e-made -d partitions=2 -d confirm=yes "$console_url/actions/create-topic") || fail "curl"
case $code in "303 $console_url/topics/e2e-made?done="*) ;; *) fail "confirmed create answered $code: $(cat "$tmp/created.html")" ;; esac
q topic describe e2e-made >"$tmp/made.txt" 2>&1 || fail "e2e-made does not exist: $(cat "$tmp/made.txt")"
grep -qE '^PARTITIONS +2$' "$tmp/made.txt" || fail "e2e-made does not have 2 partitions: $(cat "$tmp/made.txt")"
page made /topics/e2e-made
has made 'Topic e2e-made'
page topics /topics
has topics 'data-topic="e2e-made"'
page overview /
has overview 'id="n-topics">4<'
step "ok: e2e-made exists after the confirmed form"

# --- 2. a 3-node cluster with a node stopped -----------------------------------
base=$(free_ports 3)
[ -n "$base" ] || fail "no free ports for the cluster"
# The short broker session of the end-to-end clusters: the stop at the end,
# with node 3 gone, waited out the 9 s one.
e2e_cluster_timings
cluster() { QUIRE_BIN="$quire" QUIRE_CLUSTER_DIR="$tmp/cluster" QUIRE_CLUSTER_BASE_PORT="$base" GRPCURL=/nonexistent scripts/cluster.sh "$@"; }
step "starting a 3-node cluster on 127.0.0.1:$base-$((base + 2))"
cluster_up=1
cluster start >"$tmp/cluster-start.log" 2>&1 || fail "cluster start: $(cat "$tmp/cluster-start.log")"
brokers="127.0.0.1:$base,127.0.0.1:$((base + 1)),127.0.0.1:$((base + 2))"
c() { "$quire" --brokers "$brokers" "$@"; }
start_console "$brokers"
# A cluster just up may not have every broker unfenced yet (the topic needs
# three live brokers): the create is tried again until it succeeds.
deadline=$((SECONDS + 30))
until c topic create e2e-replicated -p 3 -r 3 >"$tmp/create.log" 2>&1 || c topic describe e2e-replicated >/dev/null 2>&1; do
	[ "$SECONDS" -lt "$deadline" ] || fail "topic create e2e-replicated: $(cat "$tmp/create.log")"
	sleep 0.5
done
page cluster-ok /
has cluster-ok 'id="n-brokers">3<'
has cluster-ok 'id="n-under-replicated">0<'
step "stopping node 3"
cluster stop-node 3 >"$tmp/cluster-stop.log" 2>&1 || fail "stop-node 3: $(cat "$tmp/cluster-stop.log")"
deadline=$((SECONDS + 40))
while :; do
	c topic describe --under-replicated e2e-replicated >"$tmp/replicated.txt" 2>&1 &&
		[ "$(grep -c ' UNDER-REPLICATED' "$tmp/replicated.txt")" = 3 ] && break
	[ "$SECONDS" -lt "$deadline" ] || fail "node 3 did not leave the ISRs within 40s: $(cat "$tmp/replicated.txt")"
	sleep 0.5
done
page cluster /
has cluster 'id="n-under-replicated">3<'
# Every broker at the address quire cluster info gives, the controller
# it names shown as the active one.
c cluster info >"$tmp/info.txt" || fail "quire cluster info failed"
for id in 1 2 3; do
	baddr=$(awk -v id="$id" '$1 == id || $1 == id "*" { print $2 }' "$tmp/info.txt")
	[ -n "$baddr" ] || fail "quire cluster info shows no broker $id: $(cat "$tmp/info.txt")"
	row=$(tr -d '\n' <"$out/cluster.html" | grep -o "data-broker=\"$id\">.*" | sed 's|</tr>.*||')
	grep -qF "<td>$baddr</td>" <<<"$row" || fail "overview: broker $id does not show address $baddr: $row"
done
ctl=$(awk '$1 == "CONTROLLER" { print $2 }' "$tmp/info.txt")
row=$(tr -d '\n' <"$out/cluster.html" | grep -o "data-broker=\"$ctl\">.*" | sed 's|</tr>.*||')
grep -qF 'active controller' <<<"$row" || fail "overview: broker $ctl, the controller, is not shown as the active controller: $row"
for p in 0 1 2; do has cluster "class=\"warn under-replicated\" data-partition=\"e2e-replicated/$p\""; done
page replicated /topics/e2e-replicated
has replicated 'under-replicated'
step "ok: the overview highlights the 3 partitions left under-replicated by node 3"

step "ok: screenshots in $out: $(cd "$out" && ls ./*.png | tr '\n' ' ')"
