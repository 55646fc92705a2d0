#!/usr/bin/env bash
# `npm run pack:master [-- --out <dir>] [-- --no-build]`: the operator CLI as
# one artefact for a real master host, oduflow-master-<version>.tar.gz:
#
#   oduflow-master-<version>/
#     package.json        depends on the four packed tarballs below (and pins them for every nested use)
#     package-lock.json   every third-party package pinned, with its integrity
#     packages/*.tgz      `npm pack` of @oduflow/protocol, @oduflow/receipt-store, @oduflow/job-envelope (rollouts), @oduflow/minion-wrapper (verify-fleet's reviewed module), @oduflow/master-runner, oduflow-master
#
# On the host: extract, `npm ci --omit=dev` inside (Node >= 20.18, npm, a C
# compiler for receipt-store's Node-API addon, and the npm registry or a
# mirror for the third-party packages), then link node_modules/.bin/oduflow-master
# onto the PATH. See apps/master/README.md, "Installing on a master host".
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export NX_DAEMON=false NX_NO_CLOUD=true NX_TUI=false FORCE_COLOR=0

out=$root/.pack
build=1
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    *) echo "pack-master: unknown argument $1" >&2; exit 2 ;;
  esac
done

bash scripts/ensure-node.sh
if [ "$build" = 1 ]; then
  npx nx run oduflow-master:build --outputStyle=static >&2
fi
for package in packages/protocol packages/receipt-store packages/job-envelope packages/minion-wrapper packages/master-runner apps/master; do
  [ -d "$package/dist" ] || { echo "pack-master: $package/dist is missing; build first (or drop --no-build)" >&2; exit 1; }
done

version=$(node -p "require('./apps/master/package.json').version")
name=oduflow-master-$version
stage=$(mktemp -d "${TMPDIR:-/tmp}/oduflow-pack.XXXXXX")
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/$name/packages"
npm pack --silent --pack-destination "$stage/$name/packages" \
  --workspace packages/protocol --workspace packages/receipt-store --workspace packages/job-envelope --workspace packages/minion-wrapper \
  --workspace packages/master-runner --workspace apps/master >/dev/null

node scripts/pack-master-manifest.mjs "$stage/$name" "$version"
# Pin the third-party packages now, so every host installs what this artefact was tested with.
(cd "$stage/$name" && npm install --package-lock-only --ignore-scripts --no-audit --no-fund --prefer-offline >/dev/null)

mkdir -p "$out"
tar -czf "$out/$name.tar.gz" -C "$stage" "$name"
echo "$out/$name.tar.gz"
