#!/usr/bin/env bash
# The programs the end-to-end stage of `make test` runs beside quire,
# fetched while the stages before it run:
#
#   scripts/testdeps.sh start   # install in the background, log in bin/testdeps.log
#   scripts/testdeps.sh wait    # wait for it, print its log, fail if it failed
#   scripts/testdeps.sh         # install now, in the foreground
#
# What it installs: grpcurl into ./bin (scripts/tools.sh), and, when
# running as root where apt-get exists, those of Debian's packages the
# scripts use that are missing (chromium for the console, prometheus,
# kcat, python3's grpcio, grpc-tools, protobuf and confluent-kafka, and
# docker-compose where the Docker engine has no compose plugin).
# Downloading and unpacking them waits on the network and the disk, not
# the CPU, so it overlaps verify and the unit tests instead of adding
# a minute or two to the end-to-end stage. Each end-to-end script still
# installs what it lacks by itself, so it also runs alone; a package
# that cannot be installed here is left for that script to report.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bin
log=bin/testdeps.log
pidfile=bin/testdeps.pid
rcfile=bin/testdeps.rc

debs=(chromium prometheus kcat python3 python3-grpcio python3-grpc-tools python3-protobuf python3-confluent-kafka)

install() {
	scripts/tools.sh grpcurl
	if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
		echo "testdeps: not root or no apt-get: Debian's packages are left to the scripts that use them"
		return 0
	fi
	local missing=()
	for d in "${debs[@]}"; do
		dpkg-query -W -f='${Status}' "$d" 2>/dev/null | grep -q "install ok installed" || missing+=("$d")
	done
	# Compose: the engine's plugin, or else Debian's docker-compose
	# (scripts/check_compose.sh installs it too, but the two compose
	# checks run at once).
	if command -v docker >/dev/null 2>&1 && ! docker compose version >/dev/null 2>&1 && ! command -v docker-compose >/dev/null 2>&1; then
		missing+=(docker-compose)
	fi
	if [ ${#missing[@]} -eq 0 ]; then
		echo "testdeps: Debian's packages already installed"
		return 0
	fi
	echo "testdeps: apt-get install ${missing[*]}"
	apt-get update -qq || echo "testdeps: apt-get update failed; trying the package lists there are"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null ||
		echo "testdeps: installing with apt-get did not succeed; the scripts that need these packages report what is missing"
}

case "${1:-}" in
start)
	rm -f "$rcfile"
	# Its own session, so that make's end does not stop it mid-install;
	# nice, so that compiling grpcurl yields to the stages it overlaps.
	setsid nice -n 10 bash -c "scripts/testdeps.sh >'$log' 2>&1; echo \$? >'$rcfile'" </dev/null >/dev/null 2>&1 &
	echo $! >"$pidfile"
	echo "testdeps: installing in the background (log: $log)"
	;;
wait)
	if [ ! -f "$pidfile" ]; then
		exec "$0"
	fi
	pid=$(cat "$pidfile")
	waited=0
	while [ ! -f "$rcfile" ] && kill -0 "$pid" 2>/dev/null; do
		[ "$waited" = 0 ] && echo "testdeps: waiting for the background install"
		waited=1
		sleep 1 # pacing the check of another session's process
	done
	rm -f "$pidfile"
	cat "$log" 2>/dev/null || true
	rc=$(cat "$rcfile" 2>/dev/null || echo 1)
	[ "$rc" = 0 ] || { echo "testdeps: the background install failed (exit $rc)"; exit 1; }
	;;
"")
	install
	;;
*)
	echo "usage: scripts/testdeps.sh [start|wait]" >&2
	exit 2
	;;
esac
