#!/usr/bin/env bash
# bench/memory.sh - memory of an idle server, and what idle keep-alive client connections add,
# over plain HTTP and over TLS: Gatehouse vs nginx vs HAProxy.
#
# Question answered:
#   How much resident memory does Gatehouse use idle, and how much do N idle keep-alive client
#   connections (each has made one request) add, in plain HTTP and with TLS terminated, compared
#   with nginx and HAProxy in front of the same backend?  (The hardening goal: 10,000 idle TLS
#   connections under 150 MB RSS.)
#
# Set-up (all on 127.0.0.1, free ports, a mktemp -d work dir removed on exit; nothing pinned: this
# measures memory, not speed): a backend nginx (1 worker) serving static files, and one server
# under test at a time, one worker per core: Gatehouse `workers: auto`, nginx
# `worker_processes auto`, HAProxy `nbthread` = CPUs.  Each proxies to the backend over
# HTTP/1.1 keep-alive and keeps idle client connections 10 minutes.  TLS: one ECDSA P-256
# certificate (bench/lib/tls_certs.py, cached in bench/.cache/tls-certs, shared with tls.sh),
# TLS 1.2 and 1.3, ALPN h2 and http/1.1 offered; the clients take TLS 1.3 and http/1.1.
#
# Per mode and server: start it, make one request (curl), wait 1 s, read idle memory; then
# bench/lib/hold_connections.py opens N connections (200 being opened at a time), sends one
# GET on each, reads the response heads and holds them; 2 s later memory is read again; then
# the clients close and the server stops.  Memory = VmRSS summed over the server's processes
# (nginx: master + workers; Gatehouse and HAProxy: one process), and Pss summed, which shares a
# page among the processes mapping it (nginx's workers share the master's pages).
# HAProxy reserves 2 file descriptors per client connection: under `ulimit -n` L it holds at
# most (L - 100) / 2 (9,950 at 20,000), so with a larger N it is given that many; the report
# says so and the per-connection figure stays comparable.
#
# Output: Markdown section on stdout, also written to BENCHMARKS.md (the section
# "## Memory: idle and idle keep-alive connections (bench/memory.sh)" is replaced).
#
# Run (needs nginx, haproxy, curl, python3; ulimit -n above N: the soft limit is raised to the
# hard one):
#   bench/memory.sh                                    # N=10000, builds release
#   GATEHOUSE_BIN=target/release/gatehouse bench/memory.sh
#   MODES=tls TARGETS=gatehouse N=2000 bench/memory.sh
#
# Environment knobs (defaults in brackets; QUICK=1 defaults after the slash):
#   GATEHOUSE_BIN    binary to test; unset = `cargo build --release -p gatehouse`
#   N [10000/500]    idle connections held per server
#   MODES [plain tls]
#   TARGETS [gatehouse nginx haproxy]
#   HOLD_TIMEOUT [180]   seconds the clients get to open all N connections
#   CERT_CACHE [<repo>/bench/.cache/tls-certs]
#   BENCHMARKS_MD [<repo>/BENCHMARKS.md / none]   file to update; "none" = don't
#   KEEP_WORKDIR [0]  1 = keep the temp dir (configs, logs)

set -Eeuo pipefail

# shellcheck source=SCRIPTDIR/lib/common.sh
. "$(dirname "$0")/lib/common.sh"

N=${N:-$(pick 10000 500)}
MODES=${MODES:-plain tls}
TARGETS=${TARGETS:-gatehouse nginx haproxy}
HOLD_TIMEOUT=${HOLD_TIMEOUT:-180}
CERT_CACHE=${CERT_CACHE:-$BENCH/.cache/tls-certs}
BENCHMARKS_MD=${BENCHMARKS_MD:-$(pick "$ROOT/BENCHMARKS.md" none)}
KEEP_WORKDIR=${KEEP_WORKDIR:-0}
HEADING='## Memory: idle and idle keep-alive connections (bench/memory.sh)'

