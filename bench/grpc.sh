#!/usr/bin/env bash
# bench/grpc.sh - gRPC proxy benchmark: Gatehouse vs nginx vs HAProxy forwarding gRPC calls over
# cleartext HTTP/2 (h2c) on both sides.
#
# Question answered:
#   How many gRPC calls per proxy CPU-second does Gatehouse forward compared with nginx and
#   HAProxy, pinned to one core, same run: unary calls, and server-streaming calls of many
#   messages?
#   Goals (calls per proxy CPU-second): >= 1.3x nginx, >= 1.1x HAProxy.
#
# Set-up (all on 127.0.0.1, free ports picked at start, everything in a mktemp -d work dir that
# is removed on exit):
#   CPU 0: the backend, bench/grpc/server.go (grpc-go, GOMAXPROCS=BACKEND_PROCS, h2c; service
#          bench.B of bench/grpc/bench.proto, written by hand with wrapperspb.BytesValue, no
#          protoc), and the load generator, ghz (--cpus=1, plaintext h2c, --proto bench.proto,
#          the request as a serialized message from a file, -B).  Both are built with Go into
#          bench/.cache/bin on first use (ghz: `go install`, a few minutes).
#   CPU 1: the proxies, side by side, one loaded at a time, each with one worker/thread, h2c on
#          the listener and HTTP/2 to the backend over kept-alive connections:
#          Gatehouse (workers: 1; listener `protocol: h2c`; upstream `protocol: http2`, one
#          multiplexed connection per worker), nginx (worker_processes 1; `listen ... http2`, or
#          `http2 on` from 1.25.1; `grpc_pass grpc://backend`, upstream `keepalive 256`: one
#          upstream connection per call in progress, kept), HAProxy (nbthread 1; `bind ... proto
#          h2`, `server ... proto h2`, `http-reuse always`; stream row: a buffer that holds a
#          whole answer, see HAPROXY_STREAM_BUFSIZE); the h2-floor reference when asked for
#          (crates/h2-floor, one multiplexed backend connection).  One instance per (row, proxy), all
#          started at once.  Each allows max(256, CONCURRENCY / CONNECTIONS) streams per client
#          connection; nginx's keepalive_requests is 1,000,000 (its default of 1,000 would close
#          the client connections); every proxy adds the same forwarding headers as
#          bench/proxy.sh (nginx with grpc_set_header).
# Rows (ROWS):
#   unary   bench.B/Unary: a MSG_SIZE-byte request, echoed (MSG_SIZE bytes back).
#   stream  bench.B/Stream: a 1-byte request, answered with STREAM_MSGS messages of MSG_SIZE
#           bytes each; a call is done when the last message and the trailers arrived.
#   Both: ghz --connections=CONNECTIONS --concurrency=CONCURRENCY -z DURATION
#   --duration-stop=ignore (calls still in progress at the end are neither counted nor errors).
# Order: every proxy must first pass SANITY_CALLS calls of each row with status OK that the
# backend counted; each (row, proxy) then gets an unrecorded ghz warm-up (WARMUP s).  Then, for
# rep 1..REPS, for each row, every proxy runs once, the order rotated by one per rep (as
# bench/proxy.sh).  A call that does not end with status OK, in the sanity check, the warm-up or a
# measured run, stops the benchmark with ghz's errors (no report written; the runs so far are in
# bench/results/).
#
# Measured per run (raw numbers in a CSV, bench/lib/record_run.py --tool ghz): calls/s (ghz's
# rps), messages/s (stream: calls/s x STREAM_MSGS), p99 latency of a call (ghz -O json), proxy CPU
# % (CPU time of the proxy's process tree from /proc/*/task/*/schedstat, % of one core), calls per
# proxy CPU-second (completed calls / proxy CPU-seconds), new backend connections (the backend's
# own accept counter), others' CPU % (busy time outside proxy, backend and ghz).  The table gives
# the median and the min-max spread over the reps, then Gatehouse's ratios to nginx and HAProxy.
#
# Output: Markdown section on stdout, also written to BENCHMARKS.md (the section "## gRPC
# (bench/grpc.sh)" is replaced, or appended if absent; not with QUICK=1); per-run CSV copied to
# bench/results/grpc-latest.csv (QUICK=1: grpc-quick.csv).
#
# Run (from anywhere; needs nginx with http_v2, haproxy, go (1.26; once, to build ghz and the
# backend), curl, python3, taskset, and 2 CPUs):
#   bench/grpc.sh                                        # builds gatehouse (release)
#   GATEHOUSE_BIN=target/release/gatehouse bench/grpc.sh # about 3 minutes
#   QUICK=1 GATEHOUSE_BIN=target/release/gatehouse bench/grpc.sh   # smoke run, ~30 s
#   ROWS=stream TARGETS="gatehouse nginx" REPS=5 bench/grpc.sh
#
# Environment knobs (defaults in brackets; QUICK=1 defaults after the slash):
#   GATEHOUSE_BIN   binary to test; unset = `cargo build --release -p gatehouse`
#   QUICK [0]       1 = smoke run: short runs, one rep, BENCHMARKS.md untouched
#   ROWS [unary stream]                rows to run
#   TARGETS [gatehouse nginx haproxy]  proxies to compare; gatehouse-base adds GATEHOUSE_BASE_BIN,
#                   another build with the same configuration (before / after a change); h2-floor
#                   adds gatehouse-h2-floor (crates/h2-floor: h2 server in, h2 client out, the
#                   forwarding headers and nothing else), the floor of a proxy on the h2 crate
#   H2_FLOOR_BIN    the h2-floor target's binary; unset = `cargo build --release -p gatehouse-h2-floor`
#   GATEHOUSE_BASE_BIN  the gatehouse-base target's binary
#   DURATION [5/1]  seconds per measured ghz run
#   REPS [3/1]      reps of every (row, proxy)
#   CONNECTIONS [4] ghz --connections: client connections to the proxy
#   CONCURRENCY [100]  ghz --concurrency: calls in progress at once, spread over the connections
#   MSG_SIZE [1024] bytes of the unary request (and its echo) and of each stream message
#   STREAM_MSGS [100]  messages per stream call
#   BACKEND_PROCS [1]  the backend's GOMAXPROCS
#   WARMUP [2/1]    seconds of unrecorded ghz warm-up per (row, proxy); 0 = none
#   SANITY_CALLS [20]  calls per (row, proxy) that must pass before anything is measured
#   SETTLE [1/0.2]  seconds of sleep before each measured run
#   QUIET_WAIT [30/0]  then wait up to this many seconds for processes outside the bench and
#                   hypervisor steal to drop below QUIET_PCT % of a core (a build on a shared
#                   machine); the others' CPU column shows what was left
#   QUIET_PCT [20]
#   RETRIES [2/0]   a run during which processes outside the bench used more than QUIET_PCT % of
#                   a core is measured again, at most this many times (the report counts them)
#   HAPROXY_MAXCONN [4096]
#   HAPROXY_STREAM_BUFSIZE [auto]  HAProxy's tune.bufsize in the stream row; auto = the power of
#                   two that holds a whole answer (STREAM_MSGS x MSG_SIZE) and 16 KiB more: 131072
#                   by default.  HAProxy without the fix of haproxy issue #2388 (2.9.1; Debian 12's
#                   2.6.12 lacks it) cannot decode trailers that arrive while its receive buffer
#                   for the stream is full: it closes the server connection and the calls on it
#                   fail (INTERNAL, UNAVAILABLE).  0 = HAProxy's default (16384): fails there
#   GHZ_BIN         ghz to use; unset = bench/.cache/bin/ghz, installed (v0.93.0) when missing
#   BENCHMARKS_MD [<repo>/BENCHMARKS.md/none]   file to update; "none" = don't
#   KEEP_WORKDIR [0]         1 = keep the temp dir (configs, logs, ghz reports)

