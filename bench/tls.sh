#!/usr/bin/env bash
# bench/tls.sh - TLS termination benchmark: Gatehouse vs nginx vs HAProxy.
#
# Question answered:
#   What does terminating TLS cost Gatehouse compared with nginx and HAProxy, per server
#   CPU-second, in the same run: full handshakes (ECDSA/RSA x TLS 1.2/1.3), resumed
#   handshakes with each session store on or off, SNI lookups among 10,000 stored
#   certificates, HTTP/2 vs HTTP/1.1 over TLS, 2 workers with and without reuse_port, and
#   sessions resumed on another node of a cluster, with a shared session store or without?
#
# Set-up (all on 127.0.0.1, free ports picked per server start, everything in a mktemp -d
# work dir that is removed on exit; certificates cached in bench/.cache/tls-certs):
#   CPU 0: the server under test, alone: Gatehouse (workers: 1), nginx (worker_processes 1)
#          or HAProxy (nbthread 1), each terminating TLS and proxying over HTTP/1.1
#          keep-alive to the backend.  The three run side by side; only one is loaded.
#   CPU 1: backend nginx (1 worker, static files test.html = 75 B, 5k.html, 10k.html) and
#          the load generator.
#   Group 5 (reuse_port) is the exception: servers with 2 workers, servers and load
#   generator unpinned (both cores shared), backend still on CPU 1.  Group 6 (cluster) runs
#   two nodes of one server on CPU 0, and redis-server on CPU 1.
#   For every rep the target order is rotated by one (rep 1: gatehouse nginx haproxy,
#   rep 2: nginx haproxy gatehouse, ...).
#
# Rows (ROWS knob; GROUPS is taken by bash), each group a table in the output:
#   handshake  HS_N connections, HS_CONNS in flight, one GET /test.html each: no keep-alive
#              and no session offered, so one full handshake per request (checked on Gatehouse
#              with gatehouse_tls_handshakes_total).  ECDSA P-256 and RSA-2048 certificates
#              (each server restarted with one kind), TLS 1.2 with
#              ECDHE-{ECDSA,RSA}-AES128-GCM-SHA256, TLS 1.3 with the client's default suite.
#              Client HS_CLIENT: gatehouse-loadgen (crates/loadgen, rustls: X25519, the
#              server unverified, as ab), which keeps the server core busy; or
#              ab -f TLS1.x, which spends ~4x a server's CPU per handshake (OpenSSL 3) and
#              leaves the server under half busy from one client core.
#   resume     RES_N connections, RES_CONNS in flight, each slot offering its previous
#              session (client RES_CLIENT: gatehouse-loadgen --resume, or tls_load.py
#              --resume); servers with tickets + session cache, session cache only,
#              neither; plus full handshakes (no session offered); all with an
#              ECDSA P-256 certificate, and TLS 1.2 full vs resumed (tickets + session cache)
#              again with RSA-2048 (4 x RES_N connections), where a full handshake costs an RSA
#              signature.  Each slot's first connection has no session to offer: a resumed
#              run holds RES_CONNS full handshakes (the "resumed (client)" column).  Resumption is
#              counted by the client (SSL_session_reused) and, on Gatehouse, by the metric.
#   store      client STORE_CLIENT (gatehouse-loadgen or tls_load.py) with SNI drawn at
#              random among n0..n(STORE_COUNT-1).bench.test against a directory store of
#              STORE_COUNT bundles (Gatehouse tls.store, HAProxy
#              `crt DIR/`, nginx `ssl_certificate $ssl_server_name` which reads the file on
#              every handshake), first use and the same names again, vs one certificate and
#              one name; also STORE_LAT_N connections one at a time (c=1) on one certificate
#              and on the same names again, for the store's own latency.  Start-up time (spawn
#              to /healthz for Gatehouse, to the first HTTPS 200 for the others), time until the
#              last stored name is served, and RSS.
#   h2         h2load -c H2_CONNS -m H2_STREAMS (HTTP/2) vs h2load --h1 -c H2_CONNS, on
#              5k.html and 10k.html, timed (-D DURATION after --warm-up-time WARMUP).
#   reuseport  h2load --h1 -c RP_CONNS, 2 workers, reuse_port true vs false (nginx
#              `listen ... reuseport` or not; HAProxy one `bind` per thread or one shared).
#   cluster    two nodes of a server (A and B, both on CPU 0); client CLUSTER_CLIENT with
#              --origin-port (gatehouse-loadgen or tls_load.py), CLUSTER_N pairs,
#              CLUSTER_CONNS in flight: a connection to A makes a new session, then a
#              connection to B offers it.  Gatehouse nodes share a redis-server (CPU 1):
#              (a) store off (tickets off, session_cache local), (b) Redis session store
#              (tickets off, session_cache redis), (c) cluster tickets (tickets cluster,
#              session_cache redis); nginx nodes (a) with a per-node session cache and (c)
#              with one shared ssl_session_ticket_key.  Only B connections are measured;
#              Gatehouse's resumed/fetched/Redis counters are read from both nodes.
#
# Measured per run (raw numbers in bench/results/tls-latest.csv, see bench/lib/tls_record.py):
#   rate (handshakes, connections or requests per second), latency, server CPU % (CPU time of
#   the server's process tree from /proc/*/task/*/schedstat, or utime+stime ticks from
#   /proc/PID/stat when one of its threads ended during the run; % of one core), rate per
#   server CPU-second, others' CPU % (/proc/stat busy minus server, backend and load
#   generator, and in the cluster group node A and Redis), new backend connections (backend stub_status accepts).  For h2load the CPU
#   window is its measured phase only (after warm-up).
#
# Output: Markdown section on stdout, also written to BENCHMARKS.md (the section
# "## TLS termination (bench/tls.sh)" is replaced, or appended if absent; not with QUICK=1).
#
# Run (from anywhere; needs nginx, haproxy, ab, h2load, redis-server, curl, openssl, python3, taskset,
# 2 CPUs; python3 `cryptography` makes the 10,000 certificates in seconds, without it
# openssl takes minutes, once):
#   bench/tls.sh                                        # builds gatehouse (release)
#   GATEHOUSE_BIN=target/release/gatehouse bench/tls.sh          # about 12-14 minutes
#   QUICK=1 GATEHOUSE_BIN=target/release/gatehouse bench/tls.sh  # every row once, tiny counts
#   ROWS="handshake resume" TARGETS="gatehouse nginx" bench/tls.sh
#
# Environment knobs (defaults in brackets; QUICK=1 defaults after the slash):
#   GATEHOUSE_BIN    binary to test; unset = `cargo build --release -p gatehouse`
#   QUICK [0]        1 = smoke run: REPS=1 and the small counts below
#   REPS [3/1]       repetitions of every row (but the full handshakes: HS_REPS)
#   HS_REPS [7/1]    repetitions of the full-handshake rows, whose goal figure is the median of
#                    the per-rep paired ratios (a rep here swings by ±15 %)
#   ROWS [handshake resume store h2 reuseport cluster]
#   TARGETS [gatehouse nginx haproxy]
#   HS_N [4000/200], HS_CONNS [50]         connections per handshake run, in flight
#   HS_CLIENT [loadgen]   client of the handshake rows: loadgen (gatehouse-loadgen) or ab
#   LOADGEN_BIN      gatehouse-loadgen to use; unset = `cargo build --release -p gatehouse-loadgen`
#   RES_N [3000/150; 600 with tls_load], RES_CONNS [50]   connections per resumption run, in flight
#   RES_CLIENT [loadgen]  client of the resume rows: loadgen (gatehouse-loadgen) or tls_load
#   CLUSTER_N [4000/150; 1500 with tls_load], CLUSTER_CONNS [50; 10 with tls_load]
#                         B connections per cluster run, pairs in flight
#   CLUSTER_CLIENT [loadgen]  client of the cluster rows: loadgen (gatehouse-loadgen) or tls_load
#   STORE_N [3000/200; 1000 with tls_load], STORE_CONNS [50]   connections per store run, in flight
#   STORE_CLIENT [loadgen]  client of the store rows: loadgen (gatehouse-loadgen) or tls_load
#   STORE_LAT_N [300/50]                   connections of the one-at-a-time store runs (0: none; <= STORE_N)
#   STORE_COUNT [10000]                    certificates in the store
#   STORE_HAPROXY [1/0]   1 = HAProxy in the store group too (it loads every certificate at
#                         start: 30-45 s for 10,000 here, once per run)
#   DURATION [2/1]   seconds of h2load -D; WARMUP [0.5/0.3] seconds of h2load --warm-up-time
#   H2_CONNS [100], H2_STREAMS [10], RP_CONNS [200]
#   H2_FILES [5k.html 10k.html]
#   SETTLE [0.3/0] seconds of sleep between runs
#   RUN_TIMEOUT [300]        hard limit for one load-generator run, seconds
#   HAPROXY_MAXCONN [4096]
#   CERT_CACHE [<repo>/bench/.cache/tls-certs]
#   BENCHMARKS_MD [<repo>/BENCHMARKS.md / none]   file to update; "none" = don't.  The per-run
#                    CSV goes to bench/results/tls-latest.csv (QUICK=1: tls-quick.csv).
#   KEEP_WORKDIR [0]         1 = keep the temp dir (configs, logs, raw outputs)

