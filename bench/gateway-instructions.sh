#!/usr/bin/env bash
# bench/gateway-instructions.sh - what does each stage of the API gateway cost, counted exactly?
#
# The CPU clock of this machine moves by ±20 % between identical runs; instruction counts do not.
# This runs one Gatehouse worker under `valgrind --tool=callgrind` and counts the user-space
# instructions per request of N keep-alive requests (ab -k -c 10) for each row, adding one plugin at
# a time to the same service shape:
#
#   bare       site route /test.html
#   service    service /s0 without auth or plugins (prefix stripped)
#   app-key    + auth app_key, key in the path (/s1/~KEY/test.html)
#   acl        + ACL (GET, HEAD on /**)
#   limit      + a plan with one local rate limit
#   headers    + a request header set and a response header removed (the bench/gateway.sh service)
#   header-key the same with the key in X-APP-KEY
#   cluster-limit  app key and a plan whose limit is cluster-wide: one Lua script per request in a
#              redis-server (the Redis client's cost on the request path; Redis's own not counted)
#   cors       service /s6 with a CORS policy (two origins, one exposed header), each request
#              from an allowed origin (`Origin: https://shop.example.net`): compare with `service`
#   jwt-key    service /s7, auth jwt, an RS256 token verified with the app's configured key (by kid)
#   jwt-jwks   service /s8, auth jwt, the same token's twin from an OpenID provider: verified with
#              the key set fetched from a jwks_uri (the backend serves it), the app named by `azp`.
#              Same key, same algorithm: compare with `jwt-key`
#   split      service /s9 whose upstream is a 90/10 split between two upstreams (both the
#              backend): compare with `service`
#   mirror     service /s10 with 10 % of its requests copied to a mirror (the backend again): the
#              copies' cost is counted (the task that sends them runs on the worker); the extra
#              requests the backend gets are printed after the table
#
# Kernel time is not counted (about 60 % of Gatehouse's CPU per request on loopback), so a
# difference here is an upper bound of the difference in throughput.
#
# With TRACING=RATIO, Gatehouse runs with `tracing:` at that sampling ratio, spans exported over
# OTLP/HTTP to an nginx sink: the exporter thread's instructions are counted too (callgrind counts
# every thread), so a row's figure is the whole cost of its traces.
#
# Usage: bench/gateway-instructions.sh            (needs valgrind, nginx, ab; ~2 minutes)
#   N [2000]  requests per row
#   TRACING [off]  a sampling ratio (0.01, 1) to run with traces on
#   SPLIT_ROWS [auto]  0 leaves out the split and mirror rows (and their services, so that a
#              build with them and one without route the same configuration)
set -Eeuo pipefail

# shellcheck source=SCRIPTDIR/lib/common.sh
. "$(dirname "$0")/lib/common.sh"

