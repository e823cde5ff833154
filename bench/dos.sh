#!/usr/bin/env bash
# bench/dos.sh - denial-of-service benchmark: Gatehouse vs nginx vs HAProxy.
#
# Questions answered:
#   slowloris  While an attacker holds SLOW_N connections that trickle request heads (and
#              reopens each one the proxy closes), what share of their keep-alive throughput do
#              normal clients keep?  (Hardening goal: at least 90 % with 5,000 connections.)
#   handshake  While FLOOD_PROCS clients open new TLS connections back to back (full
#              handshakes, no resumption), what share of their throughput do clients on
#              established TLS keep-alive connections keep?  (Goal: the flood does not starve them.)
#
# Set-up (all on 127.0.0.1, free ports, a mktemp -d work dir removed on exit):
#   CPU 1: the proxy under test, alone, one worker: Gatehouse (workers: 1), nginx
#          (worker_processes 1), HAProxy (nbthread 1).  The three run side by side for the whole
#          bench; only one is loaded at a time.  Each has a plain HTTP listener (slowloris) and a
#          TLS listener (handshake flood) and proxies over HTTP/1.1 keep-alive to the backend.
#   CPU 0: the backend nginx (1 worker, static files), the normal clients and the attacker.
#   Per rep the target order is rotated by one (rep 1: gatehouse nginx haproxy, rep 2: nginx
#   haproxy gatehouse, ...).
#
# Connection limits are raised so that the comparison is about slowloris, not about a limit
# (the report lists them): `ulimit -n` to the hard limit; nginx worker_connections
# WORKER_CONNS (its default, 512, cannot hold 5,000) and worker_rlimit_nofile; HAProxy global and
# frontend maxconn HAPROXY_MAXCONN (2.6 derives about 9,990 from ulimit -n 20000 by itself);
# Gatehouse's default max_connections (20,000 per worker) is kept.  Timeouts are each proxy's
# usual: Gatehouse header_read_timeout 10 s (default, the whole head from accept), nginx
# client_header_timeout 60 s (default), HAProxy `timeout http-request 10s`.
#
# Rows:
#   slowloris  per rep and proxy: wrk -t1 -cCONNS -dDURATION --latency on /test.html alone; then
#              bench/lib/slowloris.py at nice 19 (SLOW_N connections, a header line every SLOW_INTERVAL s,
#              at most SLOW_RATE new connections/s) until it holds 95 % of SLOW_N (at most
#              RAMP_TIMEOUT s), SLOW_SETTLE s more (so a 10 s header timeout has closed and the
#              attacker reopened its first wave; the proxy's CPU over these seconds is what the
#              attack alone costs it), and the same wrk run under the attack.
#   handshake  per rep and proxy: h2load --h1 -cCONNS -DDURATION --warm-up-time WARMUP over TLS
#              on /test.html alone; then FLOOD_PROCS processes of `openssl s_time -new` at nice 19 (a full
#              handshake per connection, closed at once; restarted if one fails, bounded),
#              FLOOD_ALONE s of flood alone (the proxy's CPU per accepted connection then is its
#              cost of a handshake), and the same h2load run during the flood.  Certificate: FLOOD_CERT, RSA-2048 by
#              default (the server's private-key operation costs ~20x the client's verify: the
#              asymmetry a handshake flood uses), from bench/lib/tls_certs.py.
#
# Measured per run (raw numbers in bench/results/dos-latest.csv, see bench/lib/dos_report.py):
#   req/s, latency, errors of the normal clients; proxy CPU % (utime+stime of its process tree
#   over the measured window, % of one core) and req/s per proxy CPU-second (what the attack
#   costs the proxy itself, whatever CPU the machine's other work left it); attacker CPU %; others' CPU % (/proc/stat busy
#   minus proxy, backend, normal clients and attacker: other work on the machine); the
#   attacker's view (connections held: median and minimum over the window, reopenings/s,
#   answers received) or the flood's (handshakes/s completed, from s_time); the proxy's own
#   view (open connections mid-run; new connections/s accepted over the window): Gatehouse
#   admin /metrics, nginx stub_status, HAProxy `show info` on its stats socket.
#
# Output: Markdown section on stdout, also written to BENCHMARKS.md (the section
# "## Denial of service (bench/dos.sh)" is replaced, or appended; not with QUICK=1).
#
# Run (needs nginx, haproxy, wrk, h2load, openssl, curl, python3, taskset, 2 CPUs):
#   bench/dos.sh                                        # builds gatehouse (release)
#   GATEHOUSE_BIN=target/release/gatehouse bench/dos.sh          # about 15 minutes
#   QUICK=1 GATEHOUSE_BIN=target/release/gatehouse bench/dos.sh  # smoke run
#
# Environment knobs (defaults in brackets; QUICK=1 defaults after the slash):
#   GATEHOUSE_BIN       binary to test; unset = `cargo build --release -p gatehouse`
#   ROWS [slowloris handshake]   TARGETS [gatehouse nginx haproxy]
#   REPS [3/1]          repetitions of every (row, target)
#   DURATION [15/4]     seconds of each normal-client run; WARMUP [1] h2load warm-up seconds
#   CONNS [50]          normal clients' connections (keep-alive)
#   SLOW_N [5000/500]   attacker connections; SLOW_INTERVAL [5] s between trickled header lines
#   SLOW_RATE [1000]    attacker's new connections per second, at most
#   RAMP_TIMEOUT [60]   seconds the attacker gets to hold 95 % of SLOW_N
#   SLOW_SETTLE [12/3]  seconds between the ramp and the run under attack
#   FLOOD_PROCS [4]     openssl s_time processes; FLOOD_CERT [rsa] rsa or ecdsa
#   FLOOD_ALONE [5/2]   seconds of flood alone (no established clients) before the run during it
#   SETTLE [2]          seconds of pause after each attack
#   HAPROXY_MAXCONN [9000]
#   CERT_CACHE [<repo>/bench/.cache/tls-certs]
#   BENCHMARKS_MD [<repo>/BENCHMARKS.md / none]   file to update; "none" = don't.  The per-run
#                       CSV goes to bench/results/dos-latest.csv (QUICK=1: dos-quick.csv).
#   KEEP_WORKDIR [0]    1 = keep the temp dir (configs, logs, raw outputs)

