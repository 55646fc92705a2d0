#!/usr/bin/env bash
# Makes /usr/bin/strace available: the crash-state enumeration records every durable write
# sequence with it (packages/test-harness/src/crash/strace.ts). When it is missing and we run
# as root, installs Debian's strace; otherwise fails loudly.
set -euo pipefail
if [ -x /usr/bin/strace ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "ensure-strace: /usr/bin/strace is missing and we are not root: install Debian's strace" >&2
  exit 1
fi
echo "ensure-strace: installing strace from Debian's packages" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends strace >/dev/null
test -x /usr/bin/strace || { echo "ensure-strace: strace installed but /usr/bin/strace is missing" >&2; exit 1; }
