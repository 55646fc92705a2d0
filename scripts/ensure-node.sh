#!/usr/bin/env bash
# Installs the npm workspace exactly from package-lock.json when it changed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ -d node_modules ] && [ "$(cat node_modules/.oduflow-stamp 2>/dev/null)" = "$want" ]; then
  exit 0
fi
echo "ensure-node: npm ci" >&2
npm ci --no-audit --no-fund
echo "$want" > node_modules/.oduflow-stamp
