#!/usr/bin/env bash
# Installs everything Berth needs on a Debian host and builds it. Safe to run again: each step is
# skipped when its result is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  crun runc conmon catatonit          # OCI runtimes, the per-container monitor, the --init process
  netavark aardvark-dns iptables nftables iproute2   # networking
  zstd                                # zstd-compressed layers
  bzip2 xz-utils                      # bzip2/xz build contexts, ADD archives and docker cp bodies
  docker-compose                      # compose v1 (1.29): the compose suites and build: sections
  attr                                # setfattr/getfattr for overlay xattrs
  docker-registry apache2-utils openssl busybox-static   # the tests' registries and images
  tmux procps python3-venv             # terminal tests (run -it), ps for top, docker-py's venv
  e2fsprogs                           # lsattr: the tests read ext4 flags independently
  skopeo                              # image-transfer tests: an OCI archive made by another tool
  etcd-server etcd-client             # swarm across hosts: the cluster's state (issue 22)
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: apt packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Debian ships docker-registry as a service; Berth's tests start their own registries.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet docker-registry 2>/dev/null; then
  systemctl stop docker-registry || true
fi

# Node dependencies: better-sqlite3 builds against the local Node headers (no prebuilt download).
stamp=node_modules/.berth-lock-hash
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  # `npm install`, not `npm ci`: node-unix-socket lists prebuilt packages for other platforms that the
  # registry does not have, which `npm ci` refuses; `npm install` skips them and honours the lock.
  echo "install-deps: npm install"
  npm_config_nodedir="${npm_config_nodedir:-/usr}" npm install --no-save --no-audit --no-fund --loglevel=error
  echo "$want" > "$stamp"
fi

# docker-py, the official Python client, for the compatibility tests (test/harness/python.ts finds it).
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import docker' 2>/dev/null; then
  echo "install-deps: python venv with docker-py"
  python3 -m venv .venv
  .venv/bin/pip install --quiet --disable-pip-version-check docker
fi

npm run --silent build
