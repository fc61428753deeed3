#!/usr/bin/env bash
# End-to-end check of `quire console` in headless Chromium (Debian's
# chromium, installed with apt-get when missing and running as root):
#
#   1. against a dev node: the topic page shows the high watermarks
#      `quire topic describe` answers for a topic made here; the group pages
#      show the lag `quire group describe` answers for a group that has not
#      consumed every record, and its throughput as `quire group describe`
#      works it out (not draining, the members needed, the partitions);
#      the live tail shows a record produced after the page opened; a
#      topic created through the console's form (posted with curl,
#      confirmed) exists afterwards and is listed.
#      In one page kept open (scripts/console_browser.py drives it over the
#      DevTools protocol): the message browser finds a record by key and
#      by timestamp, and its page shows its headers; a record produced
#      through the page's form (confirmed); a config edited through the
#      topic page's form (a refused value first, then a good one,
#      confirmed); the throughput charts with data (the console reads the
#      node's metrics listener); the security page; and, last, the node
#      stopped under the open overview: the page says it cannot reach the
#      cluster and shows its last view, marked stale.
#   2. against a 3-node cluster (scripts/cluster.sh): after one node is
#      stopped, the overview lists the partitions `quire topic describe`
#      shows with fewer in-sync replicas than replicas, highlighted.
#
# Pages are read with --dump-dom (or from the open page) and a screenshot
# of each is saved in the output folder. Without chromium (not
# installable) the script is skipped with a message;
# QUIRE_REQUIRE_CHROMIUM=1 makes that an error.
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
	if [ -n "${BROWSER_PID:-}" ]; then
		if [ -n "${BROWSER[1]:-}" ]; then echo quit >&"${BROWSER[1]}" 2>/dev/null || true; fi
		wait "$BROWSER_PID" 2>/dev/null || true
	fi
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

if ! command -v chromium >/dev/null || ! command -v python3 >/dev/null; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		step "installing Debian's chromium and python3 with apt-get"
		(apt-get update && apt-get install -y chromium python3) >"$tmp/apt.log" 2>&1 || true
	fi
fi
if ! command -v chromium >/dev/null || ! command -v python3 >/dev/null; then
	[ "${QUIRE_REQUIRE_CHROMIUM:-0}" = 1 ] && fail "chromium or python3 is not installed (apt-get install chromium python3)"
	step "SKIP: chromium or python3 is not installed (apt-get install chromium python3); the console was not checked in a browser"
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

chrome_args=(--headless --no-sandbox --disable-gpu --disable-background-networking --window-size=1280,900 --hide-scrollbars)
# chrome ARGS...: headless chromium, its chatter in chromium.log.
chrome() {
	timeout 60 chromium "${chrome_args[@]}" --user-data-dir="$tmp/chrome" "$@" 2>>"$tmp/chromium.log"
}
# The open page: one chromium driven by scripts/console_browser.py.
# b COMMAND ARGS: its answer (after "ok"), or the script fails.
b() {
	local ans
	echo "$*" >&"${BROWSER[1]}" || fail "the browser is gone (at: $*)"
	read -r -t 90 ans <&"${BROWSER[0]}" || fail "the browser did not answer: $*"
	case $ans in
	ok*) ans=${ans#ok} && printf '%s\n' "${ans# }" ;;
	*) fail "browser: $*: $ans" ;;
	esac
}
# bwait JS WHAT: wait up to 30s for JS to be true in the open page.
bwait() {
	local ans
	echo "wait 30 $1" >&"${BROWSER[1]}" || fail "the browser is gone (waiting for $2)"
	read -r -t 90 ans <&"${BROWSER[0]}" || fail "the browser did not answer (waiting for $2)"
	[ "${ans%% *}" = ok ] || fail "the page never showed $2: $ans"
}
# bpage NAME: the open page's DOM in NAME.html and a screenshot in NAME.png.
bpage() { b dom "$out/$1.html" >/dev/null && b shot "$out/$1.png" >/dev/null; }
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

# start_console BROKERS [ARGS]: quire console for BROKERS on a free port.
start_console() {
	local port brokers=$1
	shift
	port=$(free_ports 1)
	[ -n "$port" ] || fail "no free port for the console"
	console_url="http://127.0.0.1:$port"
	console_log="$tmp/console-$port.log"
	"$quire" --brokers "$brokers" console --listen "127.0.0.1:$port" --tail-stream-max 1s "$@" >"$console_log" 2>&1 &
	pids+=($!)
	wait_http "$console_url/static/console.css" $!
}

