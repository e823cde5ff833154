#!/usr/bin/env bash
# bench/h2-dos.sh - HTTP/2 attacks against a release Gatehouse while a well-behaved client is measured.
#
# Question answered:
#   While one attacker runs an HTTP/2 attack (rapid reset, CONTINUATION flood, HPACK bomb, SETTINGS
#   and PING floods, too many streams, a client that never reads) for DURATION seconds, how many
#   requests per second does a well-behaved HTTP/2 client still get from the same worker, and how
#   much CPU and memory does the gateway spend?
#
# Run:   bench/h2-dos.sh                                   # 30 s per attack, builds release
#        GATEHOUSE_BIN=target/release/gatehouse DURATION=5 ATTACKS="none ping" bench/h2-dos.sh
#        QUICK=1 bench/h2-dos.sh                           # 3 s per attack, a smoke run
# Needs: h2load (nghttp2-client), nginx, python3, taskset, curl. Loopback only; every phase ends by
#        itself after DURATION seconds (the attacker, h2load and the sampling loop are all bounded).
#
# Each phase starts a fresh gateway (one worker, an h2c listener) pinned to CPU 0; the backend
# nginx and h2load (8 connections x 8 streams, GET /5k.html) share CPU 1, which they saturate. The
# attacker (bench/lib/h2attack.py: raw frames, reconnecting whenever it is closed) runs on CPU 0 at
# nice 19: it takes what the gateway leaves of its core and never the client's CPU, so a drop in the
# normal client's req/s is the gateway's doing. "none" is the phase without an attacker.
# The section is written to BENCHMARKS.md unless BENCHMARKS_MD=none.
set -euo pipefail

KEEP_WORKDIR=${KEEP_WORKDIR:-0}
log() { printf 'h2-dos: %s\n' "$*" >&2; }
die() {
	log "$*"
	exit 1
}
# shellcheck source=bench/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

DURATION=${DURATION:-$(pick 30 3)}
ATTACKS=${ATTACKS:-none rapid_reset reset_forwarded continuation hpack_bomb settings ping ping_noread streams slow_reader none}
BENCHMARKS_MD=${BENCHMARKS_MD:-$ROOT/BENCHMARKS.md}
check_integers DURATION
need_commands h2load nginx taskset curl "$PYTHON"
((DURATION > 0)) || die "DURATION must be at least 1"

NOFILE=$(ulimit -n)
[[ $NOFILE == unlimited ]] && NOFILE=65536
WORKER_CONNS=$((NOFILE < 20000 ? NOFILE : 20000))
gatehouse_binary
make_workdir h2-dos
mkdir -p "$WORK/www"
write_www "$WORK/www"
head -c $((1 << 20)) /dev/zero | tr '\0' x >"$WORK/www/1m.bin"
start_backend 1

wait_h2c() { # wait_h2c PORT: the gateway answers HTTP/2 with prior knowledge; at most ~10 s
	local i
	for ((i = 0; i < 100; i++)); do
		kill -0 "${PID[gw]}" 2>/dev/null || { show_logs gw; die "gatehouse exited during start-up"; }
		[[ $(curl -s --noproxy '*' --max-time 2 --http2-prior-knowledge -o /dev/null -w '%{http_code}' \
			"http://127.0.0.1:$1/5k.html" 2>/dev/null) == 200 ]] && return 0
		sleep 0.1
	done
	show_logs gw
	die "gatehouse not ready after 10 s on port $1"
}

rss_kib() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }

# phase ATTACK -> one row appended to $WORK/rows.tsv:
# attack, req/s, failed, gateway CPU %, peak RSS KiB, attacker stats (JSON), offender metrics
phase() {
	local attack=$1 port admin gw_pid j0 j1 peak rss i h2load_pid attack_pid="" reqs failed
	free_ports 2
	port=${REPLY_PORTS[0]} admin=${REPLY_PORTS[1]}
	cat >"$WORK/gw.yaml" <<EOF
workers: 1
admin: { bind: "127.0.0.1:$admin", public: [/healthz, /metrics, /status] }
listeners:
  h2c: { bind: "127.0.0.1:$port", protocol: h2c }
$(gatehouse_upstream 256)
EOF
	start_proc gw 0 "$GATEHOUSE_BIN" run --config "$WORK/gw.yaml"
	gw_pid=${PID[gw]}
	wait_h2c "$port"
	tree_jiffies "$gw_pid"
	j0=$REPLY
	peak=$(rss_kib "$gw_pid")
	if [[ $attack != none ]]; then
		taskset -c 0 nice -n 19 "$PYTHON" "$BENCH/lib/h2attack.py" 127.0.0.1 "$port" "$attack" "$DURATION" \
			>"$WORK/attack.json" 2>"$WORK/attack.err" &
		attack_pid=$!
	else
		echo '{}' >"$WORK/attack.json"
	fi
	taskset -c 1 h2load -D "$DURATION" -c 8 -m 8 "http://127.0.0.1:$port/5k.html" >"$WORK/h2load.txt" 2>&1 &
	h2load_pid=$!
	LOADGEN_PID=$h2load_pid
	# Peak resident memory, sampled every 0.2 s while the load runs (bounded: DURATION + 30 s).
	for ((i = 0; i < (DURATION + 30) * 5; i++)); do
		kill -0 "$h2load_pid" 2>/dev/null || break
		rss=$(rss_kib "$gw_pid")
		((rss > peak)) && peak=$rss
		sleep 0.2
	done
	wait "$h2load_pid" || log "h2load exited with $? during $attack"
	LOADGEN_PID=
	[[ -n $attack_pid ]] && { wait "$attack_pid" || log "the attacker exited with $? during $attack ($(tail -n 3 "$WORK/attack.err"))"; }
	tree_jiffies "$gw_pid"
	j1=$REPLY
	reqs=$(awk '/^finished in/ { gsub(",", "", $4); print $4 }' "$WORK/h2load.txt")
	failed=$(awk '/^requests:/ { print $10 + $12 + $14 }' "$WORK/h2load.txt")
	local offenders
	offenders=$(curl -s --noproxy '*' --max-time 2 "http://127.0.0.1:$admin/metrics" |
		awk -F'[{}"]' '/^gatehouse_http2_offenders_total\{/ { split($5, v, " "); if (v[1] > 0) { printf "%s%s=%s", sep, $3, v[1]; sep = " " } }')
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$attack" "${reqs:-0}" "${failed:-?}" \
		"$(awk -v j=$((j1 - j0)) -v d="$DURATION" 'BEGIN { printf "%.0f", j / d }')" "$peak" \
		"$(cat "$WORK/attack.json")" "${offenders:-}" >>"$WORK/rows.tsv"
	terminate "$gw_pid"
	unset 'PID[gw]'
	log "$attack: $(tail -n 1 "$WORK/rows.tsv" | cut -f 2-5 | tr '\t' ' ')"
}

: >"$WORK/rows.tsv"
# Other work on the machine skews every figure: the load average is reported with them.
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
for attack in $ATTACKS; do
	log "phase: $attack, $DURATION s"
	phase "$attack"
done

"$PYTHON" - "$WORK/rows.tsv" "$WORK/section.md" "$DURATION" "$GATEHOUSE_VERSION" "$(git_source)" "$(cpu_model)" \
	"$LOAD_START" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'EOF'
import json, sys, time
rows_file, out, duration, version, source, cpu, load_start, load_end = sys.argv[1:9]
rows = [line.rstrip("\n").split("\t") for line in open(rows_file) if line.strip()]
base = [float(r[1]) for r in rows if r[0] == "none" and float(r[1]) > 0]
base_rps = sum(base) / len(base) if base else 0
codes = {"0": "NO_ERROR", "1": "PROTOCOL_ERROR", "9": "COMPRESSION_ERROR", "11": "ENHANCE_YOUR_CALM"}
lines = [
    "## HTTP/2 attacks (bench/h2-dos.sh)",
    "",
    f"- Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {cpu}; {version}; git {source}",
    f"- Each phase {duration} s against a fresh release gateway (1 worker, h2c, CPU 0); the normal client is h2load",
    "  (8 connections x 8 streams, GET /5k.html via nginx, both on CPU 1); the attacker (bench/lib/h2attack.py) runs",
    "  on CPU 0 at nice 19, taking what the gateway leaves of its core, and reconnects whenever the gateway closes it.",
    "  CPU is the gateway's, % of one core; peak RSS sampled every 0.2 s; frames are those the attacker wrote.",
    f"- Load average (1, 5, 15 min) at the start: {load_start}; at the end: {load_end}.",
    "",
    "| attack | normal req/s | vs no attack | failed | gateway CPU | gateway peak RSS | attacker connections | attacker frames | GOAWAYs received | gatehouse_http2_offenders_total |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---|---|",
]
for attack, rps, failed, cpu_pct, peak, stats, offenders in rows:
    stats = json.loads(stats or "{}")
    goaways = ", ".join(f"{codes.get(k, k)} {v}" for k, v in sorted(stats.get("goaways", {}).items())) or "-"
    ratio = f"{float(rps) / base_rps:.2f}" if base_rps else "-"
    conns = stats.get("connections", "-")
    frames = f"{stats['frames']:,}" if "frames" in stats else "-"
    lines.append(
        f"| {attack} | {float(rps):,.0f} | {ratio} | {failed} | {cpu_pct} % | {int(peak) / 1024:.1f} MiB | {conns} | {frames} | {goaways} | {offenders or '-'} |"
    )
lines += [
    "",
    "The normal client's rate is set by CPU 1 (h2load and nginx), not by the gateway, whose core stays partly idle:",
    "what an attack costs the gateway shows in its CPU column, and as a lower normal rate once that core is full. The two",
    "`none` rows, first and last, show how much the run drifted; \"vs no attack\" divides by their mean.",
]
open(out, "w").write("\n".join(lines) + "\n")
EOF
cat "$WORK/section.md"
if [[ $BENCHMARKS_MD != none ]]; then
	"$PYTHON" "$BENCH/lib/update_section.py" "$BENCHMARKS_MD" <"$WORK/section.md"
	log "section written to $BENCHMARKS_MD"
fi
