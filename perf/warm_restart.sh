#!/usr/bin/env bash
# Warm restart of the real server at 1,000,000 entries (docs/persistence.md):
# perf/state_restart writes the state file, then the server starts on it
# (time to /readyz 200), stops with SIGTERM (time of the final save), and
# starts again on what it saved (time to /readyz 200, entries restored).
#
#   perf/warm_restart.sh [BUILD_DIR]      (default: build)
set -euo pipefail
build=${1:-build}
dir=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
"$build/perf/state_restart" "$dir/state.bin"
http=$((20000 + RANDOM % 20000))

start() {
  local t0 t1
  t0=$(date +%s.%N)
  "$build/src/inferencecache-server" --threads 2 --grpc-bind-address 127.0.0.1:0 \
    --http-bind-address "127.0.0.1:$http" --snapshot-bind-address 127.0.0.1:0 \
    --insecure-disable-auth --index-max-entries 2000000 --state-file "$dir/state.bin" \
    --log-level warn 2>>"$dir/server.log" &
  pid=$!
  until [ "$(curl -s -o /dev/null -w '%{http_code}' "127.0.0.1:$http/readyz")" = 200 ]; do
    sleep 0.02
  done
  t1=$(date +%s.%N)
  printf 'ready     %8.3f s  restored %s entries\n' "$(awk "BEGIN{print $t1 - $t0}")" \
    "$(curl -s "127.0.0.1:$http/metrics" | awk '/^inferencecache_state_restored_entries /{print $2}')"
}

stop() {
  local t0 t1
  t0=$(date +%s.%N)
  kill -TERM "$pid"
  wait "$pid"
  t1=$(date +%s.%N)
  printf 'stop      %8.3f s  (drain + final save, %s bytes)\n' "$(awk "BEGIN{print $t1 - $t0}")" \
    "$(stat -c %s "$dir/state.bin")"
}

start
stop
start
stop