set -Eeuo pipefail

# ORIG_PWD = where it was started; then in the repository: ROOT, BENCH = ROOT/bench.
# shellcheck source=SCRIPTDIR/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
# shellcheck source=SCRIPTDIR/lib/grpc_tools.sh
. "$BENCH/lib/grpc_tools.sh"

ROWS=${ROWS:-unary stream}
TARGETS=${TARGETS:-gatehouse nginx haproxy}
DURATION=${DURATION:-$(pick 5 1)}
REPS=${REPS:-$(pick 3 1)}
CONNECTIONS=${CONNECTIONS:-4}
CONCURRENCY=${CONCURRENCY:-100}
MSG_SIZE=${MSG_SIZE:-1024}
STREAM_MSGS=${STREAM_MSGS:-100}
BACKEND_PROCS=${BACKEND_PROCS:-1}
WARMUP=${WARMUP:-$(pick 2 1)}
SANITY_CALLS=${SANITY_CALLS:-20}
SETTLE=${SETTLE:-$(pick 1 0.2)}
QUIET_WAIT=${QUIET_WAIT:-$(pick 30 0)}
QUIET_PCT=${QUIET_PCT:-20}
RETRIES=${RETRIES:-$(pick 2 0)}
HAPROXY_MAXCONN=${HAPROXY_MAXCONN:-4096}
HAPROXY_STREAM_BUFSIZE=${HAPROXY_STREAM_BUFSIZE:-auto}
GHZ_VERSION=v0.93.0
GHZ_BIN=${GHZ_BIN:-}
# A smoke run's numbers are not for the record.
BENCHMARKS_MD=${BENCHMARKS_MD:-$(pick "$ROOT/BENCHMARKS.md" none)}
RESULTS_NAME=$(pick grpc-latest.csv grpc-quick.csv)
KEEP_WORKDIR=${KEEP_WORKDIR:-0}
HEADING='## gRPC (bench/grpc.sh)'
PROTO=$BENCH/grpc/bench.proto

