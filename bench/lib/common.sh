# shellcheck shell=bash
# bench/lib/common.sh - shell helpers shared by the scripts in bench/: the Gatehouse binary, the
# work dir and the cleanup of every process a bench started, free ports, the backend nginx,
# process start-up, CPU and memory counters, and the report's metadata.
#
# Sourced, not run: it sets ORIG_PWD (where the bench was started) and moves to the repository
# (ROOT, BENCH = ROOT/bench).  The sourcing script defines log and die, sets KEEP_WORKDIR, and
# fills TARGET_LIST before it calls want; the helpers keep their state in the globals WORK,
# PID (instance -> pid), LOADGEN_PID, NOFILE, WORKER_CONNS and P_BACKEND.
# Processes are only ever stopped by the pids recorded here, never by name.

ORIG_PWD=$PWD
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
ROOT=$PWD
BENCH=$ROOT/bench
PYTHON=${PYTHON:-python3}
QUICK=${QUICK:-0} # 1: a smoke run with small counts
if [[ $QUICK == 1 ]]; then q=1; else q=0; fi
pick() { if ((q)); then echo "$2"; else echo "$1"; fi; } # pick FULL QUICK
declare -A PID=() # instance -> pid of every long-running process the bench started
LOADGEN_PID=

want() { # want TARGET -> true if TARGET is in TARGETS
	local t
	for t in "${TARGET_LIST[@]}"; do [[ $t == "$1" ]] && return 0; done
	return 1
}