set -Eeuo pipefail

# ORIG_PWD = where it was started; then in the repository: ROOT, BENCH = ROOT/bench.
# shellcheck source=SCRIPTDIR/lib/common.sh
. "$(dirname "$0")/lib/common.sh"

REPS=${REPS:-$(pick 3 1)}
HS_REPS=${HS_REPS:-$(pick 7 1)}
ROWS=${ROWS:-handshake resume store h2 reuseport cluster}
TARGETS=${TARGETS:-gatehouse nginx haproxy}
HS_N=${HS_N:-$(pick 4000 200)}
HS_CLIENT=${HS_CLIENT:-loadgen}
HS_CONNS=${HS_CONNS:-50}
RES_CLIENT=${RES_CLIENT:-loadgen}
if [[ $RES_CLIENT == tls_load ]]; then RES_N=${RES_N:-$(pick 600 150)}; else RES_N=${RES_N:-$(pick 3000 150)}; fi
RES_CONNS=${RES_CONNS:-50}
CLUSTER_CLIENT=${CLUSTER_CLIENT:-loadgen}
if [[ $CLUSTER_CLIENT == tls_load ]]; then
	CLUSTER_N=${CLUSTER_N:-$(pick 1500 150)} CLUSTER_CONNS=${CLUSTER_CONNS:-10}
else
	CLUSTER_N=${CLUSTER_N:-$(pick 4000 150)} CLUSTER_CONNS=${CLUSTER_CONNS:-50}
fi
STORE_CLIENT=${STORE_CLIENT:-loadgen}
if [[ $STORE_CLIENT == tls_load ]]; then STORE_N=${STORE_N:-$(pick 1000 200)}; else STORE_N=${STORE_N:-$(pick 3000 200)}; fi
STORE_CONNS=${STORE_CONNS:-50}
STORE_LAT_N=${STORE_LAT_N:-$(pick 300 50)}
STORE_COUNT=${STORE_COUNT:-10000}
STORE_HAPROXY=${STORE_HAPROXY:-$(pick 1 0)}
DURATION=${DURATION:-$(pick 2 1)}
WARMUP=${WARMUP:-$(pick 0.5 0.3)}
H2_CONNS=${H2_CONNS:-100}
H2_STREAMS=${H2_STREAMS:-10}
RP_CONNS=${RP_CONNS:-200}
H2_FILES=${H2_FILES:-5k.html 10k.html}
SETTLE=${SETTLE:-$(pick 0.3 0)}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
HAPROXY_MAXCONN=${HAPROXY_MAXCONN:-4096}
CERT_CACHE=${CERT_CACHE:-$BENCH/.cache/tls-certs}
# A smoke run's numbers are not for the record: QUICK=1 leaves BENCHMARKS.md alone unless asked.
BENCHMARKS_MD=${BENCHMARKS_MD:-$(pick "$ROOT/BENCHMARKS.md" none)}
RESULTS_CSV=$BENCH/results/$(pick tls-latest.csv tls-quick.csv)
KEEP_WORKDIR=${KEEP_WORKDIR:-0}
HEADING='## TLS termination (bench/tls.sh)'