log() { printf '[gateway-instructions.sh] %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}
N=${N:-2000}
KEEP_WORKDIR=${KEEP_WORKDIR:-0}
need_commands valgrind callgrind_control callgrind_annotate nginx ab curl bc redis-server redis-cli openssl python3
check_integers N
gatehouse_binary
HAPROXY_MAXCONN=0
raise_nofile
make_workdir gatehouse-instructions
mkdir -p "$WORK/www"
write_www "$WORK/www"
start_backend 0
free_ports 4
P_GATEHOUSE=${REPLY_PORTS[0]}
P_REDIS=${REPLY_PORTS[1]}
P_ADMIN=${REPLY_PORTS[3]}
start_redis redis none "$P_REDIS"
TRACING=${TRACING:-off}
TRACING_YAML=
if [[ $TRACING != off ]]; then
	start_otlp_sink none "${REPLY_PORTS[2]}"
	TRACING_YAML="tracing: { otlp: { endpoint: \"http://127.0.0.1:${REPLY_PORTS[2]}\" }, sampler: { ratio: $TRACING } }"
fi
head -c 48 /dev/urandom | base64 >"$WORK/cluster.key"
KEY=BENCHKEY123
# One RS256 key: configured for app `bench` (kid bench-rs), and published as a key set (kid
# idp-rs) for the provider `bench-idp`. Two tokens, signed by openssl.
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$WORK/jwt.key" 2>/dev/null
openssl pkey -in "$WORK/jwt.key" -pubout -out "$WORK/jwt.pub"
# make_token KID ISS: a compact RS256 token for app `bench`, audience api, a day to live
make_token() {
	local input
	input=$(python3 -c 'import base64, json, sys, time
b = lambda d: base64.urlsafe_b64encode(json.dumps(d, separators=(",", ":")).encode()).rstrip(b"=").decode()
print(b({"alg": "RS256", "kid": sys.argv[1]}) + "." + b({"iss": sys.argv[2], "sub": "bench", "azp": "bench", "aud": "api", "exp": int(time.time()) + 86400}))' "$1" "$2")
	printf '%s.%s' "$input" "$(printf '%s' "$input" | openssl dgst -sha256 -sign "$WORK/jwt.key" -binary | base64 -w0 | tr '+/' '-_' | tr -d '=')"
}
TOKEN_KEY=$(make_token bench-rs bench)
TOKEN_JWKS=$(make_token idp-rs bench-idp)
python3 -c 'import base64, json, sys
b = lambda n: base64.urlsafe_b64encode(n.to_bytes((n.bit_length() + 7) // 8, "big")).rstrip(b"=").decode()
n = int(sys.argv[1].split("=")[1], 16)
print(json.dumps({"keys": [{"kty": "RSA", "kid": "idp-rs", "alg": "RS256", "use": "sig", "n": b(n), "e": b(65537)}]}))' \
	"$(openssl rsa -in "$WORK/jwt.key" -noout -modulus 2>/dev/null)" >"$WORK/www/jwks.json"
ACL='acl: { allow: [{ methods: [GET, HEAD], paths: ["/**"] }] }'
# The split and mirror rows, for a build that has them (an older one, measured for comparison,
# runs the other rows).
SPLIT_SERVICES='  s9: { path: /s9, upstream: [{ upstream: backend, weight: 90 }, { upstream: canary, weight: 10 }] }
  s10: { path: /s10, upstream: backend, mirror: { upstream: canary, percent: 10 } }'
printf 'listeners: {h: {bind: "127.0.0.1:0"}}\nupstreams: {u: {targets: ["127.0.0.1:1"]}}\nsites: {s: {hosts: ["*"], routes: [{path: /, upstream: [{upstream: u}], mirror: {upstream: u}}]}}\n' >"$WORK/probe.yaml"
if [[ ${SPLIT_ROWS:-auto} == 0 ]]; then
	SPLIT_SERVICES=
elif ! "$GATEHOUSE_BIN" check "$WORK/probe.yaml" >/dev/null 2>&1; then
	log "this build has no traffic split or mirror: those rows are left out"
	SPLIT_SERVICES=
fi
cat >"$WORK/gatehouse.yaml" <<EOF
workers: 1
admin: { bind: "127.0.0.1:$P_ADMIN", public: [/metrics] }
listeners: { http: { bind: "127.0.0.1:$P_GATEHOUSE" } }
$(gatehouse_upstream 256 "" "" "  canary: { targets: [\"127.0.0.1:$P_BACKEND\"], keepalive: { max_idle: 256, idle_timeout: 60s }, retries: 0 }")
services:
  s0: { path: /s0, upstream: backend }
  s1: { path: /s1, upstream: backend, auth: app_key }
  s2: { path: /s2, upstream: backend, auth: app_key, $ACL }
  s3: { path: /s3, upstream: backend, auth: app_key, $ACL }
  s4:
    path: /s4
    upstream: backend
    auth: app_key
    $ACL
    headers: { request: { set: { x-gateway: gatehouse } }, response: { remove: [x-powered-by] } }
  s5: { path: /s5, upstream: backend, auth: app_key }
  s6: { path: /s6, upstream: backend, cors: { origins: ["https://app.example.com", "https://*.example.net"], expose_headers: [x-request-id] } }
  s7: { path: /s7, upstream: backend, auth: jwt, jwt: { issuer: bench, audience: api } }
  s8:
    path: /s8
    upstream: backend
    auth: jwt
    jwt: { issuer: bench-idp, audience: api, jwks_uri: "http://127.0.0.1:$P_BACKEND/jwks.json", app_claim: azp }
$SPLIT_SERVICES
apps:
  bench:
    key: $KEY
    jwt_keys: [{ kid: bench-rs, alg: RS256, public_key: "$WORK/jwt.pub" }]
    grants: { s1: ~, s2: ~, s3: gold, s4: gold, s5: cgold, s7: ~, s8: ~ }
plans:
  gold: { rate_limits: [{ limit: 1000000, interval: 1s }] }
  cgold: { rate_limits: [{ limit: 1000000, interval: 1s, scope: cluster }] }
redis: { url: "redis://127.0.0.1:$P_REDIS/0", secret_file: "$WORK/cluster.key" }
$TRACING_YAML
EOF
"$GATEHOUSE_BIN" check "$WORK/gatehouse.yaml" >/dev/null
start_proc gatehouse none valgrind --tool=callgrind --callgrind-out-file="$WORK/callgrind.gatehouse.%p" \
	"$GATEHOUSE_BIN" run --config "$WORK/gatehouse.yaml"
base=http://127.0.0.1:$P_GATEHOUSE
for ((i = 0; i < 300; i++)); do
	[[ $(http_probe "$base/test.html") == "200 75" ]] && break
	kill -0 "${PID[gatehouse]}" 2>/dev/null || die "gatehouse exited under valgrind"
	sleep 0.2
done
[[ $(http_probe "$base/s4/~$KEY/test.html") == "200 75" ]] || die "the gateway service does not answer 200"
# jwt_probe PATH TOKEN: the status of one request with the token
jwt_probe() { curl -s --noproxy '*' -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $2" "$base$1"; }
[[ $(jwt_probe /s7/test.html "$TOKEN_KEY") == 200 ]] || die "the configured-key JWT service does not answer 200"
# The first request waits for the key set's first fetch.
[[ $(jwt_probe /s8/test.html "$TOKEN_JWKS") == 200 ]] || die "the key-set JWT service does not answer 200"

declare -A URL=([bare]=/test.html [service]=/s0/test.html [app-key]="/s1/~$KEY/test.html"
	[acl]="/s2/~$KEY/test.html" [limit]="/s3/~$KEY/test.html" [headers]="/s4/~$KEY/test.html"
	[header-key]=/s4/test.html [cluster-limit]="/s5/~$KEY/test.html" [cors]=/s6/test.html
	[jwt-key]=/s7/test.html [jwt-jwks]=/s8/test.html [split]=/s9/test.html [mirror]=/s10/test.html)
ROWS=(bare service app-key acl limit headers header-key cluster-limit cors jwt-key jwt-jwks)
[[ -n $SPLIT_SERVICES ]] && ROWS+=(split mirror)
for warm in bare headers cluster-limit; do ab -k -n 1000 -c 10 "$base${URL[$warm]}" >/dev/null 2>&1; done
echo "| row | instructions per request | vs bare |"
echo "|---|---:|---:|"
# ab_2xx ROW AB_ARGS...: one ab run, every answer 2xx
ab_2xx() {
	local row=$1 out
	shift
	out=$(ab "$@" 2>&1)
	if grep -q "Non-2xx" <<<"$out"; then die "$row: non-2xx answers"; fi
}
first=
for row in "${ROWS[@]}"; do
	args=()
	[[ $row == header-key ]] && args=(-H "X-APP-KEY: $KEY")
	[[ $row == cors ]] && args=(-H "Origin: https://shop.example.net")
	[[ $row == jwt-key ]] && args=(-H "Authorization: Bearer $TOKEN_KEY")
	[[ $row == jwt-jwks ]] && args=(-H "Authorization: Bearer $TOKEN_JWKS")
	callgrind_count gatehouse "$row" "$N" ab_2xx "$row" -k -n "$N" -c 10 "${args[@]}" "$base${URL[$row]}"
	per=$REPLY
	first=${first:-$per}
	printf '| %s | %d | %+.1f %% |\n' "$row" "$per" "$(echo "($per - $first) * 100 / $first" | bc -l)"
done
if [[ " ${ROWS[*]} " == *" mirror "* ]]; then
	# The mirror's share of upstream traffic, from the gateway's own counters.
	metrics=$(curl -s --noproxy '*' "http://127.0.0.1:$P_ADMIN/metrics" || true)
	copies=$(awk '/^gatehouse_mirror_requests_total\{route="service:s10".*result="answered"/ {print $2}' <<<"$metrics")
	log "mirror row: ${copies:-?} copies answered by the mirror for the row's $N requests (and its warm-up)"
fi
