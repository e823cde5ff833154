#!/usr/bin/env bash
# bench/soak.sh - Gatehouse under steady load for a long time: does its memory stay flat?
#
# Question answered:
#   Under DURATION seconds of steady, moderate load (keep-alive and connection churn, over plain
#   HTTP and TLS), does Gatehouse's resident memory stay flat (no leak), and its count of open
#   file descriptors with it?  (The hardening goal: a 10-minute soak with RSS flat.)
#
# Set-up (all on 127.0.0.1, free ports, a mktemp -d work dir removed on exit; nothing pinned):
#   a backend nginx (1 worker, static files); Gatehouse with `workers: auto`, a plain listener, a
#   TLS listener (ECDSA P-256 certificate from bench/lib/tls_certs.py, cached in
#   bench/.cache/tls-certs) and the admin listener; four h2load processes at once, each bounded
#   by its own duration or count and by `timeout`:
#     plain keep-alive   h2load --h1 -c KA_CONNS --rps KA_RPS -D DURATION   /test.html
#     TLS keep-alive     the same over TLS                                   /10k.html
#     plain churn        h2load --h1 -r CHURN_RATE (new connections per second), each connection
#                        CHURN_REQS requests then closed, for DURATION        /test.html
#     TLS churn          the same over TLS: a full handshake per connection   /5k.html
#   Every SAMPLE seconds while the load runs: Gatehouse's VmRSS, open fds (/proc/PID/fd), threads,
#   open connections and requests served (admin /metrics); once more SAMPLE seconds after the
#   load generators have ended.
#
# Verdict: a least-squares line through the RSS samples of the second half of the run; its
# slope (MB per minute) and the growth it gives over the second half (% of its value at the
# middle).  Exit status 1 when that growth is above GROWTH_LIMIT %, or when a load generator
# reports failed requests.
#
# Output: Markdown section on stdout (summary, then a sample table: every sample, or one a
# minute in long runs), also written to BENCHMARKS.md (the section "## Soak (bench/soak.sh)"
# is replaced, or appended; not with QUICK=1).
#
# Run (needs nginx, h2load, curl, python3):
#   bench/soak.sh                                        # builds gatehouse, 10 minutes
#   GATEHOUSE_BIN=target/release/gatehouse DURATION=120 bench/soak.sh
#   QUICK=1 GATEHOUSE_BIN=target/release/gatehouse bench/soak.sh   # 40 s smoke run
#
# Environment knobs (defaults in brackets; QUICK=1 defaults after the slash):
#   GATEHOUSE_BIN      binary to test; unset = `cargo build --release -p gatehouse`
#   DURATION [600/40]  seconds of load; SAMPLE [10/5] seconds between samples
#   KA_CONNS [40]      keep-alive connections per keep-alive generator; KA_RPS [12] requests/s each
#                      (KA_RPS x DURATION must stay under 10,000: Gatehouse's default
#                      max_requests_per_connection closes a connection after 10,000 requests, and
#                      h2load does not open it again)
#   CHURN_RATE [10]    new connections per second per churn generator; CHURN_REQS [20] per connection
#   GROWTH_LIMIT [10]  % of RSS growth over the second half that fails the run
#   CERT_CACHE [<repo>/bench/.cache/tls-certs]
#   BENCHMARKS_MD [<repo>/BENCHMARKS.md / none]   file to update; "none" = don't
#   KEEP_WORKDIR [0]   1 = keep the temp dir (configs, logs, raw outputs)

set -Eeuo pipefail

# shellcheck source=SCRIPTDIR/lib/common.sh
. "$(dirname "$0")/lib/common.sh"

DURATION=${DURATION:-$(pick 600 40)}
SAMPLE=${SAMPLE:-$(pick 10 5)}
KA_CONNS=${KA_CONNS:-40}
KA_RPS=${KA_RPS:-12}
CHURN_RATE=${CHURN_RATE:-10}
CHURN_REQS=${CHURN_REQS:-20}
GROWTH_LIMIT=${GROWTH_LIMIT:-10}
CERT_CACHE=${CERT_CACHE:-$BENCH/.cache/tls-certs}
BENCHMARKS_MD=${BENCHMARKS_MD:-$(pick "$ROOT/BENCHMARKS.md" none)}
KEEP_WORKDIR=${KEEP_WORKDIR:-0}
HEADING='## Soak (bench/soak.sh)'