log() { printf '[tls.sh %3ss] %s\n' "$SECONDS" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# ---------------------------------------------------------------- validation
check_integers REPS HS_REPS HS_N HS_CONNS RES_N RES_CONNS CLUSTER_N CLUSTER_CONNS STORE_N STORE_CONNS STORE_LAT_N STORE_COUNT STORE_HAPROXY DURATION \
	H2_CONNS H2_STREAMS RP_CONNS RUN_TIMEOUT HAPROXY_MAXCONN
for v in SETTLE WARMUP; do
	[[ ${!v} =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "$v must be a number of seconds (got '${!v}')"
done
WARMUP_MS=$(awk -v s="$WARMUP" 'BEGIN { printf "%dms", s * 1000 }') # h2load takes no fractions of a unit
((REPS >= 1 && HS_REPS >= 1 && HS_N >= 1 && RES_N >= 1 && CLUSTER_N >= 1 && STORE_N >= 1 && STORE_COUNT >= 1 && DURATION >= 1)) ||
	die "REPS, HS_REPS, HS_N, RES_N, CLUSTER_N, STORE_N, STORE_COUNT and DURATION must be at least 1"
[[ $HS_CLIENT == loadgen || $HS_CLIENT == ab ]] || die "HS_CLIENT must be loadgen or ab (got '$HS_CLIENT')"
for v in RES_CLIENT CLUSTER_CLIENT STORE_CLIENT; do
	[[ ${!v} == loadgen || ${!v} == tls_load ]] || die "$v must be loadgen or tls_load (got '${!v}')"
done
((HS_N >= HS_CONNS)) || die "HS_N ($HS_N) must be at least HS_CONNS ($HS_CONNS)"
((STORE_LAT_N <= STORE_N)) || die "STORE_LAT_N ($STORE_LAT_N) must be at most STORE_N ($STORE_N): its names must be loaded already"

read -r -a ROW_LIST <<<"$ROWS"
read -r -a TARGET_LIST <<<"$TARGETS"
read -r -a H2_FILE_LIST <<<"$H2_FILES"
((${#ROW_LIST[@]} && ${#TARGET_LIST[@]})) || die "ROWS and TARGETS must not be empty"
for g in "${ROW_LIST[@]}"; do
	case $g in handshake | resume | store | h2 | reuseport | cluster) ;; *) die "unknown group '$g' in ROWS (handshake resume store h2 reuseport cluster)" ;; esac
done
for t in "${TARGET_LIST[@]}"; do
	case $t in gatehouse | nginx | haproxy) ;; *) die "unknown target '$t' in TARGETS (gatehouse nginx haproxy)" ;; esac
done
for f in "${H2_FILE_LIST[@]}"; do [[ -n ${SIZE[$f]:-} ]] || die "unknown file '$f' in H2_FILES (5k.html 10k.html test.html)"; done
want_group() {
	local g
	for g in "${ROW_LIST[@]}"; do [[ $g == "$1" ]] && return 0; done
	return 1
}

need=(nginx curl openssl python3 taskset getconf timeout)
want haproxy && need+=(haproxy)
want_group handshake && [[ $HS_CLIENT == ab ]] && need+=(ab)
{ want_group h2 || want_group reuseport; } && need+=(h2load)
want_group cluster && need+=(redis-server redis-cli)
need_commands "${need[@]}"
(($(nproc) >= 2)) || die "needs at least 2 CPUs (CPU 0: server under test, CPU 1: backend + load generator)"
taskset -c 1 true 2>/dev/null || die "cannot pin to CPU 1 (taskset -c 1 failed)"

CLK_TCK=$(getconf CLK_TCK)
# The interpreter itself, not a version-manager shim: a shim costs ~0.15 s per start here.
PYTHON=$(python3 -c 'import sys; print(sys.executable)')

# ------------------------------------------------------------ gatehouse binary
GATEHOUSE_VERSION=
want gatehouse && gatehouse_binary
{ { want_group handshake && [[ $HS_CLIENT == loadgen ]]; } || { want_group resume && [[ $RES_CLIENT == loadgen ]]; } ||
	{ want_group cluster && [[ $CLUSTER_CLIENT == loadgen ]]; } || { want_group store && [[ $STORE_CLIENT == loadgen ]]; }; } &&
	loadgen_binary

# --------------------------------------------------- work dir, process cleanup
make_workdir gatehouse-tls-bench
declare -A PORT=()  # instance -> its HTTPS port
declare -A ADMIN=() # gatehouse instance -> its admin port
raise_nofile

# ------------------------------------------------------ certificates, content
mkdir -p "$WORK"/{www,backend,runs}
CERTS=$CERT_CACHE
STORE_DIR=$(make_certs "$STORE_COUNT") || exit 1
LAST_NAME="n$((STORE_COUNT - 1)).bench.test"

write_www "$WORK/www"

# ---------------------------------------------------------- process helpers
elapsed_since() { # elapsed_since EPOCHREALTIME -> seconds, 3 decimals
	awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }'
}

# ------------------------------------------------------------------ backend
start_backend 1
log "work dir $WORK; backend nginx on 127.0.0.1:$P_BACKEND (CPU 1); certificates in $CERTS"

# ------------------------------------------------------------------ servers
# server_spawn INSTANCE [key=value ...] writes the configuration of one server and starts it;
# server_ready INSTANCE waits until it serves HTTPS.  INSTANCE is TARGET or TARGET_suffix.
# Keys (defaults): cert=ecdsa (or rsa), store=0 (1 = the STORE_COUNT directory store besides
# the bench.test certificate), tickets=1 (0 = off; cluster = Gatehouse `tickets: cluster`, nginx
# with the ticket key file $WORK/nginx-ticket.key shared by its nodes), cache=1 (0 = off; redis =
# Gatehouse `session_cache: redis`), redis=PORT (Gatehouse: the `redis` section, secret
# $WORK/cluster.key), workers=1, reuse=1, cpu=0 (none = unpinned).
# server_ready sets STARTUP_READY (s from spawn to /healthz for Gatehouse, to the first HTTPS
# 200 otherwise), STARTUP_NAME (s until the last stored name, or bench.test, is served with
# its own certificate) and STARTUP_RSS (kB).
declare -A T0=() OPTS=() STORE=() ERRLOG=()
server_spawn() {
	local inst=$1 target=${1%%_*}
	shift
	local cert=ecdsa store=0 tickets=1 cache=1 redis='' workers=1 reuse=1 cpu=0 kv
	for kv in "$@"; do
		case ${kv%%=*} in
		cert | store | tickets | cache | redis | workers | reuse | cpu) printf -v "${kv%%=*}" '%s' "${kv#*=}" ;;
		*) die "server_spawn: unknown option $kv" ;;
		esac
	done
	OPTS[$inst]="$*" STORE[$inst]=$store ERRLOG[$inst]=''
	local dir=$WORK/$inst port admin='' bundle=$CERTS/$cert.pem errlog='' t0
	rm -rf "$dir"
	mkdir -p "$dir"
	free_ports 2
	port=${REPLY_PORTS[0]}
	PORT[$inst]=$port
	case $target in
	gatehouse)
		admin=${REPLY_PORTS[1]}
		ADMIN[$inst]=$admin
		local -A mode=([0]=off [1]=local [cluster]=cluster [redis]=redis)
		cat >"$dir/gatehouse.yaml" <<EOF
$([[ -n $redis ]] && echo "redis: { url: \"redis://127.0.0.1:$redis/0\", secret_file: \"$WORK/cluster.key\" }")
workers: $workers
reuse_port: $( ((reuse)) && echo true || echo false)
cpu_affinity: off
access_log: { path: "off" }
admin: { bind: "127.0.0.1:$admin", public: [/healthz, /metrics, /status] }
tls:
  certificates: [{ cert: "$bundle" }]
$( ((store)) && echo "  store: { dir: \"$STORE_DIR\", scan_interval: 2s }")
  default_certificate: bench.test
  tickets: ${mode[$tickets]}
  session_cache: ${mode[$cache]}
listeners:
  https: { bind: "127.0.0.1:$port", max_connections: 20000, tls: { versions: [tls1.2, tls1.3] } }