log() { printf '[memory.sh %3ss] %s\n' "$SECONDS" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

check_integers N HOLD_TIMEOUT
((N >= 1)) || die "N must be at least 1"
read -r -a MODE_LIST <<<"$MODES"
read -r -a TARGET_LIST <<<"$TARGETS"
((${#MODE_LIST[@]} && ${#TARGET_LIST[@]})) || die "MODES and TARGETS must not be empty"
for m in "${MODE_LIST[@]}"; do case $m in plain | tls) ;; *) die "unknown mode '$m' in MODES (plain tls)" ;; esac; done
for t in "${TARGET_LIST[@]}"; do
	case $t in gatehouse | nginx | haproxy) ;; *) die "unknown target '$t' in TARGETS (gatehouse nginx haproxy)" ;; esac
done
need=(nginx curl python3)
want haproxy && need+=(haproxy)
need_commands "${need[@]}"
PYTHON=$(python3 -c 'import sys; print(sys.executable)')

GATEHOUSE_VERSION=
want gatehouse && gatehouse_binary

make_workdir gatehouse-memory-bench
ulimit -n "$(ulimit -Hn)"
# HAProxy's budget: 2 fds per connection and a few for itself (it refuses to start above it).
NOFILE_NOW=$(ulimit -n)
[[ $NOFILE_NOW == unlimited ]] && NOFILE_NOW=65536
HAPROXY_MAXCONN=$(((NOFILE_NOW - 100) / 2))
((HAPROXY_MAXCONN > N + 10)) && HAPROXY_MAXCONN=$((N + 10))
raise_nofile
((N + 200 <= NOFILE)) || die "N=$N needs about $((N + 200)) file descriptors, ulimit -n is $NOFILE"

mkdir -p "$WORK/www"
write_www "$WORK/www"
if [[ " ${MODE_LIST[*]} " == *" tls "* ]]; then
	make_certs >/dev/null
	BUNDLE=$CERT_CACHE/ecdsa.pem
fi
start_backend none
log "work dir $WORK; backend nginx on 127.0.0.1:$P_BACKEND; $(other_load)"

# ------------------------------------------------------------------ servers
server_start() { # server_start TARGET MODE -> PORT, the server started and answering
	local target=$1 mode=$2 dir=$WORK/$1-$2 scheme=http
	mkdir -p "$dir"
	free_ports 1
	PORT=${REPLY_PORTS[0]}
	[[ $mode == tls ]] && scheme=https
	case $target in
	gatehouse)
		{
			echo "workers: auto"
			echo "cpu_affinity: off"
			echo 'access_log: { path: "off" }'
			[[ $mode == tls ]] && echo "tls: { certificates: [{ cert: \"$BUNDLE\" }], default_certificate: bench.test }"
			echo "listeners:"
			echo "  main: { bind: \"127.0.0.1:$PORT\", max_connections: $((N + 1000)), keepalive_timeout: 10m, header_read_timeout: 10m$([[ $mode == tls ]] && echo ", tls: {}") }"
			gatehouse_upstream 256
		} >"$dir/gatehouse.yaml"
		gatehouse_check "$dir/gatehouse.yaml"
		start_proc "$target" none "$GATEHOUSE_BIN" run --config "$dir/gatehouse.yaml"
		;;
	nginx)
		local listen=$PORT lines="        keepalive_timeout 600s;"
		if [[ $mode == tls ]]; then
			listen="$PORT ssl http2"
			lines+=$'\n'"        ssl_certificate $BUNDLE; ssl_certificate_key $BUNDLE;"
		fi
		nginx_proxy_conf "$dir" "$listen" "$P_BACKEND" auto "$lines" >"$dir/nginx.conf"
		nginx -t -q -p "$dir" -e "$dir/error.log" -c "$dir/nginx.conf" || die "nginx rejected $dir/nginx.conf"
		start_proc "$target" none nginx -p "$dir" -e "$dir/error.log" -c "$dir/nginx.conf"
		;;
	haproxy)
		local bind="    bind 127.0.0.1:$PORT"
		[[ $mode == tls ]] && bind+=" ssl crt $BUNDLE alpn h2,http/1.1 ssl-min-ver TLSv1.2"
		haproxy_cfg "$(nproc)" "$bind
    maxconn $HAPROXY_MAXCONN
    timeout client 10m
    timeout http-keep-alive 10m
