#!/usr/bin/env bash
# bench/acme.sh - on-demand certificates against a real ACME CA, Gatehouse beside Caddy.
#
# Against the same Pebble (Let's Encrypt's test CA, PEBBLE_VA_NOSLEEP=1, no nonce refusals) each
# server is configured for on-demand TLS with an `ask` endpoint that allows every name, and new
# names are connected to with SNI, the served chain verified against Pebble's root
# (bench/lib/acme_load.py):
#
#   latency      NAMES new names one after another: time from the TCP connect to a verified
#                handshake with the name's own, just-issued certificate (p50, p99, max)
#   throughput   TPUT_NAMES new names, TPUT_CONC at a time: names issued per minute, Gatehouse as
#                three nodes on one Redis sharing the listening ports (SO_REUSEPORT, as behind an
#                L4 balancer), Caddy as one node (it has no shared on-demand issuance)
#
# Each target gets its own Pebble and pebble-challtestsrv (validation ports = the target's), run
# one after the other. Caddy validates by its own choice of challenge, Gatehouse by tls-alpn-01.
#
# Usage: bench/acme.sh   (needs pebble and pebble-challtestsrv v2.10.3, caddy v2.11.9 (go install),
#                         redis-server, python3, curl; ~1 minute)
#   TARGETS ["gatehouse caddy"]
#   NAMES [100]  TPUT_NAMES [100]  TPUT_CONC [20]
#   CADDY_BIN [caddy in PATH, else ~/.cache/gatehouse-tools/caddy-v2.11.9/caddy]
set -Eeuo pipefail

# shellcheck source=SCRIPTDIR/lib/common.sh
. "$(dirname "$0")/lib/common.sh"