log() { printf '[grpc.sh %3ss] %s\n' "$SECONDS" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# ---------------------------------------------------------------- validation
check_integers DURATION REPS CONNECTIONS CONCURRENCY MSG_SIZE STREAM_MSGS BACKEND_PROCS WARMUP SANITY_CALLS \
	QUIET_WAIT QUIET_PCT RETRIES HAPROXY_MAXCONN
[[ $SETTLE =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "SETTLE must be a number of seconds (got '$SETTLE')"
((DURATION >= 1 && REPS >= 1 && CONNECTIONS >= 1 && STREAM_MSGS >= 1 && BACKEND_PROCS >= 1 && SANITY_CALLS >= 1)) ||
	die "DURATION, REPS, CONNECTIONS, STREAM_MSGS, BACKEND_PROCS and SANITY_CALLS must be at least 1"
((CONCURRENCY >= CONNECTIONS)) || die "CONCURRENCY ($CONCURRENCY) must be at least CONNECTIONS ($CONNECTIONS)"
((MSG_SIZE >= 1 && MSG_SIZE <= 4000000)) || die "MSG_SIZE must be from 1 to 4000000 (gRPC's 4 MiB message limit)"
read -r -a ROW_LIST <<<"$ROWS"
read -r -a TARGET_LIST <<<"$TARGETS"
((${#ROW_LIST[@]} && ${#TARGET_LIST[@]})) || die "ROWS and TARGETS must not be empty"
for r in "${ROW_LIST[@]}"; do
	case $r in unary | stream) ;; *) die "unknown row '$r' in ROWS (unary stream)" ;; esac
done
for t in "${TARGET_LIST[@]}"; do
	case $t in gatehouse | gatehouse-base | nginx | haproxy | h2-floor) ;;
	*) die "unknown target '$t' in TARGETS (gatehouse gatehouse-base nginx haproxy h2-floor)" ;;
	esac
done
if [[ $HAPROXY_STREAM_BUFSIZE == auto ]]; then
	# A stream answer's messages (5-byte gRPC prefix each), headers and trailers, in one buffer.
	HAPROXY_STREAM_BUFSIZE=16384
	while ((HAPROXY_STREAM_BUFSIZE < STREAM_MSGS * (MSG_SIZE + 5) + 16384)); do
		HAPROXY_STREAM_BUFSIZE=$((HAPROXY_STREAM_BUFSIZE * 2))
	done
fi
check_integers HAPROXY_STREAM_BUFSIZE
# Streams each proxy allows on one client connection: ghz spreads the calls evenly.
MAX_STREAMS=$(((CONCURRENCY + CONNECTIONS - 1) / CONNECTIONS))
((MAX_STREAMS < 256)) && MAX_STREAMS=256
((MAX_STREAMS <= 10000)) || die "CONCURRENCY / CONNECTIONS must be at most 10000 (Gatehouse's http2_max_concurrent_streams)"

need=(curl python3 taskset getconf timeout)
want nginx && need+=(nginx)
want haproxy && need+=(haproxy)
need_commands "${need[@]}"
(($(nproc) >= 2)) || die "needs at least 2 CPUs (CPU 0: backend + load generator, CPU 1: proxy)"
taskset -c 1 true 2>/dev/null || die "cannot pin to CPU 1 (taskset -c 1 failed)"
if want nginx; then
	[[ $(nginx -V 2>&1) == *--with-http_v2_module* ]] || die "this nginx has no HTTP/2 (--with-http_v2_module)"
	NGINX_VERSION=$(nginx -v 2>&1 | sed -n 's|.*nginx/\([0-9.]*\).*|\1|p')
fi

CLK_TCK=$(getconf CLK_TCK)

# ------------------------------------------------------------ binaries
GATEHOUSE_VERSION=
want gatehouse && gatehouse_binary
want gatehouse-base && gatehouse_base_binary
want h2-floor && workspace_binary H2_FLOOR_BIN gatehouse-h2-floor

ghz_binary
server_binary

# --------------------------------------------------- work dir, process cleanup
make_workdir gatehouse-grpc-bench
raise_nofile
mkdir -p "$WORK/runs"

write_requests "$WORK" "$MSG_SIZE"
declare -A METHOD=([unary]=bench.B/Unary [stream]=bench.B/Stream)
declare -A MSGS_PER_CALL=([unary]=1 [stream]=$STREAM_MSGS)

# ------------------------------------------------------------------ backend
free_ports 2
P_BACKEND=${REPLY_PORTS[0]}
P_STATUS=${REPLY_PORTS[1]}
start_proc backend 0 env "GOMAXPROCS=$BACKEND_PROCS" "$SERVER_BIN" -addr "127.0.0.1:$P_BACKEND" \
	-status "127.0.0.1:$P_STATUS" -stream-msgs "$STREAM_MSGS" -stream-size "$MSG_SIZE"

backend_counters() { # -> "ACCEPTS CALLS": connections accepted and calls served by the backend so far
	curl -s --noproxy '*' --max-time 2 "http://127.0.0.1:$P_STATUS/" |
		awk '$1 == "accepts" { a = $2 } $1 == "calls" { c = $2 } END { if (a != "") print a, c; else exit 1 }'
}

for ((i = 0; ; i++)); do
	kill -0 "${PID[backend]}" 2>/dev/null || { show_logs backend; die "the backend exited during start-up"; }
	backend_counters >/dev/null && break
	((i < 100)) || { show_logs backend; die "the backend is not answering on :$P_STATUS after 10 s"; }
	sleep 0.1
done

# ------------------------------------------------------------------ proxies
declare -A PORT=()
NGINX_FORWARDING=$(rig_constant NGINX_FORWARDING_LINES | sed 's/^proxy_set_header /grpc_set_header /; s/^/            /')

version_at_least() { printf '%s\n%s\n' "$2" "$1" | sort -V -C; } # version_at_least HAVE WANT

nginx_grpc_conf() { # nginx_grpc_conf DIR PORT -> nginx.conf: h2c listener, grpc_pass to the backend, kept alive
	local listen="listen 127.0.0.1:$2 http2 backlog=4096;"
	version_at_least "$NGINX_VERSION" 1.25.1 && listen="listen 127.0.0.1:$2 backlog=4096;
        http2 on;"
	nginx_head "$1" 1
	cat <<EOF
http {
$(nginx_temp_paths "$1")
    access_log off;
    keepalive_timeout 75s;
    keepalive_requests 1000000;
    http2_max_concurrent_streams $MAX_STREAMS;
    upstream backend {
        server 127.0.0.1:$P_BACKEND;
        keepalive 256;
        keepalive_requests 1000000;
        keepalive_timeout 60s;
    }
    server {
        $listen
        location / {
            grpc_pass grpc://backend;
$NGINX_FORWARDING
        }
    }
}
EOF
}

start_proxy() { # start_proxy ROW TARGET: the instance ROW-TARGET written and checked, started on CPU 1
	local row=$1 t=$2 inst=$1-$2 dir=$WORK/$1-$2 global="    tune.h2.max-concurrent-streams $MAX_STREAMS"
	mkdir -p "$dir"
	free_ports 1
	PORT[$inst]=${REPLY_PORTS[0]}
	case $t in
	gatehouse | gatehouse-base)
		cat >"$dir/gatehouse.yaml" <<EOF
workers: 1
reuse_port: true
cpu_affinity: off
access_log: { path: "off" }
listeners:
  main: { bind: "127.0.0.1:${PORT[$inst]}", protocol: h2c, max_connections: 20000, http2_max_concurrent_streams: $MAX_STREAMS }
$(gatehouse_upstream 256 "127.0.0.1:$P_BACKEND" "    protocol: http2")
EOF
		gatehouse_check "$dir/gatehouse.yaml"
		local bin=$GATEHOUSE_BIN
		[[ $t == gatehouse-base ]] && bin=$GATEHOUSE_BASE_BIN
		start_proc "$inst" 1 "$bin" run --config "$dir/gatehouse.yaml"
		;;
	nginx)
		nginx_grpc_conf "$dir" "${PORT[$inst]}" >"$dir/nginx.conf"
		nginx -t -q -p "$dir" -e "$dir/error.log" -c "$dir/nginx.conf" || die "nginx rejected $dir/nginx.conf"
		start_proc "$inst" 1 nginx -p "$dir" -e "$dir/error.log" -c "$dir/nginx.conf"
		;;
	haproxy)
		[[ $row == stream ]] && ((HAPROXY_STREAM_BUFSIZE)) && global+=$'\n'"    tune.bufsize $HAPROXY_STREAM_BUFSIZE"
		haproxy_cfg 1 "    bind 127.0.0.1:${PORT[$inst]} proto h2"$'\n' "$global" \
			"    http-reuse always"$'\n'"    server backend 127.0.0.1:$P_BACKEND proto h2" >"$dir/haproxy.cfg"
		haproxy -c -q -f "$dir/haproxy.cfg" >&2 || die "haproxy rejected $dir/haproxy.cfg"
		start_proc "$inst" 1 haproxy -db -f "$dir/haproxy.cfg"
		;;
	h2-floor)
		start_proc "$inst" 1 "$H2_FLOOR_BIN" --listen "127.0.0.1:${PORT[$inst]}" --backend "127.0.0.1:$P_BACKEND" \
			--max-streams "$MAX_STREAMS"
		;;
	esac
}

