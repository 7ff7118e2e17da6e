#!/usr/bin/env bash
# Tests Berth's client libraries (clients/typescript, clients/go, clients/python) and berthd's
# compatibility with the official clients (docker-py, github.com/moby/moby/client), against a real
# berthd and seeded registries started by the test harness.
#
#   scripts/test-clients.sh [GROUP...]
#
# Groups (default: all): unit system images containers commit tls compat-images compat-containers
# compat-commit.
# Each group runs in every language it has; a summary of what passed is printed at the end, and
# the exit status is non-zero if anything failed. Safe to run again: installs are skipped when
# done, and the harness is always torn down.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
ALL_GROUPS=(unit system images containers commit tls compat-images compat-containers compat-commit)
GROUPS_TO_RUN=("$@")
[ ${#GROUPS_TO_RUN[@]} -eq 0 ] && GROUPS_TO_RUN=("${ALL_GROUPS[@]}")
for g in "${GROUPS_TO_RUN[@]}"; do
  case " ${ALL_GROUPS[*]} " in *" $g "*) ;; *) echo "unknown group: $g (groups: ${ALL_GROUPS[*]})" >&2; exit 2 ;; esac
done

log() { printf '\n== %s\n' "$*"; }
die() { echo "test-clients: $*" >&2; exit 1; }

# ---- dependencies --------------------------------------------------------------------------------
log "installing and building"
command -v go >/dev/null || die "go is not installed"
command -v python3 >/dev/null || die "python3 is not installed"
command -v openssl >/dev/null || die "openssl is not installed (TLS tests make certificates with it)"

[ -d node_modules ] || npm ci --no-audit --no-fund || die "npm ci failed"
# The harness lives in the main tree; a compile error elsewhere still emits, so judge by the file.
npm run build >/tmp/berth-client-build.log 2>&1 || echo "warning: npm run build reported errors (see /tmp/berth-client-build.log)"
[ -f dist/test/harness/cli.js ] || die "dist/test/harness/cli.js is missing after the build"

(cd clients/typescript && { [ -d node_modules ] || npm ci --no-audit --no-fund; } && node scripts/build.mjs) \
  || die "building clients/typescript failed"

VENV=clients/python/.venv
if [ ! -x "$VENV/bin/python" ]; then python3 -m venv "$VENV" || die "cannot create $VENV"; fi
"$VENV/bin/python" -c 'import pytest, docker' 2>/dev/null \
  || "$VENV/bin/pip" install --quiet pytest docker || die "pip install pytest docker failed"
# Installing our own package checks its pyproject; the tests import the source tree.
"$VENV/bin/pip" install --quiet --no-deps ./clients/python || die "pip install clients/python failed"
rm -rf clients/python/build clients/python/*.egg-info

(cd clients/go && go mod download && go vet ./...) || die "clients/go does not build"
(cd clients/compat/go && go mod download && go vet ./...) || die "clients/compat/go does not build"

# ---- harness --------------------------------------------------------------------------------------
WORK=$(mktemp -d /tmp/berth-client-tests.XXXXXX)
ENV_FILE=$WORK/harness.json
cleanup() {
  node dist/test/harness/cli.js down --env "$ENV_FILE" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

needs_daemon=0
for g in "${GROUPS_TO_RUN[@]}"; do [ "$g" != unit ] && needs_daemon=1; done
if [ $needs_daemon = 1 ]; then
  log "starting berthd and registries"
  node dist/test/harness/cli.js up --out "$ENV_FILE" || die "the harness did not come up"
fi
export BERTH_CLIENT_TEST_ENV=$ENV_FILE

# ---- groups ---------------------------------------------------------------------------------------
declare -a RESULTS=()
FAILED=0

# run NAME DIR COMMAND...: runs one suite, records PASS/FAIL, keeps going.
run() {
  local name=$1 dir=$2
  shift 2
  log "$name"
  if (cd "$dir" && timeout 900 "$@"); then
    RESULTS+=("PASS  $name")
  else
    RESULTS+=("FAIL  $name")
    FAILED=1
  fi
}

ts() { run "$1 (typescript)" clients/typescript node --test --test-concurrency=1 --test-timeout=300000 "${@:2}"; }
gotest() { run "$1 (go)" clients/go go test -count=1 -timeout 600s "${@:2}"; }
py() { run "$1 (python)" clients/python "$ROOT/$VENV/bin/python" -m pytest -q -p no:cacheprovider "${@:2}"; }

for g in "${GROUPS_TO_RUN[@]}"; do
  case $g in
    unit)
      ts unit dist/test/unit.test.js
      run "unit (go)" clients/go bash -c "go test -count=1 ./stdcopy ./jsonmessage ./registry && go test -count=1 -run '^TestUnit' ."
      py unit tests/test_unit.py
      ;;
    system | images | containers | commit | tls)
      upper=$(tr '[:lower:]' '[:upper:]' <<<"${g:0:1}")${g:1}
      [ "$g" = tls ] && upper=TLS
      ts "$g" "dist/test/$g.test.js"
      gotest "$g" . -run "^Test$upper"
      py "$g" "tests/test_$g.py"
      ;;
    compat-images)
      run "compat-images (official Go client)" clients/compat/go go test -count=1 -timeout 600s -run '^TestCompat(Version|Pinned|Image|Pull)' .
      run "compat-images (docker-py)" clients/compat/python "$ROOT/$VENV/bin/python" -m pytest -q -p no:cacheprovider test_docker_py_images.py
      ;;
    compat-containers)
      run "compat-containers (official Go client)" clients/compat/go go test -count=1 -timeout 600s -run '^TestCompat(Run|Follow)' .
      run "compat-containers (docker-py)" clients/compat/python "$ROOT/$VENV/bin/python" -m pytest -q -p no:cacheprovider test_docker_py_containers.py
      ;;
    compat-commit)
      run "compat-commit (official Go client)" clients/compat/go go test -count=1 -timeout 600s -run '^TestCompatCommit' .
      run "compat-commit (docker-py)" clients/compat/python "$ROOT/$VENV/bin/python" -m pytest -q -p no:cacheprovider test_docker_py_commit.py
      ;;
  esac
done

log "summary"
printf '%s\n' "${RESULTS[@]}"
passed=$(printf '%s\n' "${RESULTS[@]}" | grep -c '^PASS' || true)
failed=$(printf '%s\n' "${RESULTS[@]}" | grep -c '^FAIL' || true)
echo "clients: $passed passed, $failed failed"
exit $FAILED