set -Eeuo pipefail

# shellcheck source=SCRIPTDIR/lib/common.sh
. "$(dirname "$0")/lib/common.sh"

ROWS=${ROWS:-slowloris handshake}
TARGETS=${TARGETS:-gatehouse nginx haproxy}
REPS=${REPS:-$(pick 3 1)}
DURATION=${DURATION:-$(pick 15 4)}
WARMUP=${WARMUP:-1}
CONNS=${CONNS:-50}
SLOW_N=${SLOW_N:-$(pick 5000 500)}
SLOW_INTERVAL=${SLOW_INTERVAL:-5}
SLOW_RATE=${SLOW_RATE:-1000}
RAMP_TIMEOUT=${RAMP_TIMEOUT:-60}
SLOW_SETTLE=${SLOW_SETTLE:-$(pick 12 3)}
FLOOD_PROCS=${FLOOD_PROCS:-4}
FLOOD_CERT=${FLOOD_CERT:-rsa}
FLOOD_ALONE=${FLOOD_ALONE:-$(pick 5 2)}
SETTLE=${SETTLE:-2}
HAPROXY_MAXCONN=${HAPROXY_MAXCONN:-9000}
CERT_CACHE=${CERT_CACHE:-$BENCH/.cache/tls-certs}
BENCHMARKS_MD=${BENCHMARKS_MD:-$(pick "$ROOT/BENCHMARKS.md" none)}
RESULTS_CSV=$BENCH/results/$(pick dos-latest.csv dos-quick.csv)
KEEP_WORKDIR=${KEEP_WORKDIR:-0}
HEADING='## Denial of service (bench/dos.sh)'

