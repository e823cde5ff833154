# shellcheck shell=bash
# bench/lib/grpc_tools.sh - the gRPC tools of bench/grpc.sh: ghz and the backend (bench/grpc) built
# with Go into bench/.cache/bin, the requests ghz sends, and the verdict on a ghz report.
#
# Sourced after common.sh: uses BENCH, ORIG_PWD, PYTHON, log and die; ghz_binary reads GHZ_BIN and
# GHZ_VERSION.

CACHE_BIN=$BENCH/.cache/bin

cache_dir() { # bench/.cache/bin, in a bench/.cache that git ignores
	mkdir -p "$CACHE_BIN"
	[[ -f $BENCH/.cache/.gitignore ]] || printf '*\n' >"$BENCH/.cache/.gitignore"
}

ghz_binary() { # -> GHZ_BIN (absolute): GHZ_VERSION installed into bench/.cache/bin when missing
	cache_dir
	if [[ -n $GHZ_BIN ]]; then
		[[ $GHZ_BIN == /* ]] || GHZ_BIN=$ORIG_PWD/$GHZ_BIN
	else
		GHZ_BIN=$CACHE_BIN/ghz
		# A go-installed binary names its module version; one of another version is replaced.
		if [[ ! -x $GHZ_BIN ]] || { command -v go >/dev/null &&
			[[ $(mod_version "$GHZ_BIN" github.com/bojand/ghz) != "$GHZ_VERSION" ]]; }; then
			command -v go >/dev/null || die "ghz not found and no go to install it; set GHZ_BIN"
			log "installing ghz $GHZ_VERSION into $CACHE_BIN (go install; a few minutes the first time)"
			GOBIN=$CACHE_BIN go install "github.com/bojand/ghz/cmd/ghz@$GHZ_VERSION" ||
				die "go install github.com/bojand/ghz/cmd/ghz@$GHZ_VERSION failed"
		fi
	fi
	[[ -x $GHZ_BIN ]] || die "ghz not found or not executable: $GHZ_BIN"
}

server_binary() { # -> SERVER_BIN: bench/grpc built into bench/.cache/bin when missing or older than its sources
	cache_dir
	SERVER_BIN=$CACHE_BIN/grpc-bench-server
	if [[ ! -x $SERVER_BIN || -n $(find "$BENCH/grpc" -type f -newer "$SERVER_BIN" -print -quit) ]]; then
		command -v go >/dev/null || die "go not found: needed once to build the backend (bench/grpc)"
		log "building the backend: go build -C bench/grpc"
		go build -C "$BENCH/grpc" -o "$SERVER_BIN" . || die "go build of bench/grpc failed"
	fi
}

mod_version() { # mod_version BINARY MODULE -> the module's version the Go binary was built with
	go version -m "$1" 2>/dev/null | awk -v m="$2" '($1 == "mod" || $1 == "dep") && $2 == m { print $3 }'
}

# write_requests DIR SIZE -> DIR/unary.bin (d = SIZE bytes) and DIR/stream.bin (d = 1 byte): bench.M
# serialized, as ghz -B reads it: field 1 (bytes) = tag 0x0a, the length as a varint, the bytes.
write_requests() {
	"$PYTHON" - "$1" "$2" <<'EOF'
import os, sys
def message(n):
    length, v = b"", n
    while True:
        b, v = v & 0x7F, v >> 7
        length += bytes([b | (0x80 if v else 0)])
        if not v:
            return b"\x0a" + length + b"x" * n
for name, n in (("unary.bin", int(sys.argv[2])), ("stream.bin", 1)):
    with open(os.path.join(sys.argv[1], name), "wb") as f:
        f.write(message(n))
EOF
}

# ghz_verdict OUT [WANT_CALLS] -> "CALLS" when the report has calls, all OK (and WANT_CALLS of them);
# otherwise what went wrong, and false.
ghz_verdict() {
	"$PYTHON" - "$@" <<'EOF'
import json, sys
try:
    with open(sys.argv[1]) as f:
        rep = json.load(f)
except (OSError, ValueError) as e:
    print(f"no ghz report ({e})")
    sys.exit(1)
count, st = rep.get("count") or 0, rep.get("statusCodeDistribution") or {}
bad = count - st.get("OK", 0)
errs = "; ".join(f"{n} x {m}" for m, n in sorted((rep.get("errorDistribution") or {}).items(), key=lambda kv: -kv[1])[:3])
if bad or not count or (len(sys.argv) > 2 and count != int(sys.argv[2])):
    print(f"{bad} of {count} calls not OK (statuses {st}){': ' + errs if errs else ''}")
    sys.exit(1)
print(count)
EOF
}