" >"$dir/haproxy.cfg"
		haproxy -c -q -f "$dir/haproxy.cfg" >&2 || die "haproxy rejected $dir/haproxy.cfg"
		start_proc "$target" none haproxy -db -f "$dir/haproxy.cfg"
		;;
	esac
	wait_http "$target" "$scheme://127.0.0.1:$PORT/test.html" "${SIZE[test.html]}" "$dir/error.log"
}

# ------------------------------------------------------------- measurement
ROWS=$WORK/rows.tsv # mode target n idle_rss idle_pss loaded_rss loaded_pss clients
: >"$ROWS"
START_DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
LOAD_NOTE=$(other_load)
for mode in "${MODE_LIST[@]}"; do
	for t in "${TARGET_LIST[@]}"; do
		n=$N
		[[ $t == haproxy ]] && ((n > HAPROXY_MAXCONN - 10)) && n=$((HAPROXY_MAXCONN - 10))
		server_start "$t" "$mode"
		sleep 1
		tree_mem_kb "${PID[$t]}"
		idle=$REPLY idle_pss=$REPLY_PSS
		rm -f "$WORK/hold" "$WORK/held"
		mkfifo "$WORK/hold"
		tls_flag=()
		[[ $mode == tls ]] && tls_flag=(--tls)
		"$PYTHON" "$BENCH/lib/hold_connections.py" 127.0.0.1 "$PORT" "$n" --path /test.html "${tls_flag[@]}" \
			--timeout "$HOLD_TIMEOUT" <"$WORK/hold" >"$WORK/held" 2>"$WORK/hold.err" &
		LOADGEN_PID=$!
		exec 4>"$WORK/hold"
		for ((i = 0; i < (HOLD_TIMEOUT + 30) * 10; i++)); do
			[[ -s $WORK/held ]] && break
			kill -0 "$LOADGEN_PID" 2>/dev/null || { cat "$WORK/hold.err" >&2; die "hold_connections.py exited"; }
			sleep 0.1
		done
		[[ -s $WORK/held ]] || die "hold_connections.py printed nothing in $((HOLD_TIMEOUT + 30)) s"
		sleep 2
		tree_mem_kb "${PID[$t]}"
		loaded=$REPLY loaded_pss=$REPLY_PSS
		clients=$(<"$WORK/held")
		exec 4>&-
		wait "$LOADGEN_PID" || true
		LOADGEN_PID=
		log "$mode $t: idle ${idle} kB, with $n connections ${loaded} kB; $clients"
		printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$mode" "$t" "$n" "$idle" "$idle_pss" "$loaded" "$loaded_pss" "$clients" >>"$ROWS"
		terminate "${PID[$t]}"
		unset "PID[$t]"
	done
done

