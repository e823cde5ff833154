#!/usr/bin/env bash
# bench/proxy-protocol-instructions.sh - what does a PROXY protocol header cost a new connection?
#
# The CPU clock of this machine moves by ±20 % between identical runs (and more when other builds
# share it); instruction counts do not. This runs one Gatehouse worker under
# `valgrind --tool=callgrind` with three cleartext listeners that differ only in `proxy_protocol`,
# and counts the user-space instructions per connection of N connections, one request each
# (`Connection: close`, 75-byte file), for each row:
#
#   plain   a listener without proxy_protocol, the client sends its request
#   v1      a proxy_protocol listener, the client sends `PROXY TCP4 …\r\n` first
#   v2      a proxy_protocol listener, the client sends a v2 PROXY header (IPv4, no TLV) first
#
# Rows are measured in turn, REPS times. Kernel time is not counted here (most of Gatehouse's CPU
# per connection on loopback), so the difference in user-space instructions is an upper bound of
# the difference in CPU.
#
# CPU=1 measures that CPU instead: Gatehouse runs without valgrind, pinned to CPU 1 (the client
# and the backend to CPU 0), and each row reports the worker's user and system CPU time per
# connection from /proc (clock ticks, so N should be large). The machine's noise applies.
#
# Usage: bench/proxy-protocol-instructions.sh     (needs valgrind, nginx, python3; ~3 minutes)
#   N [2000; 20000 with CPU=1]  connections per row and repetition
#   REPS [3]  repetitions
#   CPU [0]   1: user + system CPU per connection instead of instructions
set -Eeuo pipefail

# shellcheck source=SCRIPTDIR/lib/common.sh
. "$(dirname "$0")/lib/common.sh"

log() { printf '[proxy-protocol-instructions.sh] %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}
CPU=${CPU:-0}
N=${N:-$((CPU == 1 ? 20000 : 2000))}
REPS=${REPS:-3}
KEEP_WORKDIR=${KEEP_WORKDIR:-0}
need_commands nginx python3 curl bc taskset
((CPU == 1)) || need_commands valgrind callgrind_control callgrind_annotate
check_integers N REPS CPU
gatehouse_binary
HAPROXY_MAXCONN=0
raise_nofile
make_workdir gatehouse-pp-instructions
mkdir -p "$WORK/www"
write_www "$WORK/www"
if ((CPU == 1)); then start_backend 0; else start_backend none; fi
free_ports 3
P_PLAIN=${REPLY_PORTS[0]} P_V1=${REPLY_PORTS[1]} P_V2=${REPLY_PORTS[2]}
cat >"$WORK/gatehouse.yaml" <<EOF
workers: 1
listeners:
  plain: { bind: "127.0.0.1:$P_PLAIN" }
  v1: { bind: "127.0.0.1:$P_V1", proxy_protocol: { trusted: ["127.0.0.1"] } }
  v2: { bind: "127.0.0.1:$P_V2", proxy_protocol: { trusted: ["127.0.0.1"] } }
$(gatehouse_upstream 256)
EOF
"$GATEHOUSE_BIN" check "$WORK/gatehouse.yaml" >/dev/null
if ((CPU == 1)); then
	start_proc gatehouse 1 "$GATEHOUSE_BIN" run --config "$WORK/gatehouse.yaml"
else
	start_proc gatehouse none valgrind --tool=callgrind --callgrind-out-file="$WORK/callgrind.gatehouse.%p" \
		"$GATEHOUSE_BIN" run --config "$WORK/gatehouse.yaml"
fi
for ((i = 0; i < 300; i++)); do
	[[ $(http_probe "http://127.0.0.1:$P_PLAIN/test.html") == "200 75" ]] && break
	kill -0 "${PID[gatehouse]}" 2>/dev/null || die "gatehouse exited under valgrind"
	sleep 0.2
done

# connections PORT KIND COUNT: COUNT connections one after another, each [header] + one GET, read to
# the close; fails unless every answer is a 200 (on CPU 0 with CPU=1). Under callgrind the server, not this client, is
# the bottleneck.
connections() {
	local pin=()
	((CPU == 1)) && pin=(taskset -c 0)
	"${pin[@]}" python3 - "$@" <<'EOF'
import socket, sys
port, kind, count = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
header = {
    "plain": b"",
    "v1": b"PROXY TCP4 192.0.2.7 127.0.0.1 51000 80\r\n",
    "v2": b"\r\n\r\n\0\r\nQUIT\n\x21\x11\0\x0c" + bytes([192, 0, 2, 7, 127, 0, 0, 1, 0xC7, 0x38, 0, 80]),
}[kind]
request = header + b"GET /test.html HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n"
for _ in range(count):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(request)
    answer = b""
    while chunk := s.recv(4096):
        answer += chunk
    s.close()
    if not answer.startswith(b"HTTP/1.1 200"):
        sys.exit(f"{kind}: {answer[:60]!r}")
EOF
}
# cpu_count LABEL N CMD...: runs CMD; REPLY is Gatehouse's user + system CPU per connection in
# nanoseconds (its whole process: one worker and the control thread, idle here).
cpu_count() {
	local label=$1 n=$2 before after hz
	shift 2
	hz=$(getconf CLK_TCK)
	read -r -a before < <(awk '{ print $14, $15 }' "/proc/${PID[gatehouse]}/stat")
	"$@"
	read -r -a after < <(awk '{ print $14, $15 }' "/proc/${PID[gatehouse]}/stat")
	local user=$((after[0] - before[0])) system=$((after[1] - before[1]))
	REPLY=$(((user + system) * 1000000000 / hz / n))
	log "$label: user $((user * 1000000000 / hz / n)) ns, system $((system * 1000000000 / hz / n)) ns per connection"
}
declare -A PORT=([plain]=$P_PLAIN [v1]=$P_V1 [v2]=$P_V2)
ROWS=(plain v1 v2)
for row in "${ROWS[@]}"; do connections "${PORT[$row]}" "$row" 200; done
declare -A RUNS
UNIT=instructions
((CPU == 1)) && UNIT="CPU ns (user + system)"
for ((r = 1; r <= REPS; r++)); do
	for row in "${ROWS[@]}"; do
		if ((CPU == 1)); then
			cpu_count "$row-$r" "$N" connections "${PORT[$row]}" "$row" "$N"
		else
			callgrind_count gatehouse "$row-$r" "$N" connections "${PORT[$row]}" "$row" "$N"
		fi
		RUNS[$row]+="$REPLY "
		log "rep $r $row: $REPLY $UNIT per connection"
	done
done
echo "| row | $UNIT per connection (median of $REPS) | runs | vs plain |"
echo "|---|---:|---|---:|"
first=
for row in "${ROWS[@]}"; do
	read -r -a runs <<<"${RUNS[$row]}"
	median=$(printf '%s\n' "${runs[@]}" | sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : int((a[NR / 2] + a[NR / 2 + 1]) / 2) }')
	first=${first:-$median}
	printf '| %s | %d | %s | %+.1f %% |\n' "$row" "$median" "${runs[*]}" "$(echo "($median - $first) * 100 / $first" | bc -l)"
done
