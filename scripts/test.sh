#!/usr/bin/env bash
# Sets up this machine (packages, npm, build) and runs every test against real daemons, registries
# and containers: the engine's own suites (node's runner), then the client libraries and the
# official clients (scripts/test-clients.sh). Each test file starts its own berthd on a temporary
# root and socket. `scripts/test.sh PATTERN` runs only the engine test files matching PATTERN.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh || exit 1
# Compose v2 for the compose tests only (not the daemon's set-up): built from its Go module once per
# machine and cached outside the repo. A failed build fails only the tests that need it.
if command -v go >/dev/null 2>&1; then
  bash scripts/install-compose.sh >/dev/null || echo "test: compose v2 did not build; its tests will fail" >&2
fi

mapfile -t files < <(find dist/src dist/test -name '*.test.js' | sort)
if [ "$#" -gt 0 ]; then
  mapfile -t files < <(printf '%s\n' "${files[@]}" | grep -E "$1")
  # With no file, node --test would look for tests everywhere and run them all.
  if [ "${#files[@]}" -eq 0 ]; then
    echo "test: no test file matches '$1'" >&2
    exit 1
  fi
fi
# The full run also fails when a route of berthd's answered no test (test/harness/README.md).
coverage=""
if [ "$#" -eq 0 ]; then
  coverage=$(mktemp -d /tmp/berth-route-coverage-XXXXXX)
  export BERTH_ROUTE_COVERAGE_DIR="$coverage"
fi
echo "test: ${#files[@]} files"
node --test --test-concurrency=2 --test-timeout=600000 "${files[@]}"
engine=$?

routes=0
if [ -n "$coverage" ]; then
  unset BERTH_ROUTE_COVERAGE_DIR
  node dist/test/harness/route-coverage.js "$coverage"
  routes=$?
  rm -rf "$coverage"
fi

clients=0
if [ "$#" -eq 0 ]; then
  bash scripts/test-clients.sh
  clients=$?
fi

echo "engine tests: exit $engine; route coverage: exit $routes; client tests: exit $clients"
[ "$engine" -eq 0 ] && [ "$routes" -eq 0 ] && [ "$clients" -eq 0 ]
