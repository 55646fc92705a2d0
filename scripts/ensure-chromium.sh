#!/usr/bin/env bash
# Makes Debian's Chromium available for the dashboard's browser tests
# (playwright-core drives it; Playwright's own browser downloads are never
# used). When it is missing and we run as root, installs Debian's `chromium`
# package; otherwise fails loudly: the browser tests never skip.
set -euo pipefail
bin=${ODUFLOW_CHROMIUM:-/usr/bin/chromium}
if [ -x "$bin" ] && "$bin" --version >/dev/null 2>&1; then
  exit 0
fi
if [ -n "${ODUFLOW_CHROMIUM:-}" ]; then
  echo "ensure-chromium: ODUFLOW_CHROMIUM=$bin is not a working Chromium" >&2
  exit 1
fi
if [ "$(id -u)" != 0 ]; then
  echo "ensure-chromium: Chromium is missing ($bin) and we are not root: install Debian's chromium package" >&2
  exit 1
fi
echo "ensure-chromium: installing chromium from Debian's packages" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# fonts-dejavu-core: a known font, so screenshots read the same on every machine.
apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
"$bin" --version >/dev/null 2>&1 || { echo "ensure-chromium: chromium installed but $bin does not run" >&2; exit 1; }
