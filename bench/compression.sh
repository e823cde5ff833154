#!/usr/bin/env bash
# bench/compression.sh - what does compressing answers cost per proxied request?
#
# Question answered:
#   Requests per proxy CPU-second of Gatehouse compressing a 50 KB JSON answer (gzip level 6,
#   brotli level 4, zstd level 3), against nginx proxying the same answer with `gzip on;
#   gzip_comp_level 6` (zlib) and Caddy 2.11.9's `encode gzip 6` (klauspost/compress) measured
#   in the same run. Goal: Gatehouse gzip-6 >= 1.2x nginx gzip-6.
#
# Set-up (127.0.0.1, free ports, a mktemp -d work dir removed on exit):
#   CPU 0: backend nginx (1 worker) serving data.json (50,000 bytes of JSON, no compression of
#          its own) + wrk -t1 -c CONNS -H 'Accept-Encoding: CODING'.
#   CPU 1: the proxies, each alone under load: Gatehouse (workers: 1; routes /gzip/, /br/,
#          /zstd/ each offering one coding, /identity/ none), nginx (worker_processes 1,
#          upstream keepalive, gzip on, gzip_comp_level 6, gzip_types application/json), Caddy
#          (GOMAXPROCS=1, reverse_proxy, encode gzip 6) when its binary is found.
#   Rows: gatehouse-identity (no compression: what the compression adds), gatehouse-gzip,
#   gatehouse-br, gatehouse-zstd, nginx-gzip, caddy-gzip. Before measuring, every row must
#   answer with its coding and decode (curl --compressed) to data.json exactly.
#   REPS rounds; each round runs every row once, the order rotated by one per round. The ratio
#   to nginx-gzip is taken per round, then the median over rounds.
#
# Output: a Markdown section on stdout (req per proxy CPU-second median and range, the ratio to
# nginx, bytes per answer), written into BENCHMARKS.md under "## Compression
# (bench/compression.sh)" unless BENCHMARKS_MD=none; per-run CSV in
# bench/results/compression-latest.csv.
#
# Run: GATEHOUSE_BIN=target/release/gatehouse bench/compression.sh   (needs nginx, wrk, ab,
#   curl, python3, taskset; Caddy from CADDY_BIN or ~/.cache/gatehouse-tools/caddy-v2.11.9)
#   REPS [5/1]  DURATION [5/1]  CONNS [50]  QUICK [0]  BENCHMARKS_MD [<repo>/BENCHMARKS.md/none]
#   ROWS [gatehouse-identity gatehouse-gzip gatehouse-br gatehouse-zstd nginx-gzip caddy-gzip]
set -Eeuo pipefail
. "$(dirname "$0")/lib/common.sh"

REPS=${REPS:-$(pick 5 1)}
DURATION=${DURATION:-$(pick 5 1)}
CONNS=${CONNS:-50}
BENCHMARKS_MD=${BENCHMARKS_MD:-$(pick "$ROOT/BENCHMARKS.md" none)}
KEEP_WORKDIR=${KEEP_WORKDIR:-0}
HAPROXY_MAXCONN=4096 # raise_nofile's fd budget (no HAProxy here)
CADDY_BIN=${CADDY_BIN:-$HOME/.cache/gatehouse-tools/caddy-v2.11.9/caddy}
ROWS=${ROWS:-gatehouse-identity gatehouse-gzip gatehouse-br gatehouse-zstd nginx-gzip caddy-gzip}
log() { printf '[compression.sh %3ss] %s\n' "$SECONDS" "$*" >&2; }
die() {
	log "ERROR: $*"
	exit 1
}
check_integers REPS DURATION CONNS
need_commands nginx wrk ab curl python3 taskset getconf
(($(nproc) >= 2)) || die "needs at least 2 CPUs (CPU 0: backend + wrk, CPU 1: proxy)"
CLK_TCK=$(getconf CLK_TCK)
PYTHON=$(python3 -c 'import sys; print(sys.executable)')
read -r -a ROW_LIST <<<"$ROWS"
if [[ " $ROWS " == *" caddy-gzip "* && ! -x $CADDY_BIN ]]; then
	log "no Caddy at $CADDY_BIN: its row is left out"
	ROW_LIST=("${ROW_LIST[@]/caddy-gzip/}")
	read -r -a ROW_LIST <<<"${ROW_LIST[*]}"
