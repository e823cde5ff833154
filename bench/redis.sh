#!/usr/bin/env bash
# bench/redis.sh - the cluster's Redis under Gatehouse's own operations: one Redis vs a 3-shard
# Redis Cluster, in the same run.
#
# Question answered:
#   How many cluster rate-limit decisions, TLS session writes and TLS session fetches per second
#   does a Gatehouse worker get from one Redis and from a 3-master Redis Cluster, at what p99, and
#   do its keys spread over the Cluster's shards (no hot shard)?  Goal: the Cluster carries at
#   least 2.5x the single Redis's commands at the same per-shard load, that is the total commands
#   divided by the busiest shard's at least 2.5 (one Redis: 1; an even spread over 3 shards: 3).
#
# Set-up (all on 127.0.0.1, free ports, a mktemp -d work dir removed on exit):
#   CPU 1: the Redis servers: one redis-server, and three Cluster masters (no replicas, made with
#          redis-cli --cluster create), all running side by side, only one deployment loaded.
#   CPU 0: gatehouse-redis-bench (crates/redisbench): one current-thread runtime, as one gateway
#          worker, CONC operations in flight, through gatehouse-redis (redis-rs) exactly as the
#          gateway sends them: the rate-limit Lua script (EVALSHA) of
#          gatehouse_plugins::rate_limit::cluster::decide over KEYS counters; SET PX of a sealed
#          200-byte session (put_session) and GET of one (fetch_session) over KEYS session ids.
#
# Rows: OPS x {single, cluster}; REPS rounds, the deployment order alternating per round.
# Measured per run: operations per second, p50 / p99 / max latency (the tool), commands per
# master (INFO commandstats, reset with CONFIG RESETSTAT before each run; the commands a script
# runs count too, as they load the shard; PING, INFO and the like excluded; a fetch run's count
# includes the KEYS sessions stored before it), the Redis servers' CPU (utime+stime).
#
# Output: a Markdown section on stdout, also written to bench/results/redis-DATE-HHMM.md
# (QUICK=1: redis-quick-DATE-HHMM.md) with the raw runs (JSON lines) beside it (.jsonl).
#
# Run (from anywhere; needs redis-server, redis-cli, python3, taskset, 2 CPUs):
#   bench/redis.sh                 # builds gatehouse-redis-bench (release); about 3 minutes
#   QUICK=1 bench/redis.sh         # smoke run, a few seconds after the build
#   OPS=ratelimit REPS=5 bench/redis.sh
#
# Environment knobs (defaults in brackets; QUICK=1 defaults after the slash):
#   REDIS_BENCH_BIN  the tool; unset = `cargo build --release -p gatehouse-redis-bench`
#   QUICK [0]        1 = smoke run
#   REPS [3/1]       rounds
#   N [200000/5000]  operations per run
#   CONC [64]        operations in flight
#   KEYS [10000/1000]  distinct counters / sessions
#   OPS [ratelimit store fetch]
#   KEEP_WORKDIR [0] 1 = keep the temp dir

set -Eeuo pipefail

# shellcheck source=SCRIPTDIR/lib/common.sh
. "$(dirname "$0")/lib/common.sh"

REPS=${REPS:-$(pick 3 1)}
N=${N:-$(pick 200000 5000)}
CONC=${CONC:-64}
KEYS=${KEYS:-$(pick 10000 1000)}
OPS=${OPS:-ratelimit store fetch}
KEEP_WORKDIR=${KEEP_WORKDIR:-0}

