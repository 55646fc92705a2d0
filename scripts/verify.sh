#!/usr/bin/env bash
# `npm run verify`: the proofs beyond `npm test`, at full size. Installs and
# builds what it needs, then runs each step below in turn (a failing step
# does not stop the others) and ends with one line per step. Exit 0 only
# when every step passed. Long (hours on 2 cores, most of it mutation
# testing): run it on purpose, not on every change.
#
#   model check        every interleaving up to the full bounds (packages/test-harness/src/model)
#   differential fuzz  TS <-> Python, 1,000,000 seeded cases by default
#   crash-states       every crash state of every recorded write sequence (ODUFLOW_CRASH_STATES=full)
#   mutation-*         Stryker per TypeScript package, mutmut over oduflow_job.py (scripts/mutation.sh),
#                      each failing below its break threshold
#
# One step per line: to add a proof, add one `step "<name>" <command...>`
# line to the list at the bottom. Smaller runs, to try the script:
# ODUFLOW_VERIFY_MODEL_BOUNDS=smoke ODUFLOW_VERIFY_FUZZ_CASES=2000 npm run verify
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export NX_DAEMON=false NX_NO_CLOUD=true NX_TUI=false FORCE_COLOR=0

bash scripts/ensure-node.sh || exit 1
bash scripts/ensure-python.sh || exit 1
bash scripts/ensure-strace.sh || exit 1
log=$(mktemp "${TMPDIR:-/tmp}/oduflow-verify-build.XXXXXX")
if ! npx nx run-many -t build --outputStyle=static >"$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "verify: the build failed; full log: $log" >&2
  exit 1
fi
rm -f "$log"

summary=()
failed=0
step() { # name, command...
  local name=$1
  shift
  echo "::: $name" >&2
  local started=$SECONDS
  "$@"
  local rc=$?
  local verdict=ok
  if [ "$rc" -ne 0 ]; then
    verdict="FAILED (exit $rc)"
    failed=1
  fi
  summary+=("$(printf '%-44s %s, %s s' "$name" "$verdict" $((SECONDS - started)))")
}

step "model check of the protocol" node packages/test-harness/dist/model-cli.js --bounds "${ODUFLOW_VERIFY_MODEL_BOUNDS:-full}"
step "differential fuzz TS <-> Python" node packages/test-harness/dist/fuzz-cli.js --cases "${ODUFLOW_VERIFY_FUZZ_CASES:-1000000}" --seed "${ODUFLOW_VERIFY_FUZZ_SEED:-1}"
step "crash states (full enumeration)" env ODUFLOW_CRASH_STATES=full npx vitest run --root packages/test-harness \
  tests/crash-states.store.test.ts tests/crash-states.master.test.ts tests/crash-states.minion.test.ts
step "mutation: protocol (Stryker)" bash scripts/mutation.sh protocol
step "mutation: receipt-store (Stryker)" bash scripts/mutation.sh receipt-store
step "mutation: master-runner (Stryker)" bash scripts/mutation.sh master-runner
step "mutation: oduflow_job.py (mutmut)" bash scripts/mutation.sh minion

echo "verify:"
printf '  %s\n' "${summary[@]}"
exit "$failed"
