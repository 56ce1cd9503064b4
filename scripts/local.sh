#!/usr/bin/env bash
# local.sh starts and stops the whole local stack without Docker or Azure:
# the Service Bus test broker (test/sbbroker), the cosmium Cosmos DB emulator
# with the change-feed proxy in front of it (test/e2etest/cmd/feedproxy), the
# reference payments service, the order worker, the outbox relay and one
# subscriber (orderworker in subscription mode) per subscription of the
# topic order-events, as built binaries whose
# process ids it keeps, so that `down` stops exactly what `up` started (a
# `go run … &` leaves its child running when the go command is killed).
#
#   scripts/local.sh up       build everything, start the stack, print how to use it
#   scripts/local.sh demo     send orders that take every outcome path, then show what happened
#   scripts/local.sh env      print the export lines for the stack (eval "$(scripts/local.sh env)")
#   scripts/local.sh status   which processes run
#   scripts/local.sh logs     the last lines of each log
#   scripts/local.sh down     stop the worker (a graceful drain), then the rest
#
# Settings (environment): LOCAL_DIR (state, default .cache/local in the
# repository), LOCAL_BROKER_PORT (5672), LOCAL_COSMOS_PORT (8081, cosmium),
# LOCAL_FEED_PORT (8082, the change-feed proxy), LOCAL_PAYMENTS_PORT (8090), LOCAL_DUP_WINDOW (the broker's duplicate-detection
# window, default 5s: short, so that the demo's late resends reach the worker
# and `go test -tags emulator` finds the queue orders-itest it expects),
# LOCAL_LOCK_DURATION (30s), LOCAL_MESSAGE_TTL (the broker's default message
# time-to-live, 336h = 14 days as infra/bicep deploys it, so that
# `orderctl dlq show` prints a real ExpiresAt), LOCAL_ORDERS (the demo's orders per run, 500),
# LOCAL_SEED (the demo producers' -seed; 0 picks one from the clock),
# COSMIUM_BIN (a prebuilt cosmium to use instead of building one).
#
# What cosmium cannot show: it ignores If-Match (no ETags), so the worker's
# conditional writes are not guarded: a status change can be overwritten by an
# older one (versions can end at v2 instead of v3) and an inbox duplicate can
# write twice; its transactional batch is not atomic and it ignores TTL. The
# in-memory model (go run ./test/simulate) and the tests cover those.
#
# cosmium has no change feed either (it answers the SDK's change feed calls
# with 401), so the relay reads one that the feed proxy computes from
# cosmium's documents; `env` points COSMOS_ENDPOINT at the proxy, which
# forwards every other request to cosmium unchanged. The proxy's feed is not
# Cosmos DB's log (see e2etest.FeedProxy), and the relay's leases are not
# fenced on cosmium: run one relay.
#
# The test broker has no management endpoint (/health on port 5300, which
# the official emulator has), so `env` sets SERVICEBUS_EMULATOR_HEALTH_URL=off
# for `go test -tags emulator ./test/emulator/...`.
#
# `go install ./cmd/...` gives only the product commands. The stack's tools
# are proof tooling and live under test/: `up` builds them all into its bin
# directory, or install them yourself with
#   go install ./test/sbbroker/cmd/sbbroker ./test/paymentservice/cmd/paymentservice ./test/e2etest/cmd/feedproxy
#   go -C test/cosmiumtest/tools install ./cmd/cosmium
# Every binary answers -version.
#
# Upstream cosmium's own server listens on every network interface whatever
# -Host says (it binds ":<port>") and serves /cosmium/export without a key, so
# this script builds the project's cosmium command
# (test/cosmiumtest/tools/cmd/cosmium): cosmium's own handlers on a
# listener bound to -Host, here 127.0.0.1 only. It still uses no well-known
# key: `up` generates a random account key (kept in $LOCAL_DIR/cosmos.key,
# mode 0600).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=${LOCAL_DIR:-$root/.cache/local}
bin=$dir/bin
broker_port=${LOCAL_BROKER_PORT:-5672}
cosmos_port=${LOCAL_COSMOS_PORT:-8081}
feed_port=${LOCAL_FEED_PORT:-8082}
payments_port=${LOCAL_PAYMENTS_PORT:-8090}
dup_window=${LOCAL_DUP_WINDOW:-5s}
lock=${LOCAL_LOCK_DURATION:-30s}
ttl=${LOCAL_MESSAGE_TTL:-336h}
orders=${LOCAL_ORDERS:-500}
seed=${LOCAL_SEED:-0}
subscriptions=(loyalty shipping) # of the topic order-events; one subscriber each
services=(cosmium feedproxy sbbroker paymentservice orderworker orderrelay "${subscriptions[@]/#/subscriber-}") # start order; down stops in reverse

