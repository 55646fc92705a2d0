#!/usr/bin/env bash
# `npm run demo`: installs what it needs (npm workspace, the Python venv with
# salt==3006.27), builds, then runs the narrated scenario (oduflow-demo)
# against a real local Salt topology with the real oduflow-master CLI.
# Exit 0 only when every step's evidence matched what was expected.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export NX_DAEMON=false NX_NO_CLOUD=true NX_TUI=false FORCE_COLOR=0

started=$(date +%s)
bash scripts/ensure-node.sh
bash scripts/ensure-python.sh

log=$(mktemp "${TMPDIR:-/tmp}/oduflow-demo-build.XXXXXX")
echo "demo: building (npx nx run-many -t build)"
if ! npx nx run-many -t build --outputStyle=static >"$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "demo: the build failed; full log: $log" >&2
  exit 1
fi
rm -f "$log"
echo "demo: ready in $(( $(date +%s) - started )) s"

# exec: the demo gets Ctrl-C / SIGTERM directly and tears its topology down.
exec node packages/test-harness/dist/demo-cli.js "$@"
