#!/usr/bin/env bash
# Runs every fuzz target of fuzz/ (cargo-fuzz, libFuzzer, AddressSanitizer) for a bounded time
# and fails on any crash, leak, timeout or out-of-memory (run by .ci/run; by hand:
# `bash .ci/fuzz.sh`, or one target as the book's "Fuzzing" says).
#
# - Installs cargo-fuzz (pinned, --locked) unless that version is already on PATH.
# - Builds all targets once (release, debug assertions, ASan), on stable through
#   RUSTC_BOOTSTRAP=1 (the sanitizer flags are unstable).
# - Runs each target for NETACL_FUZZ_SECONDS (default 30) seconds, two at a time (the CI machine
#   has 2 cores), from its seeds in fuzz/corpus/TARGET; new inputs go to a temporary directory,
#   never into the checkout. A crash is saved under fuzz/artifacts/TARGET/ and printed.
# - The inputs kept in fuzz/regressions/ and fuzz/corpus/ are run by `cargo test` (the
#   netacl-fuzzing crate's tests/regressions.rs), not here.
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_FUZZ_VERSION=0.13.2
SECONDS_PER_TARGET="${NETACL_FUZZ_SECONDS:-30}"
JOBS="${NETACL_FUZZ_JOBS:-2}"
export RUSTC_BOOTSTRAP=1
started=$SECONDS

if [ "$(cargo fuzz --version 2>/dev/null)" != "cargo-fuzz $CARGO_FUZZ_VERSION" ]; then
    echo "fuzz: installing cargo-fuzz $CARGO_FUZZ_VERSION"
    timeout 900 cargo install --locked --quiet --version "$CARGO_FUZZ_VERSION" cargo-fuzz
fi
echo "fuzz: cargo-fuzz ready after $((SECONDS - started)) s"

# fuzz/ is its own workspace with its own lock: a stale fuzz/Cargo.lock (a crate the targets now
# link missing from it) fails here, so the advisory audit never reads an old lock.
cargo metadata --locked --format-version 1 --manifest-path fuzz/Cargo.toml >/dev/null

# The same flags for build and run, or `cargo fuzz run` would build again.
flags=(--fuzz-dir fuzz --release --debug-assertions --sanitizer address)
timeout 1500 cargo fuzz build "${flags[@]}"
echo "fuzz: targets built after $((SECONDS - started)) s"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mapfile -t targets < <(cargo fuzz list --fuzz-dir fuzz)

run_target() {
    local target=$1
    mkdir -p "$work/corpus/$target"
    # -timeout: one input running 10 s is a hang; -rss_limit_mb: a leak or an allocation bomb.
    timeout $((SECONDS_PER_TARGET + 300)) cargo fuzz run "${flags[@]}" "$target" \
        "$work/corpus/$target" "fuzz/corpus/$target" -- \
        -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 >"$work/$target.log" 2>&1
}

failed=()
pids=()
names=()
for target in "${targets[@]}"; do
    run_target "$target" &
    pids+=($!)
    names+=("$target")
    if [ "${#pids[@]}" -ge "$JOBS" ]; then
        if ! wait "${pids[0]}"; then failed+=("${names[0]}"); fi
        pids=("${pids[@]:1}")
        names=("${names[@]:1}")
    fi
done
for i in "${!pids[@]}"; do
    if ! wait "${pids[$i]}"; then failed+=("${names[$i]}"); fi
done

for target in "${targets[@]}"; do
    runs=$(grep -m1 '^stat::number_of_executed_units:' "$work/$target.log" | awk '{print $2}' || true)
    speed=$(grep -m1 '^stat::average_exec_per_sec:' "$work/$target.log" | awk '{print $2}' || true)
    echo "fuzz: $target: ${runs:-?} runs, ${speed:-?} exec/s in ${SECONDS_PER_TARGET} s"
done
if [ "${#failed[@]}" -gt 0 ]; then
    for target in "${failed[@]}"; do
        echo "fuzz: $target FAILED; the end of its log:"
        tail -n 60 "$work/$target.log"
    done
    echo "fuzz: minimise with: RUSTC_BOOTSTRAP=1 cargo fuzz tmin --fuzz-dir fuzz TARGET fuzz/artifacts/TARGET/<file>;"
    echo "      fix the product, then keep the input in fuzz/regressions/TARGET/"
    exit 1
fi
echo "fuzz: ${#targets[@]} targets clean; the whole step took $((SECONDS - started)) s"
