#!/usr/bin/env bash
# bench/control.sh - the control plane's goals: release-to-applied on three nodes under load, and
# applying a 10,000-route revision on a node whose certificate store holds 10,000 bundles.
#
# Question answered:
#   How long after `POST /revisions/N/release` does every node of a three-node cluster (one Redis)
#   run revision N, and does any request fail meanwhile?  How long does a node take to apply a
#   revision of 10,000 routes, and what does that do to the p99 latency of the traffic it serves?
#   Goals: release-to-applied p99 <= 1 s over 20 releases with zero failed requests; apply <= 1 s
#   with p99 during applies within 2x of steady state.
#
# Set-up: 127.0.0.1 only, free ports, a mktemp -d work dir removed on exit; redis-server, a backend
# nginx (1 worker), Gatehouse nodes with `workers: 1`, wrk as the load. Details and the exact
# measurements are in bench/lib/control_bench.py.
#
# Run (needs redis-server, nginx, wrk, python3; the `cryptography` package makes the certificates
# in seconds, else openssl takes minutes):
#   bench/control.sh                                        # builds gatehouse (release)
#   GATEHOUSE_BIN=target/release/gatehouse bench/control.sh # about a minute
#   QUICK=1 bench/control.sh                                # 5 releases, 1,000 routes, 100 certificates
#
# Output: a Markdown section on stdout, also written to bench/results/control-DATE-HHMM.md.
set -euo pipefail
log() { printf '%s\n' "$*" >&2; }
die() { log "bench/control.sh: $*"; exit 1; }
KEEP_WORKDIR=${KEEP_WORKDIR:-0}
# shellcheck source=lib/common.sh
source "$(dirname "$0")/lib/common.sh"
need_commands redis-server nginx wrk "$PYTHON"
gatehouse_binary
make_workdir gatehouse-control-bench
HAPROXY_MAXCONN=0 # no HAProxy here
raise_nofile
CERTS=$(pick 10000 100)
STORE=$("$PYTHON" "$BENCH/lib/tls_certs.py" "${CERT_CACHE:-$BENCH/.cache/tls-certs}" --store-count "$CERTS") ||
	die "could not make the certificates (bench/lib/tls_certs.py)"
quick=()
((q)) && quick=(--quick)
out=$BENCH/results/control-$( ((q)) && echo quick-)$(date -u +%Y%m%d-%H%M).md
mkdir -p "$BENCH/results"
"$PYTHON" "$BENCH/lib/control_bench.py" --gatehouse "$GATEHOUSE_BIN" --store "$STORE" --certs "$CERTS" \
	--work "$WORK" "${quick[@]}" | tee "$out"
log "written: $out"
