#!/usr/bin/env bash
# bench/gateway.sh - the classic API-gateway load test: Gatehouse as an API gateway vs nginx
# direct, in the same run.
#
# Question answered:
#   What does Gatehouse's gateway stage (app key, grant, ACL, local rate-limit plan, header
#   rewrite) cost on top of plain proxying, and what does a hop through Gatehouse add to
#   nginx serving the same small object directly, under ab -k -c 100?  Goals: gateway req/s
#   at least 0.95 of the bare route's; mean latency added to direct at most 0.2 ms.
#
# Set-up (all on 127.0.0.1, free ports picked at start, everything in a mktemp -d work dir that
# is removed on exit):
#   CPU 0: backend nginx (1 worker, keep-alive, serves test.html of BODY_SIZE bytes, the
#          object of the original report) + ab.
#   CPU 1: the proxies, side by side, only one loaded at a time: Gatehouse (workers: 1),
#          HAProxy (nbthread 1, http-reuse always), nginx (worker_processes 1, upstream
#          keepalive 256).
#   Gatehouse has one service /svc (auth app_key, ACL GET/HEAD on /**, request header set,
#   response header removed) granted to app "bench" with plan "gold" (one local rate limit far
#   above the load), and a bare site route / to the same backend.
#
# Rows (TARGETS), each ab -k -n AB_N -c CONNS on the same object:
#   direct              ab -> nginx
#   bare                ab -> Gatehouse site route /test.html -> nginx
#   service             ab -> Gatehouse /plain/test.html, a service without plugins (prefix stripped) -> nginx
#   gateway             ab -> Gatehouse /svc/~KEY/test.html (key in the path, stripped) -> nginx
#   gateway-header-key  ab -H 'X-APP-KEY: KEY' -> Gatehouse /svc/test.html -> nginx
#   gateway-cluster     ab -> Gatehouse /csvc/~KEY/test.html: as gateway, but the plan's limit is
#                       cluster-wide, one Lua script per request in a redis-server on CPU 0 (not in
#                       the default TARGETS; the Redis client's cost on the request path)
#   haproxy             ab -> HAProxy -> nginx (peer of bare)
#   nginx-proxy         ab -> nginx proxy_pass, keepalive 256 -> nginx (peer of bare)
# Before measuring, every row must answer 200 with exactly test.html's bytes, and the service
# must refuse a missing key, a wrong key (401) and a POST (403, ACL); after each gateway run the
# service's admitted counter must have grown by the requests ab completed.  Each row gets an
# unrecorded warm-up, and each run a short clean ab burst first that refills upstream pools
# (PRIME).  Then REPS rounds; in each, every row runs once at -c CONNS, then once at -c 1
# (LAT_N requests: latency without a queue); the row order rotates by one per round.  The goal
# figures pair the rows within a round (a ratio or a difference per round) and take the median
# over the rounds: what drifts between rounds cancels, and a round a burst hit drops out.
#
# Measured per run (raw numbers in a CSV, see bench/lib/gateway_record.py): req/s, mean
# latency (ab's "Time per request" mean across all concurrent requests), p50/p99 (ab's table,
# whole ms), failed and non-2xx requests, server CPU-seconds per 10k requests (CPU time of the
# server's process tree from /proc/*/task/*/schedstat, or utime+stime ticks from /proc/PID/stat
# when one of its threads ended during the run; for direct the backend's), new backend
# connections (backend stub_status accepts), others' CPU (busy time not ours).
#
# Output: a Markdown section on stdout, also written to bench/results/gateway-DATE-HHMM.md
# (QUICK=1: gateway-quick-DATE-HHMM.md) with the configurations appended; per-run CSV beside
# it (.csv) and in bench/results/gateway-latest.csv (QUICK=1: gateway-quick.csv).  BENCHMARKS.md is not
# touched: its "## API gateway" section carries a written reading of a full run.
#
# Run (from anywhere; needs nginx, ab, curl, python3, taskset, 2 CPUs; haproxy for that row):
#   bench/gateway.sh                                        # builds gatehouse (release)
#   GATEHOUSE_BIN=target/release/gatehouse bench/gateway.sh # about 5 minutes
#   QUICK=1 bench/gateway.sh                                # smoke run, ~10 s after the build
#   TARGETS="bare gateway" REPS=5 bench/gateway.sh
#
# Environment knobs (defaults in brackets; QUICK=1 defaults after the slash):
#   GATEHOUSE_BIN   binary to test; unset = `cargo build --release -p gatehouse`
#   QUICK [0]       1 = smoke run: one round, small counts
#   REPS [7/1]      rounds (with 7 rows, each row runs once in each position of the order)
#   AB_N [200000/20000]   requests per measured ab -c CONNS run
#   CONNS [100]     ab -c
#   LAT_N [5000/1000]     requests per ab -c 1 run; 0 = no unqueued-latency runs
#   TARGETS [direct bare service haproxy gateway nginx-proxy gateway-header-key]   rows and their
#                   order in round 1
#   WARMUP_N [20000/5000] requests of the unrecorded warm-up of each row
#   PRIME [1]       1 = CONNS x 10 requests before each measured run; 0 = off
#   SETTLE [1/0.2]  seconds of sleep before each measured -c CONNS run
#   QUIET_WAIT [20/0]  before each round, wait up to this many seconds for processes outside
#                   the bench and hypervisor steal to drop below QUIET_PCT % of a core (both
#                   are reported per row either way)
#   QUIET_PCT [20]
#   BODY_SIZE [600] bytes of test.html
#   APP_KEY [BENCHKEY123]
#   AB_TIMEOUT [300]     hard limit for one ab run, seconds
#   HAPROXY_MAXCONN [4096]
#   KEEP_WORKDIR [0]     1 = keep the temp dir (configs, logs, raw ab outputs)