error_log() { # error_log INSTANCE -> the proxy's own error log, if it has one
	[[ $1 == *-nginx ]] && echo "$WORK/$1/error.log"
	return 0
}

wait_port() { # wait_port INSTANCE: its port accepts connections; at most ~10 s
	local i
	for ((i = 0; i < 100; i++)); do
		kill -0 "${PID[$1]}" 2>/dev/null || { show_logs "$1" "$(error_log "$1")"; die "$1 exited during start-up"; }
		(exec 3<>"/dev/tcp/127.0.0.1/${PORT[$1]}") 2>/dev/null && return 0
		sleep 0.1
	done
	show_logs "$1" "$(error_log "$1")"
	die "$1 is not listening on :${PORT[$1]} after 10 s"
}

for row in "${ROW_LIST[@]}"; do
	for t in "${TARGET_LIST[@]}"; do start_proxy "$row" "$t"; done
done
log "work dir $WORK; backend :$P_BACKEND (h2c), counters :$P_STATUS"
for row in "${ROW_LIST[@]}"; do
	for t in "${TARGET_LIST[@]}"; do wait_port "$row-$t"; done
done

# ------------------------------------------------------------------ ghz
# run_ghz ROW TARGET OUT LIMIT...: one ghz run of ROW's method through TARGET on CPU 0, its JSON report
# in OUT (its own messages in OUT.log); LIMIT is -z 5s or -n N; returns ghz's exit code.
run_ghz() {
	local row=$1 t=$2 out=$3
	shift 3
	taskset -c 0 timeout -k 5 $((DURATION + WARMUP + 60)) "$GHZ_BIN" --insecure --proto "$PROTO" \
		--call "${METHOD[$row]}" -B "$WORK/$row.bin" --cpus=1 --connect-timeout=5s --timeout=20s \
		--duration-stop=ignore -O json -o "$out" "$@" "127.0.0.1:${PORT[$row-$t]}" >"$out.log" 2>&1 &
	LOADGEN_PID=$!
	local rc=0
	wait "$LOADGEN_PID" || rc=$?
	LOADGEN_PID=
	return "$rc"
}

