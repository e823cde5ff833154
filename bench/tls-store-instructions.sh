#!/usr/bin/env bash
# bench/tls-store-instructions.sh - what does a certificate store of 10,000 bundles cost per
# handshake against one static certificate, counted exactly?
#
# The "dynamic vs static certificates" rows of bench/tls.sh compare CPU per connection at about
# 20 % of a core (the Python load generator is the limit), where this machine's clock moves by
# ±10 % between identical runs: too coarse for a 2 % goal.  Instruction counts do not move.  This
# runs Gatehouse (one worker) under `valgrind --tool=callgrind` and counts the user-space
# instructions per connection (new TCP + TLS connection, one GET, close: bench/lib/tls_load.py,
# 4 in flight) for each row, per TLS version:
#
#   static               one certificate in the configuration, no store; SNI bench.test
#   static, store        the same certificate, and a directory store of STORE_COUNT bundles
#                        beside it (same process as the next rows); SNI bench.test
#   stored, first use    SNI drawn at random among the store's names: index lookup, the bundle
#                        read and parsed from its file, the handshake
#   stored, loaded       the same names again (same seed): index lookup, cache hit, handshake
#   ACME-issued, loaded  (with ACME=1) a certificate issued by Pebble through tls.acme (leaf and
#                        Pebble's intermediate, ECDSA P-256) in a directory store of its own, by
#                        a Gatehouse run before for that; the same handshakes for its name
#
# Every connection must get its 200 (tls_load.py --check-name also checks that the certificate
# served names the SNI).  Kernel time is not counted, so a difference here is an upper bound of
# the difference in CPU per connection.
#
# Usage: bench/tls-store-instructions.sh     (needs valgrind, nginx, curl, python3; ~2 minutes)
#   N [300]             connections per row
#   STORE_COUNT [10000] bundles in the store (made once by bench/lib/tls_certs.py, cached)
#   VERSIONS ["1.3 1.2"]
#   CERT_CACHE [<repo>/bench/.cache/tls-certs]
#   KEEP_WORKDIR [0]    1 = keep the callgrind dumps
#   ACME [1 when pebble and pebble-challtestsrv are in PATH] the ACME-issued row
set -Eeuo pipefail

# shellcheck source=SCRIPTDIR/lib/common.sh
. "$(dirname "$0")/lib/common.sh"