log() { printf '[redis.sh %3ss] %s\n' "$SECONDS" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

check_integers REPS N CONC KEYS
((REPS >= 1 && N >= 1 && CONC >= 1 && KEYS >= 1)) || die "REPS, N, CONC and KEYS must be at least 1"
read -r -a OP_LIST <<<"$OPS"
for op in "${OP_LIST[@]}"; do
	[[ $op == ratelimit || $op == store || $op == fetch ]] || die "unknown op '$op' in OPS (ratelimit store fetch)"
done
need_commands redis-server redis-cli python3 taskset
(($(nproc) >= 2)) || die "needs at least 2 CPUs (CPU 0: the client, CPU 1: Redis)"

if [[ -n ${REDIS_BENCH_BIN:-} ]]; then
	[[ $REDIS_BENCH_BIN == /* ]] || REDIS_BENCH_BIN=$ORIG_PWD/$REDIS_BENCH_BIN
else
	log "building: cargo build --release -p gatehouse-redis-bench"
	cargo build --release -p gatehouse-redis-bench
	REDIS_BENCH_BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/gatehouse-redis-bench
fi
[[ -x $REDIS_BENCH_BIN ]] || die "gatehouse-redis-bench not found: $REDIS_BENCH_BIN"

make_workdir gatehouse-redis-bench

# A port P with P + 10000 (the Cluster bus) free too.
cluster_port() {
	"$PYTHON" -c '
import random, socket
for _ in range(500):
    p = random.randint(20000, 30000)
    try:
        for q in (p, p + 10000):
            s = socket.socket(); s.bind(("127.0.0.1", q)); s.close()
        print(p); break
    except OSError:
        pass
'
}

free_ports 1
P_SINGLE=${REPLY_PORTS[0]}
start_redis single 1 "$P_SINGLE"
CLUSTER_PORTS=()
for i in 0 1 2; do
	p=$(cluster_port)
	CLUSTER_PORTS+=("$p")
	start_redis "shard$i" 1 "$p" --cluster-enabled yes --cluster-config-file "$WORK/shard$i/nodes.conf"
done
redis-cli --cluster create "${CLUSTER_PORTS[@]/#/127.0.0.1:}" --cluster-yes >"$WORK/cluster-create.txt" 2>&1 ||
	{ cat "$WORK/cluster-create.txt" >&2; die "redis-cli --cluster create failed"; }
for _ in $(seq 200); do
	ok=1
	for p in "${CLUSTER_PORTS[@]}"; do
		redis-cli -p "$p" cluster info | grep -q 'cluster_state:ok' || ok=0
	done
	((ok)) && break
	sleep 0.1
done
((ok)) || die "the Redis Cluster did not become healthy"
SEEDS=$(printf '127.0.0.1:%s,' "${CLUSTER_PORTS[@]}")
SEEDS=${SEEDS%,}
log "work dir $WORK; single redis $P_SINGLE; cluster ${CLUSTER_PORTS[*]}"

ports_of() { # ports_of DEPLOYMENT -> REPLY_P
	if [[ $1 == single ]]; then REPLY_P=("$P_SINGLE"); else REPLY_P=("${CLUSTER_PORTS[@]}"); fi
}

redis_jiffies() { # -> REPLY: utime+stime of every redis-server of the bench
	local total=0 inst
	for inst in single shard0 shard1 shard2; do
		tree_jiffies "${PID[$inst]}"
		total=$((total + REPLY))
	done
	REPLY=$total
}

commands_of() { # commands_of PORT -> REPLY: calls of every command but ping, info, config, cluster
	REPLY=$(redis-cli -p "$1" info commandstats | tr -d '\r' | awk -F'[:=,]' '
		/^cmdstat_/ { name = substr($1, 9); if (name !~ /^(ping|info|config|cluster|command|hello|client|select|auth)/) n += $3 }
		END { print n + 0 }')
}

RUNS=$WORK/runs.jsonl
run_one() { # run_one ROUND DEPLOYMENT OP
	local round=$1 dep=$2 op=$3 p j0 j1 out shards=() target
	ports_of "$dep"
	for p in "${REPLY_P[@]}"; do redis-cli -p "$p" config resetstat >/dev/null; done
	if [[ $dep == single ]]; then target=(--url "redis://127.0.0.1:$P_SINGLE/0"); else target=(--cluster "$SEEDS"); fi
	redis_jiffies
	j0=$REPLY
	out=$(taskset -c 0 "$REDIS_BENCH_BIN" "${target[@]}" --op "$op" --count "$N" --concurrency "$CONC" --keys "$KEYS") ||
		die "gatehouse-redis-bench failed ($dep $op)"
	redis_jiffies
	j1=$REPLY
	for p in "${REPLY_P[@]}"; do
		commands_of "$p"
		shards+=("$REPLY")
	done
	"$PYTHON" - "$RUNS" "$round" "$dep" "$((j1 - j0))" "$(getconf CLK_TCK)" "$out" "${shards[@]}" <<'EOF'
import json, sys
path, rnd, dep, jif, tck, out, *shards = sys.argv[1:]
run = json.loads(out)
run.update(round=int(rnd), deployment=dep, redis_cpu_s=int(jif) / int(tck), shards=[int(s) for s in shards])
with open(path, "a") as f:
    f.write(json.dumps(run) + "\n")
EOF
	log "round $round $dep $op: $out shards ${shards[*]}"
}

START_DATE=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
for round in $(seq "$REPS"); do
	if ((round % 2)); then order=(single cluster); else order=(cluster single); fi
	for op in "${OP_LIST[@]}"; do
		for dep in "${order[@]}"; do run_one "$round" "$dep" "$op"; done
	done
done

STAMP=$(date -u '+%Y-%m-%d-%H%M')
NAME=redis-$(if ((q)); then echo "quick-"; fi)$STAMP
mkdir -p "$BENCH/results"
cp "$RUNS" "$BENCH/results/$NAME.jsonl"
{
	echo "## Redis deployments (bench/redis.sh)"
	echo
	echo "- Run: $START_DATE; $REPS round(s); $N operations per run, $CONC in flight, $KEYS keys; $(redis-server --version | cut -d' ' -f3); $(git_source crates/redis crates/redisbench bench/redis.sh)."
	echo "- Client on CPU 0 (one current-thread runtime, as one gateway worker); every redis-server on CPU 1."
	echo
	"$PYTHON" "$BENCH/lib/redis_summarize.py" "$RUNS"
} | tee "$BENCH/results/$NAME.md"
