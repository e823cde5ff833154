#!/usr/bin/env bash
# bench/memory.sh - memory of an idle Gatehouse, and what idle keep-alive client connections add.
#
# Question answered:
#   How much resident memory does Gatehouse use idle, and how much do N idle keep-alive client
#   connections (each has served one request) add?
#
# Run:   bench/memory.sh                      # N=10000, builds release
#        GATEHOUSE_BIN=target/release/gatehouse N=10000 bench/memory.sh
# Needs: python3; ulimit -n above N (the script raises the soft limit to the hard one).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
N=${N:-10000}
if [ -z "${GATEHOUSE_BIN:-}" ]; then
  (cd "$root" && cargo build --release -p gatehouse >/dev/null)
  GATEHOUSE_BIN=$root/target/${CARGO_TARGET_DIR:+../$CARGO_TARGET_DIR/}release/gatehouse
fi
ulimit -n "$(ulimit -Hn)"
work=$(mktemp -d)
gh_pid=""; holder_pid=""; nginx_pid=""
cleanup() {
  [ -n "$holder_pid" ] && kill "$holder_pid" 2>/dev/null || true
  [ -n "$gh_pid" ] && kill "$gh_pid" 2>/dev/null || true
  [ -n "$nginx_pid" ] && kill "$nginx_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
backend=$(free_port)
# The backend runs in a process of its own (nginx when installed), so only Gatehouse's own memory
# is measured; without nginx the built-in demo backend is used and counted.
demo_line=""
if command -v nginx >/dev/null 2>&1; then
  mkdir -p "$work/html" && echo ok > "$work/html/index.html"
  cat > "$work/nginx.conf" <<NGINX
worker_processes 1;
daemon off;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $work; proxy_temp_path $work; fastcgi_temp_path $work; uwsgi_temp_path $work; scgi_temp_path $work;
  server { listen 127.0.0.1:$backend; root $work/html; keepalive_requests 1000000; }
}
NGINX
  nginx -c "$work/nginx.conf" &
  nginx_pid=$!
  for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$backend/" && break; sleep 0.1; done
  backend_kind="nginx (separate process)"
else
  demo_line="demo_backend: \"127.0.0.1:$backend\""
  backend_kind="the built-in demo backend (counted)"
fi
cat > "$work/gh.yaml" <<YAML
workers: auto
$demo_line
listeners:
  http: { bind: "127.0.0.1:0", max_connections: $((N + 1000)), keepalive_timeout: 10m, header_read_timeout: 10m }
upstreams:
  demo: { targets: ["127.0.0.1:$backend"] }
sites:
  all: { hosts: ["*"], routes: [{ path: /, upstream: demo }] }
YAML
mkfifo "$work/events"
"$GATEHOUSE_BIN" run --config "$work/gh.yaml" --status-json >"$work/events" 2>"$work/gh.err" &
gh_pid=$!
exec 3<"$work/events"
read -r -t 20 ready <&3 || { cat "$work/gh.err"; exit 1; }
port=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["listeners"]["http"].split(":")[1])' "$ready")
rss() { awk '/^VmRSS/{print $2}' "/proc/$gh_pid/status"; }
curl -s -o /dev/null "http://127.0.0.1:$port/"
idle=$(rss)
mkfifo "$work/hold"
python3 "$root/bench/lib/hold_connections.py" 127.0.0.1 "$port" "$N" <"$work/hold" >"$work/held" &
holder_pid=$!
exec 4>"$work/hold"
for _ in $(seq 600); do [ -s "$work/held" ] && break; sleep 0.1; done
held=$(cat "$work/held")
loaded=$(rss)
active=$(awk '/^Threads/{print $2}' "/proc/$gh_pid/status")
exec 4>&-
{
  echo "## Memory: idle and idle keep-alive connections (bench/memory.sh)"
  echo
  echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC'); machine: $(nproc) CPUs, $(uname -r); $("$GATEHOUSE_BIN" version)"
  echo "- Source: git $(cd "$root" && git rev-parse --short HEAD)$(cd "$root" && git diff --quiet || echo ' + uncommitted changes')"
  echo "- Gatehouse with workers: auto ($active threads); backend: $backend_kind; RSS from /proc/PID/status."
  echo "  Each client connection sends one request, reads the answer, and stays open (keep-alive)."
  echo
  printf '| measure | value |\n|---|---:|\n'
  printf '| idle RSS (after one request) | %.1f MB |\n' "$(echo "$idle/1024" | bc -l)"
  printf '| RSS with %s idle keep-alive connections | %.1f MB |\n' "$N" "$(echo "$loaded/1024" | bc -l)"
  printf '| added by the connections | %.1f MB (%.0f bytes each) |\n' "$(echo "($loaded-$idle)/1024" | bc -l)" "$(echo "($loaded-$idle)*1024/$N" | bc -l)"
  printf '| clients | %s |\n' "$held"
} > "$work/section.md"
cat "$work/section.md"
if [ "${BENCHMARKS_MD:-}" != none ]; then
  python3 "$root/bench/lib/write_section.py" "$root/BENCHMARKS.md" "$work/section.md"
fi
