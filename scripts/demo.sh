#!/usr/bin/env bash
echo "oduflow demo: not built yet (issue 5)." >&2
exit 1
