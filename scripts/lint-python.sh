#!/usr/bin/env bash
# ruff over the Python side of the repository (rules in ruff.toml): the minion
# module, its tests, the Python conformance runner and watchdog, and the
# benchmarks' Python (canonical JSON, the live benchmark's store I/O timer). Lint, then
# formatting. Part of `npm run lint` and `npm test`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash scripts/ensure-python.sh
ruff=${ODUFLOW_VENV:-$root/.venv}/bin/ruff
paths=(packages/minion-wrapper/salt packages/minion-wrapper/tests packages/minion-wrapper/bench packages/test-harness/python packages/test-harness/bench)
"$ruff" check --no-cache "${paths[@]}"
"$ruff" format --check --no-cache "${paths[@]}"
