#!/usr/bin/env bash
# bench/http3.sh - HTTP/3 at the TLS edge: Gatehouse vs Caddy (HTTP/3 on by default), same run,
# and Gatehouse's own HTTP/3 against its HTTP/2 over TLS.
#
# Question answered:
#   How many HTTP/3 requests, and how many full and resumed QUIC handshakes, does each server
#   serve per server CPU-second, proxying to the same backend?  Goals: requests per CPU-second
#   >= 1.5x Caddy's; full handshakes per CPU-second >= 2x Caddy's; Gatehouse's HTTP/3 at most
#   1.5x the CPU per request of its HTTP/2 over TLS, 5 KB objects.
#
# Set-up (all on 127.0.0.1, free ports, a mktemp -d work dir removed on exit):
#   CPU 1: the server under test, one loaded at a time: Gatehouse (workers: 1; an https listener
#          with http3: true; access log off) or Caddy (GOMAXPROCS=1; `servers { protocols h1 h2
#          h3 }`, `reverse_proxy`), each with the same self-made ECDSA P-256 certificate for
#          bench.test, each proxying to the backend over kept-alive HTTP/1.1.
#   CPU 0: the backend nginx (one worker, static files of 5 KB, 10 KB and 1 MB) and the load
#          generator: bench/h3load (quic-go's HTTP/3 client, built with go on first use, with
#          GOMAXPROCS=1), or h2load for the HTTP/2 row.  The h2load here has no HTTP/3.
#          The load generator shares its core with the backend and may not saturate the server:
#          the figures that compare are per server CPU-second, not requests per second.
# Rows: SIZES x STREAMS with CONNS connections (requests mode: each connection STREAMS
#   requests in flight; 1 MB objects over CONNS/10 connections, as 100 x 100 x 1 MB would be
#   10 GB in flight); `handshakes` (CONNS/10 clients, a new connection per request, full
#   handshakes) and `resumed` (the same with a session cache: TLS 1.3 tickets) on the 5 KB object;
#   and `h2 5k` (Gatehouse only: h2load over TLS, CONNS connections x 10 streams), then again at
#   the request rate that round's HTTP/3 5 KB x10 row reached (h2load --rps): the HTTP/3 client
#   does not load the server fully, and CPU per request falls as load rises.
# Measured per run: requests (200 answers with the whole body), requests/s, p50 / p99 latency
# (the tool), the server's CPU (its process tree's schedstat), requests per server CPU-second.
# Order: REPS rounds; in each, every row runs on each server, the server order alternating.
#
# Output: a Markdown section on stdout, also written to bench/results/http3-DATE-HHMM.md
# (QUICK=1: http3-quick-DATE-HHMM.md).
#
# Run (from anywhere; needs caddy (Debian package), go, nginx, h2load, openssl, python3,
# taskset, 2 CPUs):
#   bench/http3.sh                              # builds gatehouse (release) when GATEHOUSE_BIN is unset
#   QUICK=1 GATEHOUSE_BIN=target/release/gatehouse bench/http3.sh   # smoke run, about a minute
#
# Environment knobs (defaults in brackets; QUICK=1 defaults after the slash):
#   GATEHOUSE_BIN    the gateway; unset = cargo build --release
#   REPS [3/1]       rounds
#   DURATION [10s/3s]  length of each run
#   CONNS [100/20]   connections (requests rows); handshake rows use CONNS/10 clients
#   SIZES [5k 10k 1m/5k 1m]
#   STREAMS [1 10 100/1 10]
#   TARGETS [gatehouse caddy]; gatehouse-nogso adds Gatehouse with quic.gso: false (its GSO's worth);
#                    gatehouse-base adds GATEHOUSE_BASE_BIN, another build, same settings (before / after)
#   KEEP_WORKDIR [0] 1 = keep the temp dir

set -Eeuo pipefail

# shellcheck source=SCRIPTDIR/lib/common.sh
. "$(dirname "$0")/lib/common.sh"