log() { printf '[soak.sh %4ss] %s\n' "$SECONDS" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

check_integers DURATION SAMPLE KA_CONNS KA_RPS CHURN_RATE CHURN_REQS GROWTH_LIMIT
((SAMPLE >= 1 && DURATION >= 5 * SAMPLE)) || die "DURATION must be at least 5 x SAMPLE (and SAMPLE at least 1)"
((KA_CONNS >= 1 && KA_RPS >= 1 && CHURN_RATE >= 1 && CHURN_REQS >= 1)) ||
	die "KA_CONNS, KA_RPS, CHURN_RATE and CHURN_REQS must be at least 1"
((KA_RPS * DURATION < 10000)) ||
	die "KA_RPS x DURATION must be under 10,000: Gatehouse closes a keep-alive connection after 10,000 requests (max_requests_per_connection) and h2load does not reopen it"
need_commands nginx h2load curl python3 timeout
PYTHON=$(python3 -c 'import sys; print(sys.executable)')

gatehouse_binary
make_workdir gatehouse-soak-bench
HAPROXY_MAXCONN=1000 # raise_nofile checks HAProxy's budget; no HAProxy here
raise_nofile
mkdir -p "$WORK"/{www,runs}
make_certs >/dev/null
write_www "$WORK/www"
start_backend none

free_ports 3
read -r P_HTTP P_TLS P_ADMIN <<<"${REPLY_PORTS[*]}"
cat >"$WORK/gatehouse.yaml" <<EOF
workers: auto
access_log: { path: "off" }
admin: { bind: "127.0.0.1:$P_ADMIN", public: [/healthz, /metrics, /status] }
tls: { certificates: [{ cert: "$CERT_CACHE/ecdsa.pem" }], default_certificate: bench.test }
listeners:
  http: { bind: "127.0.0.1:$P_HTTP" }
  https: { bind: "127.0.0.1:$P_TLS", tls: {} }
$(gatehouse_upstream 256)
EOF
gatehouse_check "$WORK/gatehouse.yaml"
start_proc gatehouse none "$GATEHOUSE_BIN" run --config "$WORK/gatehouse.yaml"
wait_http gatehouse "http://127.0.0.1:$P_HTTP/test.html" "${SIZE[test.html]}"
wait_http gatehouse "https://127.0.0.1:$P_TLS/test.html" "${SIZE[test.html]}"
GH=${PID[gatehouse]}
LOAD_START=$(other_load)
log "work dir $WORK; gatehouse pid $GH on :$P_HTTP (HTTP) :$P_TLS (TLS); $LOAD_START"

# ------------------------------------------------------------------- load
churn_n=$((CHURN_RATE * DURATION))
declare -A LOAD=(
	[plain-keepalive]="--h1 -c $KA_CONNS --rps $KA_RPS -D $DURATION http://127.0.0.1:$P_HTTP/test.html"
	[tls-keepalive]="--h1 -c $KA_CONNS --rps $KA_RPS -D $DURATION https://127.0.0.1:$P_TLS/10k.html"
	[plain-churn]="--h1 -r $CHURN_RATE --rate-period 1s -c $churn_n -n $((churn_n * CHURN_REQS)) http://127.0.0.1:$P_HTTP/test.html"
	[tls-churn]="--h1 -r $CHURN_RATE --rate-period 1s -c $churn_n -n $((churn_n * CHURN_REQS)) https://127.0.0.1:$P_TLS/5k.html"
)
START_DATE=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
T0=$EPOCHREALTIME
for name in plain-keepalive tls-keepalive plain-churn tls-churn; do
	# shellcheck disable=SC2086 # the options are words
	start_proc "$name" none timeout -k 5 $((DURATION + 120)) h2load ${LOAD[$name]}
done

metrics() { # -> "OPEN REQUESTS" from the admin listener
	curl -s --noproxy '*' --max-time 2 "http://127.0.0.1:$P_ADMIN/metrics" | awk '
		$1 ~ /^gatehouse_connections_active($|\{)/ { a += $2 }
		$1 ~ /^gatehouse_requests_total($|\{)/ { r += $2 }
		END { printf "%d %d\n", a, r }'
}

SAMPLES=$WORK/samples.tsv # t_s rss_kb fds threads open requests
printf 't_s\trss_kb\tfds\tthreads\topen\trequests\n' >"$SAMPLES"
for ((i = 1; i * SAMPLE < DURATION; i++)); do
	next=$(awk -v t0="$T0" -v k=$((i * SAMPLE)) -v now="$EPOCHREALTIME" 'BEGIN { d = t0 + k - now; print (d > 0 ? d : 0) }')
	sleep "$next"
	kill -0 "$GH" 2>/dev/null || { show_logs gatehouse; die "gatehouse exited during the soak"; }
	tree_mem_kb "$GH"
	rss=$REPLY
	fds=$(find "/proc/$GH/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
	threads=$(awk '/^Threads:/ { print $2 }' "/proc/$GH/status")
	read -r open reqs <<<"$(metrics)"
	printf '%s\t%s\t%s\t%s\t%s\t%s\n' $((i * SAMPLE)) "$rss" "$fds" "$threads" "$open" "$reqs" >>"$SAMPLES"
	log "t=$((i * SAMPLE))s RSS $((rss / 1024)) MB, fds $fds, open $open, requests $reqs"
done
log "load duration over; waiting for the load generators"
for name in plain-keepalive tls-keepalive plain-churn tls-churn; do
	wait "${PID[$name]}" || log "warning: h2load $name exited non-zero (see its summary)"
	unset "PID[$name]"
done
sleep "$SAMPLE"
tree_mem_kb "$GH"
AFTER="$REPLY $(find "/proc/$GH/fd" -mindepth 1 -maxdepth 1 | wc -l) $(metrics)"
LOAD_END=$(other_load)

# ---------------------------------------------------------------- reporting
{
	echo "- Date: $START_DATE; **$DURATION s** of load, a sample every $SAMPLE s$( ((q)) && echo "; **QUICK=1 smoke run, not for conclusions**")"
	echo "- Machine: $(nproc) CPUs, $(cpu_model), Linux $(uname -r)"
	echo "- Other work on the machine: at start $LOAD_START; at end $LOAD_END"
	echo "- Versions: gatehouse: ${GATEHOUSE_VERSION% }; $(h2load --version 2>&1 | sed -n 1p); $(nginx -v 2>&1 | sed 's/^nginx version: //') (backend)"
	echo "- Source: git $(git_source crates/ Cargo.toml Cargo.lock)"
	echo "- Gatehouse \`workers: auto\` ($(nproc)), default listener settings, a plain and a TLS listener (ECDSA P-256), proxying over HTTP/1.1 keep-alive to a backend nginx; nothing pinned. Load, four h2load processes at once: plain keep-alive (-c $KA_CONNS --rps $KA_RPS, /test.html), TLS keep-alive (the same, /10k.html), plain churn (-r $CHURN_RATE new connections/s, $CHURN_REQS requests each, /test.html), TLS churn (the same with a full handshake each, /5k.html)."
} >"$WORK/meta.md"
update_args
rc=0
echo
"$PYTHON" "$BENCH/lib/soak_report.py" "$SAMPLES" --heading "$HEADING" --meta "$WORK/meta.md" \
	--growth-limit "$GROWTH_LIMIT" --after "$SAMPLE $AFTER" --load "$WORK"/plain-keepalive.out --load "$WORK"/tls-keepalive.out \
	--load "$WORK"/plain-churn.out --load "$WORK"/tls-churn.out "${REPLY_UPDATE[@]}" || rc=$?
echo
((rc == 0)) || log "FAILED: RSS grew more than $GROWTH_LIMIT % over the second half, or requests failed (see above)"
exit "$rc"
