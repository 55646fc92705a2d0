#!/usr/bin/env bash
# Creates (or refreshes) the project's Python venv with the pinned Salt.
# Idempotent: a stamp of the requirement files decides whether pip runs again.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${ODUFLOW_VENV:-$root/.venv}
stamp_src=$(cat "$root/scripts/python-requirements.txt" "$root/scripts/python-constraints.txt" | sha256sum | cut -d' ' -f1)
if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.oduflow-stamp" 2>/dev/null)" = "$stamp_src" ]; then
  exit 0
fi
echo "ensure-python: creating $venv with salt==3006.27 (pip, PyPI)" >&2
python3 -m venv --clear "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check \
  -r "$root/scripts/python-requirements.txt" -c "$root/scripts/python-constraints.txt"
"$venv/bin/python" - <<'PY'
import salt.version, cherrypy, pytest, pytest_timeout, mutmut  # fail loudly if anything is missing
assert salt.version.__version__ == "3006.27", salt.version.__version__
PY
echo "$stamp_src" > "$venv/.oduflow-stamp"
