#!/usr/bin/env bash
# bench/http3-instructions.sh - user-space instructions per request, HTTP/3 against HTTP/2 over TLS.
#
# The CPU clock of this machine moves by ±20 % between identical runs; instruction counts do not.
# This runs one Gatehouse worker under `valgrind --tool=callgrind` (an https listener with
# http3: true, proxying to a local nginx) and counts its user-space instructions per request of
# the 5 KB object:
#
#   h3   bench/h3load (quic-go's HTTP/3 client): 10 connections x 10 streams for DURATION;
#        requests counted by the client (every one a 200 with the whole body)
#   h2   h2load over TLS: 10 connections x 10 streams, N requests
#
# ROUNDS rounds, each with both rows after a warm-up. Kernel time is not counted (the UDP and
# TCP paths cost about the same per request: BENCHMARKS.md "HTTP/3"), so this is the part of
# the protocols' difference that user-space code decides.
#
# Usage: bench/http3-instructions.sh          (needs valgrind, nginx, h2load, go; ~3 minutes)
#   N [1000]          HTTP/2 requests per round
#   DURATION [6]      seconds of HTTP/3 load per round (about 3,000-4,000 requests under valgrind)
#   ROUNDS [2]
#   GATEHOUSE_BIN     the gateway; unset = cargo build --release
set -Eeuo pipefail

# shellcheck source=SCRIPTDIR/lib/common.sh
. "$(dirname "$0")/lib/common.sh"

log() { printf '[http3-instructions.sh] %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}
N=${N:-1000}
DURATION=${DURATION:-6}
ROUNDS=${ROUNDS:-2}
KEEP_WORKDIR=${KEEP_WORKDIR:-0}
HAPROXY_MAXCONN=0
check_integers N DURATION ROUNDS
export PATH=$PATH:/usr/local/go/bin:$HOME/go/bin
need_commands valgrind callgrind_control callgrind_annotate nginx h2load curl openssl go python3
gatehouse_binary
h3load_binary
raise_nofile
make_workdir gatehouse-http3-instructions
mkdir -p "$WORK/www"
write_www "$WORK/www"
start_backend 0
bench_test_cert "$WORK"
free_ports 1
P=${REPLY_PORTS[0]}
h3_gatehouse_yaml "$P" "$WORK/bundle.pem" >"$WORK/gatehouse.yaml"
# Access log off, as in bench/gateway-instructions.sh: the counts are of the request path.
printf 'access_log: { path: "off" }\ncpu_affinity: off\n' >>"$WORK/gatehouse.yaml"
gatehouse_check "$WORK/gatehouse.yaml"
start_proc gatehouse none valgrind --tool=callgrind --callgrind-out-file="$WORK/callgrind.gatehouse.%p" \
	"$GATEHOUSE_BIN" run --config "$WORK/gatehouse.yaml"
for ((i = 0; i < 600; i++)); do
	[[ $(curl -sk -o /dev/null -w '%{http_code}' "https://127.0.0.1:$P/5k.html" 2>/dev/null) == 200 ]] && break
	kill -0 "${PID[gatehouse]}" 2>/dev/null || die "gatehouse exited under valgrind"
	sleep 0.2
done

# h3 SECONDS -> (stdout) requests answered whole
h3() {
	GOMAXPROCS=1 "$H3LOAD" -addr "127.0.0.1:$P" -host bench.test -path /5k.html -c 10 -m 10 -d "${1}s" -mode requests |
		"$PYTHON" -c 'import json, sys; r = json.load(sys.stdin); assert r["errors"] == 0, r; print(r["requests"])'
}
# h2 REQUESTS -> (stdout) 2xx answers
h2() {
	h2load -c 10 -m 10 -n "$1" -H ":authority: bench.test" "https://127.0.0.1:$P/5k.html" 2>&1 |
		sed -n 's/.*status codes: \([0-9]*\) 2xx.*/\1/p'
}
# count LABEL CMD... -> REPLY: user-space instructions per request of CMD (which prints its count)
count() {
	local label=$1 mark=$WORK/callgrind.mark n dump total
	shift
	touch "$mark"
	callgrind_control -z "${PID[gatehouse]}" >/dev/null 2>&1
	n=$("$@")
	callgrind_control -d "$label" "${PID[gatehouse]}" >/dev/null 2>&1
	dump=$(find "$WORK" -name "callgrind.gatehouse.${PID[gatehouse]}.*" -newer "$mark" -printf '%T@ %p\n' |
		sort -n | tail -n 1 | cut -d' ' -f2-)
	[[ -n $dump && ${n:-0} -gt 0 ]] || die "$label: no dump or no requests ($n)"
	total=$(callgrind_annotate "$dump" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
	REPLY=$((total / n))
	REPLY_N=$n
}

log "warm-up"
h3 2 >/dev/null
h2 200 >/dev/null
echo "## HTTP/3 and HTTP/2 instructions per request (bench/http3-instructions.sh)"
echo
echo "Gatehouse $GATEHOUSE_VERSION, one worker under callgrind; 5 KB objects, 10 connections x 10 streams."
echo
echo "| round | HTTP/3 requests | HTTP/3 instructions per request | HTTP/2 requests | HTTP/2 instructions per request | HTTP/3 / HTTP/2 |"
echo "|---:|---:|---:|---:|---:|---:|"
for ((r = 1; r <= ROUNDS; r++)); do
	count "h3-$r" h3 "$DURATION"
	i3=$REPLY n3=$REPLY_N
	count "h2-$r" h2 "$N"
	i2=$REPLY n2=$REPLY_N
	printf '| %d | %d | %d | %d | %d | %.2f |\n' "$r" "$n3" "$i3" "$n2" "$i2" "$(echo "$i3 / $i2" | bc -l)"
done