failed() { # failed INSTANCE WHAT OUT VERDICT: the evidence shown, the runs so far kept, the bench stopped
	[[ -s $3.log ]] && { log "--- ghz's output ($3.log)"; tail -n 20 "$3.log" >&2; }
	show_logs "$1" "$(error_log "$1")"
	show_logs backend
	[[ -s ${CSV:-} ]] && results_csv "$CSV" "$RESULTS_NAME" && log "runs so far: bench/results/$RESULTS_NAME"
	die "$2 through $1 failed: $4"
}

# Every proxy must pass calls of every row that the backend answered, before anything is measured.
for row in "${ROW_LIST[@]}"; do
	for t in "${TARGET_LIST[@]}"; do
		out=$WORK/runs/sanity-$row-$t.json
		c=$(backend_counters) || die "cannot read the backend's counters"
		read -r -a c0 <<<"$c"
		rc=0
		run_ghz "$row" "$t" "$out" -n "$SANITY_CALLS" -c 2 --connections=1 || rc=$?
		verdict=$(ghz_verdict "$out" "$SANITY_CALLS") || failed "$row-$t" "sanity check ($SANITY_CALLS calls)" "$out" "$verdict"
		((rc == 0)) || failed "$row-$t" "sanity check" "$out" "ghz exited with $rc"
		c=$(backend_counters) || die "cannot read the backend's counters"
		read -r -a c1 <<<"$c"
		((c1[1] - c0[1] >= SANITY_CALLS)) ||
			failed "$row-$t" "sanity check" "$out" "the backend served $((c1[1] - c0[1])) of the $SANITY_CALLS calls"
		log "up: $row-$t at h2c://127.0.0.1:${PORT[$row-$t]} ($SANITY_CALLS calls, all OK)"
	done
