#!/usr/bin/env bash
# bench/fuzz.sh - every fuzz target of fuzz/ for a while, one after another.
#
# Question answered:
#   Does any target find a crash in MINUTES of fuzzing from its committed corpus, and how much
#   fuzzing did it get (executions, executions per second, corpus reached)?
#   Goal: no crash after 10 minutes per target.
#
# Run:   bench/fuzz.sh [MINUTES]                  # 10 per target (about an hour for all of them)
#        TARGETS="config router" bench/fuzz.sh 2
#        FUZZ_SECONDS=20 bench/fuzz.sh            # seconds instead of minutes (.ci/fuzz-smoke)
#        FUZZ_SANITIZER=none bench/fuzz.sh 1      # without AddressSanitizer: quicker to build and run
# Needs: cargo-fuzz (`cargo install --locked cargo-fuzz`). The sanitizer flag is unstable: a
#        nightly toolchain when rustup has one, else the default toolchain with RUSTC_BOOTSTRAP=1;
#        FUZZ_TOOLCHAIN=stable (or any rustup name) chooses.
#
# Output: one line per target as it finishes, then a Markdown table, on stdout. New inputs go to
# fuzz/target/corpus/TARGET/ (the committed corpus is only read; `cargo fuzz cmin` merges), a crash
# to fuzz/artifacts/TARGET/; logs are fuzz/target/fuzz-TARGET.log. Exit status 1 when a target
# crashed (libFuzzer stops a target at its first crash, so "crashes" is 0 or 1).
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf '%s\n' "$*" >&2; }
die() { log "bench/fuzz.sh: $*"; exit 2; }

minutes=${1:-10}
seconds=${FUZZ_SECONDS:-}
[[ $minutes =~ ^[0-9]+$ ]] || die "MINUTES must be a whole number (got '$minutes')"
[[ -z $seconds ]] && seconds=$((minutes * 60))
[[ $seconds =~ ^[1-9][0-9]*$ ]] || die "FUZZ_SECONDS must be a positive whole number (got '$seconds')"
cargo fuzz --version >/dev/null 2>&1 || die "cargo-fuzz not found: cargo install --locked cargo-fuzz"

name=${FUZZ_TOOLCHAIN:-}
if [[ -z $name ]] && rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  name=nightly
fi
[[ $name == nightly* ]] || export RUSTC_BOOTSTRAP=1
toolchain=()
[[ -n $name ]] && toolchain=("+$name")
# The fuzz project is a workspace of its own; its build never shares the product's target dir.
target_dir=$PWD/fuzz/target
read -r -a targets <<<"${TARGETS:-$(cargo "${toolchain[@]}" fuzz list --fuzz-dir fuzz | tr '\n' ' ')}"

# Release with debug assertions (overflow checks too); AddressSanitizer by default, for the
# unsafe code of dependencies (unsafe-libyaml under serde_yaml, tokio, std).
sanitizer=${FUZZ_SANITIZER:-address}
log "building ${targets[*]} (cargo ${toolchain[*]:-} fuzz build, release, debug assertions, sanitizer $sanitizer)"
build_start=$SECONDS
cargo "${toolchain[@]}" fuzz build -O -a -s "$sanitizer" --fuzz-dir fuzz --target-dir "$target_dir" >&2
log "built in $((SECONDS - build_start)) s"
bin_dir=$target_dir/$(rustc "${toolchain[@]}" -vV | sed -n 's/^host: //p')/release

rows=()
crashed=0
for t in "${targets[@]}"; do
  work=$target_dir/corpus/$t
  out=$target_dir/fuzz-$t.log
  mkdir -p "$work" "fuzz/artifacts/$t"
  args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
    -artifact_prefix="fuzz/artifacts/$t/")
  [[ -f fuzz/dict/$t.dict ]] && args+=(-dict="fuzz/dict/$t.dict")
  start=$SECONDS
  status=0
  "$bin_dir/$t" "${args[@]}" "$work" "fuzz/corpus/$t" >"$out" 2>&1 || status=$?
  took=$((SECONDS - start))
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out" | tail -n1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$out" | tail -n1)
  corpus=$(grep -o 'corp: [0-9]*' "$out" | tail -n1 | cut -d' ' -f2)
  crashes=0
  if ((status != 0)); then
    crashes=1
    crashed=1
    artifact=$(sed -n 's/.*Test unit written to //p' "$out" | tail -n1)
    log "bench/fuzz.sh: $t failed (exit $status); input: ${artifact:-none written}; log: $out"
    grep -E -A3 "panicked at|ERROR: (libFuzzer|AddressSanitizer)" "$out" | head -n 20 >&2 || true
  fi
  printf '%s: %s s, %s runs, %s exec/s, corpus %s, crashes %s\n' \
    "$t" "$took" "${runs:-?}" "${rate:-?}" "${corpus:-?}" "$crashes"
  rows+=("| $t | $took | ${runs:-?} | ${rate:-?} | ${corpus:-?} | $crashes |")
done

printf '\n| target | seconds | runs | exec/s | corpus | crashes |\n|---|---|---|---|---|---|\n'
printf '%s\n' "${rows[@]}"
exit "$crashed"
