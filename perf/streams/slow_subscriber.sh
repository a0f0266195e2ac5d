#!/usr/bin/env bash
# perf/streams/slow_subscriber.sh — does StreamCacheEvents cost LookupRoute
# anything? (docs/streams.md "Slow subscribers")
#
#   perf/streams/slow_subscriber.sh [--build-dir DIR] [--duration S] [--subscribers N]
#
# Starts inferencecache-server (--threads 2) on free loopback ports and runs
# three phases of the same load, each for S seconds (default 5):
#   none   closed-loop LookupRoute (inferencecache-bench, 2 connections × 16
#          streams, tenant "lookups") while a second bench ingests
#          ReportCacheState (1 × 8 streams, tenant "ingest", 8 blocks each);
#   stuck  the same plus N (default 8) grpc++ subscribers without filter whose
#          process is stopped (SIGSTOP) once subscribed, so nothing is read
#          from their sockets: the server must end them at their bound
#          (RESOURCE_EXHAUSTED) and hold no more than that meanwhile;
#   read   the same plus N subscribers reading every event.
# Prints per phase: lookup calls/s, p50/p99 µs, ingest calls/s, the server's
# CPU seconds and CPU µs per completed call (lookups + ingests; steadier than
# rates on a shared machine), its RSS growth over the phase and how the
# subscriptions ended, then the load average. Needs a build with tools and grpc++ (ninja -C DIR). PHASES="none
# stuck none stuck" picks and repeats phases (alternate them on a busy machine).
set -euo pipefail
cd "$(dirname "$0")/../.."

build_dir=build
duration=5
subscribers=8
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir="$2"; shift ;;
    --duration) duration="$2"; shift ;;
    --subscribers) subscribers="$2"; shift ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done

server_bin="$build_dir/src/inferencecache-server"
bench="$build_dir/tools/bench/inferencecache-bench"
subs_bin="$build_dir/perf/streams/ic-perf-subscribers"
for b in "$server_bin" "$bench" "$subs_bin"; do
  [ -x "$b" ] || { echo "missing $b (build it first: ninja -C $build_dir)" >&2; exit 2; }
done

work=$(mktemp -d)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
grpc_port=$(free_port); http_port=$(free_port); control_port=$(free_port)
"$server_bin" --threads 2 --insecure-disable-auth --log-level warn \
  --grpc-bind-address "127.0.0.1:$grpc_port" --http-bind-address "127.0.0.1:$http_port" \
  --snapshot-bind-address "127.0.0.1:$control_port" >"$work/server.log" 2>&1 &
server_pid=$!
cleanup() { kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
for _ in $(seq 100); do
  curl -fs "http://127.0.0.1:$http_port/readyz" >/dev/null 2>&1 && break
  sleep 0.1
done
target="127.0.0.1:$grpc_port"

# utime + stime of the server, in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$server_pid/stat"; }
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$server_pid/status"; }
field() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

printf '%-6s %10s %7s %7s %10s %8s %9s %8s  %s\n' phase lookup/s p50_us p99_us ingest/s cpu_s cpu_us/call rss_MiB subscriptions
for phase in ${PHASES:-none stuck read}; do
  subs_out="$work/subs-$phase.txt"
  : >"$subs_out"
  if [ "$phase" != none ]; then
    "$subs_bin" --server "$target" --mode "$phase" --subscribers "$subscribers" \
      --duration "$((duration + 5))" >"$subs_out" &
    subs_pid=$!
    until grep -q subscribed "$subs_out"; do sleep 0.05; done
    # Stuck for real: the process (grpc++'s transport threads included)
    # reads nothing from its sockets until the load ends.
    [ "$phase" = stuck ] && kill -STOP "$subs_pid"
  fi
  before=$(rss_kb)
  ticks_before=$(cpu_ticks)
  "$bench" --server "$target" --rpc report -r 0 -c 1 -m 8 -D "$duration" --tenant ingest \
    --distinct 100000 --json >"$work/ingest.json" &
  ingest_pid=$!
  "$bench" --server "$target" --rpc lookup -r 0 -c 2 -m 16 -D "$duration" --tenant lookups \
    --json >"$work/lookup.json"
  wait "$ingest_pid"
  after=$(rss_kb)
  cpu_s=$(echo "($(cpu_ticks) - $ticks_before) / $(getconf CLK_TCK)" | bc -l)
  if [ "$phase" != none ]; then
    kill -CONT "$subs_pid" 2>/dev/null || true
    wait "$subs_pid" || true
  fi
  lookups=$(field "$work/lookup.json" "d['ok']")
  ingests=$(field "$work/ingest.json" "d['ok']")
  printf '%-6s %10.0f %7s %7s %10.0f %8.2f %9.2f %8.1f  %s\n' "$phase" \
    "$(field "$work/lookup.json" "d['ok_qps']")" \
    "$(field "$work/lookup.json" "d['latency']['p50_us']")" \
    "$(field "$work/lookup.json" "d['latency']['p99_us']")" \
    "$(field "$work/ingest.json" "d['ok_qps']")" "$cpu_s" \
    "$(echo "$cpu_s * 1000000 / ($lookups + $ingests)" | bc -l)" \
    "$(echo "($after - $before) / 1024" | bc -l)" \
    "$(tail -n 1 "$subs_out")"
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