log() { printf '[dos.sh %4ss] %s\n' "$SECONDS" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# ---------------------------------------------------------------- validation
check_integers REPS DURATION WARMUP CONNS SLOW_N SLOW_INTERVAL SLOW_RATE RAMP_TIMEOUT SLOW_SETTLE FLOOD_PROCS FLOOD_ALONE SETTLE HAPROXY_MAXCONN
((REPS >= 1 && DURATION >= 2 && CONNS >= 1 && SLOW_N >= 1 && SLOW_INTERVAL >= 1 && SLOW_RATE >= 1 && FLOOD_PROCS >= 1 && SLOW_SETTLE >= 1 && FLOOD_ALONE >= 1)) ||
	die "REPS, CONNS, SLOW_N, SLOW_INTERVAL, SLOW_RATE, FLOOD_PROCS, SLOW_SETTLE and FLOOD_ALONE must be at least 1, DURATION at least 2"
[[ $FLOOD_CERT == rsa || $FLOOD_CERT == ecdsa ]] || die "FLOOD_CERT must be rsa or ecdsa"
read -r -a ROW_LIST <<<"$ROWS"
read -r -a TARGET_LIST <<<"$TARGETS"
((${#ROW_LIST[@]} && ${#TARGET_LIST[@]})) || die "ROWS and TARGETS must not be empty"
for r in "${ROW_LIST[@]}"; do case $r in slowloris | handshake) ;; *) die "unknown row '$r' in ROWS (slowloris handshake)" ;; esac; done
for t in "${TARGET_LIST[@]}"; do
	case $t in gatehouse | nginx | haproxy) ;; *) die "unknown target '$t' in TARGETS (gatehouse nginx haproxy)" ;; esac
done
want_row() { [[ " ${ROW_LIST[*]} " == *" $1 "* ]]; }
need=(nginx curl openssl python3 taskset getconf timeout)
want haproxy && need+=(haproxy)
want_row slowloris && need+=(wrk)
want_row handshake && need+=(h2load)
need_commands "${need[@]}"
(($(nproc) >= 2)) || die "needs at least 2 CPUs (CPU 1: proxy under test, CPU 0: backend and clients)"
taskset -c 1 true 2>/dev/null || die "cannot pin to CPU 1 (taskset -c 1 failed)"
CLK_TCK=$(getconf CLK_TCK)
PYTHON=$(python3 -c 'import sys; print(sys.executable)')

GATEHOUSE_VERSION=
want gatehouse && gatehouse_binary

make_workdir gatehouse-dos-bench
raise_nofile
((SLOW_N + CONNS + 200 <= NOFILE)) || die "SLOW_N=$SLOW_N needs about $((SLOW_N + CONNS + 200)) fds, ulimit -n is $NOFILE"
if want haproxy && want_row slowloris; then
	((SLOW_N + CONNS + 100 <= HAPROXY_MAXCONN)) || die "HAPROXY_MAXCONN=$HAPROXY_MAXCONN is below SLOW_N + CONNS + 100"
fi

mkdir -p "$WORK"/{www,runs}
make_certs >/dev/null
BUNDLE=$CERT_CACHE/$FLOOD_CERT.pem
write_www "$WORK/www"
start_backend 0
LOAD_START=$(other_load)
log "work dir $WORK; backend nginx on 127.0.0.1:$P_BACKEND (CPU 0); $LOAD_START"

# ------------------------------------------------------------------ proxies
declare -A PORT=() TPORT=() STATUS=() # plain port, TLS port, status port (Gatehouse: admin)
for t in "${TARGET_LIST[@]}"; do
	free_ports 3
	read -r "PORT[$t]" "TPORT[$t]" "STATUS[$t]" <<<"${REPLY_PORTS[*]}"
	dir=$WORK/$t
	mkdir -p "$dir"
	case $t in
	gatehouse)
		cat >"$dir/gatehouse.yaml" <<EOF
workers: 1
cpu_affinity: off
access_log: { path: "off" }
admin: { bind: "127.0.0.1:${STATUS[$t]}", public: [/healthz, /metrics, /status] }
tls: { certificates: [{ cert: "$BUNDLE" }], default_certificate: bench.test }
listeners:
  http: { bind: "127.0.0.1:${PORT[$t]}" }
  https: { bind: "127.0.0.1:${TPORT[$t]}", tls: {} }