set -Eeuo pipefail

# ORIG_PWD = where it was started; then in the repository: ROOT, BENCH = ROOT/bench.
# shellcheck source=SCRIPTDIR/lib/common.sh
. "$(dirname "$0")/lib/common.sh"

REPS=${REPS:-$(pick 7 1)}
AB_N=${AB_N:-$(pick 200000 20000)}
CONNS=${CONNS:-100}
LAT_N=${LAT_N:-$(pick 5000 1000)}
TARGETS=${TARGETS:-direct bare service haproxy gateway nginx-proxy gateway-header-key}
WARMUP_N=${WARMUP_N:-$(pick 20000 5000)}
PRIME=${PRIME:-1}
SETTLE=${SETTLE:-$(pick 1 0.2)}
QUIET_WAIT=${QUIET_WAIT:-$(pick 20 0)}
QUIET_PCT=${QUIET_PCT:-20}
BODY_SIZE=${BODY_SIZE:-600}
APP_KEY=${APP_KEY:-BENCHKEY123}
AB_TIMEOUT=${AB_TIMEOUT:-300}
HAPROXY_MAXCONN=${HAPROXY_MAXCONN:-4096}
KEEP_WORKDIR=${KEEP_WORKDIR:-0}
HEADING='## API gateway (bench/gateway.sh)'