check_integers() { # check_integers VAR...: each must hold a non-negative integer
	local v
	for v in "$@"; do
		[[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer (got '${!v}')"
	done
}

need_commands() { # need_commands CMD...: each must be in PATH
	local c
	for c in "$@"; do command -v "$c" >/dev/null || die "'$c' not found in PATH"; done
}

# ------------------------------------------------------------ gatehouse binary
# shellcheck disable=SC2034 # GATEHOUSE_VERSION is for the sourcing script
# workspace_binary VAR PACKAGE: VAR (the name of a variable) made absolute when given, or set to
# PACKAGE's release build, built with cargo when VAR is unset; it must be executable.
workspace_binary() {
	local -n bin=$1
	if [[ -n ${bin:-} ]]; then
		[[ $bin == /* ]] || bin=$ORIG_PWD/$bin
	else
		command -v cargo >/dev/null || die "cargo not found; set $1"
		log "building: cargo build --release -p $2"
		cargo build --release -p "$2"
		bin=${CARGO_TARGET_DIR:-$ROOT/target}/release/$2
	fi
	[[ -x $bin ]] || die "$2 binary not found or not executable: $bin"
}

gatehouse_binary() { # -> GATEHOUSE_BIN (absolute; built when unset), GATEHOUSE_VERSION
	workspace_binary GATEHOUSE_BIN gatehouse
	local out
	out=$("$GATEHOUSE_BIN" version 2>&1) || die "'$GATEHOUSE_BIN version' failed: $out"
	GATEHOUSE_VERSION=${out%%$'\n'*}
}

gatehouse_base_binary() { # -> GATEHOUSE_BASE_BIN (absolute): the gatehouse-base target's build, given
	[[ -n ${GATEHOUSE_BASE_BIN:-} ]] || die "gatehouse-base needs GATEHOUSE_BASE_BIN, another build of gatehouse"
	[[ $GATEHOUSE_BASE_BIN == /* ]] || GATEHOUSE_BASE_BIN=$ORIG_PWD/$GATEHOUSE_BASE_BIN
	[[ -x $GATEHOUSE_BASE_BIN ]] || die "gatehouse-base binary not found or not executable: $GATEHOUSE_BASE_BIN"
}

loadgen_binary() { # -> LOADGEN_BIN (absolute): the benches' TLS client, built (release) when unset
	workspace_binary LOADGEN_BIN gatehouse-loadgen
}

h3load_binary() { # -> H3LOAD: bench/h3load (quic-go's HTTP/3 client), built with go when older than its source
	H3LOAD=$BENCH/.cache/bin/h3load
	if [[ ! -x $H3LOAD || $BENCH/h3load/main.go -nt $H3LOAD ]]; then
		log "building bench/h3load (quic-go)"
		mkdir -p "$BENCH/.cache/bin"
		(cd "$BENCH/h3load" && go build -o "$H3LOAD" .) || die "cannot build bench/h3load"
	fi
}

bench_test_cert() { # bench_test_cert DIR: an ECDSA P-256 certificate for bench.test, DIR/key.pem and
	# DIR/cert.pem apart, both in DIR/bundle.pem
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=bench.test \
		-addext subjectAltName=DNS:bench.test -keyout "$1/key.pem" -out "$1/cert.pem" 2>/dev/null
	cat "$1/cert.pem" "$1/key.pem" >"$1/bundle.pem"
}

h3_gatehouse_yaml() { # h3_gatehouse_yaml PORT BUNDLE -> (stdout) one worker, an https listener with
	# HTTP/3 on 127.0.0.1:PORT serving BUNDLE, every request to the backend (start_backend)
	cat <<EOF
workers: 1
tls:
  certificates: [{cert: "$2"}]
  default_certificate: bench.test # h2load sends no name for an address
listeners:
  https: {bind: "127.0.0.1:$1", tls: {}, http3: true, max_connections: 100000, quic: {max_streams: 1000}}
upstreams:
  backend: {targets: ["127.0.0.1:$P_BACKEND"]}
sites:
  bench: {hosts: ["*"], routes: [{path: /, upstream: backend}]}
EOF
}

gatehouse_check() { # gatehouse_check CONFIG: `gatehouse check` must accept it (its errors shown if not)
	"$GATEHOUSE_BIN" check "$1" >"$1.check" 2>&1 || {
		cat "$1.check" >&2
		die "gatehouse check rejected $1"
	}
}

# ------------------------------------------------------------- certificates
# shellcheck disable=SC2120 # no STORE_COUNT: 10,000
make_certs() { # make_certs [STORE_COUNT] -> (stdout) the store dir; bundles in CERT_CACHE
	# tls_certs.py keeps one store size: the benches share the cache with tls.sh's 10,000.
	mkdir -p "$CERT_CACHE"
	if [[ $CERT_CACHE == "$BENCH/.cache/"* && ! -f $BENCH/.cache/.gitignore ]]; then
		printf '*\n' >"$BENCH/.cache/.gitignore"
	fi
	"$PYTHON" "$BENCH/lib/tls_certs.py" "$CERT_CACHE" --store-count "${1:-10000}" ||
		die "could not make the certificates (bench/lib/tls_certs.py)"
}

# ------------------------------------------------------------- callgrind
# callgrind_count INSTANCE LABEL N CMD... -> REPLY: the user-space instructions INSTANCE ran while
# CMD ran, divided by N. INSTANCE is a process started by start_proc under `valgrind
# --tool=callgrind --callgrind-out-file=$WORK/callgrind.INSTANCE.%p`; its counters are zeroed
# before CMD and dumped (named LABEL) after it.
callgrind_count() {
	local inst=$1 label=$2 n=$3 mark=$WORK/callgrind.mark dump total
	shift 3
	touch "$mark"
	callgrind_control -z "${PID[$inst]}" >/dev/null 2>&1
	"$@"
	callgrind_control -d "$label" "${PID[$inst]}" >/dev/null 2>&1
	# The one dump written since the mark (the newest, should there be more).
	dump=$(find "$WORK" -name "callgrind.$inst.${PID[$inst]}.*" -newer "$mark" -printf '%T@ %p\n' |
		sort -n | tail -n 1 | cut -d' ' -f2-)
	[[ -n $dump ]] || die "$inst: no callgrind dump for $label"
	total=$(callgrind_annotate "$dump" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
	[[ -n $total ]] || die "$inst: no instruction total in $dump"
	REPLY=$((total / n))
}

# --------------------------------------------------- work dir, process cleanup
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

terminate() { # terminate PID...: TERM the trees, at most 5 s for a graceful exit, then KILL
	local p i alive
	descendants "$@"
	local -a all=("${REPLY_PIDS[@]}")
	((${#all[@]})) || return 0
	kill -TERM "${all[@]}" 2>/dev/null || true
	for ((i = 0; i < 50; i++)); do
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
	for p in "${all[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
	for p in "$@"; do wait "$p" 2>/dev/null || true; done
	return 0
}

cleanup() { # the EXIT trap: every recorded process tree stopped, the work dir removed
	local rc=$?
	set +e
	trap - EXIT INT TERM ERR
	[[ -n $LOADGEN_PID ]] && kill -TERM "$LOADGEN_PID" 2>/dev/null
	terminate "${PID[@]}" ${LOADGEN_PID:+"$LOADGEN_PID"}
	if [[ $KEEP_WORKDIR == 1 ]]; then
		log "work dir kept: $WORK"
	else
		rm -rf "$WORK"
	fi
	exit "$rc"
}

make_workdir() { # make_workdir NAME -> WORK, a mktemp -d dir removed on exit with the processes
	WORK=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
	trap cleanup EXIT
	trap 'log "command failed (line $LINENO): $BASH_COMMAND"' ERR
	trap 'exit 130' INT
	trap 'exit 143' TERM
}

raise_nofile() { # -> NOFILE, WORKER_CONNS; HAProxy and nginx need ~2 fds per proxied connection
	ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
	NOFILE=$(ulimit -n)
	[[ $NOFILE == unlimited ]] && NOFILE=65536
	WORKER_CONNS=$((NOFILE < 20000 ? NOFILE : 20000))
	((2 * HAPROXY_MAXCONN + 64 <= NOFILE)) ||
		die "HAPROXY_MAXCONN=$HAPROXY_MAXCONN needs about $((2 * HAPROXY_MAXCONN + 64)) fds, ulimit -n is $NOFILE"
}

free_ports() { # free_ports N -> REPLY_PORTS (N distinct free loopback ports)
	read -r -a REPLY_PORTS < <("$PYTHON" -c '
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(*(s.getsockname()[1] for s in socks))
' "$1")
}

# ------------------------------------------------------ content, nginx configs
declare -A SIZE=([test.html]=75 [5k.html]=5120 [10k.html]=10240)

write_www() { # write_www DIR: the files of SIZE, an HTML page of exactly that many bytes each
	"$PYTHON" - "$1" <<'EOF'
import os, sys
for name, size in (("test.html", 75), ("5k.html", 5120), ("10k.html", 10240)):
    head, tail = b"<html><body>", b"</body></html>\n"
    body = head + b"x" * (size - len(head) - len(tail)) + tail
    assert len(body) == size
    with open(os.path.join(sys.argv[1], name), "wb") as f:
        f.write(body)
EOF
}

USER_LINE=
((EUID == 0)) && USER_LINE='user root;'

nginx_head() { # nginx_head DIR WORKERS -> the main-context directives of one nginx instance
	cat <<EOF
$USER_LINE
daemon off;
master_process on;
worker_processes $2;
worker_rlimit_nofile $NOFILE;
pid $1/nginx.pid;
error_log $1/error.log warn;
events { worker_connections $WORKER_CONNS; }
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

# rig_constant NAME -> a constant of bench/lib/rig.py (a tuple one item per line): the peers'
# forwarding headers (NGINX_FORWARDING_LINES, HAPROXY_FORWARDING) and the reports' line on them
# (SAME_HEADERS_NOTE) are defined there once, for the Python and the shell benches.
rig_constant() {
	"$PYTHON" -c 'import sys; sys.path.insert(0, sys.argv[1]); import rig; v = getattr(rig, sys.argv[2])
print(v.rstrip("\n") if isinstance(v, str) else "\n".join(v))' "$BENCH/lib" "$1"
}

nginx_forwarding() { # nginx_forwarding INDENT -> the location lines adding the forwarding headers
	rig_constant NGINX_FORWARDING_LINES | sed "s/^/$1/"
}

# nginx_proxy_conf DIR LISTEN_PORT BACKEND [WORKERS] [SERVER_LINES] [LOCATION_LINES] [KEEPALIVE]
# -> nginx.conf of a reverse proxy (1 worker by default).  BACKEND is the backend's port (plain
# HTTP) or https://PORT (TLS; LOCATION_LINES then carry the proxy_ssl_* settings).  SERVER_LINES
# (more listen sockets, certificates, timeouts that override the http-level ones, locations) go
# into its server block, LOCATION_LINES into `location /`.  KEEPALIVE: idle upstream connections
# kept per worker (256); 0 = none, so a new upstream connection per request.
nginx_proxy_conf() {
	local scheme=http port=$3 keepalive=${7:-256} pool='' location=${6:+$'\n'$6}
	[[ $3 == https://* ]] && scheme=https port=${3#https://}
	((keepalive > 0)) && pool="
        keepalive $keepalive;
        keepalive_requests 1000000;
        keepalive_timeout 60s;"
	nginx_head "$1" "${4:-1}"
	cat <<EOF
http {
$(nginx_temp_paths "$1")
    access_log off;
    keepalive_timeout 75s;
    keepalive_requests 1000000;
    upstream backend {
        server 127.0.0.1:$port;$pool
    }
    server {
        listen 127.0.0.1:$2 backlog=4096;
        location / {
            proxy_pass $scheme://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
$(nginx_forwarding "            ")$location
        }
${5:-}
    }
}
EOF
}

# haproxy_cfg THREADS BIND_LINES [GLOBAL_LINES] [BACKEND_LINES]: by default HTTP keep-alive to the
# backend (`http-reuse always`, one plain server line); BACKEND_LINES replace those two lines.
haproxy_cfg() {
	cat <<EOF
global
    nbthread $1
    maxconn $HAPROXY_MAXCONN
${3:-}
defaults
    mode http
    option http-keep-alive
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    timeout http-request 10s
    timeout http-keep-alive 60s

frontend fe
${2}$(rig_constant HAPROXY_FORWARDING)
    default_backend be

backend be
${4:-    http-reuse always
    server backend 127.0.0.1:$P_BACKEND}
EOF
}

# gatehouse_upstream MAX_IDLE [TARGET] [UPSTREAM_LINES] [OTHER_UPSTREAMS] -> YAML: every request to
# the backend (TARGET, default 127.0.0.1:P_BACKEND), keep-alive; UPSTREAM_LINES (e.g.
# `    tls: {...}`) are added to the upstream, OTHER_UPSTREAMS (`  name: {...}` lines) after it.
gatehouse_upstream() {
	local more=${3:+$'\n'$3} others=${4:+$'\n'$4}
	cat <<EOF
upstreams:
  backend:
    targets: ["${2:-127.0.0.1:$P_BACKEND}"]
    keepalive: { max_idle: $1, idle_timeout: 60s }
    retries: 0$more$others
sites:
  all:
    hosts: ["*"]
    routes: [{ path: /, upstream: backend }]
EOF
}

# ---------------------------------------------------------------- processes
start_proc() { # start_proc INSTANCE CPU|none CMD... (stdout/stderr -> $WORK/INSTANCE.out/.err)
	local name=$1 cpu=$2
	shift 2
	if [[ $cpu == none ]]; then
		"$@" >"$WORK/$name.out" 2>"$WORK/$name.err" &
	else
		taskset -c "$cpu" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" &
	fi
	PID[$name]=$!
}

start_redis() { # start_redis INSTANCE CPU|none PORT [ARG...]: a redis-server (no persistence, its
	# files in $WORK/INSTANCE), waited for until it answers PING (at most 10 s)
	local name=$1 cpu=$2 port=$3 i
	shift 3
	mkdir -p "$WORK/$name"
	start_proc "$name" "$cpu" redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
		--dir "$WORK/$name" "$@"
	for ((i = 0; i < 100; i++)); do
		[[ $(redis-cli -p "$port" ping 2>/dev/null) == PONG ]] && return 0
		kill -0 "${PID[$name]}" 2>/dev/null || { show_logs "$name"; die "redis-server $name exited during start-up"; }
		sleep 0.1
	done
	show_logs "$name"
	die "redis-server $name (port $port) not ready after 10 s"
}

start_otlp_sink() { # start_otlp_sink CPU|none PORT: an nginx answering 200 to POST /v1/traces (the body
	# read and dropped), the OTLP/HTTP collector of the tracing benches; waited for (at most 10 s)
	local cpu=$1 port=$2 i
	mkdir -p "$WORK/sink"
	cat >"$WORK/sink/nginx.conf" <<CONF
daemon off;
worker_processes 1;
pid $WORK/sink/nginx.pid;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_buffer_size 1m;
    client_max_body_size 16m;
    server {
        listen 127.0.0.1:$port;
        location /v1/traces { default_type application/x-protobuf; return 200 ""; }
    }
}
CONF
	start_proc sink "$cpu" nginx -p "$WORK/sink" -e "$WORK/sink/error.log" -c "$WORK/sink/nginx.conf"
	for ((i = 0; i < 100; i++)); do
		curl -fs -o /dev/null -X POST --data x "http://127.0.0.1:$port/v1/traces" && return 0
		sleep 0.1
	done
	show_logs sink
	die "the OTLP sink (port $port) not ready after 10 s"
}

show_logs() { # show_logs INSTANCE [ERROR_LOG]
	local f
	for f in "$WORK/$1.out" "$WORK/$1.err" ${2:+"$2"}; do
		[[ -s $f ]] && { log "--- $f (last 30 lines)"; tail -n 30 "$f" >&2; }
	done
	return 0
}

http_probe() { # http_probe URL -> "CODE SIZE"; -k: the TLS bench's certificates are self-made
	curl -sk --noproxy '*' --max-time 2 -o /dev/null -w '%{http_code} %{size_download}' "$1" 2>/dev/null || true
}

wait_http() { # wait_http INSTANCE URL EXPECTED_SIZE [ERROR_LOG]; at most ~10 s
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

# start_backend CPU [HTTP_LINES]: nginx with 1 worker serving $WORK/www -> P_BACKEND; HTTP_LINES
# (say a TLS server block on a port of its own) are added to its http block.
start_backend() {
	free_ports 1
	P_BACKEND=${REPLY_PORTS[0]}
	mkdir -p "$WORK/backend"
	{
		nginx_head "$WORK/backend" 1
		cat <<EOF
http {
$(nginx_temp_paths "$WORK/backend")
    access_log off;
    types { text/html html; application/json json; }
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
${2:-}
}
EOF
	} >"$WORK/backend/nginx.conf"
	start_proc backend "$1" nginx -p "$WORK/backend" -e "$WORK/backend/error.log" -c "$WORK/backend/nginx.conf"
	wait_http backend "http://127.0.0.1:$P_BACKEND/test.html" "${SIZE[test.html]}" "$WORK/backend/error.log"
}

backend_accepts() { # -> the backend's stub_status "accepts"
	curl -s --noproxy '*' --max-time 2 "http://127.0.0.1:$P_BACKEND/nginx_status" | awk 'NR == 3 { print $1 }'
}

rotated() { # rotated N ITEM... -> REPLY_TARGETS = the items rotated left by N
	local n=$1 i
	shift
	local -a l=("$@")
	REPLY_TARGETS=()
	for ((i = 0; i < ${#l[@]}; i++)); do REPLY_TARGETS+=("${l[(i + n) % ${#l[@]}]}"); done
}

# ---------------------------------------------------------- memory counters
tree_mem_kb() { # tree_mem_kb PID -> REPLY = summed VmRSS, REPLY_PSS = summed Pss of PID's tree, kB
	local p k v
	REPLY=0 REPLY_PSS=0
	descendants "$1"
	for p in "${REPLY_PIDS[@]}"; do
		while read -r k v _; do
			[[ $k == VmRSS: ]] && REPLY=$((REPLY + v))
		done 2>/dev/null <"/proc/$p/status"
		# Pss shares each page among the processes mapping it (nginx's workers and master).
		while read -r k v _; do
			[[ $k == Pss: ]] && REPLY_PSS=$((REPLY_PSS + v))
		done 2>/dev/null <"/proc/$p/smaps_rollup"
	done
	return 0
}

rss_kb() { # rss_kb INSTANCE -> summed VmRSS of the process tree, kB
	tree_mem_kb "${PID[$1]}"
	echo "$REPLY"
}

# ------------------------------------------------------------- CPU counters
tree_jiffies() { # tree_jiffies PID -> REPLY = utime+stime of PID and its descendants
	local line p
	local -a f
	REPLY=0
	descendants "$1"
	for p in "${REPLY_PIDS[@]}"; do
		read -r line 2>/dev/null <"/proc/$p/stat" || continue
		read -r -a f <<<"${line##*) }" # f[0] = field 3 (state); utime = field 14, stime = field 15
		REPLY=$((REPLY + f[11] + f[12]))
	done
}

# tree_cpu_ns PID -> REPLY = CPU time of the live threads of PID and its descendants, ns, from
# /proc/*/task/*/schedstat (the scheduler's clock: exact, where utime+stime come in 10 ms ticks,
# too coarse for a run that uses a tenth of a second of CPU); REPLY_TIDS = " tid tid ... ".
# REPLY=0 when the kernel has no schedstat.
tree_cpu_ns() {
	local p t line
	local -a f
	REPLY=0 REPLY_TIDS=" "
	descendants "$1"
	for p in "${REPLY_PIDS[@]}"; do
		for t in /proc/"$p"/task/*; do
			read -r line 2>/dev/null <"$t/schedstat" || continue
			read -r -a f <<<"$line"
			REPLY=$((REPLY + f[0]))
			REPLY_TIDS+="${t##*/} "
		done
	done
}

# shellcheck disable=SC2034,SC2154 # s is a nameref to an associative array
snap() { # snap ARRAY_NAME SERVER_PID: CPU counters, no forks (keeps cutime clean)
	local -n s=$1
	local line busy total
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
	s[server]=$REPLY
	tree_cpu_ns "$2"
	s[server_ns]=$REPLY s[server_tids]=$REPLY_TIDS
	tree_jiffies "${PID[backend]}"
	s[backend]=$REPLY
	# Children reaped by this shell (the load generator) land in its cutime+cstime.
	read -r line </proc/$$/stat
	read -r -a f <<<"${line##*) }"
	s[self_children]=$((f[13] + f[14]))
	s[t]=$EPOCHREALTIME
}

# shellcheck disable=SC2154,SC2004 # a and b are namerefs to associative arrays
snap_deltas() { # snap_deltas S0 S1 -> REPLY_KV: wall_s, backend_j, server_ns and the /proc/stat deltas
	local -n a=$1 b=$2
	local k tid ns
	# The server's CPU from schedstat, unless a thread seen at the start ended before the end
	# (its time left the sum): then 0, and the recorders use the jiffies.
	ns=$((b[server_ns] - a[server_ns]))
	for tid in ${a[server_tids]}; do
		[[ ${b[server_tids]} == *" $tid "* ]] || ns=0
	done
	((a[server_ns] > 0 && ns > 0)) || ns=0
	REPLY_KV=("wall_s=$(awk -v x="${a[t]}" -v y="${b[t]}" 'BEGIN { printf "%.6f", y - x }')"
		"backend_j=$((b[backend] - a[backend]))" "server_ns=$ns")
	for k in user nice system idle iowait irq softirq steal cpu0_busy cpu0_total cpu1_busy cpu1_total; do
		REPLY_KV+=("${k}_j=$((b[$k] - a[$k]))")
	done
}

# quiet SECONDS_MAX: wait (at most SECONDS_MAX) until the machine's busy + steal time is below QUIET_PCT
# % of a core.  Called between runs, while the bench's own processes idle, so what it sees is other
# work: a build elsewhere on a shared machine.  Needs CLK_TCK and QUIET_PCT.
quiet() {
	local waited=0 pct
	local -a a b
	while :; do
		read -r -a a </proc/stat
		sleep 1
		read -r -a b </proc/stat
		# user nice system irq softirq steal over all CPUs, jiffies in 1 s -> % of one core.  Steal
		# counts: CPU the hypervisor gives to other guests is CPU our runs will not get.
		pct=$(((b[1] + b[2] + b[3] + b[6] + b[7] + b[8] - a[1] - a[2] - a[3] - a[6] - a[7] - a[8]) * 100 / CLK_TCK))
		((pct < QUIET_PCT)) && return 0
		if ((waited >= $1)); then
			log "warning: the machine is busy outside the bench (${pct} % of a core incl. steal); measuring anyway"
			return 0
		fi
		((waited == 0)) && log "machine busy outside the bench (${pct} % of a core incl. steal); waiting up to $1 s"
		waited=$((waited + 1))
	done
}

# measure_quietly REP ROW TARGET LABEL: the script's `measure REP ROW TARGET` after SETTLE s and
# (with QUIET_WAIT) a quiet machine; a run during which processes outside the bench used more than
# QUIET_PCT % of a core (the CSV's last row, others_cpu_pct) is moved to WORK/disturbed-runs.csv
# and measured again, up to RETRIES times, counted in REMEASURED.  Needs CSV and PYTHON.
measure_quietly() {
	local try
	for ((try = 0; ; try++)); do
		sleep "$SETTLE"
		((QUIET_WAIT)) && quiet "$QUIET_WAIT"
		measure "$1" "$2" "$3"
		((try < RETRIES)) && disturbed || break
		log "rep $1, $4: disturbed (others' CPU above $QUIET_PCT % of a core); measuring again"
		tail -n 1 "$CSV" >>"$WORK/disturbed-runs.csv"
		sed -i '$d' "$CSV"
		REMEASURED=$((REMEASURED + 1))
	done
}

disturbed() { # -> true when others' CPU in the CSV's last run was above QUIET_PCT % of a core
	"$PYTHON" -c 'import csv, sys
last = list(csv.DictReader(open(sys.argv[1])))[-1]
sys.exit(0 if float(last["others_cpu_pct"] or 0) > float(sys.argv[2]) else 1)' "$CSV" "$QUIET_PCT"
}

# ------------------------------------------------------------------ report
results_csv() { # results_csv CSV NAME: the per-run CSV copied to bench/results/NAME
	mkdir -p "$BENCH/results"
	[[ -f $BENCH/results/.gitignore ]] || printf '*\n!.gitignore\n' >"$BENCH/results/.gitignore"
	cp "$1" "$BENCH/results/$2"
}

# other_load [SECONDS] -> one line: the load average, and the processes outside this bench's trees
# that used the most CPU over SECONDS (default 1): other builds or fuzzers on a shared machine.
# shellcheck disable=SC2120 # no SECONDS: 1 s
other_load() {
	local -a ours=()
	local p
	for p in "${PID[@]}" ${LOADGEN_PID:+"$LOADGEN_PID"} $$; do
		descendants "$p"
		ours+=("${REPLY_PIDS[@]}")
	done
	"$PYTHON" - "${1:-1}" "${ours[@]}" <<'EOF'
import os, sys, time
ours = set(sys.argv[2:]) | {str(os.getpid())}
def jiffies():
    d = {}
    for p in os.listdir("/proc"):
        if not p.isdigit() or p in ours:
            continue
        try:
            with open(f"/proc/{p}/stat") as f:
                s = f.read()
        except OSError:
            continue
        comm, rest = s[s.index("(") + 1:s.rindex(")")], s[s.rindex(")") + 2:].split()
        d[p] = (comm, int(rest[11]) + int(rest[12]))
    return d
a = jiffies()
time.sleep(float(sys.argv[1]))
b = jiffies()
per_pct = os.sysconf("SC_CLK_TCK") * float(sys.argv[1]) / 100
busy = sorted(((j - a[p][1]) / per_pct, c) for p, (c, j) in b.items() if p in a and j > a[p][1])[::-1]
load = open("/proc/loadavg").read().split()[:3]
top = ", ".join(f"{c} {pct:.0f} %" for pct, c in busy[:4] if pct >= 5) or "none above 5 % of a core"
print(f"load average {' '.join(load)}; other processes' CPU over {sys.argv[1]} s: {top}")
EOF
}

cpu_model() {
	awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo
}

# shellcheck disable=SC2120 # no PATHSPEC: the whole work tree
git_source() { # git_source [PATHSPEC...] -> "REV", + a note when the work tree differs there
	local rev
	if rev=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null); then
		[[ -z $(git -C "$ROOT" status --porcelain -- "$@" 2>/dev/null | sed -n 1p) ]] ||
			rev+=" + uncommitted changes${1:+ under $1}"
	else
		rev="no commit yet"
	fi
	echo "$rev"
}

# shellcheck disable=SC2034 # REPLY_UPDATE is for the sourcing script
update_args() { # -> REPLY_UPDATE: the summariser's --update BENCHMARKS_MD, or nothing for "none"
	REPLY_UPDATE=()
	if [[ $BENCHMARKS_MD != none ]]; then
		[[ $BENCHMARKS_MD == /* ]] || BENCHMARKS_MD=$ORIG_PWD/$BENCHMARKS_MD
		REPLY_UPDATE=(--update "$BENCHMARKS_MD")
	fi
}
