#!/usr/bin/env bash
# Mutation testing (npm run verify runs every target; one target: `bash scripts/mutation.sh <target>`).
#   protocol | receipt-store | master-runner   Stryker (stryker/stryker.config.mjs), perTest coverage,
#                                               breaks below the package's threshold there
#   minion                                      mutmut 2.5.1 over oduflow_job.py (scripts/mutation/),
#                                               ODUFLOW_MUTMUT_SCOPE=durable (default) | all; breaks
#                                               below ODUFLOW_MUTMUT_BREAK percent killed (default 80)
# Reports: reports/mutation/<target>.json (Stryker), reports/mutation/minion.txt (mutmut).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
target=${1:?usage: scripts/mutation.sh protocol|receipt-store|master-runner|minion}
mkdir -p reports/mutation
case "$target" in
  protocol | receipt-store | master-runner)
    STRYKER_PACKAGE=$target npx stryker run stryker/stryker.config.mjs
    ;;
  minion)
    rm -f .mutmut-cache
    # mutmut's exit code encodes what it found; the score decides below.
    PYTHONPATH="$root/scripts/mutation" "$root/.venv/bin/mutmut" run \
      --paths-to-mutate packages/minion-wrapper/salt/_modules/oduflow_job.py \
      --tests-dir packages/minion-wrapper/tests \
      --runner "env ODUFLOW_MUTMUT_CRASH_STATES=1 bash scripts/mutation/mutmut-runner.sh" \
      --test-time-multiplier 3 --simple-output || true
    "$root/.venv/bin/mutmut" results > reports/mutation/minion.txt || true
    "$root/.venv/bin/python" scripts/mutation/mutmut_score.py "${ODUFLOW_MUTMUT_BREAK:-80}"
    ;;
  *)
    echo "unknown mutation target: $target" >&2
    exit 2
    ;;
esac