# --- 1. a dev node -----------------------------------------------------------
port=$(free_ports 2)
[ -n "$port" ] || fail "no free ports found"
addr="127.0.0.1:$port"
maddr="127.0.0.1:$((port + 1))"
step "starting quire server --dev on $addr (metrics on $maddr)"
# Lag refreshed five times a second, so that the group coordinator's
# rates (two refreshes at least) are known within a second.
"$quire" server --dev --data-dir "$tmp/data" --set "listeners=$addr" --set "metrics.listen=$maddr" \
	--set group.lag.refresh.ms=200 >"$tmp/server.log" 2>&1 &
pids+=($!)
server_pid=$!
q() { "$quire" --brokers "$addr" "$@"; }
deadline=$((SECONDS + 60))
until q cluster info >/dev/null 2>&1; do
	kill -0 "$server_pid" 2>/dev/null || fail "server exited during start"
	[ "$SECONDS" -lt "$deadline" ] || fail "server did not answer within 60s"
	sleep 0.2
done
# Samples and refreshes every second, and a short wait for the cluster,
# so that the charts fill and the stopped node shows within seconds.
start_console "$addr" --metrics "1=$maddr" --sample-interval 1s --refresh 1s --request-timeout 2s --log-level debug
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
has topic 'id="cleanup-policy">delete<'
step "ok: the topic page shows the high watermarks of quire topic describe and its cleanup.policy"
page topics /topics
has topics 'data-topic="e2e-orders"'

step "group e2e-readers: 6 records, 2 consumed and committed"
printf 'r1\nr2\nr3\nr4\nr5\nr6\n' | q produce e2e-lag >"$tmp/produce.log" 2>&1 || fail "produce: $(cat "$tmp/produce.log")"
q consume e2e-lag -p 0 -g e2e-readers -n 2 -o start >"$tmp/consume.log" 2>&1 || fail "consume: $(cat "$tmp/consume.log")"
# GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG
read -r committed lag < <(q group describe e2e-readers | awk '$1 == "e2e-readers" { print $4, $6 }') || true
[ "$lag" = 4 ] && [ "$committed" = 2 ] || fail "quire group describe: committed $committed, lag $lag; want 2 and 4"
# Its throughput, once the coordinator knows its rates: "lag 4 records;
# consumed 0.0/s, produced 0.0/s; not draining (...); members to keep
# up: 0 (of 1 partitions)".
waited=$SECONDS deadline=$((SECONDS + 30))
until tline=$(q group describe e2e-readers | grep '^lag ') && [[ $tline == *"members to keep up: "[0-9]* ]]; do
	[ "$SECONDS" -lt "$deadline" ] || fail "quire group describe shows no members needed within 30s: ${tline:-}"
	sleep 0.1
done
step "quire group describe knows the group's rates after $((SECONDS - waited))s: $tline"
needed=$(sed -E 's/.*members to keep up: ([0-9]+) \(of ([0-9]+) partitions\).*/\1/' <<<"$tline")
parts=$(sed -E 's/.*members to keep up: ([0-9]+) \(of ([0-9]+) partitions\).*/\2/' <<<"$tline")
case $tline in
*"not draining"*) drain='id="drain">not draining<' ;;
*) fail "a group that reads nothing drains its lag, says quire group describe: $tline" ;;
esac
page group /groups/e2e-readers
has group "$drain"
has group "id=\"members-needed\">$needed<"
has group 'id="members-now">0<'
has group "id=\"partitions\">$parts<"
has group 'id="consume-rate">0/s<'
has group "id=\"keep-up-lag\">$lag<"
has group 'data-partition="e2e-lag/0"'
has group "class=\"num committed\">$committed<"
has group 'class="num hw">6<'
has group "class=\"num lag\">$lag<"
has group "id=\"total-lag\">$lag<"
has group 'id="lag-chart"'
has group 'class="label xtick"'
page groups /groups
has groups 'data-group="e2e-readers"'
has groups "class=\"num lag\">$lag<"
has groups 'class="num drain warn-text">not draining<'
has groups "class=\"num members-needed\">$needed<"
step "ok: the group pages show committed offset $committed and lag $lag, not draining, $needed members needed of $parts partitions"

