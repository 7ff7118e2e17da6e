#!/usr/bin/env bash
# Builds Berth and the suite, then runs every benchmark (options: bash bench/run.sh --help).
# Needs root, like berthd. The table goes to stdout, progress to stderr, raw figures to bench/results/.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d node_modules ] || npm ci --no-audit --no-fund
[ -d bench/node_modules ] || npm ci --prefix bench --no-audit --no-fund
# The root build may report errors from files in progress elsewhere; tsc still writes dist/.
npm run --silent build >&2 || echo "bench: root build reported errors (dist/ written anyway)" >&2
node_modules/.bin/tsc -p bench/tsconfig.json >&2 || echo "bench: suite build reported errors" >&2
exec node bench/dist/bench/main.js "$@"