done

# ------------------------------------------------------------- measurement
CSV=$WORK/grpc-runs.csv
SEQ=0
EXTRA=row,msgs_per_call,backend_calls

measure() { # measure REP ROW TARGET [warmup]: one ghz run through ROW-TARGET, one CSV row
	local rep=$1 row=$2 t=$3 inst=$2-$3 warm=${4:-} pid=${PID[$2-$3]} out rc=0 verdict
	local -a load=(--connections="$CONNECTIONS" --concurrency="$CONCURRENCY")
	if [[ -n $warm ]]; then
		out=$WORK/runs/warmup-$row-$t.json
		run_ghz "$row" "$t" "$out" "${load[@]}" -z "${WARMUP}s" || rc=$?
		verdict=$(ghz_verdict "$out") || failed "$inst" "warm-up" "$out" "$verdict"
		((rc == 0)) || failed "$inst" "warm-up" "$out" "ghz exited with $rc"
		return 0
	fi
	SEQ=$((SEQ + 1))
	out=$WORK/runs/$(printf '%03d' "$SEQ")-$row-$t.json
	local c
	local -a c0 c1
	c=$(backend_counters) || die "cannot read the backend's counters"
	read -r -a c0 <<<"$c"
	declare -A S0=() S1=()
	snap S0 "$pid"
	run_ghz "$row" "$t" "$out" "${load[@]}" -z "${DURATION}s" || rc=$?
	snap S1 "$pid"
	c=$(backend_counters) || die "cannot read the backend's counters"
	read -r -a c1 <<<"$c"
	kill -0 "$pid" 2>/dev/null || { show_logs "$inst" "$(error_log "$inst")"; die "$inst died during its run"; }
	local -a kv=(
		"rep=$rep" "seq=$SEQ" "row=$row" "target=$t" "file=${MSG_SIZE}B" "exit_code=$rc" "clk_tck=$CLK_TCK"
		"proxy_j=$((S1[server] - S0[server]))" "loadgen_j=$((S1[self_children] - S0[self_children]))"
		"accepts_before=${c0[0]}" "accepts_after=${c1[0]}" "accepts_self=0"
		"msgs_per_call=${MSGS_PER_CALL[$row]}" "backend_calls=$((c1[1] - c0[1]))"
	)
	snap_deltas S0 S1
	kv+=("${REPLY_KV[@]}")
	"$PYTHON" "$BENCH/lib/record_run.py" --csv "$CSV" --tool ghz --output "$out" --extra "$EXTRA" "${kv[@]}"
	verdict=$(ghz_verdict "$out") || failed "$inst" "rep $rep" "$out" "$verdict"
	((rc == 0)) || failed "$inst" "rep $rep" "$out" "ghz exited with $rc"
}

