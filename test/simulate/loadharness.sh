#!/bin/sh
# loadharness.sh runs a command on a machine made too busy for the
# simulation's compressed time scale, and ends the load with it:
#
#	test/simulate/loadharness.sh [-n LOOPS] [-t SECONDS] COMMAND [ARGS...]
#	test/simulate/loadharness.sh -n 32 go run ./test/simulate -seed 100027 -orders 600
#
# It starts LOOPS (default 32) CPU-bound shell loops in the command's own
# session, each ended after SECONDS (default 150) at the latest, runs the
# command, and kills the loops it started. It exits with the command's
# status.
#
# Why in the same session: Linux with autogroup scheduling (the default of
# most distributions, /proc/sys/kernel/sched_autogroup_enabled) shares the
# CPU fairly between sessions first, so load in other sessions, however
# high the load average, leaves the simulation its share (24 loops in
# sessions of their own, load 43: PASS; other helpers' builds and tests,
# load 24: largest measured delay 120 ms, PASS), and so do four loops, nice
# or SIGSTOP/SIGCONT. Many runnable threads in
# the simulation's own session, as a script that starts several
# `go test -race ./...` runs and a simulation together makes, starve it for
# seconds: on this project's 2-core machine, 32 loops gave a largest
# measured delay of 1.46 s and 1052 locks lost that no fault planned.
#
# The machine is shared: keep runs short (-orders 600 takes about two and a
# half minutes under this load).
set -eu
loops=32
seconds=150
while getopts n:t: opt; do
	case $opt in
	n) loops=$OPTARG ;;
	t) seconds=$OPTARG ;;
	*) echo "usage: $0 [-n LOOPS] [-t SECONDS] COMMAND [ARGS...]" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
if [ $# -eq 0 ]; then
	echo "usage: $0 [-n LOOPS] [-t SECONDS] COMMAND [ARGS...]" >&2
	exit 2
fi
pids=""
i=0
while [ "$i" -lt "$loops" ]; do
	timeout "$seconds" sh -c 'while :; do :; done' &
	pids="$pids $!"
	i=$((i + 1))
done
trap 'kill $pids 2>/dev/null || true' EXIT INT TERM
status=0
"$@" || status=$?
exit "$status"
