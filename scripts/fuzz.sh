#!/usr/bin/env bash
# Runs every Go fuzz target in the module for FUZZTIME (default 20s) each,
# found with go test -list: among them the differential targets of the
# hand-written protobuf codecs against proto (internal/wire), the record
# batch and record checks (record), segment recovery, the checkpoint files
# and meta.properties (storage), the metadata directory's meta.properties
# (metadata), the Kafka listener's request decoding and its allocation bound
# (kafka: FuzzKafkaDecodeAlloc, FuzzKafkaRequest), and the auth parsers:
# principals, principal mapping rules, ACL patterns and SCRAM credentials
# (auth).
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime="${FUZZTIME:-20s}"
for pkg in $(go list ./...); do
	for target in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
		echo "fuzz: $pkg $target ($fuzztime)"
		go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"
	done
done