START_DATE=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
LOAD_START=$(other_load)
log "$LOAD_START"
if ((WARMUP > 0)); then
	for row in "${ROW_LIST[@]}"; do
		for t in "${TARGET_LIST[@]}"; do
			log "warm-up: $row $t (${WARMUP}s ghz)"
			measure 0 "$row" "$t" warmup
		done
	done
fi

REMEASURED=0
for ((rep = 1; rep <= REPS; rep++)); do
	rotated $((rep - 1)) "${TARGET_LIST[@]}"
	for row in "${ROW_LIST[@]}"; do
		log "rep $rep/$REPS, $row: order ${REPLY_TARGETS[*]}"
		for t in "${REPLY_TARGETS[@]}"; do
			measure_quietly "$rep" "$row" "$t" "$row $t"
		done
	done
done

# ---------------------------------------------------------------- reporting
results_csv "$CSV" "$RESULTS_NAME"
versions=()
# sed and awk read to the end: no SIGPIPE for the version commands under pipefail.
want nginx && versions+=("nginx $NGINX_VERSION")
want haproxy && versions+=("$(haproxy -v 2>/dev/null | sed -n '1 { s/ - https.*//; s/ *$//; p }')")
if command -v go >/dev/null; then
	versions+=("ghz $(mod_version "$GHZ_BIN" github.com/bojand/ghz)"
		"backend grpc-go $(mod_version "$SERVER_BIN" google.golang.org/grpc), $(go version "$SERVER_BIN" | awk '{ print $2 }')")