# The live tail's topic (its pages are checked in the open page, below).
q topic create e2e-tail -p 1 >/dev/null || fail "topic create e2e-tail failed"

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

# --- the open page -------------------------------------------------------------
coproc BROWSER { python3 scripts/console_browser.py "${chrome_args[@]}" --user-data-dir="$tmp/chrome-open" 2>>"$tmp/chromium.log"; }
step "live tail of e2e-tail: a record produced after the page opened"
# In the open page, waited on in the page itself: a one-shot chromium
# under --virtual-time-budget stalled now and then, reconnecting no more
# after a stream or two, until it ran into its time limit.
b open "$console_url/topics/e2e-tail/tail" >/dev/null
deadline=$((SECONDS + 30))
until grep -q 'tail reading: topic=e2e-tail' "$console_log"; do
	[ "$SECONDS" -lt "$deadline" ] || fail "the tail page did not open its stream within 30s"
	sleep 0.1
done
echo 'after-open' | q produce e2e-tail -k tail-key -H source=e2e >"$tmp/produce.log" 2>&1 || fail "produce: $(cat "$tmp/produce.log")"
bwait '[...document.querySelectorAll(".value")].some(e => e.textContent === "after-open") && document.body.textContent.indexOf("source=e2e") >= 0' "the record produced after the tail opened"
bpage tail
has tail 'class="value">after-open<'
has tail 'class="key">tail-key<'
has tail 'source=e2e'
printf '\377\001binary' | q produce e2e-tail >/dev/null 2>&1 || fail "produce of a binary record failed"
b open "$console_url/topics/e2e-tail/tail?from=start" >/dev/null
bwait '[...document.querySelectorAll(".value.hex")].some(e => e.textContent === "ff0162696e617279") && [...document.querySelectorAll(".value")].some(e => e.textContent === "after-open")' "both records of the tail from the start"
bpage tail-start
has tail-start 'class="value hex" title="binary, shown as hex">ff0162696e617279<'
has tail-start 'class="value">after-open<'
step "ok: the tail showed the record produced after it opened (and binary as hex)"

step "message browser: e2e-browse, a record found by key and by timestamp"
q topic create e2e-browse -p 2 >/dev/null || fail "topic create e2e-browse failed"
printf 'a1:one\na2:two\n' | q produce e2e-browse --key-separator : -H kind=early >"$tmp/produce.log" 2>&1 || fail "produce: $(cat "$tmp/produce.log")"
since=$(date +%s%3N) # after every early record's timestamp
printf 'b1:{"late":true,"n":[1,2]}\n' | q produce e2e-browse --key-separator : -H kind=late -H trace=e2e-7 >"$tmp/produce.log" 2>&1 || fail "produce: $(cat "$tmp/produce.log")"
b open "$console_url/topics/e2e-browse/messages?key=a2" >/dev/null
bwait 'document.querySelectorAll("tr.record").length === 1 && document.querySelector("tr.record td.value").textContent === "two"' "the record of key a2 alone"
bpage messages-key
b open "$console_url/topics/e2e-browse/messages?from=timestamp&ts=$since" >/dev/null
bwait 'document.querySelectorAll("tr.record").length === 1 && document.querySelector("tr.record td.key").textContent === "b1"' "only the record produced after $since"
bpage messages
b eval 'document.querySelector("tr.record td.num a").click(); true' >/dev/null
bwait 'document.getElementById("headers") !== null' "the record's page"
bwait 'document.getElementById("headers").textContent.indexOf("trace") >= 0 && document.getElementById("headers").textContent.indexOf("e2e-7") >= 0' "the record's trace header"
bwait 'document.getElementById("value").dataset.as === "json" && document.getElementById("value").textContent.indexOf("\"late\": true") >= 0' "the value as pretty JSON"
bpage record
step "ok: found by key and by timestamp; the record's page shows its headers and its JSON"

