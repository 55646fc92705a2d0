#!/usr/bin/env bash
# `npm test`: installs what it needs, then builds, type-checks, lints (publint +
# attw per package, then eslint, knip and ruff over the tree) and runs every
# suite, TypeScript and Python. Ends with one line
# totalling all of them: `N passed, M failed`.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export NX_DAEMON=false NX_NO_CLOUD=true NX_TUI=false FORCE_COLOR=0
# CI builds, type-checks and lints for real instead of replaying nx's cache.
if [ "${CI:-}" = "true" ]; then export NX_SKIP_NX_CACHE=true; fi
results=$root/.test-results
rm -rf "$results" && mkdir -p "$results"
steps=$results/steps.tsv
: > "$steps"

step() { # name, command...
  local name=$1; shift
  echo "::: $name" >&2
  "$@"
  local rc=$?
  printf '%s\t%s\n' "$name" "$rc" >> "$steps"
  return $rc
}

step install-node bash scripts/ensure-node.sh || { node scripts/summarize-tests.mjs "$results"; exit 1; }
step install-python bash scripts/ensure-python.sh || { node scripts/summarize-tests.mjs "$results"; exit 1; }
step install-postgres bash scripts/ensure-postgres.sh || { node scripts/summarize-tests.mjs "$results"; exit 1; }
step install-strace bash scripts/ensure-strace.sh || { node scripts/summarize-tests.mjs "$results"; exit 1; }
# Debian's Chromium for the dashboard's browser tests (apps/master/tests/dashboard): never skipped.
step install-chromium bash scripts/ensure-chromium.sh || { node scripts/summarize-tests.mjs "$results"; exit 1; }
step build npx nx run-many -t build --outputStyle=static
step typecheck npx nx run-many -t typecheck --outputStyle=static
step lint npx nx run-many -t lint --outputStyle=static
step eslint npm run --silent lint:eslint
step knip npm run --silent lint:knip
step ruff npm run --silent lint:python
step vitest npx nx run-many -t test --parallel=1 --outputStyle=static
step pytest "$root/.venv/bin/python" -m pytest -p no:cacheprovider --junitxml="$results/pytest.xml" -q --color=no
node scripts/summarize-tests.mjs "$results"