fi
gatehouse_binary

make_workdir gatehouse-compression-bench
raise_nofile
mkdir -p "$WORK"/{www,nginx,gatehouse,caddy,runs,probe}
write_www "$WORK/www"
"$PYTHON" - "$WORK/www/data.json" <<'EOF'
import json, random, sys
random.seed(7)
words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
items, out = [], "[]"
while True:
    i = len(items)
    items.append({"id": i, "sku": f"SKU-{random.randrange(10**6):06d}", "name": " ".join(random.sample(words, 3)),
                  "price": round(random.uniform(1, 500), 2), "stock": random.randrange(1000),
                  "tags": random.sample(words, 2), "active": random.random() < 0.8})
    text = json.dumps(items, separators=(",", ":"))
    if len(text) > 50_000:
        break
    out = text
out = out[:-1] + " " * (50_000 - len(out)) + "]"
assert len(out) == 50_000
open(sys.argv[1], "w").write(out)
EOF
SIZE[data.json]=50000
start_backend 0
free_ports 4
read -r P_GH P_NGINX P_CADDY P_ADMIN <<<"${REPLY_PORTS[*]}"

cat >"$WORK/gatehouse/gatehouse.yaml" <<EOF
workers: 1
reuse_port: true
cpu_affinity: off
access_log: { path: "off" }
admin: { bind: "127.0.0.1:$P_ADMIN" }
listeners:
  main: { bind: "127.0.0.1:$P_GH", max_connections: 20000 }
upstreams:
  backend:
    targets: ["127.0.0.1:$P_BACKEND"]
    keepalive: { max_idle: 256, idle_timeout: 60s }
    retries: 0
sites:
  all:
    hosts: ["*"]
    routes:
      - { path: /identity/, upstream: backend, rewrite: / }
      - { path: /gzip/, upstream: backend, rewrite: /, compression: { algorithms: [gzip], levels: { gzip: 6 } } }
      - { path: /br/, upstream: backend, rewrite: /, compression: { algorithms: [br], levels: { br: 4 } } }
      - { path: /zstd/, upstream: backend, rewrite: /, compression: { algorithms: [zstd], levels: { zstd: 3 } } }
EOF
gatehouse_check "$WORK/gatehouse/gatehouse.yaml"
nginx_proxy_conf "$WORK/nginx" "$P_NGINX" "$P_BACKEND" 1 \
	"        gzip on; gzip_comp_level 6; gzip_types application/json; gzip_min_length 256;" >"$WORK/nginx/nginx.conf"
cat >"$WORK/caddy/Caddyfile" <<EOF
{
	admin off
	auto_https off
	persist_config off
}
http://127.0.0.1:$P_CADDY {
	encode {
		gzip 6
		match {
			header Content-Type application/json*
		}
	}
	reverse_proxy 127.0.0.1:$P_BACKEND
}
EOF

declare -A SERVER=([gatehouse-identity]=gatehouse [gatehouse-gzip]=gatehouse [gatehouse-br]=gatehouse
	[gatehouse-zstd]=gatehouse [nginx-gzip]=nginx [caddy-gzip]=caddy)
declare -A URL=([gatehouse-identity]="http://127.0.0.1:$P_GH/identity/data.json"
	[gatehouse-gzip]="http://127.0.0.1:$P_GH/gzip/data.json" [gatehouse-br]="http://127.0.0.1:$P_GH/br/data.json"
	[gatehouse-zstd]="http://127.0.0.1:$P_GH/zstd/data.json" [nginx-gzip]="http://127.0.0.1:$P_NGINX/data.json"
	[caddy-gzip]="http://127.0.0.1:$P_CADDY/data.json")
declare -A CODING=([gatehouse-identity]=identity [gatehouse-gzip]=gzip [gatehouse-br]=br [gatehouse-zstd]=zstd
	[nginx-gzip]=gzip [caddy-gzip]=gzip)