log() { printf '[gateway.sh %3ss] %s\n' "$SECONDS" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# ---------------------------------------------------------------- validation
check_integers REPS AB_N CONNS LAT_N WARMUP_N PRIME QUIET_WAIT QUIET_PCT BODY_SIZE AB_TIMEOUT HAPROXY_MAXCONN
[[ $SETTLE =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "SETTLE must be a number of seconds (got '$SETTLE')"
((REPS >= 1 && CONNS >= 1 && AB_N >= CONNS)) || die "REPS and CONNS must be at least 1, AB_N at least CONNS"
((BODY_SIZE >= 64)) || die "BODY_SIZE must be at least 64 bytes"
[[ $APP_KEY =~ ^[A-Za-z0-9_-]+$ ]] || die "APP_KEY must be letters, digits, _ or - (it goes in a path and a header)"

read -r -a TARGET_LIST <<<"$TARGETS"
((${#TARGET_LIST[@]})) || die "TARGETS must not be empty"
declare -A SERVER=([direct]=backend [bare]=gatehouse [service]=gatehouse [gateway]=gatehouse [gateway-header-key]=gatehouse
	[gateway-cluster]=gatehouse [haproxy]=haproxy [nginx-proxy]=nginx)
declare -A URL_PATH=([direct]=/test.html [bare]=/test.html [service]=/plain/test.html [gateway]="/svc/~$APP_KEY/test.html"
	[gateway-header-key]=/svc/test.html [gateway-cluster]="/csvc/~$APP_KEY/test.html" [haproxy]=/test.html
	[nginx-proxy]=/test.html)
declare -A HEADER=([gateway-header-key]="X-APP-KEY: $APP_KEY")
for t in "${TARGET_LIST[@]}"; do
	[[ -n ${SERVER[$t]:-} ]] || die "unknown target '$t' in TARGETS (${!SERVER[*]})"
done
wants_server() { # wants_server NAME: some target of TARGETS is served by NAME
	local t
	for t in "${TARGET_LIST[@]}"; do [[ ${SERVER[$t]} == "$1" ]] && return 0; done
	return 1
}

need=(nginx ab curl python3 taskset getconf timeout)
wants_server haproxy && need+=(haproxy)
CLUSTER_ROW=0
[[ " $TARGETS " == *" gateway-cluster "* ]] && { CLUSTER_ROW=1; need+=(redis-server redis-cli); }
need_commands "${need[@]}"
(($(nproc) >= 2)) || die "needs at least 2 CPUs (CPU 0: backend + ab, CPU 1: proxy)"
taskset -c 1 true 2>/dev/null || die "cannot pin to CPU 1 (taskset -c 1 failed)"
CLK_TCK=$(getconf CLK_TCK)
PYTHON=$(python3 -c 'import sys; print(sys.executable)') # not a version-manager shim

# ------------------------------------------------------------ gatehouse binary
GATEHOUSE_VERSION=
wants_server gatehouse && gatehouse_binary

# --------------------------------------------------- work dir, process cleanup
make_workdir gatehouse-gateway-bench
raise_nofile

# ------------------------------------------------- content, backend, configs
mkdir -p "$WORK"/{www,nginx,haproxy,gatehouse,runs,probe}
write_www "$WORK/www"
# The original report's object: a small HTML page of BODY_SIZE bytes, not common.sh's 75.
SIZE[test.html]=$BODY_SIZE
"$PYTHON" - "$WORK/www/test.html" "$BODY_SIZE" <<'EOF'
import sys
head = b"<!DOCTYPE html>\n<html><head><title>gateway bench</title></head><body>\n<p>"
tail = b"</p>\n</body></html>\n"
n = int(sys.argv[2]) - len(head) - len(tail)
body = head + (b"lorem ipsum dolor sit amet " * (n // 27 + 1))[:n] + tail
with open(sys.argv[1], "wb") as f:
    f.write(body)
EOF
start_backend 0
free_ports 5
read -r P_GATEHOUSE P_ADMIN P_HAPROXY P_NGINX P_REDIS <<<"${REPLY_PORTS[*]}"
CLUSTER_YAML=
if ((CLUSTER_ROW)); then
	start_redis redis 0 "$P_REDIS"
	head -c 48 /dev/urandom | base64 >"$WORK/cluster.key"
	CLUSTER_YAML="redis: { url: \"redis://127.0.0.1:$P_REDIS/0\", secret_file: \"$WORK/cluster.key\" }"
fi
declare -A PORT=([backend]=$P_BACKEND [gatehouse]=$P_GATEHOUSE [haproxy]=$P_HAPROXY [nginx]=$P_NGINX)

GH_CONF=$WORK/gatehouse/gatehouse.yaml
cat >"$GH_CONF" <<EOF
workers: 1
reuse_port: true
cpu_affinity: off
access_log: { path: "off" }
admin: { bind: "127.0.0.1:$P_ADMIN", public: [/healthz, /metrics, /status] }
listeners:
  http: { bind: "127.0.0.1:$P_GATEHOUSE", max_connections: 20000 }
$(gatehouse_upstream 256)
services:
  plain: { path: /plain, upstream: backend }
  svc:
    path: /svc
    upstream: backend
    auth: app_key
    acl: { allow: [{ methods: [GET, HEAD], paths: ["/**"] }] }
    headers: { request: { set: { x-gateway: gatehouse } }, response: { remove: [x-powered-by] } }
$(if ((CLUSTER_ROW)); then printf '  csvc: { path: /csvc, upstream: backend, auth: app_key }\n'; fi)
apps:
  bench: { key: $APP_KEY, grants: { svc: gold$(if ((CLUSTER_ROW)); then printf ', csvc: cgold'; fi) } }
plans:
  gold: { rate_limits: [{ limit: 1000000, interval: 1s }] } # the most a limit can count (1 per µs), far above the load
$(if ((CLUSTER_ROW)); then printf '  cgold: { rate_limits: [{ limit: 1000000, interval: 1s, scope: cluster }] }\n'; fi)
$CLUSTER_YAML
EOF

nginx_proxy_conf "$WORK/nginx" "$P_NGINX" "$P_BACKEND" >"$WORK/nginx/nginx.conf"

haproxy_cfg 1 "    bind 127.0.0.1:$P_HAPROXY"$'\n' >"$WORK/haproxy/haproxy.cfg"

# -------------------------------------------------------------- start servers
log "work dir $WORK; ports: backend $P_BACKEND gatehouse $P_GATEHOUSE (admin $P_ADMIN) haproxy $P_HAPROXY nginx $P_NGINX"
if wants_server gatehouse; then
	"$GATEHOUSE_BIN" check "$GH_CONF" >"$WORK/gatehouse-check.txt" 2>&1 || {
		cat "$WORK/gatehouse-check.txt" >&2
		die "gatehouse check rejected $GH_CONF (errors above)"
	}
	start_proc gatehouse 1 "$GATEHOUSE_BIN" run --config "$GH_CONF"
	wait_http gatehouse "http://127.0.0.1:$P_GATEHOUSE/test.html" "$BODY_SIZE"
fi
if wants_server haproxy; then
	haproxy -c -q -f "$WORK/haproxy/haproxy.cfg" >&2 || die "haproxy rejected $WORK/haproxy/haproxy.cfg"
	start_proc haproxy 1 haproxy -db -f "$WORK/haproxy/haproxy.cfg"
	wait_http haproxy "http://127.0.0.1:$P_HAPROXY/test.html" "$BODY_SIZE"
fi
if wants_server nginx; then
	nginx -t -q -p "$WORK/nginx" -e "$WORK/nginx/error.log" -c "$WORK/nginx/nginx.conf" 2>&1 ||
		die "nginx rejected $WORK/nginx/nginx.conf"
	start_proc nginx 1 nginx -p "$WORK/nginx" -e "$WORK/nginx/error.log" -c "$WORK/nginx/nginx.conf"
	wait_http nginx "http://127.0.0.1:$P_NGINX/test.html" "$BODY_SIZE" "$WORK/nginx/error.log"
fi

# ------------------------------------------------------------ sanity checks
url_of() { echo "http://127.0.0.1:${PORT[${SERVER[$1]}]}${URL_PATH[$1]}"; }

fetch() { # fetch NAME URL [CURL_ARG...] -> REPLY = status; body in $WORK/probe/NAME
	REPLY=$(curl -s --noproxy '*' --max-time 2 -o "$WORK/probe/$1" -w '%{http_code}' "${@:3}" "$2" 2>/dev/null) || true
}

check_row() { # check_row TARGET: 200 and exactly test.html's bytes, or the run stops here
	local t=$1 url hint
	url=$(url_of "$t")
	local -a args=()
	[[ -n ${HEADER[$t]:-} ]] && args=(-H "${HEADER[$t]}")
	fetch "$t" "$url" "${args[@]}"
	if [[ $REPLY == 200 ]] && cmp -s "$WORK/probe/$t" "$WORK/www/test.html"; then
		return 0
	fi
	case $REPLY in
	200) hint="the body is not test.html ($(wc -c <"$WORK/probe/$t") bytes instead of $BODY_SIZE)" ;;
	401) hint="the app key was not accepted" ;;
	403) hint="refused by the grant or the ACL" ;;
	429) hint="refused by the rate limit" ;;
	000) hint="no answer" ;;
	*) hint="unexpected status" ;;
	esac
	die "sanity check: $t GET $url${args[*]:+ with ${args[1]}} -> $REPLY: $hint; body starts: $(head -c 120 "$WORK/probe/$t" | tr -c '[:print:]' ' ')"
}

check_refused() { # check_refused WHAT STATUS URL [CURL_ARG...]: the service must refuse it
	fetch refused "$3" "${@:4}"
	[[ $REPLY == "$2" ]] ||
		die "sanity check: $1 -> $REPLY, want $2: the service does not enforce its plugins, so the gateway rows would not measure them"
}

admitted() { # admitted [SERVICE] -> gatehouse_gateway_admitted_total of service SERVICE (svc)
	curl -s --noproxy '*' --max-time 2 "http://127.0.0.1:$P_ADMIN/metrics" |
		awk -v want="gatehouse_gateway_admitted_total{service=\"${1:-svc}\"}" '$1 == want { print $2; found = 1 } END { exit !found }'
}

for t in "${TARGET_LIST[@]}"; do check_row "$t"; done
if want gateway || want gateway-header-key; then
	svc=http://127.0.0.1:$P_GATEHOUSE/svc
	check_refused "GET /svc/test.html without a key" 401 "$svc/test.html"
	check_refused "GET /svc/~WRONGKEY/test.html" 401 "$svc/~WRONGKEY/test.html"
	check_refused "POST /svc/~KEY/test.html (the ACL allows GET and HEAD)" 403 "$svc/~$APP_KEY/test.html" -X POST -d x
	before=$(admitted) || die "no gatehouse_gateway_admitted_total{service=\"svc\"} in http://127.0.0.1:$P_ADMIN/metrics"
	check_row gateway
	after=$(admitted)
	((after == before + 1)) || die "sanity check: the service's admitted counter went $before -> $after for one request"
fi
log "sanity checks passed: every row serves test.html ($BODY_SIZE bytes); the service refuses no key, a wrong key and POST"

# ------------------------------------------------------------- measurement
CSV=$WORK/gateway-runs.csv
SEQ=0

ab_args() { # ab_args TARGET -> REPLY_AB (the header option, if any)
	REPLY_AB=()
	[[ -n ${HEADER[$1]:-} ]] && REPLY_AB=(-H "${HEADER[$1]}")
	return 0
}

run_load() { # run_load REP TARGET CONC N [warmup]
	local rep=$1 t=$2 conc=$3 n=$4 warm=${5:-} url name pid out rc=0 a0 a1 adm0='' adm1=''
	url=$(url_of "$t")
	name=${SERVER[$t]}
	pid=${PID[$name]}
	ab_args "$t"
	if [[ -n $warm ]]; then
		taskset -c 0 timeout -k 5 "$AB_TIMEOUT" ab -k -n "$n" -c "$conc" "${REPLY_AB[@]}" "$url" \
			>"$WORK/runs/warmup-$t.txt" 2>&1 || log "warning: warm-up of $t exited non-zero"
		return 0
	fi
	SEQ=$((SEQ + 1))
	out=$WORK/runs/$(printf '%03d' "$SEQ")-$t-c$conc.txt
	if ((PRIME && conc > 1)); then
		taskset -c 0 timeout -k 5 60 ab -k -n $((conc * 10)) -c "$conc" "${REPLY_AB[@]}" "$url" >"$out.prime" 2>&1 ||
			log "warning: pool priming of $t exited non-zero (see KEEP_WORKDIR=1 $out.prime)"
	fi
	((conc > 1)) && sleep "$SETTLE" # one client leaves nothing to settle
	a0=$(backend_accepts) || die "cannot read backend stub_status"
	local svc=svc
	[[ $t == gateway-cluster ]] && svc=csvc
	[[ $t == gateway* ]] && { adm0=$(admitted "$svc") || die "cannot read gatehouse metrics"; }
	declare -A S0=() S1=()
	snap S0 "$pid"
	taskset -c 0 timeout -k 5 "$AB_TIMEOUT" ab -k -n "$n" -c "$conc" "${REPLY_AB[@]}" "$url" >"$out" 2>&1 &
	LOADGEN_PID=$!
	wait "$LOADGEN_PID" || rc=$?
	LOADGEN_PID=
	snap S1 "$pid"
	a1=$(backend_accepts) || die "cannot read backend stub_status"
	[[ $t == gateway* ]] && { adm1=$(admitted "$svc") || die "cannot read gatehouse metrics"; }
	kill -0 "$pid" 2>/dev/null || { show_logs "$name"; die "$name died during the run against $t"; }
	local -a kv=(
		"rep=$rep" "seq=$SEQ" "target=$t" "conc=$conc" "exit_code=$rc" "clk_tck=$CLK_TCK"
		"server_j=$((S1[server] - S0[server]))" "loadgen_j=$((S1[self_children] - S0[self_children]))"
		"accepts_before=$a0" "accepts_after=$a1"
	)
	[[ -n $adm0 ]] && kv+=("admitted=$((adm1 - adm0))")
	snap_deltas S0 S1
	kv+=("${REPLY_KV[@]}")
	"$PYTHON" "$BENCH/lib/gateway_record.py" --csv "$CSV" --output "$out" "${kv[@]}"
}

START_DATE=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
START_T=$EPOCHREALTIME
for t in "${TARGET_LIST[@]}"; do
	log "warm-up: $t ($WARMUP_N requests)"
	run_load 0 "$t" "$CONNS" "$WARMUP_N" warmup
done
for ((rep = 1; rep <= REPS; rep++)); do
	rotated $((rep - 1)) "${TARGET_LIST[@]}"
	((QUIET_WAIT)) && quiet "$QUIET_WAIT"
	log "round $rep/$REPS: order ${REPLY_TARGETS[*]}"
	for t in "${REPLY_TARGETS[@]}"; do run_load "$rep" "$t" "$CONNS" "$AB_N"; done
	if ((LAT_N)); then
		for t in "${REPLY_TARGETS[@]}"; do run_load "$rep" "$t" 1 "$LAT_N"; done
	fi
done
TOOK=$(awk -v a="$START_T" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }')

# ---------------------------------------------------------------- reporting
STAMP=$(date -u '+%Y-%m-%d-%H%M')
RESULTS_CSV=$(pick gateway-latest.csv gateway-quick.csv)
REPORT=$BENCH/results/$(pick gateway gateway-quick)-$STAMP.md
results_csv "$CSV" "$RESULTS_CSV"
results_csv "$CSV" "$(basename "$REPORT" .md).csv" # stays beside its report when the next run replaces *-latest.csv

versions=("$(nginx -v 2>&1 | sed 's/^nginx version: //')")
wants_server haproxy && versions+=("$(haproxy -v 2>/dev/null | sed -n '1 { s/ - https.*//; s/ *$//; p }')")
versions+=("$(ab -V 2>&1 | sed -n '1 { s/^This is //; s/, Version/ Version/; s/ <.*//; p }')")
[[ -n $GATEHOUSE_VERSION ]] &&
	versions+=("gatehouse: ${GATEHOUSE_VERSION% } (binary built $(date -u -r "$GATEHOUSE_BIN" '+%Y-%m-%d %H:%M UTC'))")
git_rev=$(git_source crates/ Cargo.toml Cargo.lock)
if [[ -n $GATEHOUSE_VERSION ]]; then
	# Built from these sources when no source file is newer than the binary (cargo's own test).
	stale=$(find crates Cargo.toml Cargo.lock -type f -newer "$GATEHOUSE_BIN" -print -quit 2>/dev/null)
	[[ -z $stale ]] || git_rev+=" (the gatehouse binary is older than $stale: it may not contain the sources)"
fi
hdr="-H 'X-APP-KEY: $APP_KEY'"
{
	echo "- Date: $START_DATE (took $TOOK s)$( ((q)) && echo "; **QUICK=1 smoke run: one round, small counts, not for conclusions**")"
	echo "- Machine: $(nproc) CPUs, $(cpu_model), Linux $(uname -r); clock tick $CLK_TCK Hz"
	printf -v vline '%s; ' "${versions[@]}"
	echo "- Versions: ${vline%; }"
	echo "- Source: git $git_rev"
	echo "- Settings: TARGETS=\"${TARGET_LIST[*]}\" REPS=$REPS AB_N=$AB_N CONNS=$CONNS LAT_N=$LAT_N WARMUP_N=$WARMUP_N PRIME=$PRIME BODY_SIZE=$BODY_SIZE"
	echo "- Commands: \`taskset -c 0 ab -k -n $AB_N -c $CONNS URL\` (and \`-c 1 -n $LAT_N\`), URL per row: direct \`http://127.0.0.1:BACKEND/test.html\`; bare, haproxy, nginx-proxy \`http://127.0.0.1:PROXY/test.html\`; gateway \`http://127.0.0.1:GATEHOUSE/svc/~$APP_KEY/test.html\`; gateway-header-key \`$hdr\` on \`http://127.0.0.1:GATEHOUSE/svc/test.html\`."
	echo "- Layout: backend nginx (1 worker, keep-alive, test.html of $BODY_SIZE bytes) and ab on CPU 0; the proxy under test alone on CPU 1 with one worker/thread (Gatehouse workers: 1; HAProxy nbthread 1, http-reuse always; nginx worker_processes 1, upstream keepalive 256). Gatehouse service: auth app_key, ACL GET/HEAD /**, request header set, response header removed, app granted a plan with one local rate limit (10^6/s, the most the limiter can count); bare = a site route to the same upstream. Row order rotated by one each round."
	rig_constant SAME_HEADERS_NOTE
	echo "- Columns: time per request across all concurrent = ab's \"Time per request (mean, across all concurrent requests)\" = wall time ÷ requests = 1 ÷ req/s. Mean latency = ab's first \"Time per request (mean)\", the mean time a client waited for an answer (= the former × concurrency). p50/p99 from ab's table (whole ms). Server CPU-s per 10k req = CPU time of the server's process tree (schedstat; utime+stime ticks for a run in which one of its threads ended) per 10,000 completed requests (direct: the backend nginx; other rows: the proxy alone, not the backend). Others' CPU % = machine busy time not used by server, backend or ab (one core = 100 %); steal = CPU time the hypervisor gave to other guests, shown when a row's median is above 5 % of a core (⚠: rates and CPU per request there are unreliable). Raw per-run numbers: bench/results/$(basename "$REPORT" .md).csv (also $RESULTS_CSV until the next run)."
} >"$WORK/meta.md"

echo
"$PYTHON" "$BENCH/lib/gateway_summarize.py" "$CSV" --conns "$CONNS" --heading "$HEADING" --meta "$WORK/meta.md" --out "$REPORT"
{
	echo
	echo "### Configurations of this run"
	echo
	echo "Gatehouse (\`$GH_CONF\`):"
	echo
	echo '```yaml'
	cat "$GH_CONF"
	echo '```'
	if wants_server nginx; then
		printf '\nnginx proxy:\n\n```nginx\n'
		cat "$WORK/nginx/nginx.conf"
		echo '```'
	fi
	if wants_server haproxy; then
		printf '\nHAProxy:\n\n```\n'
		cat "$WORK/haproxy/haproxy.cfg"
		echo '```'
	fi
} >>"$REPORT"
echo
log "report: $REPORT; per-run CSV: bench/results/$RESULTS_CSV"