$(gatehouse_upstream 256)
EOF
		gatehouse_check "$dir/gatehouse.yaml"
		start_proc "$t" 1 "$GATEHOUSE_BIN" run --config "$dir/gatehouse.yaml"
		;;
	nginx)
		nginx_proxy_conf "$dir" "${PORT[$t]}" "$P_BACKEND" 1 "        listen 127.0.0.1:${TPORT[$t]} ssl http2 backlog=4096;
        listen 127.0.0.1:${STATUS[$t]};
        ssl_certificate $BUNDLE; ssl_certificate_key $BUNDLE;
        location = /nginx_status { stub_status; }" >"$dir/nginx.conf"
		nginx -t -q -p "$dir" -e "$dir/error.log" -c "$dir/nginx.conf" || die "nginx rejected $dir/nginx.conf"
		start_proc "$t" 1 nginx -p "$dir" -e "$dir/error.log" -c "$dir/nginx.conf"
		;;
	haproxy)
		haproxy_cfg 1 "    bind 127.0.0.1:${PORT[$t]}
    bind 127.0.0.1:${TPORT[$t]} ssl crt $BUNDLE alpn h2,http/1.1 ssl-min-ver TLSv1.2
    maxconn $HAPROXY_MAXCONN
" "    stats socket $dir/haproxy.sock mode 600 level user" >"$dir/haproxy.cfg"
		haproxy -c -q -f "$dir/haproxy.cfg" >&2 || die "haproxy rejected $dir/haproxy.cfg"
		start_proc "$t" 1 haproxy -db -f "$dir/haproxy.cfg"
		;;
	esac
done
for t in "${TARGET_LIST[@]}"; do
	wait_http "$t" "http://127.0.0.1:${PORT[$t]}/test.html" "${SIZE[test.html]}" "$WORK/$t/error.log"
	wait_http "$t" "https://127.0.0.1:${TPORT[$t]}/test.html" "${SIZE[test.html]}" "$WORK/$t/error.log"
	log "up: $t on :${PORT[$t]} (HTTP) and :${TPORT[$t]} (TLS)"
done

# ------------------------------------------------------------- measurement
proxy_counters() { # proxy_counters TARGET -> "OPEN ACCEPTED": the proxy's own connection counts
	case $1 in
	gatehouse)
		curl -s --noproxy '*' --max-time 2 "http://127.0.0.1:${STATUS[$1]}/metrics" | awk '
			$1 ~ /^gatehouse_connections_active($|\{)/ { a += $2 }
			$1 ~ /^gatehouse_connections_accepted_total($|\{)/ { c += $2 }
			END { printf "%d %d\n", a, c }'
		;;
	nginx) # "Active connections" counts the status request itself
		curl -s --noproxy '*' --max-time 2 "http://127.0.0.1:${STATUS[$1]}/nginx_status" |
			awk 'NR == 1 { a = $3 - 1 } NR == 3 { c = $1 } END { printf "%d %d\n", a, c }'
		;;
	haproxy)
		"$PYTHON" - "$WORK/haproxy/haproxy.sock" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(2)
s.connect(sys.argv[1])
s.sendall(b"show info\n")
out = b""
while chunk := s.recv(65536):
    out += chunk
info = dict(ln.split(": ", 1) for ln in out.decode().splitlines() if ": " in ln)
print(int(info["CurrConns"]) - 1, info["CumConns"])  # this stats connection is one of them
EOF
		;;
	esac
}

attackers_jiffies() { # -> REPLY = CPU jiffies of the running attacker processes
	local sum=0 p
	for p in "${!PID[@]}"; do
		[[ $p == attacker || $p == flood* ]] || continue
		tree_jiffies "${PID[$p]}"
		sum=$((sum + REPLY))
	done
	REPLY=$sum
}