for r in "${ROW_LIST[@]}"; do [[ -n ${SERVER[$r]:-} ]] || die "unknown row '$r' in ROWS"; done

log "work dir $WORK; backend $P_BACKEND, gatehouse $P_GH, nginx $P_NGINX, caddy $P_CADDY"
start_proc gatehouse 1 "$GATEHOUSE_BIN" run --config "$WORK/gatehouse/gatehouse.yaml"
wait_http gatehouse "http://127.0.0.1:$P_GH/identity/data.json" 50000
start_proc nginx 1 nginx -p "$WORK/nginx" -e "$WORK/nginx/error.log" -c "$WORK/nginx/nginx.conf"
wait_http nginx "http://127.0.0.1:$P_NGINX/data.json" 50000 "$WORK/nginx/error.log"
if [[ " ${ROW_LIST[*]} " == *" caddy-gzip "* ]]; then
	GOMAXPROCS=1 start_proc caddy 1 "$CADDY_BIN" run --config "$WORK/caddy/Caddyfile" --adapter caddyfile
	wait_http caddy "http://127.0.0.1:$P_CADDY/data.json" 50000
fi

# Every row answers in its coding and decodes to data.json; its answer's size is kept.
declare -A BYTES=()
for r in "${ROW_LIST[@]}"; do
	c=${CODING[$r]}
	got=$(curl -s --noproxy '*' --max-time 5 -H "Accept-Encoding: $c" -D "$WORK/probe/$r.head" -o "$WORK/probe/$r.raw" \
		-w '%{http_code} %{size_download}' "${URL[$r]}")
	[[ ${got% *} == 200 ]] || die "sanity check: $r -> $got"
	BYTES[$r]=${got#* }
	enc=$(awk -F': *' 'tolower($1) == "content-encoding" { gsub("\r", "", $2); print $2 }' "$WORK/probe/$r.head")
	[[ ${enc:-identity} == "$c" ]] || die "sanity check: $r answered with Content-Encoding '${enc:-none}', want $c"
	curl -s --noproxy '*' --max-time 5 --compressed -H "Accept-Encoding: $c" -o "$WORK/probe/$r.decoded" "${URL[$r]}"
	cmp -s "$WORK/probe/$r.decoded" "$WORK/www/data.json" || die "sanity check: $r does not decode to data.json"
done
log "sanity checks passed: $(for r in "${ROW_LIST[@]}"; do printf '%s %s B; ' "$r" "${BYTES[$r]}"; done)"

CSV=$WORK/compression-runs.csv
SEQ=0
run_load() { # run_load REP ROW [warmup]
	local rep=$1 row=$2 name pid out rc=0 a0 a1
	name=${SERVER[$row]}
	pid=${PID[$name]}
	local -a hdr=(-H "Accept-Encoding: ${CODING[$row]}")
	if [[ -n ${3:-} ]]; then
		taskset -c 0 timeout -k 5 60 wrk -t1 -c"$CONNS" -d1s "${hdr[@]}" "${URL[$row]}" >/dev/null 2>&1 || true
		return 0
	fi
	SEQ=$((SEQ + 1))
	out=$WORK/runs/$(printf '%03d' "$SEQ")-$row.txt
	taskset -c 0 timeout -k 5 60 ab -k -n $((CONNS * 10)) -c "$CONNS" "${hdr[@]}" "${URL[$row]}" >"$out.prime" 2>&1 || true
	sleep 0.2
	a0=$(backend_accepts)
	declare -A S0=() S1=()
	snap S0 "$pid"
	taskset -c 0 timeout -k 5 $((DURATION + 30)) wrk -t1 -c"$CONNS" -d"${DURATION}s" --latency "${hdr[@]}" "${URL[$row]}" >"$out" 2>&1 &
	LOADGEN_PID=$!
	wait "$LOADGEN_PID" || rc=$?
	LOADGEN_PID=
	snap S1 "$pid"
	a1=$(backend_accepts)
	kill -0 "$pid" 2>/dev/null || { show_logs "$name"; die "$name died during the run of $row"; }
	local -a kv=("rep=$rep" "seq=$SEQ" "target=$row" "file=data.json" "exit_code=$rc" "clk_tck=$CLK_TCK"
		"proxy_j=$((S1[server] - S0[server]))" "loadgen_j=$((S1[self_children] - S0[self_children]))"
		"accepts_before=$a0" "accepts_after=$a1")
	snap_deltas S0 S1
	kv+=("${REPLY_KV[@]}")
	python3 "$BENCH/lib/record_run.py" --csv "$CSV" --tool wrk --output "$out" "${kv[@]}"
}

for r in "${ROW_LIST[@]}"; do run_load 0 "$r" warmup; done
for ((rep = 1; rep <= REPS; rep++)); do
	rotated $((rep - 1)) "${ROW_LIST[@]}"
	log "round $rep/$REPS: ${REPLY_TARGETS[*]}"
	for r in "${REPLY_TARGETS[@]}"; do
		sleep 1
		run_load "$rep" "$r"
	done
done
results_csv "$CSV" compression-latest.csv

bytes_kv=()
for r in "${ROW_LIST[@]}"; do bytes_kv+=("$r=${BYTES[$r]}"); done
"$PYTHON" - "$CSV" "$REPS" "$DURATION" "$CONNS" "$(git_source)" "$(nginx -v 2>&1 | sed 's/^nginx version: //')" \
	"$([[ -x $CADDY_BIN ]] && "$CADDY_BIN" build-info | awk '$1 == "mod" && $2 ~ /caddyserver\/caddy/ { print $3 }')" "${bytes_kv[@]}" >"$WORK/section.md" <<'PY'
import csv, statistics, sys
path, reps, duration, conns, source, nginx, caddy, *sizes = sys.argv[1:]
size = dict(s.split("=", 1) for s in sizes)
rows = [r for r in csv.DictReader(open(path)) if r["ok"] == "1"]
order = [t for t in ["gatehouse-identity", "gatehouse-gzip", "gatehouse-br", "gatehouse-zstd", "nginx-gzip", "caddy-gzip"]
         if any(r["target"] == t for r in rows)]
def per(t):
    return [float(r["req_per_cpu_s"]) for r in rows if r["target"] == t]
def ratios(t, base="nginx-gzip"):
    out = []
    for rep in sorted({r["rep"] for r in rows}):
        a = [float(r["req_per_cpu_s"]) for r in rows if r["rep"] == rep and r["target"] == t]
        b = [float(r["req_per_cpu_s"]) for r in rows if r["rep"] == rep and r["target"] == base]
        if a and b:
            out.append(a[0] / b[0])
    return out
print("## Compression (bench/compression.sh)\n")
print(f"bench/compression.sh: a 50,000-byte JSON answer from a backend nginx, through each proxy on one "
      f"pinned core; wrk -t1 -c{conns} for {duration} s with the row's `Accept-Encoding`, {reps} rounds, "
      f"rows rotated; ratios taken per round, then the median. nginx {nginx}: `gzip on; gzip_comp_level 6` (zlib). "
      f"Caddy {caddy or 'not run'}: `encode gzip 6` (klauspost/compress), GOMAXPROCS=1. Gatehouse: gzip 6 "
      f"(libdeflate: the answer's length is known and under 64 KiB), brotli 4, zstd 3; `identity` is the same "
      f"route without compression. Source: git {source}.\n")
print("| row | bytes per answer | req per proxy CPU-s, median (range) | / nginx gzip-6, median (range) |")
print("|---|---:|---|---|")
for t in order:
    v, q = per(t), ratios(t)
    qs = f"{statistics.median(q):.2f} ({min(q):.2f}–{max(q):.2f})" if q else "—"
    print(f"| {t} | {int(size.get(t, 0)):,} | {statistics.median(v):,.0f} ({min(v):,.0f}–{max(v):,.0f}) | {qs} |")
PY
cat "$WORK/section.md"
if [[ $BENCHMARKS_MD != none ]]; then
	python3 "$BENCH/lib/update_section.py" "$BENCHMARKS_MD" <"$WORK/section.md"
fi
