#!/usr/bin/env bash
# Sets up this machine for Berth (packages, npm, build) and runs berthd in the foreground with its
# built-in defaults (unix:///run/berth/berth.sock, /var/lib/berth). Extra arguments go to berthd.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
exec bin/berthd "$@"