CSV=$WORK/dos-runs.csv
SEQ=0
# run_case ROW PHASE TARGET TOOL WARMUP_S CMD...: one normal-client run on CPU 0 against TARGET;
# record_case then writes it as one CSV row (for a flood, once the s_time processes have printed
# their counts).  WARMUP_S > 0: the CPU and counter window starts after it (h2load).
declare -a RECORD_ARGS=()
run_case() {
	local row=$1 phase=$2 t=$3 tool=$4 warm=$5
	shift 5
	local pid=${PID[$t]} out rc=0 c0 c1 mid aj0 aj1 lg0=0
	SEQ=$((SEQ + 1))
	out=$WORK/runs/$(printf '%03d' "$SEQ")-$row-$phase-$t.txt
	declare -A S0=() S1=()
	taskset -c 0 timeout -k 5 $((DURATION + warm + 30)) "$@" >"$out" 2>&1 &
	LOADGEN_PID=$!
	if ((warm)); then
		sleep "$warm"
		tree_jiffies "$LOADGEN_PID"
		lg0=$REPLY # its warm-up CPU, not yet in this shell's cutime
	fi
	c0=$(proxy_counters "$t")
	attackers_jiffies
	aj0=$REPLY
	snap S0 "$pid"
	sleep "$(awk -v d="$DURATION" 'BEGIN { print d / 2 }')"
	mid=$(proxy_counters "$t")
	wait "$LOADGEN_PID" || rc=$?
	LOADGEN_PID=
	snap S1 "$pid"
	attackers_jiffies
	aj1=$REPLY
	c1=$(proxy_counters "$t")
	kill -0 "$pid" 2>/dev/null || { show_logs "$t" "$WORK/$t/error.log"; die "$t died during the $row $phase run"; }
	snap_deltas S0 S1
	RECORD_ARGS=(--csv "$CSV" --tool "$tool" --output "$out" "row=$row" "phase=$phase" "target=$t" "rep=$REP" "seq=$SEQ" "exit_code=$rc" "clk_tck=$CLK_TCK" \
		"t0=${S0[t]}" "t1=${S1[t]}" "proxy_j=$((S1[server] - S0[server]))" \
		"loadgen_j=$((S1[self_children] - S0[self_children] - lg0))" "attacker_j=$((aj1 - aj0))" \
		"open_mid=${mid%% *}" "accepted_before=${c0##* }" "accepted_after=${c1##* }" "${REPLY_KV[@]}")
}

record_case() { # record_case [--option VALUE | key=value]...: the last run_case, with these added
	local -a opts=() kvs=()
	while (($#)); do
		case $1 in
		--*) opts+=("$1" "$2") && shift 2 ;;
		*) kvs+=("$1") && shift ;;
		esac
	done
	"$PYTHON" "$BENCH/lib/dos_report.py" record "${opts[@]}" "${RECORD_ARGS[@]}" "${kvs[@]}"
}

# attack_alone SECONDS -> REPLY_KV: the proxy's CPU % and new connections/s while only the attacker
# runs (no normal clients): what fending the attack off costs the proxy by itself.
attack_alone() {
	local t=$1 j0 j1 c0 c1 t0 wall
	c0=$(proxy_counters "$t")
	tree_jiffies "${PID[$t]}"
	j0=$REPLY t0=$EPOCHREALTIME
	sleep "$2"
	tree_jiffies "${PID[$t]}"
	j1=$REPLY
	c1=$(proxy_counters "$t")
	wall=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { print b - a }')
	REPLY_KV=("alone_cpu_pct=$(awk -v j=$((j1 - j0)) -v w="$wall" -v k="$CLK_TCK" 'BEGIN { printf "%.2f", 100 * j / k / w }')"
		"alone_conns_per_s=$(awk -v n=$((${c1##* } - ${c0##* })) -v w="$wall" 'BEGIN { printf "%.1f", n / w }')")
}

