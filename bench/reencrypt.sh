#!/usr/bin/env bash
# bench/reencrypt.sh - re-encryption benchmark: Gatehouse vs nginx vs HAProxy terminating TLS and
# speaking TLS again to the backend, and what a named upstream (DNS) costs Gatehouse.
#
# Question answered:
#   How many requests per proxy CPU-second does Gatehouse forward when it re-encrypts (TLS from
#   the client to the proxy, TLS from the proxy to the backend) compared with nginx and HAProxy,
#   pinned to one core, same run: with the upstream connections pooled, and with a new (resumed)
#   upstream connection per request?  And what does an upstream target given by DNS name cost
#   against the same backend given as an IP literal?
#   Goals (req per proxy CPU-second): pooled >= 1.1x nginx and HAProxy; new-conn >= 1.8x;
#   dns: the name within 2 % of the IP literal.
#
# Set-up (all on 127.0.0.1, free ports picked at start, everything in a mktemp -d work dir that
# is removed on exit):
#   A test CA and one ECDSA P-256 certificate (backend.test, proxy.test, 127.0.0.1) it signed are
#   made with openssl in the work dir; the backend and the proxies' listeners serve it.
#   CPU 0: backend nginx (1 worker; test.html = 75 B; plain HTTP with stub_status, and TLS 1.2/1.3
#          on a port of its own with ssl_session_cache shared and tickets on), dnsmasq (dns row)
#          and the load generator, wrk -t1 -c CONNS over HTTPS keep-alive (dns row: plain HTTP).
#   CPU 1: the proxies, side by side, one loaded at a time, each with one worker/thread and
#          TLS 1.2/1.3 on its listener: Gatehouse (workers: 1), nginx (worker_processes 1),
#          HAProxy (nbthread 1); same forwarding headers as bench/proxy.sh.
#   Every proxy verifies the backend's certificate against the test CA for the name
#   backend.test, sent as SNI, and offers TLS 1.2 and 1.3 upstream.
# Rows (ROWS):
#   pooled    client -> proxy TLS keep-alive; proxy -> backend TLS keep-alive, pooled.
#             Gatehouse `tls: {ca, server_name: backend.test}`, `keepalive: {max_idle: 256}`;
#             nginx `proxy_pass https://`, upstream `keepalive 256`, proxy_ssl_verify on,
#             proxy_ssl_trusted_certificate, proxy_ssl_name backend.test, proxy_ssl_server_name
#             on, proxy_ssl_session_reuse on, proxy_ssl_protocols TLSv1.2 TLSv1.3 (1.22's
#             default lacks 1.3); HAProxy `server ... ssl verify required ca-file CA
#             sni str(backend.test) verifyhost backend.test`, `http-reuse always`.
#   new-conn  the same, but a new upstream connection per request, resumed from the proxy's
#             session cache: Gatehouse `keepalive: {max_idle: 0}`; nginx without upstream
#             keepalive (session reuse on); HAProxy `http-reuse never` and `option
#             http-server-close` (http-reuse never alone keeps each client connection's server
#             connection; session reuse is on by default).  No pool priming.
#   dns       Gatehouse only, plain HTTP on both sides (bench/proxy.sh's set-up): target
#             127.0.0.1:PORT ("IP literal") vs backend.test:PORT ("name"), answered by dnsmasq
#             with a TTL of DNS_TTL s (resolver: nameservers, min_ttl 1s: the name is asked again
#             every DNS_TTL s on Gatehouse's control thread, whose CPU is counted).  Both
#             instances carry the same resolver section.  DNS_REPS reps (at least 5 for a figure).
# Order: each target gets an unrecorded wrk warm-up (WARMUP s) first, so pools and session caches
# are warm.  Then, for rep 1..max(REPS, DNS_REPS), for each row that still needs reps, every
# target of the row runs once, the order rotated by one per rep (as bench/proxy.sh).
#
# Measured per run (raw numbers in a CSV, bench/lib/record_run.py): req/s, p99 (wrk --latency),
# proxy CPU % (CPU time of the proxy's process tree from /proc/*/task/*/schedstat, % of one core),
# req per proxy CPU-second (completed requests / proxy CPU-seconds), new backend connections per
# 100k requests (backend stub_status accepts), others' CPU % (busy time outside proxy, backend and
# load generator); and upstream TLS handshakes: the backend logs the first request of each TLS
# connection with $ssl_session_reused, so each run records the handshakes the proxy made and how
# many resumed; for Gatehouse also gatehouse_upstream_tls_handshakes_total{kind} (admin /metrics).
# The table gives the median and the min-max spread over the reps.
#
# Output: Markdown section on stdout, also written to BENCHMARKS.md (the section "## Re-encryption
# and named upstreams (bench/reencrypt.sh)" is replaced, or appended if absent; not with QUICK=1);
# per-run CSV copied to bench/results/reencrypt-latest.csv (QUICK=1: reencrypt-quick.csv).
#
# Run (from anywhere; needs nginx, haproxy, wrk, ab, curl, openssl, python3, taskset, dnsmasq for
# the dns row, and 2 CPUs):
#   bench/reencrypt.sh                                        # builds gatehouse (release)
#   GATEHOUSE_BIN=target/release/gatehouse bench/reencrypt.sh # about 4 minutes
#   QUICK=1 GATEHOUSE_BIN=target/release/gatehouse bench/reencrypt.sh   # smoke run, ~40 s
#   ROWS=dns DNS_REPS=9 bench/reencrypt.sh
#
# Environment knobs (defaults in brackets; QUICK=1 defaults after the slash):
#   GATEHOUSE_BIN   binary to test; unset = `cargo build --release -p gatehouse`
#   QUICK [0]       1 = smoke run: short runs, one rep (dns: two), BENCHMARKS.md untouched
#   ROWS [pooled new-conn dns]         rows to run
#   TARGETS [gatehouse nginx haproxy]  proxies of the pooled and new-conn rows
#   DURATION [5/1]  seconds per wrk run
#   REPS [3/1]      reps of the pooled and new-conn rows
#   DNS_REPS [6/2]  reps of the dns row
#   CONNS [100]     wrk -c
#   WARMUP [2/1]    seconds of unrecorded wrk warm-up per target; 0 = none
#   PRIME [1]       1 = before each measured pooled or dns run, refill the proxy's upstream pool
#                   with a short clean ab -k burst (CONNS x 10 requests), as bench/proxy.sh; 0 = off
#   SETTLE [1/0.2]  seconds of sleep before each measured run
#   QUIET_WAIT [30/0]  then wait up to this many seconds for processes outside the bench and
#                   hypervisor steal to drop below QUIET_PCT % of a core (a build on a shared
#                   machine); the others' CPU column shows what was left
#   QUIET_PCT [20]
#   RETRIES [2/0]   a run during which processes outside the bench used more than QUIET_PCT % of
#                   a core is measured again, at most this many times (the report counts them)
#   DNS_TTL [1]     TTL of dnsmasq's answer for backend.test, seconds
#   SUITES [same]   same = nginx and HAProxy offer (upstream) and prefer (listener) the TLS 1.3
#                   suites in Gatehouse's order, AES-128-GCM-SHA256 first, so every proxy does the
#                   same cryptography (`proxy_ssl_conf_command` / `ssl_conf_command Ciphersuites`
#                   and `ssl_prefer_server_ciphers`; HAProxy `ssl-default-server-ciphersuites`,
#                   `ssl-default-bind-ciphersuites`); openssl = their OpenSSL defaults (AES-256-GCM
#                   with SHA-384 first)
#   HAPROXY_MAXCONN [4096]
#   BENCHMARKS_MD [<repo>/BENCHMARKS.md/none]   file to update; "none" = don't
#   KEEP_WORKDIR [0]         1 = keep the temp dir (configs, logs, raw outputs)