$(gatehouse_upstream 2048)
EOF
		gatehouse_check "$dir/gatehouse.yaml"
		t0=$EPOCHREALTIME
		start_proc "$inst" "$cpu" "$GATEHOUSE_BIN" run --config "$dir/gatehouse.yaml"
		;;
	nginx)
		[[ $cache == 1 || $cache == 0 ]] || die "server_spawn: nginx runs with cache=0 or 1 only"
		local cert_lines="ssl_certificate $bundle; ssl_certificate_key $bundle;" store_map=""
		if ((store)); then
			# nginx's lazy store: the file named by the SNI, read on every handshake; no name
			# (or another one) gets the bench.test bundle.
			store_map="map \$ssl_server_name \$store_bundle { \"~^(n[0-9]+\\.bench\\.test)\$\" $STORE_DIR/\$1.pem; default $bundle; }"
			cert_lines="ssl_certificate \$store_bundle; ssl_certificate_key \$store_bundle;"
		fi
		{
			nginx_head "$dir" "$workers"
			cat <<EOF
http {
$(nginx_temp_paths "$dir")
    access_log off;
    keepalive_timeout 75s;
    keepalive_requests 1000000;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_cache $([[ $cache == 1 ]] && echo "shared:SSL:10m" || echo off);
    ssl_session_timeout 5m;
    ssl_session_tickets $([[ $tickets == 0 ]] && echo off || echo on);
    $([[ $tickets == cluster ]] && echo "ssl_session_ticket_key $WORK/nginx-ticket.key;")
    $store_map
    upstream backend {
        server 127.0.0.1:$P_BACKEND;
        keepalive 2048;
        keepalive_requests 1000000;
        keepalive_timeout 60s;
    }
    server {
        listen 127.0.0.1:$port ssl http2 backlog=4096$( ((reuse && workers > 1)) && echo " reuseport");
        $cert_lines
        location / {
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
$(nginx_forwarding "            ")
        }
    }
}
EOF
		} >"$dir/nginx.conf"
		errlog=$dir/error.log
		ERRLOG[$inst]=$errlog
		nginx -t -q -p "$dir" -e "$errlog" -c "$dir/nginx.conf" 2>"$dir/check.txt" || {
			cat "$dir/check.txt" >&2
			die "nginx rejected $dir/nginx.conf"
		}
		t0=$EPOCHREALTIME
		start_proc "$inst" "$cpu" nginx -p "$dir" -e "$errlog" -c "$dir/nginx.conf"
		;;
	haproxy)
		local crt="crt $bundle" opts="" binds="" th
		((store)) && crt+=" crt $STORE_DIR/"
		[[ $tickets == 1 || $tickets == 0 ]] || die "server_spawn: HAProxy runs with tickets=0 or 1 only"
		[[ $cache == 1 || $cache == 0 ]] || die "server_spawn: HAProxy runs with cache=0 or 1 only"
		((tickets)) || opts+=" no-tls-tickets"
		if ((reuse && workers > 1)); then
			# One listening socket per thread (HAProxy sets SO_REUSEPORT): the kernel spreads
			# connections, as with Gatehouse's and nginx's reuse_port.
			for ((th = 1; th <= workers; th++)); do
				binds+="    bind 127.0.0.1:$port ssl $crt alpn h2,http/1.1 ssl-min-ver TLSv1.2$opts thread $th"$'\n'
			done
		else
			binds="    bind 127.0.0.1:$port ssl $crt alpn h2,http/1.1 ssl-min-ver TLSv1.2$opts"$'\n'
		fi
		haproxy_cfg "$workers" "$binds" "    tune.ssl.cachesize $( ((cache)) && echo 20000 || echo 0)
    tune.ssl.lifetime 300
" >"$dir/haproxy.cfg"
		((store)) || haproxy -c -q -f "$dir/haproxy.cfg" >&2 || die "haproxy rejected $dir/haproxy.cfg"
		t0=$EPOCHREALTIME
		start_proc "$inst" "$cpu" haproxy -db -f "$dir/haproxy.cfg"
		;;
	esac
	T0[$inst]=$t0
}

server_ready() {
	local inst=$1 target=${1%%_*} store=${STORE[$1]} errlog=${ERRLOG[$1]} t0=${T0[$1]}
	local dir=$WORK/$1 port=${PORT[$1]} admin=${ADMIN[$1]:-} i got
	local limit=150 # 0.1 s polls; HAProxy loading a big store gets 300 s
	[[ $target == haproxy ]] && ((store)) && limit=3000
	STARTUP_READY='' STARTUP_NAME=''
	for ((i = 0; i < limit * 5; i++)); do
		kill -0 "${PID[$inst]}" 2>/dev/null || { show_logs "$inst" "$errlog"; die "$inst exited during start-up"; }
		if [[ $target == gatehouse ]]; then
			got=$(http_probe "http://127.0.0.1:$admin/healthz")
			[[ $got == "200 "* ]] && break
		else
			got=$(http_probe "https://127.0.0.1:$port/test.html")
			[[ $got == "200 75" ]] && break
		fi
		sleep 0.02
	done
	((i < limit * 5)) || { show_logs "$inst" "$errlog"; die "$inst not ready: last probe '${got:-no answer}'"; }
	STARTUP_READY=$(elapsed_since "$t0")
	local name=bench.test
	((store)) && name=$LAST_NAME
	for ((i = 0; i < limit; i++)); do
		if taskset -c 1 "$PYTHON" "$BENCH/lib/tls_load.py" --port "$port" --path /test.html -n 1 -c 1 \
			--sni "$name" --check-name --timeout 2 >"$dir/name-probe.json" 2>&1; then
			STARTUP_NAME=$(elapsed_since "$t0")
			break
		fi
		sleep 0.05
	done
	[[ -n $STARTUP_NAME ]] || { cat "$dir/name-probe.json" >&2; die "$inst never served $name with its certificate"; }
	STARTUP_RSS=$(rss_kb "$inst")
	# Every server must serve every file with the exact size before we measure.
	local f
	for f in test.html 5k.html 10k.html; do
		got=$(http_probe "https://127.0.0.1:$port/$f")
		[[ $got == "200 ${SIZE[$f]}" ]] || die "sanity check: $inst GET /$f -> '$got', want '200 ${SIZE[$f]}'"
	done
	log "up: $inst (${OPTS[$inst]}) on :$port, ready ${STARTUP_READY}s, serves $name ${STARTUP_NAME}s, RSS $((STARTUP_RSS / 1024)) MB"
}

server_up() { # server_up INSTANCE [key=value ...]: alone, so its start-up time is its own
	server_spawn "$@"
	server_ready "$1"
}

servers_up() { # servers_up [key=value ...]: every target of TARGETS, started side by side
	local t
	for t in "${TARGET_LIST[@]}"; do server_spawn "$t" "$@"; done
	for t in "${TARGET_LIST[@]}"; do server_ready "$t"; done
}

