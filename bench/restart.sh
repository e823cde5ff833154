#!/usr/bin/env bash
# bench/restart.sh - configuration reloads and binary upgrades under load, as the clients count them.
#
# Question answered:
#   Do configuration reloads (SIGHUP) and binary upgrades (SIGUSR2: a new process takes over the
#   listening sockets, the old one drains) lose requests while traffic flows?
#
# Load, for the whole run, through Gatehouse to an nginx backend:
#   - wrk, HTTP/1.1 keep-alive, plain and TLS;
#   - wrk with `Connection: close`, plain and TLS (a new connection, and handshake, per request, so
#     connections are accepted at every moment of a reload or an upgrade);
#   - during the upgrades, h2load, HTTP/2 over TLS. When a draining process sends GOAWAY, h2load
#     goes on submitting requests on that connection, which its HTTP/2 library refuses locally
#     ("Process Request Failure") and h2load counts as failed: a client-side count, not requests
#     the server refused or dropped; clients that open a new connection after GOAWAY see none.
# Meanwhile RELOADS reloads, alternating between two configurations, then UPGRADES upgrades, each
# waited for through the `--status-json` events.
#
# Run:   bench/restart.sh                   # RELOADS=100 UPGRADES=10, builds release
#        GATEHOUSE_BIN=target/release/gatehouse RELOADS=20 UPGRADES=3 bench/restart.sh
# Needs: nginx, wrk, h2load, curl, python3. Loopback only; bounded by the wrk/h2load durations.
set -euo pipefail
log() { printf '[restart] %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}
KEEP_WORKDIR=${KEEP_WORKDIR:-0}
HAPROXY_MAXCONN=1000
# shellcheck source=SCRIPTDIR/lib/common.sh
. "$(dirname "$0")/lib/common.sh"

RELOADS=${RELOADS:-100}
UPGRADES=${UPGRADES:-10}
check_integers RELOADS UPGRADES
need_commands nginx wrk h2load curl "$PYTHON"
gatehouse_binary
make_workdir gatehouse-restart
raise_nofile
mkdir -p "$WORK/www" "$WORK/gatehouse"
write_www "$WORK/www"
start_backend none

config() { # config KEEPALIVE -> the configuration; the two variants differ in a listener setting
	cat <<EOF
workers: auto
shutdown_grace: 10s
tls:
  self_signed: { dir: $WORK/gatehouse/certs, names: [localhost, 127.0.0.1] }
listeners:
  http: { bind: "127.0.0.1:0", keepalive_timeout: $1 }
  https: { bind: "127.0.0.1:0", tls: {}, keepalive_timeout: $1 }
$(gatehouse_upstream 256)
EOF
}
config 75s >"$WORK/gatehouse/gatehouse.yaml"
events=$WORK/gatehouse/events
: >"$events"
"$GATEHOUSE_BIN" run --config "$WORK/gatehouse/gatehouse.yaml" --status-json >>"$events" 2>"$WORK/gatehouse/err" &
PID[gatehouse]=$!

count_events() { grep -c "\"event\":\"$1\"" "$events" || true; }
wait_events() { # wait_events NAME N: at most 60 s for the N-th NAME event
	local i
	for ((i = 0; i < 600; i++)); do
		(($(count_events "$1") >= $2)) && return 0
		grep -q '"event":"upgrade_failed"\|"event":"reload_failed"' "$events" && break
		sleep 0.1
	done
	tail -n 20 "$WORK/gatehouse/err" >&2
	die "no $2-th $1 event"
}
wait_events ready 1
read -r P_HTTP P_HTTPS < <("$PYTHON" -c '
import json, sys
ev = json.loads(open(sys.argv[1]).readline())
print(ev["listeners"]["http"].split(":")[1], ev["listeners"]["https"].split(":")[1])' "$events")
current_pid() { # the pid named by the last ready event
	"$PYTHON" -c '
import json, sys
print([json.loads(l) for l in open(sys.argv[1]) if "\"ready\"" in l][-1]["pid"])' "$events"
}
wait_http gatehouse "http://127.0.0.1:$P_HTTP/test.html" "${SIZE[test.html]}"

# The load runs until every change is done (a little after), within a bound; the clients are then
# stopped with SIGINT, on which they print what they counted.
duration=$((30 + RELOADS * 3 + UPGRADES * 10))
log "load for at most ${duration}s: $RELOADS reloads, then $UPGRADES upgrades"
http=http://127.0.0.1:$P_HTTP/test.html
https=https://127.0.0.1:$P_HTTPS/test.html
wrk -t1 -c16 -d"${duration}s" "$http" >"$WORK/keepalive-http.txt" 2>&1 &
PID[wrk1]=$!
wrk -t1 -c16 -d"${duration}s" "$https" >"$WORK/keepalive-https.txt" 2>&1 &
PID[wrk2]=$!
wrk -t1 -c4 -d"${duration}s" -H 'Connection: close' "$http" >"$WORK/close-http.txt" 2>&1 &
PID[wrk3]=$!
wrk -t1 -c4 -d"${duration}s" -H 'Connection: close' "$https" >"$WORK/close-https.txt" 2>&1 &
PID[wrk4]=$!
sleep 3

started=$(date +%s)
for ((i = 1; i <= RELOADS; i++)); do
	if ((i % 2)); then config 60s; else config 75s; fi >"$WORK/gatehouse/gatehouse.yaml"
	kill -HUP "$(current_pid)"
	wait_events reloaded "$i"
done
reload_secs=$(($(date +%s) - started))
# One upgrade every SLOT seconds, so h2load's fixed duration covers them all.
SLOT=4
h2load -c8 -m4 -D$((UPGRADES * SLOT + 6)) "$https" >"$WORK/h2.txt" 2>&1 &
PID[h2load]=$!
sleep 3
started=$(date +%s)
for ((i = 1; i <= UPGRADES; i++)); do
	kill -USR2 "$(current_pid)"
	wait_events upgraded "$i"
	# The old process drains and stops before the next upgrade.
	wait_events stopped "$i"
	PID[gatehouse]=$(current_pid)
	while (($(date +%s) < started + i * SLOT)); do sleep 0.2; done
done
upgrade_secs=$(($(date +%s) - started))
wait "${PID[h2load]}" || true
for w in wrk1 wrk2 wrk3 wrk4; do kill -INT "${PID[$w]}" 2>/dev/null || true; done
for w in wrk1 wrk2 wrk3 wrk4; do wait "${PID[$w]}" || true; done
failed=$(count_events upgrade_failed)

wrk_row() { # wrk_row LABEL FILE -> a table row: requests, socket errors, non-2xx
	"$PYTHON" - "$1" "$2" <<'EOF'
import re, sys
label, text = sys.argv[1], open(sys.argv[2]).read()
reqs = re.search(r"(\d+) requests in", text)
errs = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
e = [int(x) for x in errs.groups()] if errs else [0, 0, 0, 0]
print(f"| {label} | {reqs.group(1) if reqs else '?'} | {sum(e)} (connect {e[0]}, read {e[1]}, write {e[2]}, timeout {e[3]}) | {non2xx.group(1) if non2xx else 0} |")
EOF
}
h2_row() {
	"$PYTHON" - "$1" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout", text)
if m:
    t, s, d, ok, f, e, to = m.groups()
    print(f"| h2load, HTTP/2 over TLS, 8 connections x 4 streams, during the upgrades | {d} | {int(f) + int(e) + int(to)} (failed {f}, errored {e}, timeout {to}) | {int(d) - int(ok)} |")
else:
    print("| h2load | ? | ? | ? |")
EOF
}
{
	echo "## Reloads and binary upgrades under load (bench/restart.sh)"
	echo
	echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC'); machine: $(nproc) CPUs, $(uname -r); $GATEHOUSE_VERSION"
	echo "- Source: git $(git rev-parse --short HEAD)$(git diff --quiet || echo ' + uncommitted changes')"
	echo "- Gatehouse (workers: auto) in front of nginx serving a 75-byte file, plain and TLS listeners."
	echo "  $RELOADS reloads (SIGHUP, alternating keepalive_timeout 60s/75s so the listeners' accept tasks"
	echo "  restart on their sockets) took ${reload_secs}s; then $UPGRADES binary upgrades (SIGUSR2, each waited"
	echo "  for until the old process stopped) took ${upgrade_secs}s; upgrades that failed: $failed."
	echo "  Load throughout, from 3 s before the first change to 3 s after the last."
	echo
	echo "| client | requests | socket errors | non-2xx |"
	echo "|---|---:|---|---:|"
	wrk_row "wrk, HTTP/1.1 keep-alive, 16 connections" "$WORK/keepalive-http.txt"
	wrk_row "wrk, HTTPS keep-alive, 16 connections" "$WORK/keepalive-https.txt"
	wrk_row "wrk, HTTP/1.1 Connection: close, 4 connections" "$WORK/close-http.txt"
	wrk_row "wrk, HTTPS Connection: close, 4 connections" "$WORK/close-https.txt"
	h2_row "$WORK/h2.txt"
} >"$WORK/section.md"
cat "$WORK/section.md"
if [[ ${BENCHMARKS_MD:-} != none ]]; then
	"$PYTHON" "$BENCH/lib/update_section.py" "$ROOT/BENCHMARKS.md" <"$WORK/section.md"
fi
