#!/usr/bin/env bash
# timed.sh NAME COMMAND [ARG...]: runs COMMAND, then says how it ended and
# how long it took. make test's end-to-end stage runs its scripts through
# it, several at once, each one's output printed whole when it ends.
name=$1
shift
echo "== $name"
start=$SECONDS
"$@"
rc=$?
if [ "$rc" = 0 ]; then
	echo "== $name: ok in $((SECONDS - start)) s"
else
	echo "== $name: FAILED (exit $rc) after $((SECONDS - start)) s"
fi
exit "$rc"
