#!/usr/bin/env bash
# bench/proxy.sh - keep-alive reverse-proxy benchmark: Gatehouse vs nginx vs HAProxy.
#
# Question answered:
#   How many requests per proxy CPU-second does Gatehouse forward compared with
#   nginx and HAProxy as keep-alive reverse proxies, pinned to one core, same run?
#
# Set-up (all on 127.0.0.1, free ports picked at start, everything in a mktemp -d
# work dir that is removed on exit):
#   CPU 0: backend nginx (1 worker, serves test.html = 75 B, 5k.html, 10k.html,
#          stub_status on /nginx_status) + the load generator (wrk or ab).
#   CPU 1: the proxy under test, alone: Gatehouse (workers: 1), nginx
#          (worker_processes 1, upstream keepalive 256) or HAProxy (nbthread 1,
#          http-reuse always).  "direct" = load generator -> backend, no proxy.
#   Each target gets an unrecorded wrk warm-up (WARMUP s) first, so upstream
#   pools are warm.  Then for each rep, for each file, for each tool, every
#   target is run once; the target order is rotated by one position per rep
#   (rep 1: direct nginx gatehouse haproxy, rep 2: nginx gatehouse haproxy
#   direct, ...), so Gatehouse always runs between peers and no target always
#   runs first or last.
#
# Measured per run (raw numbers in a CSV, see bench/lib/record_run.py):
#   req/s, mean latency, p99 (wrk --latency / ab percentile table; ab's is in
#   whole ms), proxy CPU % (utime+stime of the proxy process tree from
#   /proc/PID/stat over the run's wall time, % of one core; for "direct" the
#   backend's), req/s per proxy CPU-second (= completed requests / proxy CPU
#   seconds, i.e. req/s / (CPU%/100)), new backend connections per 100k
#   requests (backend stub_status "accepts" delta), others' CPU % (/proc/stat
#   user+nice+system minus proxy, backend and load generator; irq/softirq and
#   steal are kept separately in the CSV).  Failed requests, non-2xx, socket
#   errors or a non-zero exit flag the run in the table.
#
# Output: Markdown section on stdout, also written to BENCHMARKS.md (the section
# "## Proxy: keep-alive, 75-byte file (bench/proxy.sh)" is replaced, or appended
# if absent); per-run CSV copied to bench/results/proxy-latest.csv.
#
# Run (from anywhere; needs nginx, haproxy, wrk, ab, curl, python3, taskset and
# at least 2 CPUs):
#   bench/proxy.sh                                   # builds gatehouse (release)
#   GATEHOUSE_BIN=target/release/gatehouse bench/proxy.sh     # no build
#   DURATION=2 AB_N=5000 REPS=1 TARGETS="direct nginx haproxy" bench/proxy.sh
#
# Environment knobs (defaults in brackets):
#   GATEHOUSE_BIN   binary to test; unset = `cargo build --release -p gatehouse`
#                   and use target/release/gatehouse (or $CARGO_TARGET_DIR)
#   DURATION [5]    seconds per wrk run
#   AB_N [50000]    requests per ab run
#   REPS [3]        repetitions of every (file, tool, target)
#   CONNS [100]     concurrent connections (wrk -c / ab -c)
#   FILES [test.html]   any of: test.html 5k.html 10k.html
#   TARGETS [direct nginx gatehouse haproxy]   subset/order of targets
#   TOOLS [wrk ab]  load generators to use
#   WARMUP [2]      seconds of unrecorded wrk warm-up per (file, target); 0 = none
#   PRIME [1]       1 = before each measured run, refill the proxy's upstream pool
#                   with a short clean ab -k burst (CONNS x 10 requests), so
#                   "new backend conns" counts connections opened under steady
#                   load, not the re-connects after the previous run's aborted
#                   in-flight requests (wrk stops mid-request); 0 = off
#   SETTLE [1]      seconds of sleep between runs
#   HAPROXY_MAXCONN [4096]   HAProxy global maxconn (fd budget: ulimit -n)
#   AB_TIMEOUT [300]         hard time limit for one ab run, seconds
#   BENCHMARKS_MD [<repo>/BENCHMARKS.md]   file to update; "none" = don't
#   KEEP_WORKDIR [0]         1 = keep the temp dir (configs, logs, raw outputs)

set -Eeuo pipefail

