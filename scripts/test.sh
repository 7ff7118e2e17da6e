#!/usr/bin/env bash
# Sets up this machine (packages, npm, build) and runs every test against real daemons, registries
# and containers. Each test file starts its own berthd on a temporary root and socket.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh

mapfile -t files < <(find dist/src dist/test -name '*.test.js' | sort)
if [ "$#" -gt 0 ]; then
  mapfile -t files < <(printf '%s\n' "${files[@]}" | grep -E "$1")
fi
echo "test: ${#files[@]} files"
exec node --test --test-concurrency=2 --test-timeout=600000 "${files[@]}"
