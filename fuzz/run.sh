#!/usr/bin/env bash
# Runs the fuzz targets (cargo-fuzz, libFuzzer): `fuzz/run.sh [SECONDS] [TARGET...]`, each
# target for SECONDS (default 60), all targets when none is named. Each target's working corpus
# grows in fuzz/corpus/<target> (not committed) on top of the committed seeds in
# fuzz/seeds/<target>; a crash, hang (over 10 s) or leak stops that target with its input in
# fuzz/artifacts/<target>/ and makes the script exit 1. Prints executions and coverage (libFuzzer's
# `cov`, edges reached, and `ft`, features) per target; full logs in fuzz/logs/.
# FUZZ_RUNS=N stops each target after N executions instead (SECONDS still bounds it), e.g.
# `FUZZ_RUNS=10000000 fuzz/run.sh 7200` for the ten-million-execution runs of issue 20.
# Needs the nightly toolchain and cargo-fuzz; installs both when missing (skips, saying so, only
# when rustup cannot install nightly). FUZZ_BUILD_FLAGS adds cargo-fuzz build flags: CI passes
# `--dev --sanitizer none` so its short smoke run does not pay for an optimized AddressSanitizer
# build of the whole node (Rust code: panics and hangs are still caught, leaks are not); long runs keep
# cargo-fuzz's default (release, ASan).
set -euo pipefail
cd "$(dirname "$0")"

seconds=${1:-60}
shift || true

if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    echo "fuzz: installing the nightly toolchain, which libFuzzer's instrumentation needs"
    if ! rustup toolchain install nightly --profile minimal >/dev/null 2>&1; then
        echo "fuzz: SKIPPED: no nightly toolchain and rustup could not install one"
        exit 0
    fi
fi
if ! command -v cargo-fuzz >/dev/null; then
    echo "fuzz: installing cargo-fuzz"
    cargo install cargo-fuzz --locked --quiet
fi

if [ "$#" -gt 0 ]; then
    targets=("$@")
else
    mapfile -t targets < <(cargo +nightly fuzz list)
fi


mkdir -p logs
failed=()
printf '%-18s %12s %8s %8s %s\n' target executions cov ft result
for target in "${targets[@]}"; do
    mkdir -p "corpus/$target" "seeds/$target"
    log="logs/$target.log"
    if cargo +nightly fuzz run ${FUZZ_BUILD_FLAGS:-} "$target" "corpus/$target" "seeds/$target" -- \
        -max_total_time="$seconds" ${FUZZ_RUNS:+-runs=$FUZZ_RUNS} -timeout=10 -rss_limit_mb=3072 -print_final_stats=1 \
        >"$log" 2>&1; then
        result=ok
    else
        result="FAILED (see fuzz/$log, fuzz/artifacts/$target/)"
        failed+=("$target")
    fi
    executions=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*$')
    ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*$')
    printf '%-18s %12s %8s %8s %s\n' "$target" "${executions:-?}" "${cov:-?}" "${ft:-?}" "$result"
done
if [ "${#failed[@]}" -gt 0 ]; then
    echo "fuzz: failed: ${failed[*]}" >&2
    exit 1
fi