ORIG_PWD=$PWD
cd "$(dirname "$0")/.."
ROOT=$PWD
BENCH=$ROOT/bench

DURATION=${DURATION:-5}
AB_N=${AB_N:-50000}
REPS=${REPS:-3}
CONNS=${CONNS:-100}
FILES=${FILES:-test.html}
TARGETS=${TARGETS:-direct nginx gatehouse haproxy}
TOOLS=${TOOLS:-wrk ab}
WARMUP=${WARMUP:-2}
PRIME=${PRIME:-1}
SETTLE=${SETTLE:-1}
HAPROXY_MAXCONN=${HAPROXY_MAXCONN:-4096}
AB_TIMEOUT=${AB_TIMEOUT:-300}
BENCHMARKS_MD=${BENCHMARKS_MD:-$ROOT/BENCHMARKS.md}
KEEP_WORKDIR=${KEEP_WORKDIR:-0}
HEADING='## Proxy: keep-alive, 75-byte file (bench/proxy.sh)'

log() { printf '[proxy.sh] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# ---------------------------------------------------------------- validation
for v in DURATION AB_N REPS CONNS WARMUP PRIME SETTLE HAPROXY_MAXCONN AB_TIMEOUT; do
	[[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer (got '${!v}')"
done
((DURATION >= 1 && AB_N >= 1 && REPS >= 1 && CONNS >= 1)) ||
	die "DURATION, AB_N, REPS and CONNS must be at least 1"
((AB_N >= CONNS)) || die "AB_N ($AB_N) must be at least CONNS ($CONNS)"

declare -A SIZE=([test.html]=75 [5k.html]=5120 [10k.html]=10240)
read -r -a FILE_LIST <<<"$FILES"
read -r -a TARGET_LIST <<<"$TARGETS"
read -r -a TOOL_LIST <<<"$TOOLS"
((${#FILE_LIST[@]} && ${#TARGET_LIST[@]} && ${#TOOL_LIST[@]})) || die "FILES, TARGETS and TOOLS must not be empty"
for f in "${FILE_LIST[@]}"; do [[ -n ${SIZE[$f]:-} ]] || die "unknown file '$f' in FILES (use: ${!SIZE[*]})"; done
for t in "${TARGET_LIST[@]}"; do
	case $t in direct | nginx | gatehouse | haproxy) ;; *) die "unknown target '$t' in TARGETS (direct nginx gatehouse haproxy)" ;; esac
done
for t in "${TOOL_LIST[@]}"; do
	case $t in wrk | ab) ;; *) die "unknown tool '$t' in TOOLS (wrk ab)" ;; esac
done
want() { # want TARGET -> true if TARGET is in TARGETS
	local t
	for t in "${TARGET_LIST[@]}"; do [[ $t == "$1" ]] && return 0; done
	return 1
}

need=(nginx curl python3 taskset getconf)
want haproxy && need+=(haproxy)
need+=("${TOOL_LIST[@]}")
((PRIME)) && need+=(ab)
((WARMUP)) && need+=(wrk)
for c in "${need[@]}"; do command -v "$c" >/dev/null || die "'$c' not found in PATH"; done
(($(nproc) >= 2)) || die "needs at least 2 CPUs (CPU 0: backend + load generator, CPU 1: proxy)"
taskset -c 1 true 2>/dev/null || die "cannot pin to CPU 1 (taskset -c 1 failed)"

CLK_TCK=$(getconf CLK_TCK)

# ------------------------------------------------------------ gatehouse binary
GATEHOUSE_VERSION=
if want gatehouse; then
	if [[ -n ${GATEHOUSE_BIN:-} ]]; then
		[[ $GATEHOUSE_BIN == /* ]] || GATEHOUSE_BIN=$ORIG_PWD/$GATEHOUSE_BIN
	else
		command -v cargo >/dev/null || die "cargo not found; set GATEHOUSE_BIN"
		log "building: cargo build --release -p gatehouse"
		cargo build --release -p gatehouse
		GATEHOUSE_BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/gatehouse
	fi
	[[ -x $GATEHOUSE_BIN ]] || die "gatehouse binary not found or not executable: $GATEHOUSE_BIN"
	gh_version_out=$("$GATEHOUSE_BIN" version 2>&1) || die "'$GATEHOUSE_BIN version' failed: $gh_version_out"
	GATEHOUSE_VERSION=${gh_version_out%%$'\n'*}
fi

# --------------------------------------------------- work dir, process cleanup
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gatehouse-proxy-bench.XXXXXX")
declare -A PID=()   # name -> pid of every long-running process we started
LOADGEN_PID=

descendants() { # descendants PID... -> REPLY_PIDS (the PIDs and all their descendants)
	local -a stack=("$@")
	local p kids t
	REPLY_PIDS=()
	while ((${#stack[@]})); do
		p=${stack[-1]}
		unset 'stack[-1]'
		[[ -d /proc/$p ]] || continue
		REPLY_PIDS+=("$p")
		for t in /proc/"$p"/task/*/children; do
			kids=
			read -r kids 2>/dev/null <"$t" || true
			# shellcheck disable=SC2206 # pids are plain integers
			[[ -n $kids ]] && stack+=($kids)
		done
	done
	return 0
}

cleanup() {
	local rc=$? p i alive
	set +e
	trap - EXIT INT TERM ERR
	[[ -n $LOADGEN_PID ]] && kill -TERM "$LOADGEN_PID" 2>/dev/null
	descendants "${PID[@]}" ${LOADGEN_PID:+"$LOADGEN_PID"}
	local -a all=("${REPLY_PIDS[@]}")
	((${#all[@]})) && kill -TERM "${all[@]}" 2>/dev/null
	for ((i = 0; i < 50; i++)); do # at most 5 s for a graceful exit
		alive=0
		for p in "${all[@]}"; do
			if kill -0 "$p" 2>/dev/null && [[ $(awk '{print $3}' "/proc/$p/stat" 2>/dev/null) != Z ]]; then
				alive=1
				break
			fi
		done
		((alive)) || break
		sleep 0.1
	done
	for p in "${all[@]}"; do kill -KILL "$p" 2>/dev/null; done
	for p in "${PID[@]}" ${LOADGEN_PID:+"$LOADGEN_PID"}; do wait "$p" 2>/dev/null; done
	if [[ $KEEP_WORKDIR == 1 ]]; then
		log "work dir kept: $WORK"
	else
		rm -rf "$WORK"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'log "command failed (line $LINENO): $BASH_COMMAND"' ERR
trap 'exit 130' INT
trap 'exit 143' TERM

# Raise the fd limit as far as the hard limit allows (HAProxy/nginx need ~2 fds
# per proxied connection).
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
NOFILE=$(ulimit -n)
[[ $NOFILE == unlimited ]] && NOFILE=65536
PROXY_WORKER_CONNS=$((NOFILE < 20000 ? NOFILE : 20000))
((2 * HAPROXY_MAXCONN + 64 <= NOFILE)) ||
	die "HAPROXY_MAXCONN=$HAPROXY_MAXCONN needs about $((2 * HAPROXY_MAXCONN + 64)) fds, ulimit -n is $NOFILE"

# ------------------------------------------------------------------ free ports
read -r P_BACKEND P_NGINX P_GATEHOUSE P_HAPROXY < <(python3 -c '
import socket
socks = []
for _ in range(4):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(*(s.getsockname()[1] for s in socks))
')
declare -A PORT=([direct]=$P_BACKEND [nginx]=$P_NGINX [gatehouse]=$P_GATEHOUSE [haproxy]=$P_HAPROXY)

# ------------------------------------------------------------- content + configs
mkdir -p "$WORK"/{www,backend,nginx,haproxy,gatehouse,runs}
python3 - "$WORK/www" <<'EOF'
import os, sys
for name, size in (("test.html", 75), ("5k.html", 5120), ("10k.html", 10240)):
    head, tail = b"<html><body>", b"</body></html>\n"
    body = head + b"x" * (size - len(head) - len(tail)) + tail
    assert len(body) == size
    with open(os.path.join(sys.argv[1], name), "wb") as f:
        f.write(body)
EOF

USER_LINE=
((EUID == 0)) && USER_LINE='user root;'

nginx_common() { # nginx_common DIR -> directives shared by both nginx instances
	cat <<EOF
$USER_LINE
daemon off;
master_process on;
worker_processes 1;
worker_rlimit_nofile $NOFILE;
pid $1/nginx.pid;
error_log $1/error.log warn;
events { worker_connections $PROXY_WORKER_CONNS; }
EOF
}
nginx_temp_paths() { # nginx_temp_paths DIR
	cat <<EOF
    client_body_temp_path $1/client_body;
    proxy_temp_path $1/proxy;
    fastcgi_temp_path $1/fastcgi;
    uwsgi_temp_path $1/uwsgi;
    scgi_temp_path $1/scgi;
EOF
}

{
	nginx_common "$WORK/backend"
	cat <<EOF
http {
$(nginx_temp_paths "$WORK/backend")
    access_log off;
    types { text/html html; }
    default_type application/octet-stream;
    sendfile on;
    tcp_nopush on;
    open_file_cache max=64 inactive=60s;
    open_file_cache_valid 60s;
    keepalive_timeout 75s;
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:$P_BACKEND backlog=4096;
        root $WORK/www;
        location / { }
        location = /nginx_status { stub_status; allow 127.0.0.1; deny all; }
    }
}
EOF
} >"$WORK/backend/nginx.conf"

{
	nginx_common "$WORK/nginx"
	cat <<EOF
http {
$(nginx_temp_paths "$WORK/nginx")
    access_log off;
    keepalive_timeout 75s;
    keepalive_requests 1000000;
    upstream backend {
        server 127.0.0.1:$P_BACKEND;
        keepalive 256;
        keepalive_requests 1000000;
        keepalive_timeout 60s;
    }
    server {
        listen 127.0.0.1:$P_NGINX backlog=4096;
        location / {
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
EOF
} >"$WORK/nginx/nginx.conf"

cat >"$WORK/haproxy/haproxy.cfg" <<EOF
global
    nbthread 1
    maxconn $HAPROXY_MAXCONN

defaults
    mode http
    option http-keep-alive
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    timeout http-request 10s
    timeout http-keep-alive 60s

frontend fe
    bind 127.0.0.1:$P_HAPROXY
    default_backend be

backend be
    http-reuse always
    server backend 127.0.0.1:$P_BACKEND
EOF

cat >"$WORK/gatehouse/gatehouse.yaml" <<EOF
workers: 1
reuse_port: true
cpu_affinity: off
access_log: { path: "off" }
listeners:
  main: { bind: "127.0.0.1:$P_GATEHOUSE", max_connections: 20000 }
upstreams:
  backend:
    targets: ["127.0.0.1:$P_BACKEND"]
    keepalive: { max_idle: 256, idle_timeout: 60s }
    retries: 0
sites:
  all:
    hosts: ["*"]
    routes: [{ path: /, upstream: backend }]
EOF

# -------------------------------------------------------------- start servers
start_proc() { # start_proc NAME CPU CMD... (stdout/stderr -> $WORK/NAME.out/.err)
	local name=$1 cpu=$2
	shift 2
	taskset -c "$cpu" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" &
	PID[$name]=$!
}

show_logs() { # show_logs NAME [ERROR_LOG]
	local f
	for f in "$WORK/$1.out" "$WORK/$1.err" ${2:+"$2"}; do
		[[ -s $f ]] && { log "--- $f (last 30 lines)"; tail -n 30 "$f" >&2; }
	done
	return 0
}

http_probe() { # http_probe URL -> "CODE SIZE"
	curl -s --noproxy '*' --max-time 2 -o /dev/null -w '%{http_code} %{size_download}' "$1" 2>/dev/null || true
}

wait_http() { # wait_http NAME URL EXPECTED_SIZE [ERROR_LOG]; at most ~10 s
	local name=$1 url=$2 size=$3 i got=
	for ((i = 0; i < 100; i++)); do
		kill -0 "${PID[$name]}" 2>/dev/null || { show_logs "$name" "${4:-}"; die "$name exited during start-up"; }
		got=$(http_probe "$url")
		[[ $got == "200 $size" ]] && return 0
		sleep 0.1
	done
	show_logs "$name" "${4:-}"
	die "$name not ready after 10 s: GET $url -> '${got:-no answer}' (want '200 $size')"
}

wait_line() { # wait_line NAME FILE PATTERN; at most ~10 s; 1 if not seen
	local i
	for ((i = 0; i < 100; i++)); do
		kill -0 "${PID[$1]}" 2>/dev/null || return 1
		grep -Eq -- "$3" "$2" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

FIRST_FILE=${FILE_LIST[0]}
log "work dir $WORK; ports: backend $P_BACKEND nginx $P_NGINX gatehouse $P_GATEHOUSE haproxy $P_HAPROXY"

start_proc backend 0 nginx -p "$WORK/backend" -e "$WORK/backend/error.log" -c "$WORK/backend/nginx.conf"
wait_http backend "http://127.0.0.1:$P_BACKEND/$FIRST_FILE" "${SIZE[$FIRST_FILE]}" "$WORK/backend/error.log"

if want nginx; then
	start_proc nginx 1 nginx -p "$WORK/nginx" -e "$WORK/nginx/error.log" -c "$WORK/nginx/nginx.conf"
	wait_http nginx "http://127.0.0.1:$P_NGINX/$FIRST_FILE" "${SIZE[$FIRST_FILE]}" "$WORK/nginx/error.log"
fi

if want haproxy; then
	haproxy -c -q -f "$WORK/haproxy/haproxy.cfg" >&2 || die "haproxy rejected $WORK/haproxy/haproxy.cfg"
	start_proc haproxy 1 haproxy -db -f "$WORK/haproxy/haproxy.cfg"
	wait_http haproxy "http://127.0.0.1:$P_HAPROXY/$FIRST_FILE" "${SIZE[$FIRST_FILE]}"
fi

if want gatehouse; then
	if "$GATEHOUSE_BIN" --help 2>&1 | grep -Eq '^ +check '; then
		"$GATEHOUSE_BIN" check "$WORK/gatehouse/gatehouse.yaml" >"$WORK/gatehouse-check.txt" 2>&1 || {
			cat "$WORK/gatehouse-check.txt" >&2
			die "gatehouse check rejected $WORK/gatehouse/gatehouse.yaml (errors above)"
		}
	fi
	gh_args=(run --config "$WORK/gatehouse/gatehouse.yaml")
	status_json=0
	if "$GATEHOUSE_BIN" run --help 2>&1 | grep -q -- '--status-json'; then
		gh_args+=(--status-json)
		status_json=1
	fi
	start_proc gatehouse 1 "$GATEHOUSE_BIN" "${gh_args[@]}"
	if ((status_json)) && ! wait_line gatehouse "$WORK/gatehouse.out" '"event" *: *"ready"'; then
		kill -0 "${PID[gatehouse]}" 2>/dev/null || { show_logs gatehouse; die "gatehouse exited during start-up (config refused?)"; }
		log "warning: no {\"event\":\"ready\"} line from gatehouse after 10 s; falling back to polling"
	fi
	wait_http gatehouse "http://127.0.0.1:$P_GATEHOUSE/$FIRST_FILE" "${SIZE[$FIRST_FILE]}"
fi

# Every target must serve every file with the exact size before we measure.
for t in "${TARGET_LIST[@]}"; do
	for f in "${FILE_LIST[@]}"; do
		got=$(http_probe "http://127.0.0.1:${PORT[$t]}/$f")
		[[ $got == "200 ${SIZE[$f]}" ]] || die "sanity check: $t GET /$f -> '$got', want '200 ${SIZE[$f]}'"
	done
done

# ------------------------------------------------------------- measurement
backend_accepts() {
	curl -s --noproxy '*' --max-time 2 "http://127.0.0.1:$P_BACKEND/nginx_status" | awk 'NR == 3 { print $1 }'
}

tree_jiffies() { # tree_jiffies PID -> REPLY = utime+stime of PID and its descendants
	local line rest p
	local -a f
	REPLY=0
	descendants "$1"
	for p in "${REPLY_PIDS[@]}"; do
		read -r line 2>/dev/null <"/proc/$p/stat" || continue
		rest=${line##*) }
		read -r -a f <<<"$rest" # f[0] = field 3 (state); utime = field 14, stime = field 15
		REPLY=$((REPLY + f[11] + f[12]))
	done
}

# shellcheck disable=SC2034,SC2154 # s is a nameref to an associative array
snap() { # snap ARRAY_NAME PROXY_PID: CPU counters, no forks (keeps cutime clean)
	local -n s=$1
	local line rest busy total
	local -a f
	while read -r line; do
		case $line in
		"cpu "*)
			read -r -a f <<<"$line"
			s[user]=${f[1]} s[nice]=${f[2]} s[system]=${f[3]} s[idle]=${f[4]}
			s[iowait]=${f[5]} s[irq]=${f[6]} s[softirq]=${f[7]} s[steal]=${f[8]:-0}
			;;
		"cpu0 "* | "cpu1 "*)
			read -r -a f <<<"$line"
			busy=$((f[1] + f[2] + f[3] + f[6] + f[7]))
			total=$((busy + f[4] + f[5] + ${f[8]:-0}))
			s[${f[0]}_busy]=$busy s[${f[0]}_total]=$total
			;;
		intr*) break ;;
		esac
	done </proc/stat
	tree_jiffies "$2"
	s[proxy]=$REPLY
	tree_jiffies "${PID[backend]}"
	s[backend]=$REPLY
	# Children reaped by this shell (the load generator) land in its cutime+cstime.
	read -r line </proc/$$/stat
	rest=${line##*) }
	read -r -a f <<<"$rest"
	s[self_children]=$((f[13] + f[14]))
	s[t]=$EPOCHREALTIME
}

CSV=$WORK/proxy-runs.csv
SEQ=0

run_load() { # run_load REP TOOL TARGET FILE [warmup]
	local rep=$1 tool=$2 target=$3 file=$4 warm=${5:-}
	local url="http://127.0.0.1:${PORT[$target]}/$file" name pid rc=0 out a0 a1
	name=$([[ $target == direct ]] && echo backend || echo "$target")
	pid=${PID[$name]}
	if [[ -n $warm ]]; then
		taskset -c 0 timeout -k 5 $((WARMUP + 30)) wrk -t1 -c"$CONNS" -d"${WARMUP}s" "$url" \
			>"$WORK/runs/warmup-$target-$file.txt" 2>&1 || log "warning: warm-up of $target /$file exited non-zero"
		return 0
	fi
	SEQ=$((SEQ + 1))
	out=$WORK/runs/$(printf '%03d' "$SEQ")-$tool-$target-$file.txt
	if ((PRIME)); then
		taskset -c 0 timeout -k 5 60 ab -k -n $((CONNS * 10)) -c "$CONNS" "$url" >"$out.prime" 2>&1 ||
			log "warning: pool priming of $target /$file exited non-zero (see KEEP_WORKDIR=1 $out.prime)"
		sleep 0.2 # let the primer's client connections finish closing
	fi
	a0=$(backend_accepts) || die "cannot read backend stub_status"
	declare -A S0=() S1=()
	snap S0 "$pid"
	if [[ $tool == wrk ]]; then
		taskset -c 0 timeout -k 5 $((DURATION + 30)) \
			wrk -t1 -c"$CONNS" -d"${DURATION}s" --latency "$url" >"$out" 2>&1 &
	else
		taskset -c 0 timeout -k 5 "$AB_TIMEOUT" \
			ab -k -n "$AB_N" -c "$CONNS" "$url" >"$out" 2>&1 &
	fi
	LOADGEN_PID=$!
	wait "$LOADGEN_PID" || rc=$?
	LOADGEN_PID=
	snap S1 "$pid"
	a1=$(backend_accepts) || die "cannot read backend stub_status"
	kill -0 "$pid" 2>/dev/null || { show_logs "$name"; die "$name died during the $tool run against $target"; }
	local -a kv=(
		"rep=$rep" "seq=$SEQ" "target=$target" "file=$file" "exit_code=$rc" "clk_tck=$CLK_TCK"
		"wall_s=$(awk -v a="${S0[t]}" -v b="${S1[t]}" 'BEGIN { printf "%.6f", b - a }')"
		"proxy_j=$((S1[proxy] - S0[proxy]))" "backend_j=$((S1[backend] - S0[backend]))"
		"loadgen_j=$((S1[self_children] - S0[self_children]))"
		"accepts_before=$a0" "accepts_after=$a1"
	)
	local k
	for k in user nice system idle iowait irq softirq steal; do kv+=("${k}_j=$((S1[$k] - S0[$k]))"); done
	for k in cpu0_busy cpu0_total cpu1_busy cpu1_total; do kv+=("${k}_j=$((S1[$k] - S0[$k]))"); done
	python3 "$BENCH/lib/record_run.py" --csv "$CSV" --tool "$tool" --output "$out" "${kv[@]}"
}

rotated() { # rotated N -> REPLY_TARGETS = TARGET_LIST rotated left by N
	local n=${#TARGET_LIST[@]} i
	REPLY_TARGETS=()
	for ((i = 0; i < n; i++)); do REPLY_TARGETS+=("${TARGET_LIST[(i + $1) % n]}"); done
}

START_DATE=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
if ((WARMUP > 0)); then
	for f in "${FILE_LIST[@]}"; do
		for t in "${TARGET_LIST[@]}"; do
			log "warm-up: $t /$f (${WARMUP}s wrk)"
			run_load 0 wrk "$t" "$f" warmup
		done
	done
fi

for ((rep = 1; rep <= REPS; rep++)); do
	rotated $((rep - 1))
	log "rep $rep/$REPS: order ${REPLY_TARGETS[*]}"
	for f in "${FILE_LIST[@]}"; do
		for tool in "${TOOL_LIST[@]}"; do
			for t in "${REPLY_TARGETS[@]}"; do
				sleep "$SETTLE"
				run_load "$rep" "$tool" "$t" "$f"
			done
		done
	done
done

# ---------------------------------------------------------------- reporting
mkdir -p "$BENCH/results"
[[ -f $BENCH/results/.gitignore ]] || printf '*\n!.gitignore\n' >"$BENCH/results/.gitignore"
cp "$CSV" "$BENCH/results/proxy-latest.csv"

cpu_model=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo)
versions=("$(nginx -v 2>&1 | sed 's/^nginx version: //')")
want haproxy && versions+=("$(haproxy -v 2>/dev/null | head -n 1 | sed 's/ - https.*//; s/ *$//')")
for t in "${TOOL_LIST[@]}"; do
	case $t in
	wrk) versions+=("$( (wrk --version 2>&1 || true) | head -n 1 | awk '{ print "wrk " $2 }')") ;;
	ab) versions+=("$(ab -V 2>&1 | head -n 1 | sed 's/^This is //; s/, Version/ Version/; s/ <.*//')") ;;
	esac
done
[[ -n $GATEHOUSE_VERSION ]] && versions+=("gatehouse: ${GATEHOUSE_VERSION% }")
if git_rev=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null); then
	[[ -z $(git -C "$ROOT" status --porcelain 2>/dev/null | head -n 1) ]] || git_rev+=" + uncommitted changes"
else
	git_rev="no commit yet"
fi
{
	echo "- Date: $START_DATE (finished $(date -u '+%H:%M:%S UTC'))"
	echo "- Machine: $(nproc) CPUs, $cpu_model, Linux $(uname -r); clock tick $CLK_TCK Hz"
	printf -v vline '%s; ' "${versions[@]}"
	echo "- Versions: ${vline%; }"
	echo "- Source: git $git_rev"
	echo "- Settings: TARGETS=\"${TARGET_LIST[*]}\" TOOLS=\"${TOOL_LIST[*]}\" FILES=\"${FILE_LIST[*]}\" REPS=$REPS DURATION=${DURATION}s (wrk -t1 -c$CONNS --latency) AB_N=$AB_N (ab -k -c$CONNS) WARMUP=${WARMUP}s PRIME=$PRIME"
	echo "- Layout: backend nginx (1 worker) and load generator on CPU 0; proxy under test alone on CPU 1 with one worker/thread. Target order rotated by one each rep; runs interleaved."
	echo "- Columns: proxy CPU % = utime+stime of the proxy's process tree / wall time (100 % = one core; for direct: the backend's). req/s per proxy CPU-s = completed requests / proxy CPU-seconds. New backend conns = backend stub_status accepts delta during the run (pools warmed$( ((PRIME)) && echo " and refilled before each run"); for direct: the client's own connections). Others' CPU % = /proc/stat busy time (incl. irq/softirq) not used by proxy, backend or load generator (one core = 100 %). ab's p99 has 1 ms resolution. Raw per-run numbers: bench/results/proxy-latest.csv."
} >"$WORK/meta.md"

update=()
if [[ $BENCHMARKS_MD != none ]]; then
	[[ $BENCHMARKS_MD == /* ]] || BENCHMARKS_MD=$ORIG_PWD/$BENCHMARKS_MD
	update=(--update "$BENCHMARKS_MD")
fi
echo
python3 "$BENCH/lib/summarize.py" "$CSV" --heading "$HEADING" --meta "$WORK/meta.md" "${update[@]}"
echo
log "per-run CSV: $BENCH/results/proxy-latest.csv${update:+; updated $BENCHMARKS_MD}"
