#!/usr/bin/env bash
# Starts ic-baseline-server on an ephemeral loopback port, preloads a small
# index with ic-perf-preload and checks the exact hot-path answer
# (PREFIX_MATCH on replica-0 and replica-1, full chain) and RenderTemplate
# TEMPLATE_NOT_FOUND; then the same against inferencecache-server, so that
# perf/compare.sh's verification holds for both servers it compares.
# Usage: smoke_test.sh <ic-baseline-server> <ic-perf-preload> <inferencecache-server>
set -euo pipefail
server=$1
preload=$2
ic_server=$3
out=$(mktemp)
"$server" --listen 127.0.0.1:0 --threads 2 >"$out" 2>&1 &
pid=$!
trap 'kill -TERM $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -f "$out"' EXIT
port=""
for _ in $(seq 100); do
  port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$out")
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { echo "server did not start:"; cat "$out"; exit 1; }
"$preload" --target "127.0.0.1:$port" --prefixes 64 --verify

# The same preload and answers against InferenceCache itself.
kill -TERM $pid && wait $pid || true
"$ic_server" --grpc-bind-address 127.0.0.1:0 --http-bind-address 127.0.0.1:0 \
  --snapshot-bind-address 127.0.0.1:0 --threads 1 --pin-threads false >"$out" 2>&1 &
pid=$!
port=""
for _ in $(seq 100); do
  port=$(sed -n 's/.*"grpc_port":\([0-9]*\).*/\1/p' "$out")
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { echo "inferencecache-server did not start:"; cat "$out"; exit 1; }
"$preload" --target "127.0.0.1:$port" --prefixes 64 --verify