REPS=${REPS:-$(pick 3 1)}
DURATION=${DURATION:-$(pick 10s 3s)}
CONNS=${CONNS:-$(pick 100 20)}
SIZES=${SIZES:-$(pick "5k 10k 1m" "5k 1m")}
STREAMS=${STREAMS:-$(pick "1 10 100" "1 10")}
TARGETS=${TARGETS:-gatehouse caddy}
KEEP_WORKDIR=${KEEP_WORKDIR:-0}
read -r -a TARGET_LIST <<<"$TARGETS"

log() { printf '[http3.sh %3ss] %s\n' "$SECONDS" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

check_integers REPS CONNS
export PATH=$PATH:/usr/local/go/bin:$HOME/go/bin
need_commands nginx h2load openssl taskset go "$PYTHON"
if want caddy && ! command -v caddy >/dev/null; then
	log "caddy is not installed (Debian: caddy): Gatehouse alone"
	read -r -a TARGET_LIST <<<"${TARGETS//caddy/}"
fi
gatehouse_binary
want gatehouse-base && gatehouse_base_binary

h3load_binary

make_workdir gatehouse-http3-bench
HAPROXY_MAXCONN=0 # no HAProxy here
raise_nofile
mkdir -p "$WORK/www"
write_www "$WORK/www"
head -c 1048576 /dev/zero | tr '\0' 'x' >"$WORK/www/1m.html"
start_backend 0

# One certificate for both servers: key and chain apart for Caddy, one bundle for Gatehouse.
bench_test_cert "$WORK"

free_ports 4
P_GATEHOUSE=${REPLY_PORTS[0]}
P_CADDY=${REPLY_PORTS[1]}
P_NOGSO=${REPLY_PORTS[2]}
P_BASE=${REPLY_PORTS[3]}
h3_gatehouse_yaml "$P_GATEHOUSE" "$WORK/bundle.pem" >"$WORK/gatehouse.yaml"
# The same with GSO off (quic.gso: false), for the gatehouse-nogso target.
sed -e "s/127.0.0.1:$P_GATEHOUSE/127.0.0.1:$P_NOGSO/" -e 's/quic: {max_streams: 1000}/quic: {max_streams: 1000, gso: false}/' \
	"$WORK/gatehouse.yaml" >"$WORK/gatehouse-nogso.yaml"
# Another build with the same configuration, for the gatehouse-base target (before / after).
sed -e "s/127.0.0.1:$P_GATEHOUSE/127.0.0.1:$P_BASE/" "$WORK/gatehouse.yaml" >"$WORK/gatehouse-base.yaml"
cat >"$WORK/Caddyfile" <<EOF
{
	auto_https off
	admin off
	servers {
		protocols h1 h2 h3
	}
}
https://bench.test:$P_CADDY {
	tls $WORK/cert.pem $WORK/key.pem
	reverse_proxy 127.0.0.1:$P_BACKEND
}
EOF

port_of() {
	case $1 in
	gatehouse) echo "$P_GATEHOUSE" ;;
	gatehouse-nogso) echo "$P_NOGSO" ;;
	gatehouse-base) echo "$P_BASE" ;;
	*) echo "$P_CADDY" ;;
	esac
}

if want gatehouse; then
	gatehouse_check "$WORK/gatehouse.yaml"
	start_proc gatehouse 1 "$GATEHOUSE_BIN" run --config "$WORK/gatehouse.yaml"
fi
if want gatehouse-nogso; then
	start_proc gatehouse-nogso 1 "$GATEHOUSE_BIN" run --config "$WORK/gatehouse-nogso.yaml"
fi
if want gatehouse-base; then
	start_proc gatehouse-base 1 "$GATEHOUSE_BASE_BIN" run --config "$WORK/gatehouse-base.yaml"
fi
if want caddy; then
	start_proc caddy 1 env GOMAXPROCS=1 HOME="$WORK" XDG_DATA_HOME="$WORK" XDG_CONFIG_HOME="$WORK" \
		caddy run --config "$WORK/Caddyfile" --adapter caddyfile
