#!/usr/bin/env bash
# `npm run bench` (default mode) or `npm run bench -- --full` (the fleet-scale
# and live parts too): installs what the benchmarks need, builds, clears
# .test-results/bench/, runs every package's `bench` target one at a time
# (each writes its result files there, see /docs/benchmarks.md), then
# scripts/bench.mjs checks them and rewrites BENCHMARKS.md and docs/bench/*.svg.
# Exits 1 when a benchmark broke (ok: false, or its script failed) or an
# expected result is missing; a missed target does not fail the run.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
mode=default
for arg in "$@"; do
  case "$arg" in
    --full) mode=full ;;
    *) echo "usage: npm run bench [-- --full]" >&2; exit 2 ;;
  esac
done
export NX_DAEMON=false NX_NO_CLOUD=true NX_TUI=false FORCE_COLOR=0 ODUFLOW_BENCH_MODE=$mode
started=$(date +%s)

echo "::: install" >&2
bash scripts/ensure-node.sh && bash scripts/ensure-python.sh && bash scripts/ensure-postgres.sh || exit 1
echo "::: build" >&2
npx nx run-many -t build --outputStyle=static || exit 1

rm -rf .test-results/bench && mkdir -p .test-results/bench
echo "::: bench ($mode)" >&2
# One target at a time (and `parallelism: false` on each): the benchmarks
# measure ratios side by side, and two of them at once would share 2 cores.
# nx goes on after a failed target, so every benchmark gets its run.
npx nx run-many -t bench --parallel=1 --outputStyle=static
bench_status=$?

echo "::: report" >&2
ODUFLOW_BENCH_ELAPSED_S=$(( $(date +%s) - started )) node scripts/bench.mjs
report_status=$?
echo "bench: $mode run took $(( $(date +%s) - started )) s" >&2
[ "$bench_status" -eq 0 ] && [ "$report_status" -eq 0 ]