die() { echo "local.sh: $*" >&2; exit 1; }

pidof_svc() { [[ -f $dir/run/$1.pid ]] && cat "$dir/run/$1.pid"; }

alive() {
	local pid
	pid=$(pidof_svc "$1") || return 1
	kill -0 "$pid" 2>/dev/null
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# wait_for what seconds command…: polls the command every 0.2 s.
wait_for() {
	local what=$1 secs=$2
	shift 2
	local i
	for ((i = 0; i < secs * 5; i++)); do
		if "$@"; then return 0; fi
		sleep 0.2
	done
	die "$what did not come up within ${secs}s; see $dir/log"
}

env_lines() {
	local key
	key=$(cat "$dir/cosmos.key" 2>/dev/null) || die "the stack was never started: run scripts/local.sh up"
	cat <<EOF
export SERVICEBUS_CONNECTION_STRING='Endpoint=sb://127.0.0.1:$broker_port;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;'
export SERVICEBUS_QUEUE=orders SERVICEBUS_LOCK_DURATION=$lock SERVICEBUS_DUPLICATE_DETECTION_WINDOW=$dup_window SERVICEBUS_MESSAGE_TTL=$ttl
export SERVICEBUS_TOPIC=order-events SERVICEBUS_EMULATOR_HEALTH_URL=off
export COSMOS_ENDPOINT=http://127.0.0.1:$feed_port/ COSMOS_KEY='$key' COSMOS_DATABASE=orders COSMOS_CONTAINER=orders COSMOS_CREATE_CONTAINER=true
export PAYMENTS_URL=http://127.0.0.1:$payments_port
EOF
}

build() {
	mkdir -p "$bin"
	echo "building orderworker, orderrelay, orderproducer, orderctl, paymentservice, sbbroker, feedproxy into $bin"
	(cd "$root" && go build -o "$bin" ./cmd/orderworker ./cmd/orderrelay ./cmd/orderproducer ./cmd/orderctl \
		./test/paymentservice/cmd/paymentservice ./test/sbbroker/cmd/sbbroker ./test/e2etest/cmd/feedproxy)
	if [[ -n ${COSMIUM_BIN:-} ]]; then
		cp "$COSMIUM_BIN" "$bin/cosmium" # a prebuilt one, as test/cosmiumtest accepts
	elif [[ ! -x $bin/cosmium ]]; then
		echo "building cosmium once (from test/cosmiumtest/tools; about half a minute)"
		go -C "$root/test/cosmiumtest/tools" build -o "$bin/cosmium" ./cmd/cosmium
	fi
}

# start name command…: runs the binary in the background with its output in
# $dir/log/name.log and its pid in $dir/run/name.pid.
start() {
	local name=$1
	shift
	"$@" >"$dir/log/$name.log" 2>&1 &
	echo $! >"$dir/run/$name.pid"
}

up() {
	for s in "${services[@]}"; do
		if alive "$s"; then die "$s is already running (pid $(pidof_svc "$s")): scripts/local.sh down first"; fi
	done
	for p in "$broker_port" "$cosmos_port" "$feed_port" "$payments_port"; do
		port_free "$p" || die "port $p is in use; free it or set LOCAL_BROKER_PORT, LOCAL_COSMOS_PORT, LOCAL_FEED_PORT, LOCAL_PAYMENTS_PORT"
	done
	build
	mkdir -p "$dir/log" "$dir/run"
	(umask 077 && head -c 64 /dev/urandom | base64 | tr -d '\n' >"$dir/cosmos.key")
	eval "$(env_lines)"

	start cosmium "$bin/cosmium" -Host 127.0.0.1 -Port "$cosmos_port" -AccountKey "$COSMOS_KEY" -DisableTls -LogLevel error
	wait_for cosmium 30 eval '! port_free $cosmos_port'
	start feedproxy "$bin/feedproxy" -addr "127.0.0.1:$feed_port" -cosmos-endpoint "http://127.0.0.1:$cosmos_port/"
	wait_for feedproxy 30 eval '! port_free $feed_port'
	# -allow-unrealistic-timings: the default 5 s window is below Service Bus's
	# 20 s minimum (the emulator accepts it), so that the demo's resends (after
	# resend_delay) and the emulator tests' (after 8 s) fall outside it.
	start sbbroker "$bin/sbbroker" -addr "127.0.0.1:$broker_port" -queue orders,orders-itest -allow-unrealistic-timings \
		-topic "order-events:$(IFS=,; echo "${subscriptions[*]}")" -lock-duration "$lock" -duplicate-detection-window "$dup_window" -ttl "$ttl"
	wait_for sbbroker 30 grep -q '^Endpoint=' "$dir/log/sbbroker.log"
	PAYMENTS_ADDR=127.0.0.1:$payments_port start paymentservice "$bin/paymentservice" -log-format json
	wait_for paymentservice 30 curl -fs -o /dev/null "$PAYMENTS_URL/healthz"
	LOG_FORMAT=json WORKER_SUMMARY_INTERVAL=5s start orderworker "$bin/orderworker"
	wait_for orderworker 30 grep -q '"orderworker starting"' "$dir/log/orderworker.log"
	# The relay reads the change feed through the proxy (COSMOS_ENDPOINT),
	# once the worker has created the container. One instance: cosmium does
	# not fence its leases.
	LOG_FORMAT=json RELAY_POLL_INTERVAL=500ms start orderrelay "$bin/orderrelay"
	# The subscribers are inbox consumers (orderworker in subscription mode),
	# which capture no payment: PAYMENTS_URL is for the order writer only.
	local sub
	for sub in "${subscriptions[@]}"; do
		LOG_FORMAT=json WORKER_SUMMARY_INTERVAL=5s SERVICEBUS_SUBSCRIPTION=$sub \
			start "subscriber-$sub" env -u PAYMENTS_URL "$bin/orderworker"
	done
	sleep 1
	alive orderworker || die "the worker exited at start:\n$(tail -n 20 "$dir/log/orderworker.log")"
	wait_for orderrelay 30 grep -q '"orderrelay starting"' "$dir/log/orderrelay.log"
	for sub in "${subscriptions[@]}"; do
		wait_for "subscriber-$sub" 30 grep -q '"orderworker starting"' "$dir/log/subscriber-$sub.log"
	done
	sleep 2
	for s in orderrelay "${subscriptions[@]/#/subscriber-}"; do
		alive "$s" || die "$s exited at start:\n$(tail -n 20 "$dir/log/$s.log")"
	done
	cat <<EOF

The local stack runs (logs in $dir/log):
  sbbroker        127.0.0.1:$broker_port  queues orders, orders-itest; topic order-events (subscriptions loyalty, shipping);
                                  duplicate-detection window $dup_window (each drop is logged); messages expire after $ttl
  cosmium         127.0.0.1:$cosmos_port  database orders, container orders; random account key in $dir/cosmos.key
  feedproxy       127.0.0.1:$feed_port  cosmium with a change feed (COSMOS_ENDPOINT): what the relay reads
  paymentservice  127.0.0.1:$payments_port
  orderworker     consumes orders, captures payments, writes each order's OrderAccepted event (the outbox)
  orderrelay      publishes the outbox events to the topic order-events
  subscriber-*    one inbox consumer per subscription (${subscriptions[*]}): awards each order once (an inbox marker)

cosmium is not Cosmos DB: it ignores If-Match, so status versions can end at v2 and an
inbox duplicate can write twice; its batch is not atomic and it ignores TTL; its change
feed is the proxy's, computed from snapshots of its documents.

Next:
  scripts/local.sh demo                         orders through every outcome path
  eval "\$(scripts/local.sh env)" && $bin/orderproducer -count 100    your own orders
  scripts/local.sh down                         stop everything
EOF
}

# drained waits until the summaries of the worker and the subscribers stop
# changing.
drained() {
	local last="" cur i log
	for ((i = 0; i < 120; i++)); do
		sleep 6
		cur=""
		for log in orderworker "${subscriptions[@]/#/subscriber-}"; do
			cur+=$(grep '"msg":"summary"' "$dir/log/$log.log" | tail -n 1 | sed 's/"time":"[^"]*",//;s/"interval":{[^}]*}//')
		done
		if [[ -n $cur && $cur == "$last" ]]; then return 0; fi
		last=$cur
	done
	echo "the worker was still busy after 12 minutes" >&2
}

# resend_delay is the second demo run's delay before its resends: twice the
# broker's duplicate-detection window and 5 s more (15 s for the default 5 s),
# so that the resends fall outside the window on a busy machine too; 8 s when
# the window is not given in whole seconds.
resend_delay() {
	if [[ $dup_window =~ ^([0-9]+)s$ ]]; then
		echo "$((2 * BASH_REMATCH[1] + 5))s"
	else
		echo 8s
	fi
}

# queue_drops counts the broker's duplicate drops on the orders queue of the
# messages whose id starts with $1.
queue_drops() {
	grep 'duplicate dropped' "$dir/log/sbbroker.log" | grep -c -e " queue=orders message_id=$1" || true
}

demo() {
	alive orderworker && alive sbbroker || die "the stack is not running: scripts/local.sh up"
	eval "$(env_lines)"
	local run drops_before delay out resends dropped_b
	run=demo-$(date +%H%M%S)
	delay=$(resend_delay)
	drops_before=$(grep -c 'duplicate dropped' "$dir/log/sbbroker.log" || true)
	echo "1/2 resends at once, inside the broker's $dup_window window: the broker drops them (and logs each drop)"
	"$bin/orderproducer" -count "$orders" -duplicates 0.1 -reused 0.05 -malformed 0.01 -status-changes 0.1 \
		-seed "$seed" -id-prefix "$run-a" -progress never -log-level warn
	echo "2/2 resends after $delay, beyond the window: they reach the worker, whose database check catches them"
	out=$("$bin/orderproducer" -count "$orders" -duplicates 0.1 -reused 0.05 -resend-delay "$delay" \
		-seed "$seed" -id-prefix "$run-b" -progress never -log-level warn)
	echo "$out"
	# "…: N orders, D duplicates, R reused ids, …": the resends are D + R.
	resends=$(sed -n 's/.* \([0-9]*\) duplicates, \([0-9]*\) reused ids.*/\1 \2/p' <<<"$out" | awk '{print $1 + $2}')
	dropped_b=$(queue_drops "$run-b")
	echo "waiting for the worker to finish…"
	drained
	echo
	echo "broker: $(($(grep -c 'duplicate dropped' "$dir/log/sbbroker.log") - drops_before)) resends dropped by duplicate detection in this demo (grep 'duplicate dropped' $dir/log/sbbroker.log)"
	echo "  run 1: $(queue_drops "$run-a") of its messages dropped on the queue (its resends, inside the window)"
	if [[ $dropped_b == 0 ]]; then
		echo "  run 2: none of its messages dropped on the queue: its ${resends:-?} resends all reached the worker"
	else
		echo "  run 2: $dropped_b of its messages dropped on the queue all the same (grep 'message_id=$run-b' $dir/log/sbbroker.log):"
		echo "         each is a resend the broker still saw inside its window (of the ${resends:-?} sent $delay after the first"
		echo "         sends were acknowledged; it did not reach the worker), or a send the client retried after its first"
		echo "         attempt was enqueued (that attempt did)"
	fi
	echo "worker, last summary (created, duplicate = caught by the database, mismatch = reused id, invalid = malformed):"
	grep '"msg":"summary"' "$dir/log/orderworker.log" | tail -n 1
	echo "subscribers, last summary (created = an order's event awarded once, with its inbox marker; the relay publishes each created order's event):"
	local sub
	for sub in "${subscriptions[@]}"; do
		echo "subscriber-$sub: $(grep '"msg":"summary"' "$dir/log/subscriber-$sub.log" | tail -n 1)"
	done
}

down() {
	local i n s pid
	for ((i = ${#services[@]} - 1; i >= 0; i--)); do
		s=${services[i]}
		pid=$(pidof_svc "$s") || continue
		if kill -0 "$pid" 2>/dev/null; then
			kill -TERM "$pid"
			# The worker drains within its shutdown grace (30 s by default).
			n=0
			while kill -0 "$pid" 2>/dev/null && ((n++ < 200)); do sleep 0.2; done
			if kill -0 "$pid" 2>/dev/null; then
				echo "$s (pid $pid) did not stop within 40s: killing it" >&2
				kill -KILL "$pid" 2>/dev/null || true
			fi
			echo "stopped $s (pid $pid)"
		fi
		rm -f "$dir/run/$s.pid"
	done
	if [[ -f $dir/log/orderworker.log ]]; then
		grep '"msg":"final summary"' "$dir/log/orderworker.log" | tail -n 1 || true
	fi
	if [[ -f $dir/log/sbbroker.log ]]; then
		grep -E '(queue|topic|subscription) at exit' "$dir/log/sbbroker.log" | tail -n $((3 + ${#subscriptions[@]})) || true
	fi
}

status() {
	for s in "${services[@]}"; do
		if alive "$s"; then echo "$s running (pid $(pidof_svc "$s"))"; else echo "$s stopped"; fi
	done
}

logs() {
	for s in "${services[@]}"; do
		[[ -f $dir/log/$s.log ]] || continue
		echo "== $s ($dir/log/$s.log)"
		tail -n "${LINES_PER_LOG:-5}" "$dir/log/$s.log"
	done
}

case ${1:-} in
up) up ;;
demo) demo ;;
env) env_lines ;;
status) status ;;
logs) logs ;;
down) down ;;
*)
	echo "usage: scripts/local.sh up|demo|env|status|logs|down" >&2
	exit 2
	;;
esac