log() { printf '[acme.sh] %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}
TARGETS=${TARGETS:-gatehouse caddy}
read -r -a TARGET_LIST <<<"$TARGETS"
NAMES=${NAMES:-100}
TPUT_NAMES=${TPUT_NAMES:-100}
TPUT_CONC=${TPUT_CONC:-20}
KEEP_WORKDIR=${KEEP_WORKDIR:-0}
check_integers NAMES TPUT_NAMES TPUT_CONC
PYTHON=$(python3 -c 'import sys; print(sys.executable)')
need_commands pebble pebble-challtestsrv redis-server curl go
PEBBLE_TEST="$(go env GOMODCACHE)/github.com/letsencrypt/pebble/v2@v2.10.3/test"
[[ -d $PEBBLE_TEST ]] || die "$PEBBLE_TEST missing: go install github.com/letsencrypt/pebble/v2/cmd/pebble@v2.10.3"
if want caddy; then
	CADDY_BIN=${CADDY_BIN:-$(command -v caddy || echo "$HOME/.cache/gatehouse-tools/caddy-v2.11.9/caddy")}
	[[ -x $CADDY_BIN ]] || die "no caddy: go install github.com/caddyserver/caddy/v2/cmd/caddy@v2.11.9"
	CADDY_VERSION=$(go version -m "$CADDY_BIN" | awk '$1 == "mod" && $2 == "github.com/caddyserver/caddy/v2" {print $3}')
fi
gatehouse_binary
make_workdir gatehouse-acme

# An ask endpoint that allows every name (both servers are made to ask, the same way).
free_ports 1
ASK_PORT=${REPLY_PORTS[0]}
start_proc ask none "$PYTHON" -c '
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("content-length", "0"); self.end_headers()
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
' "$ASK_PORT"

# start_pebble NAME HTTP_PORT TLS_PORT -> DIRECTORY, ROOT (Pebble's issuing root, fetched)
start_pebble() {
	local name=$1 http=$2 tls=$3 i
	free_ports 4
	local dns=${REPLY_PORTS[0]} dnsm=${REPLY_PORTS[1]} listen=${REPLY_PORTS[2]} mgmt=${REPLY_PORTS[3]}
	start_proc "$name-dns" none pebble-challtestsrv -dnsserver "127.0.0.1:$dns" -management "127.0.0.1:$dnsm" \
		-http01 "" -https01 "" -tlsalpn01 "" -doh "" -defaultIPv6 ""
	cat >"$WORK/$name-pebble.json" <<EOF
{"pebble": {"listenAddress": "127.0.0.1:$listen", "managementListenAddress": "127.0.0.1:$mgmt",
 "certificate": "$PEBBLE_TEST/certs/localhost/cert.pem", "privateKey": "$PEBBLE_TEST/certs/localhost/key.pem",
 "httpPort": $http, "tlsPort": $tls, "ocspResponderURL": "", "externalAccountBindingRequired": false,
 "retryAfter": {"authz": 1, "order": 1}, "keyAlgorithm": "ecdsa",
 "profiles": {"default": {"description": "90 days", "validityPeriod": 7776000}}}}
EOF
	PEBBLE_VA_NOSLEEP=1 PEBBLE_WFE_NONCEREJECT=0 start_proc "$name" none pebble -config "$WORK/$name-pebble.json" \
		-dnsserver "127.0.0.1:$dns"
	for ((i = 0; i < 100; i++)); do
		curl -sf --cacert "$PEBBLE_TEST/certs/pebble.minica.pem" "https://127.0.0.1:$mgmt/roots/0" >"$WORK/$name-root.pem" 2>/dev/null && break
		sleep 0.1
	done
	[[ -s $WORK/$name-root.pem ]] || { show_logs "$name"; die "pebble $name did not start"; }
	DIRECTORY="https://127.0.0.1:$listen/dir"
	ROOT="$WORK/$name-root.pem"
}

# gatehouse_yaml NODE HTTP TLS [REDIS_PORT]
gatehouse_yaml() {
	local node=$1 http=$2 tls=$3 redis=${4:-}
	local store="{ dir: \"$WORK/$node-certs\" }"
	[[ -n $redis ]] && store="{ redis: true }"
	cat <<EOF
workers: 1
access_log: { path: "off" }
$([[ -n $redis ]] && printf 'redis: { url: "redis://127.0.0.1:%s", secret_file: "%s" }\nnode: { id: %s }\n' "$redis" "$WORK/secret" "$node")
tls:
  store: $store
  acme:
    directory: "$DIRECTORY"
    ca: "$PEBBLE_TEST/certs/pebble.minica.pem"
    challenges: [tls-alpn-01]
    on_demand: { ask: "http://127.0.0.1:$ASK_PORT/check", rate: { limit: 100000, interval: 1m } }
listeners:
  http: { bind: "127.0.0.1:$http" }
  https: { bind: "127.0.0.1:$tls", tls: {} }
EOF
}

wait_port() { # wait_port INSTANCE PORT
	local i
	for ((i = 0; i < 200; i++)); do
		(exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null && return 0
		kill -0 "${PID[$1]}" 2>/dev/null || { show_logs "$1"; die "$1 exited during start-up"; }
		sleep 0.05
	done
	show_logs "$1"
	die "$1 not listening on $2"
}

load() { # load PORT PREFIX COUNT CONC -> JSON on stdout
	"$PYTHON" "$BENCH/lib/acme_load.py" --port "$1" --root "$ROOT" --prefix "$2" --count "$3" --concurrency "$4"
}

declare -A RESULT
run_gatehouse() {
	local http tls
	free_ports 2
	http=${REPLY_PORTS[0]} tls=${REPLY_PORTS[1]}
	start_pebble gh-pebble "$http" "$tls"
	mkdir -p "$WORK/one-certs"
	gatehouse_yaml one "$http" "$tls" >"$WORK/one.yaml"
	"$GATEHOUSE_BIN" check "$WORK/one.yaml" >/dev/null
	start_proc gatehouse-one none "$GATEHOUSE_BIN" run --config "$WORK/one.yaml"
	wait_port gatehouse-one "$tls"
	RESULT[gatehouse-latency]=$(load "$tls" lat "$NAMES" 1)
	log "gatehouse latency: ${RESULT[gatehouse-latency]}"
	terminate "${PID[gatehouse-one]}" "${PID[gh-pebble]}" "${PID[gh-pebble-dns]}"
	# Three nodes on one Redis, the same ports.
	free_ports 3
	http=${REPLY_PORTS[0]} tls=${REPLY_PORTS[1]}
	local redis=${REPLY_PORTS[2]} n
	start_redis redis none "$redis"
	head -c 48 /dev/urandom | base64 >"$WORK/secret"
	start_pebble gh3-pebble "$http" "$tls"
	for n in 1 2 3; do
		gatehouse_yaml "n$n" "$http" "$tls" "$redis" >"$WORK/n$n.yaml"
		start_proc "gatehouse-n$n" none "$GATEHOUSE_BIN" run --config "$WORK/n$n.yaml"
		wait_port "gatehouse-n$n" "$tls"
	done
	RESULT[gatehouse-throughput]=$(load "$tls" tput "$TPUT_NAMES" "$TPUT_CONC")
	log "gatehouse (3 nodes) throughput: ${RESULT[gatehouse-throughput]}"
	terminate "${PID[gatehouse-n1]}" "${PID[gatehouse-n2]}" "${PID[gatehouse-n3]}" "${PID[gh3-pebble]}" \
		"${PID[gh3-pebble-dns]}" "${PID[redis]}"
}

run_caddy() {
	local http tls phase conc count
	for phase in latency throughput; do
		free_ports 3
		http=${REPLY_PORTS[0]} tls=${REPLY_PORTS[1]}
		start_pebble "caddy-$phase-pebble" "$http" "$tls"
		cat >"$WORK/Caddyfile-$phase" <<EOF
{
	admin off
	http_port $http
	https_port $tls
	storage file_system $WORK/caddy-$phase
	acme_ca $DIRECTORY
	acme_ca_root $PEBBLE_TEST/certs/pebble.minica.pem
	skip_install_trust
	on_demand_tls {
		ask http://127.0.0.1:$ASK_PORT/check
	}
}
https:// {
	tls {
		on_demand
	}
	respond "ok"
}
EOF
		XDG_DATA_HOME="$WORK/caddy-$phase" XDG_CONFIG_HOME="$WORK/caddy-$phase" \
			start_proc "caddy-$phase" none "$CADDY_BIN" run --config "$WORK/Caddyfile-$phase" --adapter caddyfile
		wait_port "caddy-$phase" "$tls"
		if [[ $phase == latency ]]; then count=$NAMES conc=1; else count=$TPUT_NAMES conc=$TPUT_CONC; fi
		RESULT[caddy-$phase]=$(load "$tls" "$phase" "$count" "$conc")
		log "caddy $phase: ${RESULT[caddy-$phase]}"
		terminate "${PID[caddy-$phase]}" "${PID[caddy-$phase-pebble]}" "${PID[caddy-$phase-pebble-dns]}"
	done
}

# The ask endpoint listens before any other port is picked (a free port is free until bound).
wait_port ask "$ASK_PORT"
want gatehouse && run_gatehouse
want caddy && run_caddy

field() { "$PYTHON" -c 'import json,sys; v=json.loads(sys.argv[1]).get(sys.argv[2]); print("-" if v is None else v)' "$1" "$2"; }
echo
echo "## On-demand certificates (bench/acme.sh): Gatehouse $GATEHOUSE_VERSION${CADDY_VERSION:+, Caddy $CADDY_VERSION}, Pebble v2.10.3"
echo
echo "| target | new names | ok | p50 ms | p99 ms | max ms | names/min |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for key in gatehouse-latency caddy-latency gatehouse-throughput caddy-throughput; do
	[[ -n ${RESULT[$key]:-} ]] || continue
	r=${RESULT[$key]}
	label=$key
	[[ $key == gatehouse-throughput ]] && label="gatehouse-throughput (3 nodes, $TPUT_CONC at a time)"
	[[ $key == caddy-throughput ]] && label="caddy-throughput (1 node, $TPUT_CONC at a time)"
	echo "| $label | $(field "$r" count) | $(field "$r" ok) | $(field "$r" p50_ms) | $(field "$r" p99_ms) | $(field "$r" max_ms) | $(field "$r" names_per_min) |"
done