fi
for t in "${TARGET_LIST[@]}"; do
	for _ in $(seq 1 100); do
		code=$(curl -sk -o /dev/null -w '%{http_code}' --resolve "bench.test:$(port_of "$t"):127.0.0.1" \
			"https://bench.test:$(port_of "$t")/5k.html" || true)
		[[ $code == 200 ]] && break
		sleep 0.1
	done
	[[ $code == 200 ]] || { show_logs "$t"; die "$t does not answer over TCP"; }
	out=$(taskset -c 0 "$H3LOAD" -addr "127.0.0.1:$(port_of "$t")" -host bench.test -path /5k.html -c 1 -d 1s) ||
		{ show_logs "$t"; die "$t does not answer over HTTP/3: $out"; }
done

RUNS=$WORK/runs.jsonl
: >"$RUNS"
# h3_rate -> (stdout) the last Gatehouse "h3 5k x10" run's requests per second per connection
h3_rate() {
	"$PYTHON" - "$RUNS" "$CONNS" <<'EOF'
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
last = [r for r in runs if r["target"] == "gatehouse" and r["row"] == "h3 5k x10"][-1]
print(max(1, round(last["rps"] / int(sys.argv[2]))))
EOF
}
# run TARGET ROW SIZE STREAMS MODE
run() {
	local target=$1 row=$2 size=$3 streams=$4 mode=$5 out before after
	tree_cpu_ns "${PID[$target]}"
	before=$REPLY
	if [[ $mode == h2* ]]; then
		local rate=()
		# h2-paced: HTTP/2 at the request rate HTTP/3 just reached (h2load --rps is per client).
		[[ $mode == h2-paced ]] && rate=(--rps="$(h3_rate)")
		out=$(taskset -c 0 h2load -c "$CONNS" -m "$streams" "${rate[@]}" -D "${DURATION%s}" --warm-up-time=0 \
			-H ":authority: bench.test" "https://127.0.0.1:$(port_of "$target")/$size.html" 2>&1 |
			"$PYTHON" -c '
import json, re, sys
text = sys.stdin.read()
ok = int(re.search(r"status codes: (\d+) 2xx", text).group(1))
secs = float(re.search(r"finished in ([\d.]+)s", text).group(1))
print(json.dumps({"requests": ok, "seconds": secs, "rps": ok / secs, "p50_ms": 0, "p99_ms": 0, "errors": 0}))
')
	else
		local c=$CONNS
		# Handshake rows, and 1 MB objects (100 x 100 x 1 MB would be 10 GB in flight): a tenth.
		[[ $mode != requests || $size == 1m ]] && c=$((CONNS / 10 > 0 ? CONNS / 10 : 1))
		out=$(GOMAXPROCS=1 taskset -c 0 "$H3LOAD" -addr "127.0.0.1:$(port_of "$target")" -host bench.test \
			-path "/$size.html" -c "$c" -m "$streams" -d "$DURATION" -mode "$mode") || true
	fi
	tree_cpu_ns "${PID[$target]}"
	after=$REPLY
	"$PYTHON" - "$target" "$row" "$((after - before))" "$out" >>"$RUNS" <<'EOF'
import json, sys
target, row, ns, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
r = json.loads(out) if out.strip().startswith("{") else {"requests": 0, "error": out}
r.update(target=target, row=row, cpu_s=ns / 1e9)
r["per_cpu_s"] = r["requests"] / r["cpu_s"] if r["cpu_s"] > 0 else 0
print(json.dumps(r))
EOF
	log "$row $target: $(tail -1 "$RUNS")"
}

for rep in $(seq 1 "$REPS"); do
	order=("${TARGET_LIST[@]}")
	((rep % 2 == 0)) && order=($(printf '%s\n' "${TARGET_LIST[@]}" | tac))
	for size in $SIZES; do
		for streams in $STREAMS; do
			for t in "${order[@]}"; do run "$t" "h3 $size x$streams" "$size" "$streams" requests; done
		done
	done
	for mode in handshakes resumed; do
		for t in "${order[@]}"; do run "$t" "h3 $mode" 5k 1 "$mode"; done
	done
	if want gatehouse; then
		run gatehouse "h2 5k x10" 5k 10 h2
		# quic-go's client does not load the server fully (it shares a core with the backend), and
		# CPU per request falls as load rises (more requests per wake-up and per system call):
		# HTTP/2 is measured again at the request rate of this round's HTTP/3 5 KB x10 row.
		[[ " $SIZES " == *" 5k "* && " $STREAMS " == *" 10 "* ]] && run gatehouse "h2 5k x10, HTTP/3's rate" 5k 10 h2-paced
	fi
done

STAMP=$(date -u +%Y%m%d-%H%M)
mkdir -p "$BENCH/results"
PREFIX=http3-
((q)) && PREFIX=http3-quick-
REPORT=$BENCH/results/$PREFIX$STAMP.md
"$PYTHON" - "$RUNS" "$GATEHOUSE_VERSION" "$DURATION" "$CONNS" "$REPS" >"$REPORT" <<'EOF'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
version, duration, conns, reps = sys.argv[2:6]
rows = list(dict.fromkeys(r["row"] for r in runs))
targets = list(dict.fromkeys(r["target"] for r in runs))
def med(row, target, key):
    vals = [r.get(key, 0) for r in runs if r["row"] == row and r["target"] == target]
    return (statistics.median(vals), min(vals), max(vals)) if vals else None
print("## HTTP/3 (bench/http3.sh)\n")
print(f"Gatehouse {version} vs Caddy, one core each, same run; {conns} connections, {duration} per run, {reps} round(s);")
print("load from quic-go's HTTP/3 client (bench/h3load) sharing a core with the backend nginx.\n")
print("| row | server | req/s | p99 ms | server CPU s | requests per server CPU-s (median, min-max) | errors |")
print("|---|---|---:|---:|---:|---:|---:|")
for row in rows:
    for t in targets:
        m = med(row, t, "per_cpu_s")
        if m is None:
            continue
        rps = med(row, t, "rps")[0]; p99 = med(row, t, "p99_ms")[0]; cpu = med(row, t, "cpu_s")[0]
        errs = sum(r.get("errors", 0) for r in runs if r["row"] == row and r["target"] == t)
        print(f"| {row} | {t} | {rps:,.0f} | {p99:.1f} | {cpu:.2f} | {m[0]:,.0f} ({m[1]:,.0f}-{m[2]:,.0f}) | {errs} |")
print()
def ratios(other, title):
    """Gatehouse's requests per server CPU-second over `other`'s, row by row (medians)."""
    if other not in targets or "gatehouse" not in targets:
        return
    print(f"{title}, requests per server CPU-second (medians):\n")
    for row in rows:
        g, o = med(row, "gatehouse", "per_cpu_s"), med(row, other, "per_cpu_s")
        if g and o and o[0] > 0:
            print(f"- {row}: **{g[0] / o[0]:.2f}**")
    print()
ratios("caddy", "Gatehouse / Caddy")
ratios("gatehouse-nogso", "Gatehouse with GSO / without (quic.gso: false)")
ratios("gatehouse-base", "Gatehouse / the base build")
h3, h2 = med("h3 5k x10", "gatehouse", "per_cpu_s"), med("h2 5k x10", "gatehouse", "per_cpu_s")
paced = med("h2 5k x10, HTTP/3's rate", "gatehouse", "per_cpu_s")
if h3 and h2 and h3[0] > 0:
    print("Gatehouse CPU per request, HTTP/3 / HTTP/2 over TLS (5 KB, 10 streams per connection; medians):\n")
    print(f"- each client at full speed: **{h2[0] / h3[0]:.2f}**")
    if paced:
        # Per round too: each paced run follows its round's HTTP/3 run.
        h3s = [r["per_cpu_s"] for r in runs if r["row"] == "h3 5k x10" and r["target"] == "gatehouse"]
        h2s = [r["per_cpu_s"] for r in runs if r["row"] == "h2 5k x10, HTTP/3's rate" and r["target"] == "gatehouse"]
        per_round = sorted(b / a for a, b in zip(h3s, h2s) if a > 0)
        spread = f" (rounds: {', '.join(f'{x:.2f}' for x in per_round)})" if len(per_round) > 1 else ""
        print(f"- HTTP/2 at HTTP/3's request rate: **{paced[0] / h3[0]:.2f}**{spread}")
EOF
cat "$REPORT"
log "report: $REPORT"