# ---------------------------------------------------------------- reporting
versions=("$(nginx -v 2>&1 | sed 's/^nginx version: //')")
want haproxy && versions+=("$(haproxy -v 2>/dev/null | sed -n '1 { s/ - https.*//; s/ *$//; p }')")
versions+=("Python $("$PYTHON" -c 'import platform, ssl; print(platform.python_version(), "with", ssl.OPENSSL_VERSION)') (clients)")
[[ -n $GATEHOUSE_VERSION ]] && versions+=("gatehouse: ${GATEHOUSE_VERSION% }")
printf -v vline '%s; ' "${versions[@]}"
{
	echo "$HEADING"
	echo
	echo "- Date: $START_DATE$( ((q)) && echo "; **QUICK=1 smoke run, not for conclusions**")"
	echo "- Machine: $(nproc) CPUs, $(cpu_model), Linux $(uname -r); at start: $LOAD_NOTE"
	echo "- Versions: ${vline%; }"
	echo "- Source: git $(git_source crates/ Cargo.toml Cargo.lock)"
	echo "- Servers: one worker per core (Gatehouse \`workers: auto\`, nginx \`worker_processes auto\`, HAProxy \`nbthread $(nproc)\`), each proxying to a backend nginx in its own process (not counted), idle client connections kept 10 minutes. TLS: ECDSA P-256 certificate; clients negotiate TLS 1.3, ALPN http/1.1, no resumption."
	echo "- Each client connection sends one request, reads the response head, and stays open (keep-alive). Memory: VmRSS of the server's processes summed (Pss summed in brackets: nginx's workers share pages with their master). HAProxy under \`ulimit -n $NOFILE\`: maxconn $HAPROXY_MAXCONN (it reserves 2 fds per connection)."
	echo
	echo "| mode | server | idle RSS (PSS) | RSS with the idle connections (PSS) | idle connections | added per connection (RSS) | clients |"
	echo "|---|---|---:|---:|---:|---:|---|"
	awk -F'\t' '
		function mb(kb) { return sprintf("%.1f MB", kb / 1024) }
		function grouped(x, s) { s = sprintf("%.0f", x); while (s ~ /[0-9][0-9][0-9][0-9]/) sub(/[0-9][0-9][0-9]($|,)/, ",&", s); return s }
		BEGIN { name["gatehouse"] = "**Gatehouse**"; name["nginx"] = "nginx"; name["haproxy"] = "HAProxy"
			mname["plain"] = "plain HTTP"; mname["tls"] = "TLS" }
		{ printf "| %s | %s | %s (%s) | %s (%s) | %s | %s B | %s |\n", mname[$1], name[$2], mb($4), mb($5), mb($6), mb($7), grouped($3), grouped(($6 - $4) * 1024 / $3), $8
		  per[$1 "," $2] = ($6 - $4) * 1024 / $3; rss[$1 "," $2] = $6; cnt[$1 "," $2] = $3 }
		END {
			print ""
			split("plain tls", order, " ")
			for (i = 1; i <= 2; i++) {
				m = order[i]; g = m ",gatehouse"
				if (!(g in per)) continue
				line = ""
				if ((m ",nginx") in per) line = line sprintf(" nginx %.2f,", per[g] / per[m ",nginx"])
				if ((m ",haproxy") in per) line = line sprintf(" HAProxy %.2f,", per[g] / per[m ",haproxy"])
				if (line != "") printf "- %s: bytes per idle connection, Gatehouse / peer (same run):%s\n", mname[m], substr(line, 1, length(line) - 1)
			}
			g = "tls,gatehouse"
			if (g in rss) printf "- Goal \"10,000 idle TLS connections under 150 MB RSS\": Gatehouse held %s at %s: %s.\n", grouped(cnt[g]), mb(rss[g]), (cnt[g] >= 10000 && rss[g] < 150 * 1024) ? "met" : (cnt[g] < 10000 ? "not tested at 10,000 (N smaller)" : "**not met**")
		}' "$ROWS"
} >"$WORK/section.md"
echo
cat "$WORK/section.md"
if [[ $BENCHMARKS_MD != none ]]; then
	[[ $BENCHMARKS_MD == /* ]] || BENCHMARKS_MD=$ORIG_PWD/$BENCHMARKS_MD
	"$PYTHON" "$BENCH/lib/update_section.py" "$BENCHMARKS_MD" <"$WORK/section.md"
	log "updated $BENCHMARKS_MD"
fi