server_down() { # server_down INSTANCE...: stopped together
	local inst
	local -a pids=()
	for inst in "$@"; do
		[[ -n ${PID[$inst]:-} ]] || continue
		pids+=("${PID[$inst]}")
		unset "PID[$inst]" "PORT[$inst]" "ADMIN[$inst]"
	done
	((${#pids[@]} == 0)) || terminate "${pids[@]}"
}

# ------------------------------------------------------------- measurement
# The Gatehouse counters a run records, as deltas, in this order (tls_record.py's gh_* fields).
GH_COUNTERS=(full resumed resumed_ticket resumed_cache fetched redis_cmds redis_errors redis_us)
gh_counters() { # gh_counters INSTANCE -> the GH_COUNTERS values from its admin metrics
	curl -s --noproxy '*' --max-time 2 "http://127.0.0.1:${ADMIN[$1]}/metrics" | awk '
		/^gatehouse_tls_handshakes_total\{/ {
			if ($1 ~ /kind="full"/) f += $2
			else if ($1 ~ /kind="resumed"/) { r += $2; if ($1 ~ /mechanism="ticket"/) t += $2; else c += $2 }
		}
		$1 == "gatehouse_tls_sessions_fetched_total" { fe = $2 }
		$1 == "gatehouse_tls_redis_commands_total" { rc = $2 }
		$1 == "gatehouse_tls_redis_errors_total" { re = $2 }
		$1 == "gatehouse_tls_redis_latency_seconds_total" { us = $2 * 1e6 }
		END { printf "%.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f\n", f, r, t, c, fe, rc, re, us }'
}

gh_deltas() { # gh_deltas PREFIX BEFORE AFTER -> REPLY_KV += PREFIX_counter=delta for GH_COUNTERS
	local -a x y
	local i
	read -r -a x <<<"$2"
	read -r -a y <<<"$3"
	for i in "${!GH_COUNTERS[@]}"; do REPLY_KV+=("$1_${GH_COUNTERS[i]}=$((y[i] - x[i]))"); done
}

CSV=$WORK/tls-runs.csv
SEQ=0
CUR_REP=0

# run_case GROUP CASE VARIANT INSTANCE TOOL CPU|none RATE_WINDOW CMD...
# Runs CMD (the load generator) against INSTANCE and records one CSV row.  RATE_WINDOW=1:
# CMD is h2load -D with --warm-up-time WARMUP, and the CPU window starts after the warm-up.
# With ORIGIN=INSTANCE2 in the environment (cluster group: node A, where the sessions are
# made), that instance's CPU and Gatehouse counters are recorded too (origin_j, a_*); while
# the cluster group's redis-server runs, its CPU too (redis_j).
run_case() {
	local group=$1 case=$2 variant=$3 inst=$4 tool=$5 cpu=$6 rate=$7
	shift 7
	local target=${inst%%_*} pid=${PID[$inst]} origin=${ORIGIN:-} out rc=0 h0='' h1='' o0='' o1='' lg0=0 a0 a1
	local oj0=0 oj1=0 rj0=0 rj1=0
	SEQ=$((SEQ + 1))
	out=$WORK/runs/$(printf '%03d' "$SEQ")-$group-$inst.txt
	sleep "$SETTLE"
	[[ $target == gatehouse ]] && h0=$(gh_counters "$inst")
	[[ $origin == gatehouse* ]] && o0=$(gh_counters "$origin")
	a0=$(backend_accepts) || die "cannot read the backend's stub_status"
	declare -A S0=() S1=()
	[[ -n $origin ]] && { tree_jiffies "${PID[$origin]}" && oj0=$REPLY; }
	[[ -n ${PID[redis]:-} ]] && { tree_jiffies "${PID[redis]}" && rj0=$REPLY; }
	snap S0 "$pid"
	if [[ $cpu == none ]]; then
		timeout -k 5 "$RUN_TIMEOUT" "$@" >"$out" 2>&1 &
	else
		taskset -c "$cpu" timeout -k 5 "$RUN_TIMEOUT" "$@" >"$out" 2>&1 &
	fi
	LOADGEN_PID=$!
	if ((rate)); then
		sleep "$WARMUP"
		a0=$(backend_accepts) || die "cannot read the backend's stub_status"
		snap S0 "$pid"
		tree_jiffies "$LOADGEN_PID"
		lg0=$REPLY # the load generator's warm-up CPU, not yet in this shell's cutime
	fi
	wait "$LOADGEN_PID" || rc=$?
	LOADGEN_PID=
	snap S1 "$pid"
	[[ -n $origin ]] && { tree_jiffies "${PID[$origin]}" && oj1=$REPLY; }
	[[ -n ${PID[redis]:-} ]] && { tree_jiffies "${PID[redis]}" && rj1=$REPLY; }
	kill -0 "$pid" 2>/dev/null || { show_logs "$inst"; die "$inst died during the $tool run"; }
	a1=$(backend_accepts) || die "cannot read the backend's stub_status"
	[[ $target == gatehouse ]] && h1=$(gh_counters "$inst")
	[[ $origin == gatehouse* ]] && o1=$(gh_counters "$origin")
	snap_deltas S0 S1
	[[ -n $h0 && -n $h1 ]] && gh_deltas gh "$h0" "$h1"
	[[ -n $o0 && -n $o1 ]] && gh_deltas a "$o0" "$o1"
	"$PYTHON" "$BENCH/lib/tls_record.py" --csv "$CSV" --tool "$tool" --output "$out" \
		"group=$group" "case=$case" "variant=$variant" "target=$target" "rep=$CUR_REP" "seq=$SEQ" \
		"exit_code=$rc" "clk_tck=$CLK_TCK" "rate_window=$rate" \
		"server_j=$((S1[server] - S0[server]))" "loadgen_j=$((S1[self_children] - S0[self_children] - lg0))" \
		"origin_j=$((oj1 - oj0))" "redis_j=$((rj1 - rj0))" "rss_kb=$(rss_kb "$inst")" \
		"accepts_before=$a0" "accepts_after=$a1" "${REPLY_KV[@]}"
}

# load_case GROUP CASE VARIANT INSTANCE N C [ARGS...]: run_case with tls_load.py, or with
# gatehouse-loadgen when LOAD_CLIENT=loadgen (it takes --tls and --resume alike), pinned to
# CPU 1, sending N connections, C in flight, to INSTANCE's port for /test.html.
load_case() {
	local inst=$4 n=$5 c=$6
	if [[ ${LOAD_CLIENT:-tls_load} == loadgen ]]; then
		run_case "$1" "$2" "$3" "$inst" loadgen 1 0 \
			"$LOADGEN_BIN" --port "${PORT[$inst]}" --path /test.html -n "$n" -c "$c" "${@:7}"
	else
		run_case "$1" "$2" "$3" "$inst" tls_load 1 0 \
			"$PYTHON" "$BENCH/lib/tls_load.py" --port "${PORT[$inst]}" --path /test.html -n "$n" -c "$c" "${@:7}"
	fi
}

record_startup() { # record_startup INSTANCE VARIANT READY NAME RSS_IDLE
	local target=${1%%_*}
	"$PYTHON" "$BENCH/lib/tls_record.py" --csv "$CSV" --tool startup "group=store" "variant=$2" \
		"target=$target" "rep=$CUR_REP" "ready_s=$3" "name_s=$4" "rss_idle_kb=$5" "rss_kb=$(rss_kb "$1")"
}

# ------------------------------------------------------------------- groups
NOTES=$WORK/notes.md
: >"$NOTES"

group_handshake() {
	local cert label kind v t cipher
	for cert in ecdsa rsa; do
		label=$([[ $cert == ecdsa ]] && echo "ECDSA P-256" || echo "RSA-2048")
		kind=$([[ $cert == ecdsa ]] && echo ECDSA || echo RSA)
		servers_up cert=$cert
		for ((CUR_REP = 1; CUR_REP <= HS_REPS; CUR_REP++)); do
			rotated $((CUR_REP - 1)) "${TARGET_LIST[@]}"
			log "handshake $label rep $CUR_REP/$HS_REPS: order ${REPLY_TARGETS[*]}"
			for v in 1.2 1.3; do
				cipher=()
				[[ $v == 1.2 ]] && cipher=(-Z "ECDHE-$kind-AES128-GCM-SHA256")
				for t in "${REPLY_TARGETS[@]}"; do
					if [[ $HS_CLIENT == loadgen ]]; then
						# It offers the same suites as ab -Z here (ECDHE AES-128-GCM for TLS 1.2).
						LOAD_CLIENT=loadgen load_case handshake "$label · TLS $v" "$cert" "$t" "$HS_N" "$HS_CONNS" --tls "$v"
					else
						run_case handshake "$label · TLS $v" "$cert" "$t" ab 1 0 \
							ab -n "$HS_N" -c "$HS_CONNS" -f "TLS$v" "${cipher[@]}" "https://127.0.0.1:${PORT[$t]}/test.html"
					fi
				done
			done
		done
		server_down "${TARGET_LIST[@]}"
	done
}

group_resume() {
	# Modes are compared with each other, so every rep restarts the servers once per mode,
	# in an order rotated per rep: slow drifts of the machine hit every mode alike.
	local mode label v t LOAD_CLIENT=$RES_CLIENT # load_case's client
	local -a opts modes
	for ((CUR_REP = 1; CUR_REP <= REPS; CUR_REP++)); do
		rotated $((CUR_REP - 1)) both cache none
		modes=("${REPLY_TARGETS[@]}")
		for mode in "${modes[@]}"; do
			case $mode in
			both) opts=(tickets=1 cache=1) label="tickets + session cache" ;;
			cache) opts=(tickets=0 cache=1) label="session cache only (tickets off)" ;;
			none) opts=(tickets=0 cache=0) label="neither (tickets off, cache off)" ;;
			esac
			servers_up "${opts[@]}"
			rotated $((CUR_REP - 1)) "${TARGET_LIST[@]}"
			log "resume '$label' rep $CUR_REP/$REPS: order ${REPLY_TARGETS[*]}"
			for v in 1.2 1.3; do
				for t in "${REPLY_TARGETS[@]}"; do
					if [[ $mode == both ]]; then
						load_case resume "TLS $v" "full: client offers no session" "$t" "$RES_N" "$RES_CONNS" --tls "$v"
					fi
					load_case resume "TLS $v" "$label" "$t" "$RES_N" "$RES_CONNS" --tls "$v" --resume
				done
			done
			server_down "${TARGET_LIST[@]}"
		done
		# RSA-2048, TLS 1.2: a full handshake signs with RSA and a resumed one skips the key
		# exchange too, the case the classic session-store reports measured. Four times the
		# connections, so the RES_CONNS first ones (full: no session yet) weigh 4x less.
		servers_up cert=rsa tickets=1 cache=1
		rotated $((CUR_REP - 1)) "${TARGET_LIST[@]}"
		log "resume RSA-2048 TLS 1.2 rep $CUR_REP/$REPS: order ${REPLY_TARGETS[*]}"
		for t in "${REPLY_TARGETS[@]}"; do
			load_case resume "TLS 1.2 · RSA-2048" "full: client offers no session" "$t" $((4 * RES_N)) "$RES_CONNS" --tls 1.2
			load_case resume "TLS 1.2 · RSA-2048" "tickets + session cache" "$t" $((4 * RES_N)) "$RES_CONNS" --tls 1.2 --resume
		done
		server_down "${TARGET_LIST[@]}"
	done
}

group_store() {
	local t one="1 certificate, one name" many="$STORE_COUNT in store, random SNI"
	local -a store_targets=() up_store=()
	local hap_store=0 seed LOAD_CLIENT=$STORE_CLIENT # load_case's client
	for t in "${TARGET_LIST[@]}"; do
		if [[ $t == haproxy ]] && ((!STORE_HAPROXY)); then
			echo "- Store group: HAProxy not run with $STORE_COUNT certificates (STORE_HAPROXY=0; it loads every certificate at start, 30-45 s here)." >>"$NOTES"
			continue
		fi
		store_targets+=("$t")
	done
	for ((CUR_REP = 1; CUR_REP <= REPS; CUR_REP++)); do
		seed=$CUR_REP
		for t in "${TARGET_LIST[@]}"; do
			server_up "$t"
			record_startup "$t" "1" "$STARTUP_READY" "$STARTUP_NAME" "$STARTUP_RSS"
		done
		rotated $((CUR_REP - 1)) "${TARGET_LIST[@]}"
		log "store: one certificate rep $CUR_REP/$REPS: order ${REPLY_TARGETS[*]}"
		for t in "${REPLY_TARGETS[@]}"; do
			load_case store "" "$one" "$t" "$STORE_N" "$STORE_CONNS" --sni bench.test --check-name --seed "$seed"
			((STORE_LAT_N)) && load_case store "" "$one, one at a time" "$t" "$STORE_LAT_N" 1 --sni bench.test --check-name --seed "$seed"
		done
		server_down "${TARGET_LIST[@]}"

		up_store=()
		for t in "${store_targets[@]}"; do
			if [[ $t == haproxy ]]; then
				# Started once: loading the whole store takes most of a minute.
				if ((!hap_store)); then
					log "store: starting HAProxy with $STORE_COUNT certificates (slow)"
					server_up haproxy_store store=1
					record_startup haproxy_store "$STORE_COUNT" "$STARTUP_READY" "$STARTUP_NAME" "$STARTUP_RSS"
					hap_store=1
				fi
				up_store+=(haproxy_store)
			else
				server_up "${t}_store" store=1
				eval "ST_${t}=(\"\$STARTUP_READY\" \"\$STARTUP_NAME\" \"\$STARTUP_RSS\")"
				up_store+=("${t}_store")
			fi
		done
		rotated $((CUR_REP - 1)) "${up_store[@]}"
		log "store: $STORE_COUNT certificates rep $CUR_REP/$REPS: order ${REPLY_TARGETS[*]}"
		local -a random_sni=(--sni-pattern 'n{}.bench.test' --sni-count "$STORE_COUNT" --check-name --seed "$seed")
		for t in "${REPLY_TARGETS[@]}"; do
			load_case store "" "$many, first use" "$t" "$STORE_N" "$STORE_CONNS" "${random_sni[@]}"
		done
		for t in "${REPLY_TARGETS[@]}"; do
			# nginx has no certificate cache (1.22 reads the file on every handshake): skipped.
			# The same seed: the same names, now loaded.
			[[ $t == nginx_store ]] && continue
			load_case store "" "$many, same names again" "$t" "$STORE_N" "$STORE_CONNS" "${random_sni[@]}"
			# The first STORE_LAT_N of the same names (STORE_LAT_N <= STORE_N), one at a time.
			((STORE_LAT_N)) && load_case store "" "$many, same names again, one at a time" "$t" "$STORE_LAT_N" 1 "${random_sni[@]}"
		done
		for t in "${up_store[@]}"; do
			[[ $t == haproxy_store ]] && continue
			local -n st="ST_${t%%_*}"
			record_startup "$t" "$STORE_COUNT" "${st[0]}" "${st[1]}" "${st[2]}"
			unset -n st
			server_down "$t"
		done
	done
	server_down haproxy_store
	echo "- Store group: nginx 1.22 has no certificate cache for \`ssl_certificate \$ssl_server_name\` (it reads and parses the file on every handshake), so its 'same names again' run is skipped; HAProxy holds every certificate from start, so its two runs differ only by noise." >>"$NOTES"
}

group_h2() {
	local t f proto
	servers_up
	for ((CUR_REP = 1; CUR_REP <= REPS; CUR_REP++)); do
		rotated $((CUR_REP - 1)) "${TARGET_LIST[@]}"
		log "h2 rep $CUR_REP/$REPS: order ${REPLY_TARGETS[*]}"
		for f in "${H2_FILE_LIST[@]}"; do
			for proto in h1 h2; do
				for t in "${REPLY_TARGETS[@]}"; do
					if [[ $proto == h2 ]]; then
						run_case h2 "$f" "HTTP/2 (-c $H2_CONNS -m $H2_STREAMS)" "$t" h2load 1 1 \
							h2load -c "$H2_CONNS" -m "$H2_STREAMS" -D "$DURATION" --warm-up-time "$WARMUP_MS" \
							"https://127.0.0.1:${PORT[$t]}/$f"
					else
						run_case h2 "$f" "HTTP/1.1 (--h1 -c $H2_CONNS)" "$t" h2load 1 1 \
							h2load --h1 -c "$H2_CONNS" -D "$DURATION" --warm-up-time "$WARMUP_MS" \
							"https://127.0.0.1:${PORT[$t]}/$f"
					fi
				done
			done
		done
	done
	server_down "${TARGET_LIST[@]}"
}

group_reuseport() {
	# on and off alternate within every rep (order rotated per rep), like the resume modes.
	local reuse t
	local -a modes
	for ((CUR_REP = 1; CUR_REP <= REPS; CUR_REP++)); do
		rotated $((CUR_REP - 1)) 1 0
		modes=("${REPLY_TARGETS[@]}")
		for reuse in "${modes[@]}"; do
			servers_up workers=2 reuse="$reuse" cpu=none
			rotated $((CUR_REP - 1)) "${TARGET_LIST[@]}"
			log "reuseport $reuse rep $CUR_REP/$REPS: order ${REPLY_TARGETS[*]}"
			for t in "${REPLY_TARGETS[@]}"; do
				run_case reuseport "" "$( ((reuse)) && echo "on" || echo "off (one shared socket)")" "$t" h2load none 1 \
					h2load --h1 -c "$RP_CONNS" -D "$DURATION" --warm-up-time "$WARMUP_MS" \
					"https://127.0.0.1:${PORT[$t]}/test.html"
			done
			server_down "${TARGET_LIST[@]}"
		done
	done
}

# Two nodes of one server, both on CPU 0: a session made on node A is offered to node B
# (--origin-port of the client: each measured connection to B offers the session that a
# connection to A made just before in its slot, so a single-use TLS 1.3 ticket is never
# offered twice).  The Gatehouse nodes share one redis-server on CPU 1 (with the load generator
# and the backend), emptied before each mode.  Modes, order rotated per rep:
#   off      Gatehouse tickets off, session_cache local (nothing shared: B cannot resume);
#            nginx tickets off, ssl_session_cache shared:SSL:10m on each node (the same).
#   store    Gatehouse tickets off, session_cache redis (B fetches the session id / stateful
#            TLS 1.3 ticket from Redis).  nginx has no cross-node session store: not run.
#   tickets  Gatehouse tickets cluster, session_cache redis (ticket keys from Redis);
#            nginx ssl_session_ticket_key, one key file for both nodes, + its local cache.
group_cluster() {
	local mode v t i
	local -a modes gh ng nodes
	free_ports 1
	P_REDIS=${REPLY_PORTS[0]}
	head -c 48 /dev/urandom | base64 >"$WORK/cluster.key"
	openssl rand 80 >"$WORK/nginx-ticket.key"
	chmod 600 "$WORK/cluster.key" "$WORK/nginx-ticket.key"
	start_redis redis 1 "$P_REDIS"
	for ((CUR_REP = 1; CUR_REP <= REPS; CUR_REP++)); do
		rotated $((CUR_REP - 1)) off store tickets
		modes=("${REPLY_TARGETS[@]}")
		for mode in "${modes[@]}"; do
			case $mode in
			off) gh=(tickets=0 cache=1) ng=(tickets=0 cache=1) ;;
			store) gh=(tickets=0 cache=redis "redis=$P_REDIS") ng=() ;;
			tickets) gh=(tickets=cluster cache=redis "redis=$P_REDIS") ng=(tickets=cluster cache=1) ;;
			esac
			redis-cli -p "$P_REDIS" flushall >/dev/null || die "redis-cli flushall failed"
			nodes=()
			if want gatehouse; then
				server_spawn gatehouse_a "${gh[@]}"
				server_spawn gatehouse_b "${gh[@]}"
				nodes+=(gatehouse)
			fi
			if want nginx && ((${#ng[@]})); then
				server_spawn nginx_a "${ng[@]}"
				server_spawn nginx_b "${ng[@]}"
				nodes+=(nginx)
			fi
			((${#nodes[@]})) || continue
			for t in "${nodes[@]}"; do
				server_ready "${t}_a"
				server_ready "${t}_b"
			done
			rotated $((CUR_REP - 1)) "${nodes[@]}"
			log "cluster '$mode' rep $CUR_REP/$REPS: order ${REPLY_TARGETS[*]}"
			for v in 1.2 1.3; do
				for t in "${REPLY_TARGETS[@]}"; do
					LOAD_CLIENT=$CLUSTER_CLIENT ORIGIN=${t}_a load_case cluster "TLS $v" "${CLUSTER_MODE[$mode]}" "${t}_b" "$CLUSTER_N" "$CLUSTER_CONNS" \
						--tls "$v" --origin-port "${PORT[${t}_a]}"
				done
			done
			for t in "${nodes[@]}"; do server_down "${t}_a" "${t}_b"; done
		done
	done
	server_down redis
	{
		echo "- Cluster group: two nodes of a server on CPU 0; redis-server (emptied before each mode) on CPU 1 with the backend and the load generator. Each measured connection to node B offers the session that a connection to node A made just before in the same slot (the A connection offers none, so it is a full handshake), $CLUSTER_CONNS pairs in flight: the rate is B connections per second of the whole run (every B connection costs the client an A connection too), and resumption, handshake time and CPU per connection are B's; A's handshake time and CPU are shown beside."
		echo "- Cluster configurations: (a) Gatehouse \`tickets: off\`, \`session_cache: local\` on each node; nginx \`ssl_session_tickets off\`, \`ssl_session_cache shared:SSL:10m\` on each node (its cache is per node: nginx has no cross-node session store). (b) Gatehouse \`tickets: off\`, \`session_cache: redis\` (no nginx equivalent: not run). (c) Gatehouse \`tickets: cluster\`, \`session_cache: redis\`; nginx \`ssl_session_ticket_key\` with one 80-byte key file for both nodes, plus its local cache: the nginx way to resume across nodes."
	} >>"$NOTES"
	want haproxy && echo "- Cluster group: HAProxy not run (two HAProxy nodes could share ticket keys with \`tls-ticket-keys\`; not set up here)." >>"$NOTES"
	return 0
}
declare -A CLUSTER_MODE=(
	[off]="(a) store off"
	[store]="(b) Redis session store"
	[tickets]="(c) cluster tickets"
)

# ------------------------------------------------------------------- run
START_DATE=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
START_T=$EPOCHREALTIME
for g in "${ROW_LIST[@]}"; do
	log "group $g"
	"group_$g"
done

# ---------------------------------------------------------------- reporting
results_csv "$CSV" "${RESULTS_CSV##*/}"

versions=("$(nginx -v 2>&1 | sed 's/^nginx version: //')")
want haproxy && versions+=("$(haproxy -v 2>/dev/null | sed -n '1 { s/ - https.*//; s/ *$//; p }')")
versions+=("$(openssl version | awk '{ print $1, $2 }') (nginx, HAProxy, clients)")
if want_group handshake && [[ $HS_CLIENT == ab ]]; then
	versions+=("$(ab -V 2>&1 | sed -n '1 { s/^This is //; s/, Version/ Version/; s/ <.*//; p }')")
fi
[[ -n ${LOADGEN_BIN:-} ]] && versions+=("$("$LOADGEN_BIN" --version) (rustls, aws-lc-rs)")
{ want_group h2 || want_group reuseport; } && versions+=("$(h2load --version 2>&1 | sed -n 1p)")
want_group cluster && versions+=("Redis $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p')")
versions+=("Python $("$PYTHON" -c 'import platform; print(platform.python_version())') (tls_load.py)")
[[ -n $GATEHOUSE_VERSION ]] &&
	versions+=("gatehouse: ${GATEHOUSE_VERSION% } (rustls, aws-lc-rs; binary built $(date -u -r "$GATEHOUSE_BIN" '+%Y-%m-%d %H:%M UTC'))")
git_rev=$(git_source crates/ Cargo.toml Cargo.lock)
if [[ -n $GATEHOUSE_VERSION ]]; then
	# Built from these sources when no source file is newer than the binary (cargo's own test);
	# a commit made after the build does not matter if it changed no file since.
	stale=$(find crates Cargo.toml Cargo.lock -type f -newer "$GATEHOUSE_BIN" -print -quit 2>/dev/null)
	[[ -z $stale ]] || git_rev+=" (the gatehouse binary is older than $stale: it may not contain the sources)"
fi
{
	echo "- Date: $START_DATE (took $(awk -v a="$START_T" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }') s)$( ((q)) && echo "; **QUICK=1 smoke run: one rep, tiny counts, not for conclusions**")"
	echo "- Machine: $(nproc) CPUs, $(cpu_model), Linux $(uname -r); clock tick $CLK_TCK Hz"
	printf -v vline '%s; ' "${versions[@]}"
	echo "- Versions: ${vline%; }"
	echo "- Source: git $git_rev"
	echo "- Settings: ROWS=\"${ROW_LIST[*]}\" TARGETS=\"${TARGET_LIST[*]}\" REPS=$REPS HS_REPS=$HS_REPS HS_CLIENT=$HS_CLIENT HS_N=$HS_N HS_CONNS=$HS_CONNS RES_CLIENT=$RES_CLIENT RES_N=$RES_N RES_CONNS=$RES_CONNS CLUSTER_CLIENT=$CLUSTER_CLIENT CLUSTER_N=$CLUSTER_N CLUSTER_CONNS=$CLUSTER_CONNS STORE_CLIENT=$STORE_CLIENT STORE_N=$STORE_N STORE_CONNS=$STORE_CONNS STORE_LAT_N=$STORE_LAT_N STORE_COUNT=$STORE_COUNT STORE_HAPROXY=$STORE_HAPROXY DURATION=${DURATION}s WARMUP=${WARMUP}s H2_CONNS=$H2_CONNS H2_STREAMS=$H2_STREAMS RP_CONNS=$RP_CONNS"
	echo "- Layout: server under test alone on CPU 0 with one worker/thread (Gatehouse workers: 1, nginx worker_processes 1, HAProxy nbthread 1), terminating TLS and proxying over HTTP/1.1 keep-alive to a backend nginx serving static files; backend and load generator on CPU 1. Group 5 only: 2 workers, servers and h2load unpinned. Group 6: two nodes of a server both on CPU 0, redis-server on CPU 1. Target order rotated by one each rep."
	echo "- Servers as deployed: Gatehouse tickets + session cache local; nginx ssl_session_cache shared:SSL:10m + tickets; HAProxy defaults (tickets, tune.ssl.cachesize 20000); all offer h2 and http/1.1 by ALPN. Certificates: one CA each (P-256, RSA-2048), bundles leaf + CA + key."
	rig_constant SAME_HEADERS_NOTE
	echo "- Columns: server CPU % = CPU time of the server's process tree (the scheduler's per-thread clock, /proc/*/task/*/schedstat; utime+stime ticks for a run in which one of its threads ended) / wall time (100 % = one core). Per server CPU-s = completed handshakes, connections or requests / server CPU-seconds (h2load rows: req/s over the measured phase / CPU share in it). Others' CPU % = /proc/stat busy time not used by server, backend or load generator; \"steal N % ⚠\" = the median hypervisor steal of the row's runs was above 5 % of a core (the VM lost CPU time: rates there are unreliable, per server CPU-s less affected). The load generator has one core (CPU 1, shared with the backend). gatehouse-loadgen (the client of groups 1, 2, 3 and 6 by default) spends less per handshake than a server, so the server under test runs near saturation there; where its CPU % stays well below 100 (a cheap server, resumed handshakes, two nodes sharing CPU 0) and with tls_load.py (Python, OpenSSL), the rates are bounded by the client and an idle server's wake-ups weigh in its CPU per connection: compare per server CPU-s, and at like CPU %. Raw per-run numbers: bench/results/${RESULTS_CSV##*/}."
} >"$WORK/meta.md"

update_args
echo
"$PYTHON" "$BENCH/lib/tls_summarize.py" "$CSV" --heading "$HEADING" --meta "$WORK/meta.md" --notes "$NOTES" "${REPLY_UPDATE[@]}"
echo
log "per-run CSV: $RESULTS_CSV${REPLY_UPDATE:+; updated $BENCHMARKS_MD}"
