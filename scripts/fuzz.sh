#!/usr/bin/env bash
# `npm run fuzz -- --cases N [--seed S] [--batch B] [--no-fixtures] [--json]`:
# the differential fuzzer (@oduflow/protocol against oduflow_job.py) at any
# size. Installs what it needs, builds the test harness, then runs
# packages/test-harness/dist/fuzz-cli.js. Exit 1 when the two disagreed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export NX_DAEMON=false NX_NO_CLOUD=true NX_TUI=false FORCE_COLOR=0
bash scripts/ensure-node.sh
bash scripts/ensure-python.sh
log=$(mktemp "${TMPDIR:-/tmp}/oduflow-fuzz-build.XXXXXX")
if ! npx nx run @oduflow/test-harness:build --outputStyle=static >"$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "fuzz: the build failed; full log: $log" >&2
  exit 1
fi
rm -f "$log"
exec node packages/test-harness/dist/fuzz-cli.js "$@"