fi
[[ -n $GATEHOUSE_VERSION ]] && versions+=("gatehouse: ${GATEHOUSE_VERSION% }")
{
	echo "- Date: $START_DATE (finished $(date -u '+%H:%M:%S UTC'))"
	echo "- Machine: $(nproc) CPUs, $(cpu_model), Linux $(uname -r); at start: $LOAD_START"
	printf -v vline '%s; ' "${versions[@]}"
	echo "- Versions: ${vline%; }"
	# The code's state, not BENCHMARKS.md's (an earlier run's section there is no change to what ran).
	echo "- Source: git $(git_source crates bench Cargo.toml Cargo.lock)"
	echo "- Settings: ROWS=\"${ROW_LIST[*]}\" TARGETS=\"${TARGET_LIST[*]}\" REPS=$REPS DURATION=${DURATION}s (ghz --connections=$CONNECTIONS --concurrency=$CONCURRENCY --duration-stop=ignore) MSG_SIZE=$MSG_SIZE STREAM_MSGS=$STREAM_MSGS BACKEND_PROCS=$BACKEND_PROCS WARMUP=${WARMUP}s QUIET_WAIT=${QUIET_WAIT}s QUIET_PCT=$QUIET_PCT RETRIES=$RETRIES; runs measured again for a disturbance: $REMEASURED"
	echo "- Layout: backend (grpc-go, GOMAXPROCS=$BACKEND_PROCS) and ghz (--cpus=1) on CPU 0; the proxy under test alone on CPU 1 with one worker/thread. Proxies of a row rotated by one each rep; rows interleaved."
	echo "- Calls: unary = bench.B/Unary, a $MSG_SIZE-byte message echoed; stream = bench.B/Stream, a 1-byte request answered with $STREAM_MSGS messages of $MSG_SIZE bytes (bench/grpc/bench.proto). Cleartext HTTP/2 (h2c) on both sides of every proxy."
	want h2-floor && echo "- h2 floor (reference, not a proxy to run): gatehouse-h2-floor (crates/h2-floor), the same vendored h2 and tokio as Gatehouse with nothing but h2 in, h2 out over one multiplexed backend connection, the forwarding headers below and Gatehouse's windows, send buffers and back-pressure; no routing, limits, deadlines, timeouts, metrics or logs."
	echo "- Upstream connections: Gatehouse \`protocol: http2\` (one multiplexed connection per worker); nginx \`grpc_pass\` with upstream \`keepalive 256\` (one connection per call in progress, kept); HAProxy \`proto h2\`, \`http-reuse always\` (multiplexed). Streams per client connection allowed: $MAX_STREAMS in each."
	if want haproxy && [[ " ${ROW_LIST[*]} " == *" stream "* ]]; then
		if ((HAPROXY_STREAM_BUFSIZE)); then
			echo "- HAProxy, stream row: \`tune.bufsize $HAPROXY_STREAM_BUFSIZE\` (default 16384), so that a whole answer fits in its receive buffer: with the default, an HAProxy without the fix of haproxy issue #2388 (2.9.1) fails calls whose trailers arrive while that buffer is full (it closes the server connection)."
		else
			echo "- HAProxy, stream row: default \`tune.bufsize\` (16384)."
		fi
	fi
	echo "- Same work per call: every proxy adds X-Forwarded-For, X-Real-IP, X-Forwarded-Proto and an X-Request-Id sent upstream and echoed to the client (Gatehouse's defaults; nginx \`grpc_set_header\` and \`add_header ... always\` with \`\$request_id\`; HAProxy \`option forwardfor\`, \`http-request set-header\`, \`unique-id-header\`)."
	echo "- Columns: each cell is the median over the reps with the min–max spread. Calls/s = ghz's rate of completed calls (status OK; a run with any other status stops the bench); messages/s = calls/s × $STREAM_MSGS for stream. Proxy CPU % = CPU time of the proxy's process tree (schedstat) / wall time (100 % = one core). Calls per proxy CPU-s = completed calls / proxy CPU-seconds. p99 = ghz's 99th percentile of a call's latency (stream: until its last message and trailers). New backend conns = connections the backend accepted during the run. Others' CPU % = busy time not used by proxy, backend or ghz. Raw per-run numbers: bench/results/$RESULTS_NAME."
} >"$WORK/meta.md"

update_args
echo
"$PYTHON" "$BENCH/lib/grpc_summarize.py" "$CSV" --heading "$HEADING" --meta "$WORK/meta.md" "${REPLY_UPDATE[@]}"
echo
log "per-run CSV: $BENCH/results/$RESULTS_NAME${REPLY_UPDATE:+; updated $BENCHMARKS_MD}"