log() { printf '[tls-store-instructions.sh] %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}
N=${N:-300}
STORE_COUNT=${STORE_COUNT:-10000}
VERSIONS=${VERSIONS:-1.3 1.2}
KEEP_WORKDIR=${KEEP_WORKDIR:-0}
CERT_CACHE=${CERT_CACHE:-$BENCH/.cache/tls-certs}
if command -v pebble >/dev/null && command -v pebble-challtestsrv >/dev/null; then ACME=${ACME:-1}; else ACME=${ACME:-0}; fi
need_commands valgrind callgrind_control callgrind_annotate nginx curl bc python3
check_integers N STORE_COUNT
((N >= 1 && STORE_COUNT >= 1)) || die "N and STORE_COUNT must be at least 1"
for v in $VERSIONS; do [[ $v == 1.2 || $v == 1.3 ]] || die "VERSIONS: 1.2 and/or 1.3, not '$v'"; done
PYTHON=$(python3 -c 'import sys; print(sys.executable)')
gatehouse_binary
HAPROXY_MAXCONN=0
raise_nofile
make_workdir gatehouse-tls-store-instructions
STORE_DIR=$(make_certs "$STORE_COUNT")
mkdir -p "$WORK/www"
write_www "$WORK/www"
start_backend 0

# issue_by_acme -> ACME_DIR: a directory store holding a certificate for acme.bench.test issued by
# Pebble through Gatehouse's tls.acme (tls-alpn-01), made by a Gatehouse run (not under valgrind)
issue_by_acme() {
	local i test
	test="$(go env GOMODCACHE)/github.com/letsencrypt/pebble/v2@v2.10.3/test"
	[[ -d $test ]] || die "ACME=1: $test missing (go install github.com/letsencrypt/pebble/v2/cmd/pebble@v2.10.3)"
	free_ports 6
	local dns=${REPLY_PORTS[0]} dnsm=${REPLY_PORTS[1]} listen=${REPLY_PORTS[2]} mgmt=${REPLY_PORTS[3]}
	local http=${REPLY_PORTS[4]} tls=${REPLY_PORTS[5]}
	start_proc acme-dns none pebble-challtestsrv -dnsserver "127.0.0.1:$dns" -management "127.0.0.1:$dnsm" \
		-http01 "" -https01 "" -tlsalpn01 "" -doh "" -defaultIPv6 ""
	cat >"$WORK/pebble.json" <<EOF
{"pebble": {"listenAddress": "127.0.0.1:$listen", "managementListenAddress": "127.0.0.1:$mgmt",
 "certificate": "$test/certs/localhost/cert.pem", "privateKey": "$test/certs/localhost/key.pem",
 "httpPort": $http, "tlsPort": $tls, "ocspResponderURL": "", "externalAccountBindingRequired": false,
 "keyAlgorithm": "ecdsa", "profiles": {"default": {"description": "90 days", "validityPeriod": 7776000}}}}
EOF
	PEBBLE_VA_NOSLEEP=1 start_proc acme-pebble none pebble -config "$WORK/pebble.json" -dnsserver "127.0.0.1:$dns"
	for ((i = 0; i < 100; i++)); do
		(exec 3<>"/dev/tcp/127.0.0.1/$listen") 2>/dev/null && break
		sleep 0.1
	done
	ACME_DIR="$WORK/acme-store"
	mkdir -p "$ACME_DIR"
	cat >"$WORK/acme-issuer.yaml" <<EOF
workers: 1
tls:
  store: { dir: "$ACME_DIR" }
  acme: { directory: "https://127.0.0.1:$listen/dir", ca: "$test/certs/pebble.minica.pem", names: [acme.bench.test] }
listeners:
  http: { bind: "127.0.0.1:$http" }
  https: { bind: "127.0.0.1:$tls", tls: {} }
EOF
	start_proc acme-issuer none "$GATEHOUSE_BIN" run --config "$WORK/acme-issuer.yaml"
	for ((i = 0; i < 300; i++)); do
		[[ -s $ACME_DIR/acme.bench.test.ecdsa.pem ]] && break
		sleep 0.1
	done
	[[ -s $ACME_DIR/acme.bench.test.ecdsa.pem ]] || { show_logs acme-issuer; die "ACME: no certificate issued"; }
	terminate "${PID[acme-issuer]}" "${PID[acme-pebble]}" "${PID[acme-dns]}"
	log "ACME: issued, $(grep -c 'BEGIN CERTIFICATE' "$ACME_DIR/acme.bench.test.ecdsa.pem") certificates in the chain"
}

# start_gatehouse NAME STORE(0|1|DIR) -> PORT_OF[NAME], PID[NAME]; waits until bench.test answers
declare -A PORT_OF
start_gatehouse() {
	local name=$1 store=$2 port i dir
	free_ports 1
	port=${REPLY_PORTS[0]}
	PORT_OF[$name]=$port
	dir=$STORE_DIR
	[[ $store == /* ]] && dir=$store
	cat >"$WORK/$name.yaml" <<EOF
workers: 1
cpu_affinity: off
access_log: { path: "off" }
tls:
  certificates: [{ cert: "$CERT_CACHE/ecdsa.pem" }]
$( [[ $store != 0 ]] && echo "  store: { dir: \"$dir\" }")
  default_certificate: bench.test
listeners:
  https: { bind: "127.0.0.1:$port", tls: { versions: [tls1.2, tls1.3] } }
$(gatehouse_upstream 256)
EOF
	"$GATEHOUSE_BIN" check "$WORK/$name.yaml" >/dev/null
	start_proc "$name" none valgrind --tool=callgrind --callgrind-out-file="$WORK/callgrind.$name.%p" \
		"$GATEHOUSE_BIN" run --config "$WORK/$name.yaml"
	for ((i = 0; i < 600; i++)); do
		[[ $(curl -sk -o /dev/null -w '%{http_code}' --resolve "bench.test:$port:127.0.0.1" \
			"https://bench.test:$port/test.html" 2>/dev/null) == 200 ]] && break
		kill -0 "${PID[$name]}" 2>/dev/null || die "$name exited under valgrind"
		sleep 0.2
	done
	if [[ $store == 1 ]]; then
		# The store is indexed in the background after start: wait for its last name.
		for ((i = 0; i < 600; i++)); do
			[[ $(curl -sk -o /dev/null -w '%{http_code}' --resolve "n$((STORE_COUNT - 1)).bench.test:$port:127.0.0.1" \
				"https://n$((STORE_COUNT - 1)).bench.test:$port/test.html" 2>/dev/null) == 200 ]] && return 0
			sleep 0.2
		done
		die "$name: the store's last name is not served"
	fi
}

# load NAME TLS ARGS... : N connections, every one a 200 with the right certificate
load() {
	local name=$1 tls=$2 out
	shift 2
	out=$("$PYTHON" "$BENCH/lib/tls_load.py" --port "${PORT_OF[$name]}" --path /test.html -n "$N" -c 4 \
		--tls "$tls" --check-name "$@")
	[[ $("$PYTHON" -c 'import json,sys; d=json.loads(sys.stdin.read()); print(d["ok"])' <<<"$out") == "$N" ]] ||
		die "$name: not every connection got its 200: $out"
}

log "starting Gatehouse under valgrind: one certificate, then one certificate and $STORE_COUNT stored"
start_gatehouse static 0
start_gatehouse store 1
if ((ACME)); then
	issue_by_acme
	start_gatehouse acme "$ACME_DIR"
fi

echo "| TLS | row | instructions per connection | vs static |"
echo "|---|---|---:|---:|"
seed=0
for v in $VERSIONS; do
	seed=$((seed + 1))
	random=(--sni-pattern 'n{}.bench.test' --sni-count "$STORE_COUNT" --seed "$seed")
	load static "$v" --sni bench.test # warm-up: pools, allocator, caches
	load store "$v" --sni bench.test
	callgrind_count static static "$N" load static "$v" --sni bench.test
	base=$REPLY
	printf '| %s | static | %d | – |\n' "$v" "$base"
	callgrind_count store static-store "$N" load store "$v" --sni bench.test
	printf '| %s | static, store of %d beside it | %d | %+.1f %% |\n' "$v" "$STORE_COUNT" "$REPLY" "$(echo "($REPLY - $base) * 100 / $base" | bc -l)"
	callgrind_count store first "$N" load store "$v" "${random[@]}"
	printf '| %s | stored names, first use | %d | %+.1f %% |\n' "$v" "$REPLY" "$(echo "($REPLY - $base) * 100 / $base" | bc -l)"
	callgrind_count store again "$N" load store "$v" "${random[@]}"
	printf '| %s | stored names, loaded | %d | %+.1f %% |\n' "$v" "$REPLY" "$(echo "($REPLY - $base) * 100 / $base" | bc -l)"
	if ((ACME)); then
		load acme "$v" --sni acme.bench.test # its first use: loaded from the store
		callgrind_count acme acme "$N" load acme "$v" --sni acme.bench.test
		printf '| %s | ACME-issued, loaded | %d | %+.1f %% |\n' "$v" "$REPLY" "$(echo "($REPLY - $base) * 100 / $base" | bc -l)"
	fi
done