step "produce a record through the messages page's form"
b open "$console_url/topics/e2e-browse/messages" >/dev/null
b eval 'var f = document.getElementById("produce"); f.partition.value = "1"; f.key.value = "form-key"; f.value.value = "from the form"; f.headers.value = "via=chromium"; f.querySelector("button").click(); true' >/dev/null
bwait 'document.getElementById("confirm") !== null' "the confirmation of the produce"
hw_sum() { q topic describe e2e-browse | awk 'NF == 8 && $1 ~ /^[0-9]+$/ { s += $7 } END { print s + 0 }'; }
[ "$(hw_sum)" = 3 ] || fail "a record was produced before the confirmation"
bpage produce-confirm
b eval 'document.querySelector("#confirm button").click(); true' >/dev/null
bwait 'document.querySelector(".notice") !== null && document.querySelector(".notice").textContent.indexOf("Produced a record to e2e-browse/1") === 0' "the produce's notice"
bwait 'document.querySelector("tr.record td.key").textContent === "form-key"' "the produced record"
[ "$(hw_sum)" = 4 ] || fail "the confirmed produce did not add a record: $(q topic describe e2e-browse)"
step "ok: the form's record is in partition 1"

step "edit a config through the topic page's form"
b open "$console_url/topics/e2e-browse" >/dev/null
b eval 'var f = document.getElementById("alter-configs"); f.key.value = "retention.ms"; f.value.value = "soon"; f.querySelector("button").click(); true' >/dev/null
bwait 'document.body.textContent.indexOf("the broker refuses it: INVALID_CONFIG") >= 0 && document.getElementById("confirm") === null' "the broker's refusal of retention.ms=soon"
b open "$console_url/topics/e2e-browse" >/dev/null
b eval 'var f = document.getElementById("alter-configs"); f.key.value = "retention.ms"; f.value.value = "3600000"; f.querySelector("button").click(); true' >/dev/null
bwait 'document.getElementById("confirm") !== null && document.getElementById("summary").textContent.indexOf("to 3600000") > 0' "the config edit's confirmation"
b eval 'document.querySelector("#confirm button").click(); true' >/dev/null
bwait 'document.querySelector(".notice") !== null && document.querySelector(".notice").textContent === "Set retention.ms=3600000 on e2e-browse."' "the config edit's notice"
q topic describe e2e-browse -a | grep -qE '^retention\.ms +3600000 +topic$' || fail "retention.ms is not 3600000 on the topic: $(q topic describe e2e-browse -a)"
bpage topic-config
step "ok: retention.ms=soon refused in the broker's words, 3600000 set"

step "throughput: records produced while the page is open"
q topic create e2e-flow -p 3 >/dev/null || fail "topic create e2e-flow failed"
b open "$console_url/throughput" >/dev/null
# Four batches about a second apart, a sample (1s) between each.
for i in 1 2 3 4; do
	seq 1 500 | q produce e2e-flow >"$tmp/produce.log" 2>&1 || fail "produce: $(cat "$tmp/produce.log")"
	sleep 1 # pacing the batches over several samples
done
# Above the bottom (y 120) on the first line (in) of a chart.
above='(function (id) { return document.getElementById(id).querySelector("polyline").getAttribute("points").split(" ").some(function (xy) { return Number(xy.split(",")[1]) < 120; }); })'
bwait 'document.querySelector("#topic-rates tr[data-topic=\"e2e-flow\"]") !== null && '"$above"'("records-chart") && '"$above"'("bytes-chart")' "records and bytes in on the charts, and e2e-flow's row"
bpage throughput
b open "$console_url/topics/e2e-flow" >/dev/null
bwait 'document.querySelectorAll("td.size").length === 3 && Array.from(document.querySelectorAll("td.size")).every(function (td) { return /^[0-9.]+ (B|KiB|MiB)$/.test(td.textContent); })' "each partition's size on disk"
bpage topic-flow
step "ok: throughput charts with data, each partition's size on disk"

b open "$console_url/security" >/dev/null
bwait 'document.getElementById("principal").textContent === "User:ANONYMOUS"' "the console's principal"
bpage security

step "the node stopped under the open overview"
b open "$console_url/" >/dev/null
bwait 'document.getElementById("n-topics").textContent === "6"' "the overview of 6 topics"
kill "$server_pid"
wait "$server_pid" 2>/dev/null || true
bwait 'document.body.textContent.indexOf("cannot reach the cluster at '"$addr"'") >= 0 && document.getElementById("stale") !== null' "that the cluster cannot be reached, and the stale view"
bpage unreachable
grep -qF 'id="n-topics">6<' "$out/unreachable.html" || fail "the stale view lost the last figures"
if grep -qF 'Every partition has its full set' "$out/unreachable.html"; then fail "the unreachable page claims the partitions are healthy"; fi
step "ok: the open page says the cluster cannot be reached and shows its last view, stale"

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
