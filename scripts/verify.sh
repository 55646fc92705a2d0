#!/usr/bin/env bash
# `npm run verify`: the proofs beyond `npm test`, each a step; ends with one line per step and
# exits non-zero when any failed. Long: run it on purpose, not on every change.
#   crash-states     every crash state of every recorded write sequence (ODUFLOW_CRASH_STATES=full)
#   mutation-*       Stryker per TypeScript package, mutmut over oduflow_job.py (scripts/mutation.sh),
#                    each failing below its break threshold
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export NX_DAEMON=false NX_NO_CLOUD=true NX_TUI=false FORCE_COLOR=0
failed=0
summary=()

step() { # name, command...
  local name=$1; shift
  echo "::: $name" >&2
  local started=$SECONDS
  "$@"
  local rc=$?
  summary+=("$name: $([ $rc = 0 ] && echo passed || echo "FAILED ($rc)") in $((SECONDS - started)) s")
  [ $rc = 0 ] || failed=1
  return $rc
}

step install-node bash scripts/ensure-node.sh || exit 1
step install-python bash scripts/ensure-python.sh || exit 1
step install-strace bash scripts/ensure-strace.sh || exit 1
step build npx nx run-many -t build --outputStyle=static
step crash-states env ODUFLOW_CRASH_STATES=full npx vitest run --root packages/test-harness \
  tests/crash-states.store.test.ts tests/crash-states.master.test.ts tests/crash-states.minion.test.ts
step mutation-protocol bash scripts/mutation.sh protocol
step mutation-receipt-store bash scripts/mutation.sh receipt-store
step mutation-master-runner bash scripts/mutation.sh master-runner
step mutation-minion bash scripts/mutation.sh minion

printf '%s\n' "${summary[@]}"
exit $failed
