#!/usr/bin/env bash
# Builds Docker Compose v2 (the `docker compose` CLI plugin) from its Go module, once per version,
# into a cache outside the repository, and prints the binary's path. The compose tests install it as
# a CLI plugin in their own DOCKER_CONFIG. Building takes minutes on two cores; later runs (and fresh
# clones on the same machine) reuse the cached binary.
#
#   scripts/install-compose.sh            # prints /var/cache/berth/compose/v2.40.3/docker-compose
#
# BERTH_CACHE overrides the cache directory; BERTH_COMPOSE_BIN names a ready binary to use instead.
# `go install ...@v2.40.3` refuses this module (its go.mod has exclude directives), hence the copy and
# `go build` inside it.
set -euo pipefail

VERSION=v2.40.3
MODULE=github.com/docker/compose/v2

if [ -n "${BERTH_COMPOSE_BIN:-}" ]; then
  [ -x "$BERTH_COMPOSE_BIN" ] || { echo "install-compose: $BERTH_COMPOSE_BIN is not executable" >&2; exit 1; }
  echo "$BERTH_COMPOSE_BIN"
  exit 0
fi

dest="${BERTH_CACHE:-/var/cache/berth}/compose/$VERSION"
bin="$dest/docker-compose"
if [ -x "$bin" ] && "$bin" version --short 2>/dev/null | grep -qx "${VERSION#v}"; then
  echo "$bin"
  exit 0
fi

command -v go >/dev/null || { echo "install-compose: go is not installed" >&2; exit 1; }
mkdir -p "$dest"
# One build at a time: two test runs starting together wait for the first one's binary.
exec 9>"$dest/.lock"
flock 9
if [ -x "$bin" ] && "$bin" version --short 2>/dev/null | grep -qx "${VERSION#v}"; then
  echo "$bin"
  exit 0
fi

echo "install-compose: building docker compose $VERSION (minutes; cached in $dest)" >&2
src=$(go mod download -json "$MODULE@$VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
[ -n "$src" ] && [ -d "$src" ] || { echo "install-compose: go mod download $MODULE@$VERSION gave no source directory" >&2; exit 1; }
work=$(mktemp -d "$dest/build.XXXXXX")
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
# The module cache is read-only; the build needs a writable copy of the tree.
cp -r "$src/." "$work/"
chmod -R u+w "$work"
(cd "$work" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath \
  -ldflags "-w -X $MODULE/internal.Version=$VERSION" -o "$work/docker-compose" ./cmd) >&2
mv "$work/docker-compose" "$bin"
echo "$bin"
