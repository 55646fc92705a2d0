#!/usr/bin/env bash
# Makes PostgreSQL 15's server binaries available for the test suites.
# When they are missing and we run as root, installs Debian's postgresql-15
# (the server is never started as a service: tests run their own cluster as an
# unprivileged user in a temp directory). Otherwise fails loudly.
set -euo pipefail
bindir=/usr/lib/postgresql/15/bin
if [ -x "$bindir/initdb" ] && [ -x "$bindir/pg_ctl" ] && [ -x "$bindir/postgres" ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "ensure-postgres: PostgreSQL 15 server binaries are missing ($bindir) and we are not root: install Debian's postgresql-15" >&2
  exit 1
fi
echo "ensure-postgres: installing postgresql-15 from Debian's packages" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# policy-rc.d keeps the package from starting a system cluster we do not use.
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
apt-get install -y -qq --no-install-recommends postgresql-15 postgresql-client-15 >/dev/null
test -x "$bindir/initdb" || { echo "ensure-postgres: postgresql-15 installed but $bindir/initdb is missing" >&2; exit 1; }