set -Eeuo pipefail

# ORIG_PWD = where it was started; then in the repository: ROOT, BENCH = ROOT/bench.
# shellcheck source=SCRIPTDIR/lib/common.sh
. "$(dirname "$0")/lib/common.sh"

ROWS=${ROWS:-pooled new-conn dns}
TARGETS=${TARGETS:-gatehouse nginx haproxy}
DURATION=${DURATION:-$(pick 5 1)}
REPS=${REPS:-$(pick 3 1)}
DNS_REPS=${DNS_REPS:-$(pick 6 2)}
CONNS=${CONNS:-100}
WARMUP=${WARMUP:-$(pick 2 1)}
PRIME=${PRIME:-1}
SETTLE=${SETTLE:-$(pick 1 0.2)}
QUIET_WAIT=${QUIET_WAIT:-$(pick 30 0)}
QUIET_PCT=${QUIET_PCT:-20}
RETRIES=${RETRIES:-$(pick 2 0)}
DNS_TTL=${DNS_TTL:-1}
HAPROXY_MAXCONN=${HAPROXY_MAXCONN:-4096}
SUITES=${SUITES:-same}
# Gatehouse's TLS 1.3 order, upstream and on its listeners (crates/upstream/src/tls.rs).
TLS13_ORDER=TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256
# A smoke run's numbers are not for the record.
BENCHMARKS_MD=${BENCHMARKS_MD:-$(pick "$ROOT/BENCHMARKS.md" none)}
RESULTS_NAME=$(pick reencrypt-latest.csv reencrypt-quick.csv)
KEEP_WORKDIR=${KEEP_WORKDIR:-0}
HEADING='## Re-encryption and named upstreams (bench/reencrypt.sh)'
BACKEND_NAME=backend.test

