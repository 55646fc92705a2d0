#!/usr/bin/env bash
# One mutant's tests (mutmut applies the mutant to oduflow_job.py in place, then runs this).
# The by-path suites first (-x: most mutants die in seconds); for a mutant in the durable
# core, then the crash-state enumeration of the module's writes (mutmut_config.py).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
mkdir -p reports/mutation
: > reports/mutation/mutmut-runner.log
if [ "${ODUFLOW_MUTMUT_CRASH_STATES:-0}" = 1 ]; then
  # The store's own suite, then two sequences that between them make every durable write
  # (a new store, claim, receipt; a refusal record), smoke-sized.
  "$root/.venv/bin/python" -m pytest -x -q -p no:cacheprovider --no-header packages/minion-wrapper/tests/test_run_and_store.py \
    packages/minion-wrapper/tests/test_duplicate_and_refusal_races.py >>"$root/reports/mutation/mutmut-runner.log" 2>&1
  cd packages/test-harness
  npx vitest run tests/crash-states.minion.test.ts --typecheck.enabled=false --reporter=dot \
    -t 'first apply on a new store|refusal record \(forbidden option\)' >>"$root/reports/mutation/mutmut-runner.log" 2>&1
else
  "$root/.venv/bin/python" -m pytest -x -q -p no:cacheprovider --no-header \
    packages/minion-wrapper/tests/test_validation.py packages/minion-wrapper/tests/test_run_and_store.py \
    packages/minion-wrapper/tests/test_duplicate_and_refusal_races.py >>"$root/reports/mutation/mutmut-runner.log" 2>&1
fi