held_now() { # -> the attacker's last reported count of held connections (0 before its first line)
	local last
	last=$(tail -n 1 "$WORK/attacker.out" 2>/dev/null) || true
	[[ $last =~ \"held\":\ ([0-9]+) ]] && echo "${BASH_REMATCH[1]}" || echo 0
}

slowloris_case() { # slowloris_case TARGET
	local t=$1 url="http://127.0.0.1:${PORT[$1]}/test.html" i want held=0
	run_case slowloris alone "$t" wrk 0 wrk -t1 -c"$CONNS" -d"${DURATION}s" --latency "$url"
	record_case
	# At nice 19, like the flood: the attacker stands for other machines, so it takes only the CPU
	# that the backend and the normal clients leave (it shares CPU 0 with them; reopening ~400
	# connections/s costs it about 13 % of a core).  Its held count and reopenings show its strength.
	start_proc attacker 0 nice -n 19 "$PYTHON" "$BENCH/lib/slowloris.py" --port "${PORT[$t]}" -n "$SLOW_N" \
		--interval "$SLOW_INTERVAL" --rate "$SLOW_RATE" --duration $((RAMP_TIMEOUT + SLOW_SETTLE + DURATION + 60))
	want=$((SLOW_N * 95 / 100))
	for ((i = 0; i < RAMP_TIMEOUT * 5; i++)); do
		held=$(held_now)
		((held >= want)) && break
		kill -0 "${PID[attacker]}" 2>/dev/null || { show_logs attacker; die "slowloris.py exited"; }
		sleep 0.2
	done
	log "slowloris on $t: holds $held of $SLOW_N after $((i / 5)) s$( ((held < want)) && echo " (below 95 %: measuring anyway)")"
	attack_alone "$t" "$SLOW_SETTLE"
	local -a alone=("${REPLY_KV[@]}")
	run_case slowloris attack "$t" wrk 0 wrk -t1 -c"$CONNS" -d"${DURATION}s" --latency "$url"
	terminate "${PID[attacker]}"
	unset "PID[attacker]"
	record_case --attacker "$WORK/attacker.out" "slow_n=$SLOW_N" "${alone[@]}"
	sleep "$SETTLE"
}

handshake_case() { # handshake_case TARGET
	local t=$1 url="https://127.0.0.1:${TPORT[$1]}/test.html" i span f t0
	local -a h2=(h2load --h1 -c "$CONNS" -D "$DURATION" --warm-up-time "${WARMUP}s" "$url") floods=()
	run_case handshake alone "$t" h2load "$WARMUP" "${h2[@]}"
	record_case
	span=$((1 + FLOOD_ALONE + WARMUP + DURATION + 2))
	rm -f "$WORK"/flood*.out
	t0=$EPOCHREALTIME
	for ((i = 1; i <= FLOOD_PROCS; i++)); do
		# At nice 19: the flood takes only the CPU that the backend and the established clients
		# leave (they share CPU 0), so what the established clients lose is lost at the proxy.
		# s_time exits when a connect fails: restarted until the span ends, at most 200 times.
		# shellcheck disable=SC2016 # expanded by the inner bash
		start_proc "flood$i" 0 nice -n 19 timeout -k 5 $((span + 30)) bash -c '
			end=$((SECONDS + $1)); n=0
			while ((SECONDS < end && n < 200)); do
				openssl s_time -connect "127.0.0.1:$2" -new -time $((end - SECONDS)) 2>&1 || sleep 0.1
				n=$((n + 1))
			done' flood "$span" "${TPORT[$t]}"
	done
	sleep 1
	attack_alone "$t" "$FLOOD_ALONE"
	local -a alone=("${REPLY_KV[@]}")
	run_case handshake attack "$t" h2load "$WARMUP" "${h2[@]}"
	for ((i = 1; i <= FLOOD_PROCS; i++)); do
		wait "${PID[flood$i]}" 2>/dev/null || true
		unset "PID[flood$i]"
		floods+=(--flood "$WORK/flood$i.out")
	done
	record_case "${floods[@]}" "${alone[@]}" "flood_span=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')"
	sleep "$SETTLE"
}

START_DATE=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
START_T=$EPOCHREALTIME
for row in "${ROW_LIST[@]}"; do
	for ((REP = 1; REP <= REPS; REP++)); do
		rotated $((REP - 1)) "${TARGET_LIST[@]}"
		log "$row rep $REP/$REPS: order ${REPLY_TARGETS[*]}"
		for t in "${REPLY_TARGETS[@]}"; do "${row}_case" "$t"; done
	done
done
LOAD_END=$(other_load)

# ---------------------------------------------------------------- reporting
results_csv "$CSV" "${RESULTS_CSV##*/}"
versions=("$(nginx -v 2>&1 | sed 's/^nginx version: //')")
want haproxy && versions+=("$(haproxy -v 2>/dev/null | sed -n '1 { s/ - https.*//; s/ *$//; p }')")
want_row slowloris && versions+=("$( (wrk --version 2>&1 || true) | head -n 1 | awk '{ print "wrk " $2 }')" "Python $("$PYTHON" -c 'import platform; print(platform.python_version())') (slowloris.py)")
want_row handshake && versions+=("$(h2load --version 2>&1 | sed -n 1p)" "$(openssl version | awk '{ print $1, $2 }') (s_time, nginx, HAProxy)")
[[ -n $GATEHOUSE_VERSION ]] && versions+=("gatehouse: ${GATEHOUSE_VERSION% } (rustls, aws-lc-rs)")
printf -v vline '%s; ' "${versions[@]}"
cert_label=$([[ $FLOOD_CERT == rsa ]] && echo RSA-2048 || echo "ECDSA P-256")
{
	echo "- Date: $START_DATE (took $(awk -v a="$START_T" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }') s)$( ((q)) && echo "; **QUICK=1 smoke run, not for conclusions**")"
	echo "- Machine: $(nproc) CPUs, $(cpu_model), Linux $(uname -r); clock tick $CLK_TCK Hz"
	echo "- Other work on the machine: at start $LOAD_START; at end $LOAD_END"
	echo "- Versions: ${vline%; }"
	echo "- Source: git $(git_source crates/ Cargo.toml Cargo.lock)"
	echo "- Settings: ROWS=\"${ROW_LIST[*]}\" TARGETS=\"${TARGET_LIST[*]}\" REPS=$REPS DURATION=${DURATION}s CONNS=$CONNS SLOW_N=$SLOW_N SLOW_INTERVAL=${SLOW_INTERVAL}s SLOW_RATE=$SLOW_RATE/s SLOW_SETTLE=${SLOW_SETTLE}s FLOOD_PROCS=$FLOOD_PROCS FLOOD_ALONE=${FLOOD_ALONE}s FLOOD_CERT=$cert_label WARMUP=${WARMUP}s"
	echo "- Layout: proxy under test alone on CPU 1 with one worker (Gatehouse \`workers: 1\`, nginx \`worker_processes 1\`, HAProxy \`nbthread 1\`), proxying over HTTP/1.1 keep-alive to a backend nginx (1 worker); backend, normal clients and attacker on CPU 0. Target order rotated by one each rep."
	echo "- Limits, set so that the comparison is about the attack: \`ulimit -n $NOFILE\`; nginx \`worker_connections $WORKER_CONNS\`, \`worker_rlimit_nofile $NOFILE\` (its default worker_connections, 512, cannot hold $SLOW_N connections: with it, this attack fills nginx and normal clients wait in the backlog); HAProxy \`maxconn $HAPROXY_MAXCONN\` global and frontend (left unset, 2.6 derives 9,986 from this ulimit); Gatehouse defaults (\`max_connections\` 20,000 per worker, no \`max_connections_per_ip\`). Timeouts: Gatehouse \`header_read_timeout\` 10 s (default; the whole head, from accept), nginx \`client_header_timeout\` 60 s (default), HAProxy \`timeout http-request 10s\`, \`timeout client 60s\`. No per-address limit anywhere (the attacker has one address, so one would stop it at once)."
	echo "- Attackers: slowloris.py and the s_time processes run at nice 19, so they take only the CPU of CPU 0 that the backend and the normal clients leave (a real attacker's CPU is not the clients' machine's)."
	echo "- Columns: kept = req/s under attack / req/s alone, per rep (adjacent runs), median over reps. Proxy CPU % = utime+stime of its process tree over the measured window (100 % = one core). Req/s per proxy CPU-s = req/s / proxy CPU share: what the attack costs the proxy itself, whatever CPU other work on the machine left it. Held = connections the attacker had open (from its side: one waiting in the accept queue counts), median (minimum) over its 1 s reports during the run. Open at the proxy = the proxy's own count mid-run (normal clients included). Others' CPU % = /proc/stat busy time not used by proxy, backend, clients or attacker. Raw per-run numbers: bench/results/${RESULTS_CSV##*/}."
} >"$WORK/meta.md"

update_args
echo
"$PYTHON" "$BENCH/lib/dos_report.py" summarize "$CSV" --heading "$HEADING" --meta "$WORK/meta.md" "${REPLY_UPDATE[@]}"
echo
log "per-run CSV: $RESULTS_CSV${REPLY_UPDATE:+; updated $BENCHMARKS_MD}"