log() { printf '[reencrypt.sh %3ss] %s\n' "$SECONDS" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# ---------------------------------------------------------------- validation
check_integers DURATION REPS DNS_REPS CONNS WARMUP PRIME DNS_TTL QUIET_WAIT QUIET_PCT RETRIES HAPROXY_MAXCONN
[[ $SETTLE =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "SETTLE must be a number of seconds (got '$SETTLE')"
((DURATION >= 1 && REPS >= 1 && DNS_REPS >= 1 && CONNS >= 1 && DNS_TTL >= 1)) ||
	die "DURATION, REPS, DNS_REPS, CONNS and DNS_TTL must be at least 1"
[[ $SUITES == same || $SUITES == openssl ]] || die "SUITES must be same or openssl (got '$SUITES')"
read -r -a ROW_LIST <<<"$ROWS"
read -r -a TARGET_LIST <<<"$TARGETS"
((${#ROW_LIST[@]})) || die "ROWS must not be empty"
for r in "${ROW_LIST[@]}"; do
	case $r in pooled | new-conn | dns) ;; *) die "unknown row '$r' in ROWS (pooled new-conn dns)" ;; esac
done
for t in "${TARGET_LIST[@]}"; do
	case $t in gatehouse | nginx | haproxy) ;; *) die "unknown target '$t' in TARGETS (gatehouse nginx haproxy)" ;; esac
done
want_row() { [[ " ${ROW_LIST[*]} " == *" $1 "* ]]; }
TLS_ROWS=0
{ want_row pooled || want_row new-conn; } && TLS_ROWS=1
((TLS_ROWS == 0 || ${#TARGET_LIST[@]})) || die "TARGETS must not be empty"

need=(nginx wrk curl openssl python3 taskset getconf timeout)
((PRIME)) && need+=(ab)
((TLS_ROWS)) && want haproxy && need+=(haproxy)
need_commands "${need[@]}"
DNSMASQ=$(command -v dnsmasq || echo /usr/sbin/dnsmasq)
want_row dns && { [[ -x $DNSMASQ ]] || die "dnsmasq not found (Debian: apt-get install dnsmasq-base)"; }
(($(nproc) >= 2)) || die "needs at least 2 CPUs (CPU 0: backend + load generator, CPU 1: proxy)"
taskset -c 1 true 2>/dev/null || die "cannot pin to CPU 1 (taskset -c 1 failed)"

CLK_TCK=$(getconf CLK_TCK)

# ------------------------------------------------------------ gatehouse binary
GATEHOUSE_VERSION=
gatehouse_binary

# --------------------------------------------------- work dir, process cleanup
make_workdir gatehouse-reencrypt-bench
raise_nofile
mkdir -p "$WORK"/{www,pki,runs}
write_www "$WORK/www"

# ------------------------------------------------------------ certificates
# A test CA and one leaf it signed, for the backend's name, the proxies' and the loopback address.
CA=$WORK/pki/ca.pem
BUNDLE=$WORK/pki/bundle.pem # leaf, then its key: every server here reads both from one file
make_pki() {
	local d=$WORK/pki ec=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)
	openssl req -x509 "${ec[@]}" -keyout "$d/ca.key" -out "$CA" -days 30 \
		-subj "/CN=Gatehouse bench CA" -addext basicConstraints=critical,CA:TRUE \
		-addext keyUsage=critical,keyCertSign,cRLSign 2>"$d/openssl.log" &&
		openssl req -x509 "${ec[@]}" -keyout "$d/leaf.key" -out "$d/leaf.pem" -days 30 \
			-CA "$CA" -CAkey "$d/ca.key" -subj "/CN=$BACKEND_NAME" \
			-addext "subjectAltName=DNS:$BACKEND_NAME,DNS:proxy.test,IP:127.0.0.1" \
			-addext basicConstraints=CA:FALSE -addext extendedKeyUsage=serverAuth 2>>"$d/openssl.log" ||
		{ cat "$d/openssl.log" >&2; die "openssl could not make the test CA and certificate"; }
	cat "$d/leaf.pem" "$d/leaf.key" >"$BUNDLE"
}
make_pki

# ------------------------------------------------------------------ backend
# TLS on a port of its own; the first request of each TLS connection is logged with whether its
# handshake resumed a session ("r") or not ("."), so each run counts the proxy's handshakes.
free_ports 1
P_TLS=${REPLY_PORTS[0]}
HS_LOG=$WORK/backend/tls-handshakes.log
start_backend 0 "    map \$connection_requests \$first_request { 1 1; default 0; }
    log_format handshake '\$ssl_session_reused \$ssl_protocol \$ssl_cipher';
    server {
        listen 127.0.0.1:$P_TLS ssl backlog=4096;
        ssl_certificate $BUNDLE; ssl_certificate_key $BUNDLE;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_session_cache shared:SSL:10m;
        ssl_session_timeout 5m;
        ssl_session_tickets on;
        access_log $HS_LOG handshake if=\$first_request;
        root $WORK/www;
        location / { }
    }"
wait_http backend "https://127.0.0.1:$P_TLS/test.html" "${SIZE[test.html]}" "$WORK/backend/error.log"

backend_handshakes() { # -> "ALL RESUMED": TLS connections the backend has seen so far
	awk '{ n++; if ($1 == "r") r++ } END { printf "%d %d\n", n, r }' "$HS_LOG" 2>/dev/null || echo "0 0"
}

# ---------------------------------------------------------------------- DNS
P_DNS=
if want_row dns; then
	free_ports 1
	P_DNS=${REPLY_PORTS[0]}
	mkdir -p "$WORK/dns"
	echo "127.0.0.1 $BACKEND_NAME" >"$WORK/dns/hosts"
	dns_args=(--keep-in-foreground --conf-file=/dev/null --no-resolv --no-hosts --bind-interfaces
		--listen-address=127.0.0.1 "--port=$P_DNS" "--addn-hosts=$WORK/dns/hosts" "--local-ttl=$DNS_TTL"
		"--pid-file=$WORK/dns/dnsmasq.pid" "--log-facility=$WORK/dns/dnsmasq.log")
	((EUID == 0)) && dns_args+=(--user=root)
	start_proc dns 0 "$DNSMASQ" "${dns_args[@]}"
	for ((i = 0; i < 50; i++)); do # it listens on TCP as well as UDP
		kill -0 "${PID[dns]}" 2>/dev/null || { show_logs dns; die "dnsmasq exited during start-up"; }
		(exec 3<>"/dev/tcp/127.0.0.1/$P_DNS") 2>/dev/null && break
		sleep 0.1
	done
fi

# ------------------------------------------------------------------ proxies
# Instances are ROW-TARGET (pooled-nginx, new-conn-gatehouse) and dns-ip, dns-name.
declare -A URL=() ADMIN=() ERRLOG=()
NGINX_UPSTREAM_TLS="            proxy_ssl_protocols TLSv1.2 TLSv1.3;
            proxy_ssl_verify on;
            proxy_ssl_trusted_certificate $CA;
            proxy_ssl_name $BACKEND_NAME;
            proxy_ssl_server_name on;
            proxy_ssl_session_reuse on;"
NGINX_FRONT_TLS="        ssl_certificate $BUNDLE; ssl_certificate_key $BUNDLE;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_session_cache shared:SSL:10m;
        ssl_session_tickets on;"
HAPROXY_GLOBAL_TLS=
if [[ $SUITES == same ]]; then
	NGINX_UPSTREAM_TLS+=$'\n'"            proxy_ssl_conf_command Ciphersuites $TLS13_ORDER;"
	NGINX_FRONT_TLS+=$'\n'"        ssl_conf_command Ciphersuites $TLS13_ORDER; ssl_prefer_server_ciphers on;"
	HAPROXY_GLOBAL_TLS="    ssl-default-server-ciphersuites $TLS13_ORDER"$'\n'"    ssl-default-bind-ciphersuites $TLS13_ORDER"
fi

gatehouse_yaml() { # gatehouse_yaml PORT ADMIN TLS(0|1) MAX_IDLE TARGET [UPSTREAM_LINES] -> YAML
	cat <<EOF
workers: 1
reuse_port: true
cpu_affinity: off
access_log: { path: "off" }
admin: { bind: "127.0.0.1:$2", public: [/healthz, /metrics, /status] }
EOF
	if (($3)); then
		echo "tls: { certificates: [{ cert: \"$BUNDLE\" }], default_certificate: proxy.test }"
		echo "listeners: { main: { bind: \"127.0.0.1:$1\", max_connections: 20000, tls: {} } }"
	else
		echo "resolver: { nameservers: [\"127.0.0.1:$P_DNS\"], min_ttl: 1s }"
		echo "listeners: { main: { bind: \"127.0.0.1:$1\", max_connections: 20000 } }"
	fi
	gatehouse_upstream "$4" "$5" "${6:-}"
}

start_proxy() { # start_proxy ROW TARGET: the instance ROW-TARGET written and started on CPU 1
	local row=$1 target=$2 inst=$1-$2 dir=$WORK/$1-$2 port max_idle=256 backend
	mkdir -p "$dir"
	free_ports 2
	port=${REPLY_PORTS[0]}
	[[ $row == new-conn ]] && max_idle=0
	URL[$inst]=https://127.0.0.1:$port/test.html
	case $target in
	gatehouse | ip | name)
		ADMIN[$inst]=${REPLY_PORTS[1]}
		if [[ $row == dns ]]; then
			URL[$inst]=http://127.0.0.1:$port/test.html
			backend=127.0.0.1:$P_BACKEND
			[[ $target == name ]] && backend=$BACKEND_NAME:$P_BACKEND
			gatehouse_yaml "$port" "${ADMIN[$inst]}" 0 256 "$backend" >"$dir/gatehouse.yaml"
		else
			gatehouse_yaml "$port" "${ADMIN[$inst]}" 1 "$max_idle" "127.0.0.1:$P_TLS" \
				"    tls: { ca: \"$CA\", server_name: $BACKEND_NAME }" >"$dir/gatehouse.yaml"
		fi
		gatehouse_check "$dir/gatehouse.yaml"
		start_proc "$inst" 1 "$GATEHOUSE_BIN" run --config "$dir/gatehouse.yaml"
		;;
	nginx)
		ERRLOG[$inst]=$dir/error.log
		nginx_proxy_conf "$dir" "$port ssl" "https://$P_TLS" 1 "$NGINX_FRONT_TLS" "$NGINX_UPSTREAM_TLS" \
			"$max_idle" >"$dir/nginx.conf"
		nginx -t -q -p "$dir" -e "$dir/error.log" -c "$dir/nginx.conf" || die "nginx rejected $dir/nginx.conf"
		start_proc "$inst" 1 nginx -p "$dir" -e "$dir/error.log" -c "$dir/nginx.conf"
		;;
	haproxy)
		backend="    server backend 127.0.0.1:$P_TLS ssl verify required ca-file $CA sni str($BACKEND_NAME) verifyhost $BACKEND_NAME"
		if [[ $row == new-conn ]]; then
			backend="    option http-server-close"$'\n'"    http-reuse never"$'\n'"$backend"
		else
			backend="    http-reuse always"$'\n'"$backend"
		fi
		haproxy_cfg 1 "    bind 127.0.0.1:$port ssl crt $BUNDLE ssl-min-ver TLSv1.2"$'\n' "$HAPROXY_GLOBAL_TLS" "$backend" >"$dir/haproxy.cfg"
		haproxy -c -q -f "$dir/haproxy.cfg" >&2 || die "haproxy rejected $dir/haproxy.cfg"
		start_proc "$inst" 1 haproxy -db -f "$dir/haproxy.cfg"
		;;
	esac
}

declare -A ROW_TARGETS=()
for row in "${ROW_LIST[@]}"; do
	if [[ $row == dns ]]; then ROW_TARGETS[$row]="ip name"; else ROW_TARGETS[$row]="${TARGET_LIST[*]}"; fi
	for t in ${ROW_TARGETS[$row]}; do start_proxy "$row" "$t"; done
done
log "work dir $WORK; backend :$P_BACKEND (plain), :$P_TLS (TLS)${P_DNS:+, dnsmasq :$P_DNS}"
for row in "${ROW_LIST[@]}"; do
	for t in ${ROW_TARGETS[$row]}; do
		inst=$row-$t
		wait_http "$inst" "${URL[$inst]}" "${SIZE[test.html]}" "${ERRLOG[$inst]:-}"
		log "up: $inst at ${URL[$inst]}"
	done
done

# ------------------------------------------------------------- measurement
CSV=$WORK/reencrypt-runs.csv
SEQ=0
EXTRA=row,hs_all,hs_resumed,gh_full,gh_resumed,dns_ok,dns_error

# gh_counters INSTANCE -> "FULL RESUMED DNS_OK DNS_ERROR" from its admin /metrics: upstream TLS
# handshakes by kind, DNS lookups of upstream names by result.
gh_counters() {
	curl -s --noproxy '*' --max-time 2 "http://127.0.0.1:${ADMIN[$1]}/metrics" | awk '
		/^gatehouse_upstream_tls_handshakes_total\{/ { if ($1 ~ /kind="full"/) f += $2; else if ($1 ~ /kind="resumed"/) r += $2 }
		/^gatehouse_dns_lookups_total\{/ { if ($1 ~ /result="ok"/) ok += $2; else e += $2 }
		END { printf "%.0f %.0f %.0f %.0f\n", f, r, ok, e }'
}

measure() { # measure REP ROW TARGET [warmup]: one wrk run against ROW-TARGET, one CSV row
	local rep=$1 row=$2 target=$3 inst=$2-$3 warm=${4:-}
	local url=${URL[$2-$3]} pid=${PID[$2-$3]} out rc=0 a0 a1 h0 h1 g0='0 0 0 0' g1='0 0 0 0'
	if [[ -n $warm ]]; then
		taskset -c 0 timeout -k 5 $((WARMUP + 30)) wrk -t1 -c"$CONNS" -d"${WARMUP}s" "$url" \
			>"$WORK/runs/warmup-$inst.txt" 2>&1 || log "warning: warm-up of $inst exited non-zero"
		return 0
	fi
	SEQ=$((SEQ + 1))
	out=$WORK/runs/$(printf '%03d' "$SEQ")-$inst.txt
	if ((PRIME)) && [[ $row != new-conn ]]; then
		taskset -c 0 timeout -k 5 60 ab -k -n $((CONNS * 10)) -c "$CONNS" "$url" >"$out.prime" 2>&1 ||
			log "warning: pool priming of $inst exited non-zero (see KEEP_WORKDIR=1 $out.prime)"
		sleep 0.2 # let the primer's client connections finish closing
	fi
	a0=$(backend_accepts) || die "cannot read backend stub_status"
	read -r -a h0 <<<"$(backend_handshakes)"
	[[ -n ${ADMIN[$inst]:-} ]] && g0=$(gh_counters "$inst")
	declare -A S0=() S1=()
	snap S0 "$pid"
	taskset -c 0 timeout -k 5 $((DURATION + 30)) wrk -t1 -c"$CONNS" -d"${DURATION}s" --latency "$url" >"$out" 2>&1 &
	LOADGEN_PID=$!
	wait "$LOADGEN_PID" || rc=$?
	LOADGEN_PID=
	snap S1 "$pid"
	a1=$(backend_accepts) || die "cannot read backend stub_status"
	read -r -a h1 <<<"$(backend_handshakes)"
	[[ -n ${ADMIN[$inst]:-} ]] && g1=$(gh_counters "$inst")
	kill -0 "$pid" 2>/dev/null || { show_logs "$inst" "${ERRLOG[$inst]:-}"; die "$inst died during its run"; }
	read -r -a g0 <<<"$g0"
	read -r -a g1 <<<"$g1"
	local -a kv=(
		"rep=$rep" "seq=$SEQ" "row=$row" "target=$target" "file=test.html" "exit_code=$rc" "clk_tck=$CLK_TCK"
		"proxy_j=$((S1[server] - S0[server]))" "loadgen_j=$((S1[self_children] - S0[self_children]))"
		"accepts_before=$a0" "accepts_after=$a1"
		"hs_all=$((h1[0] - h0[0]))" "hs_resumed=$((h1[1] - h0[1]))"
		"gh_full=$((g1[0] - g0[0]))" "gh_resumed=$((g1[1] - g0[1]))"
		"dns_ok=$((g1[2] - g0[2]))" "dns_error=$((g1[3] - g0[3]))"
	)
	snap_deltas S0 S1
	kv+=("${REPLY_KV[@]}")
	python3 "$BENCH/lib/record_run.py" --csv "$CSV" --tool wrk --output "$out" --extra "$EXTRA" "${kv[@]}"
}

START_DATE=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
LOAD_START=$(other_load)
log "$LOAD_START"
# What each leg negotiated: the client's side as an OpenSSL client with default settings sees
# it, the upstream side as the backend logged it (the last connection after the warm-up).
declare -A NEGOTIATED=()
for row in "${ROW_LIST[@]}"; do
	for t in ${ROW_TARGETS[$row]}; do
		if ((WARMUP > 0)); then
			log "warm-up: $row-$t (${WARMUP}s wrk)"
			measure 0 "$row" "$t" warmup
		fi
		[[ $row == dns ]] && continue
		front=${URL[$row-$t]#https://}
		front=$(openssl s_client -connect "${front%%/*}" -servername proxy.test </dev/null 2>/dev/null || true)
		front=$(awk '/^New, / { sub(",", "", $2); print $2, $NF; exit }' <<<"$front")
		curl -sk --noproxy '*' --max-time 2 -o /dev/null "${URL[$row-$t]}" || true
		NEGOTIATED[$row-$t]="client side ${front:-?}; upstream $(tail -n 1 "$HS_LOG" 2>/dev/null | awk '{ print $2, $3 }')"
	done
done

REMEASURED=0
max_reps=$REPS
want_row dns && ((DNS_REPS > max_reps)) && max_reps=$DNS_REPS
for ((rep = 1; rep <= max_reps; rep++)); do
	for row in "${ROW_LIST[@]}"; do
		if [[ $row == dns ]]; then ((rep <= DNS_REPS)) || continue; else ((rep <= REPS)) || continue; fi
		read -r -a targets <<<"${ROW_TARGETS[$row]}"
		rotated $((rep - 1)) "${targets[@]}"
		log "rep $rep/$max_reps, $row: order ${REPLY_TARGETS[*]}"
		for t in "${REPLY_TARGETS[@]}"; do
			measure_quietly "$rep" "$row" "$t" "$row-$t"
		done
	done
done

# ---------------------------------------------------------------- reporting
results_csv "$CSV" "$RESULTS_NAME"
versions=("$(nginx -v 2>&1 | sed 's/^nginx version: //')")
# sed and awk read to the end: no SIGPIPE for the version commands under pipefail.
((TLS_ROWS)) && want haproxy && versions+=("$(haproxy -v 2>/dev/null | sed -n '1 { s/ - https.*//; s/ *$//; p }')")
versions+=("$( (wrk --version 2>&1 || true) | head -n 1 | awk '{ print "wrk " $2 }')" "$(openssl version | awk '{ print $1, $2 }')")
want_row dns && versions+=("$("$DNSMASQ" --version | awk 'NR == 1 { print $1, $3 }')")
versions+=("gatehouse: ${GATEHOUSE_VERSION% }")
{
	echo "- Date: $START_DATE (finished $(date -u '+%H:%M:%S UTC'))"
	echo "- Machine: $(nproc) CPUs, $(cpu_model), Linux $(uname -r); at start: $LOAD_START"
	printf -v vline '%s; ' "${versions[@]}"
	echo "- Versions: ${vline%; }"
	# The code's state, not BENCHMARKS.md's (an earlier run's section there is no change to what ran).
	echo "- Source: git $(git_source crates bench Cargo.toml Cargo.lock)"
	echo "- Settings: ROWS=\"${ROW_LIST[*]}\" TARGETS=\"${TARGET_LIST[*]}\" REPS=$REPS DNS_REPS=$DNS_REPS DURATION=${DURATION}s (wrk -t1 -c$CONNS --latency, test.html = 75 B) WARMUP=${WARMUP}s PRIME=$PRIME DNS_TTL=${DNS_TTL}s QUIET_WAIT=${QUIET_WAIT}s QUIET_PCT=$QUIET_PCT RETRIES=$RETRIES SUITES=$SUITES; runs measured again for a disturbance: $REMEASURED"
	echo "- Layout: backend nginx (1 worker), dnsmasq and wrk on CPU 0; the proxy under test alone on CPU 1 with one worker/thread. Targets of a row rotated by one each rep; rows interleaved."
	echo "- TLS: a test CA made by openssl; one ECDSA P-256 certificate for the backend (verified by every proxy for backend.test, sent as SNI) and the proxies' listeners. Client -> proxy: wrk (OpenSSL) over TLS keep-alive. Proxy -> backend: TLS 1.2/1.3 offered by all; session resumption on in every proxy."
	if ((TLS_ROWS)); then
		echo "- Negotiated (OpenSSL client with defaults against each proxy; the backend's log for the upstream leg):"
		for row in pooled new-conn; do
			want_row "$row" || continue
			for t in "${TARGET_LIST[@]}"; do echo "  - $row $t: ${NEGOTIATED[$row-$t]}"; done
		done
	fi
	rig_constant SAME_HEADERS_NOTE
	echo "- Columns: each cell is the median over the reps with the min–max spread. Proxy CPU % = CPU time of the proxy's process tree (schedstat) / wall time (100 % = one core). Req per proxy CPU-s = completed requests / proxy CPU-seconds. New backend conns = backend stub_status accepts delta. Upstream TLS handshakes = TLS connections the backend saw during the runs (its log of each connection's first request), resumed share = \`\$ssl_session_reused\` = r. Others' CPU % = busy time not used by proxy, backend or wrk. Raw per-run numbers: bench/results/$RESULTS_NAME."
} >"$WORK/meta.md"

update_args
echo
python3 "$BENCH/lib/reencrypt_summarize.py" "$CSV" --heading "$HEADING" --meta "$WORK/meta.md" "${REPLY_UPDATE[@]}"
echo
log "per-run CSV: $BENCH/results/$RESULTS_NAME${REPLY_UPDATE:+; updated $BENCHMARKS_MD}"
