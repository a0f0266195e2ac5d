#!/usr/bin/env bash
# perf/compare.sh — inferencecache-server vs the grpc++ baseline, side by side.
#
#   perf/compare.sh [--quick] [--rounds N] [--duration S] [--build-dir DIR] [--no-build]
#                   [--out FILE] [--profile DIR] [--from-head DIR]
#                   [--priority normal|nice|rt]
#
# Builds both servers, then per round (baseline first, then InferenceCache —
# B A B A, so machine drift hits both) starts one server pinned to its CPUs,
# preloads identical index state over ReportCacheState (ic-perf-preload),
# checks both answer the hot request identically, and drives it from other
# CPUs with h2load (and inferencecache-bench when it is built):
#   - saturation: fixed concurrency, max QPS and p99;
#   - open-ish loop fixed rates at 25/50/75 % of the BASELINE's saturation QPS
#     (measured in round 1, identical for both servers): p50 / p99 / p99.9;
#   - the same against RenderTemplate (a template no server holds: one catalog
#     miss, TEMPLATE_NOT_FOUND on both servers): the transport
#     ceiling, i.e. how much of LookupRoute's cost is transport vs index;
#   - the wake path: server context switches per call (voluntary + involuntary,
#     summed over the server's threads from /proc/PID/task/*/status) in every
#     run, and, in a separate counting pass of inferencecache-bench at each
#     load (perf stat on the syscall tracepoints, so the tracing cost stays out
#     of the latency runs), io_uring_enter and epoll_wait calls per call.
# Prints ONE table with the ratios InferenceCache / baseline, preceded by the
# machine description. Full run ≤ ~10 min, --quick ≈ 2 min.
# --from-head DIR: measure the committed HEAD, not the shared work tree (which
# holds other people's unfinished edits): git archive HEAD into DIR, build
# there with -Dtests=disabled.
# --priority: scheduling of servers and load generators. normal (default);
# nice = nice -20; rt = SCHED_FIFO 10 (chrt). On a machine where others
# compile, normal measures the scheduler as much as the servers (a 1-thread
# reactor waits a CFS slice behind compilers on every wake-up); rt
# approximates dedicated cores. Use rt briefly: it starves other work.
# --profile DIR: instead of the table, samples each server (perf record,
# cpu-clock) during a LookupRoute saturation run and writes the top symbols to
# DIR/profile-<server>-<rpc>.txt, and keeps the samples as DIR/<server>-<rpc>.perf
# (PROFILE_RPC=RenderTemplate profiles the transport ceiling instead;
# PROFILE_CALLGRAPH=dwarf unwinds through libraries built without frame pointers).
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=build-perf
quick=0
rounds=2
duration=5
do_build=1
out=""
profile_dir=""
head_dir=""
measured=""
priority=normal
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --rounds) rounds="$2"; shift ;;
    --duration) duration="$2"; shift ;;
    --build-dir) build_dir="$2"; shift ;;
    --no-build) do_build=0 ;;
    --out) out="$2"; shift ;;
    --profile) profile_dir="$2"; shift ;;
    --from-head) head_dir="$2"; shift ;;
    --priority) priority="$2"; shift ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "compare.sh: unknown argument $1" >&2; exit 64 ;;
  esac
  shift
done
if [ "$quick" = 1 ]; then
  rounds=1
  duration=2
fi
warmup=1

# Free loopback ports picked now (the machine is shared: fixed ports collide
# with other people's servers).
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
ic_port=${IC_PORT:-$(free_port)}
ic_http_port=${IC_HTTP_PORT:-$(free_port)}
ic_snapshot_port=${IC_SNAPSHOT_PORT:-$(free_port)}
base_port=${BASE_PORT:-$(free_port)}
service=inferencecache.v1alpha1.InferenceCache

work=$(mktemp -d /tmp/ic-compare.XXXXXX)
server_pid=""
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

log() { printf '%s\n' "$*" >&2; }

# --- build -------------------------------------------------------------------
if [ -n "$head_dir" ]; then
  # One export per commit (a new commit is a full build, ~5 min at -j2).
  head_sha=$(git rev-parse --short HEAD)
  head_src="$head_dir/src-$head_sha"
  if [ ! -d "$head_src" ]; then
    mkdir -p "$head_src"
    git archive HEAD | tar -x -C "$head_src"
  fi
  log "measuring HEAD $head_sha exported to $head_src"
  measured="commit $head_sha (clean export of HEAD, release build)"
  build_dir="$head_src/build-perf"
  [ -d "$build_dir" ] || meson setup "$build_dir" "$head_src" -Dtests=disabled >/dev/null
  do_build=1
fi
if [ "$do_build" = 1 ]; then
  [ -d "$build_dir" ] || meson setup "$build_dir" >/dev/null
  targets=(perf/baseline/ic-baseline-server perf/baseline/ic-perf-preload src/inferencecache-server)
  # grep reads all of ninja's output (no -q): under pipefail an early exit
  # would SIGPIPE ninja and make the test false, dropping the bench runs.
  if ninja -C "$build_dir" -t targets all 2>/dev/null | grep -c '^tools/bench/inferencecache-bench:' >/dev/null; then
    targets+=(tools/bench/inferencecache-bench)
  fi
  ninja -C "$build_dir" -j2 "${targets[@]}" >&2
fi
# A build of an earlier --from-head export is labelled by its commit.
if [ -z "$measured" ] && [[ "$build_dir" =~ /src-([0-9a-f]+)/build-perf/?$ ]]; then
  measured="commit ${BASH_REMATCH[1]} (clean export, release build)"
fi
[ -n "$measured" ] || measured="build dir $build_dir of the work tree at $(git rev-parse --short HEAD) (may include uncommitted edits)"
ic_server="$build_dir/src/inferencecache-server"
base_server="$build_dir/perf/baseline/ic-baseline-server"
preload="$build_dir/perf/baseline/ic-perf-preload"
bench="$build_dir/tools/bench/inferencecache-bench"
for exe in "$ic_server" "$base_server" "$preload"; do
  [ -x "$exe" ] || { log "compare.sh: $exe is not built"; exit 1; }
done
have_bench=0
[ -x "$bench" ] && have_bench=1
command -v h2load >/dev/null || { log "compare.sh: h2load missing (apt-get install nghttp2-client)"; exit 1; }

# --- scheduling priority --------------------------------------------------------
case "$priority" in
  normal) prio=() ;;
  nice) prio=(nice -n -20) ;;
  rt) prio=(chrt -f 10) ;;
  *) log "compare.sh: --priority wants normal, nice or rt"; exit 64 ;;
esac

# --- CPU placement -------------------------------------------------------------
# Server on the lower half of the CPUs, load generators on the upper half, so
# they never steal each other's cycles. One CPU: no pinning (said in output).
ncpu=$(nproc)
if [ "$ncpu" -ge 2 ]; then
  half=$((ncpu / 2))
  server_cpus="0-$((half - 1))"
  [ "$half" = 1 ] && server_cpus=0
  load_cpus="$half-$((ncpu - 1))"
  [ $((ncpu - half)) = 1 ] && load_cpus=$half
  server_threads=$half
  load_threads=$((ncpu - half))
  pin_server=("${prio[@]}" taskset -c "$server_cpus")
  pin_load=("${prio[@]}" taskset -c "$load_cpus")
  placement="server on CPU $server_cpus (--threads $server_threads), load generator on CPU $load_cpus"
else
  server_threads=1
  load_threads=1
  pin_server=("${prio[@]}")
  pin_load=("${prio[@]}")
  placement="1 CPU: server and load generator share it (no pinning)"
fi

# The InferenceCache command line; override with IC_SERVER_ARGS if flags differ.
ic_args_default="--grpc-bind-address 127.0.0.1:$ic_port --http-bind-address 127.0.0.1:$ic_http_port
  --snapshot-bind-address 127.0.0.1:$ic_snapshot_port --threads $server_threads"
read -r -d '' -a ic_args <<<"${IC_SERVER_ARGS:-$ic_args_default}" || true
base_args=(--listen "127.0.0.1:$base_port" --threads "$server_threads")

# --- servers -----------------------------------------------------------------
# start_server NAME: starts it pinned, preloads the index, verifies the answer.
start_server() {
  local name=$1 port
  if [ "$name" = ic ]; then
    port=$ic_port
    "${pin_server[@]}" "$ic_server" "${ic_args[@]}" >"$work/$name.out" 2>&1 &
  else
    port=$base_port
    "${pin_server[@]}" "$base_server" "${base_args[@]}" >"$work/$name.out" 2>&1 &
  fi
  server_pid=$!
  target="127.0.0.1:$port"
  if ! "${pin_load[@]}" "$preload" --target "$target" --wait-ms 10000 --verify \
      >"$work/$name.preload" 2>&1; then
    log "compare.sh: preload/verify against $name failed:"
    cat "$work/$name.preload" "$work/$name.out" >&2
    exit 1
  fi
  if ! kill -0 "$server_pid" 2>/dev/null; then
    log "compare.sh: $name exited at startup (another process answered on $target):"
    cat "$work/$name.out" >&2
    exit 1
  fi
  sed 's/^/  /' "$work/$name.preload" >&2
}

stop_server() {
  kill -TERM "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}

# CPU time (user + system) of the server so far, in µs.
server_cpu_us() {
  local ticks
  ticks=$(awk '{print $14 + $15}' "/proc/$server_pid/stat")
  echo $((ticks * 1000000 / $(getconf CLK_TCK)))
}

# Context switches (voluntary + involuntary) of all the server's threads so far.
server_csw() {
  cat /proc/"$server_pid"/task/*/status 2>/dev/null |
    awk '/^(voluntary|nonvoluntary)_ctxt_switches:/ {n += $2} END {print n + 0}'
}

# Syscall tracepoints perf stat can count (root or perf_event_paranoid <= 1
# and a mounted tracefs); without them the counting pass is skipped.
have_count=0
if command -v perf >/dev/null &&
  perf stat -e syscalls:sys_enter_io_uring_enter -x, -- true >/dev/null 2>&1; then
  have_count=1
fi

# --- load ----------------------------------------------------------------------
results="$work/results.tsv"
printf 'server\tround\ttool\trpc\tmode\tqps\tmean_us\tp50_us\tp99_us\tp999_us\tcpu_us_per_req\tserver_cpu_pct\tok\tfailed\tload1\tcsw_per_req\tenter_per_req\tepoll_per_req\n' >"$results"

# Mean request time (µs) from h2load's summary line
#   "time for request:  47us  14.00ms  382us  1.33ms  94.80%" (min max mean sd).
# Only the mean: h2load 1.52's --log-file per-request durations are not
# usable (with -c1 -m1 it logs overlapping 7 ms requests while its own summary
# says mean 382 µs), so percentiles come from inferencecache-bench.
h2load_mean_us() {
  awk '/^time for request:/ {
    v = $6
    if (v ~ /ms$/) { sub(/ms$/, "", v); v *= 1000 }
    else if (v ~ /us$/) { sub(/us$/, "", v) }
    else if (v ~ /s$/) { sub(/s$/, "", v); v *= 1000000 }
    printf "%.0f\n", v
  }' "$1"
}

# h2load_run SERVER ROUND RPC MODE: MODE is "sat" or a total target rate (req/s).
h2load_run() {
  local name=$1 round=$2 rpc=$3 mode=$4 body port clients streams rate_args=()
  [ "$rpc" = LookupRoute ] && body="$work/lookup.bin" || body="$work/render.bin"
  [ "$name" = ic ] && port=$ic_port || port=$base_port
  clients=${SAT_CLIENTS:-4}
  streams=${SAT_STREAMS:-16}
  if [ "$mode" != sat ]; then
    streams=64  # rate-limited: streams only bound the backlog, they don't pace it
    rate_args=(--rps "$(awk -v r="$mode" -v c="$clients" 'BEGIN {printf "%.2f", r / c}')")
  fi
  local url="http://127.0.0.1:$port/$service/$rpc"
  local common=(-t "$load_threads" -c "$clients" -m "$streams" -d "$body"
    -H 'content-type: application/grpc' -H 'te: trailers')
  # Warm-up before each saturation run (not recorded): connections, caches,
  # allocator pools. Fixed-rate runs follow on an already warm server.
  if [ "$mode" = sat ]; then
    "${pin_load[@]}" h2load "${common[@]}" -D "$warmup" "$url" >/dev/null 2>&1 || true
  fi
  local cpu0 cpu1 csw0 csw1 out="$work/h2load.out" load1 cpu_pct
  load1=$(cut -d' ' -f1 /proc/loadavg)
  cpu0=$(server_cpu_us)
  csw0=$(server_csw)
  "${pin_load[@]}" h2load "${common[@]}" "${rate_args[@]}" -D "$duration" "$url" >"$out" 2>&1 || true
  cpu1=$(server_cpu_us)
  csw1=$(server_csw)
  local qps ok failed
  qps=$(awk '/^finished in/ {gsub(",", "", $4); print $4}' "$out")
  ok=$(awk '/^requests:/ {print $8}' "$out")
  failed=$(awk '/^requests:/ {print $10 + $12 + $14}' "$out")
  local mean per_req
  mean=$(h2load_mean_us "$out")
  per_req=$(awk -v c=$((cpu1 - cpu0)) -v n="${ok:-0}" 'BEGIN {if (n > 0) printf "%.2f", c / n; else print "nan"}')
  # Server CPU over the run in % of one CPU: < ~90 % at saturation means the
  # load generator, not the server, was the limit.
  cpu_pct=$(awk -v c=$((cpu1 - cpu0)) -v d="$duration" 'BEGIN {printf "%.0f", c / (d * 10000)}')
  printf '%s\t%s\th2load\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\tnan\tnan\n' "$name" "$round" "$rpc" "$mode" \
    "${qps:-nan}" "${mean:-nan}" nan nan nan "$per_req" "$cpu_pct" "${ok:-0}" "${failed:-0}" "$load1" \
    "$(per_call $((csw1 - csw0)) "${ok:-0}")" >>"$results"
  log "  h2load $rpc $mode: ${qps:-?} req/s, mean ${mean:-?} µs, ${per_req} CPU-µs/req, server CPU ${cpu_pct} %, failed ${failed:-?}"
}

# bench_args SERVER: inferencecache-bench's common flags (its synthetic
# workload: tenant "bench", 1024 stored prompts of 8 blocks on 8 replicas,
# 90 % of lookups hit), same connection shape as h2load's saturation.
bench_args() {
  local port
  [ "$1" = ic ] && port=$ic_port || port=$base_port
  echo --server "127.0.0.1:$port" -c "${SAT_CLIENTS:-4}" -m "${SAT_STREAMS:-16}" \
    -t "$load_threads"
}

# bench_preload SERVER: stores the bench workload's prompts once per server
# start, outside any measured window.
bench_preload() {
  # shellcheck disable=SC2046
  "${pin_load[@]}" "$bench" $(bench_args "$1") --preload 1 -r 100 -D 0.2 >/dev/null 2>&1 ||
    log "  inferencecache-bench preload failed"
}

# bench_run SERVER ROUND MODE: inferencecache-bench on LookupRoute; MODE
# "sat" = closed loop (every stream busy), else an open-loop rate (req/s)
# with latency from the intended send time (no coordinated omission).
bench_run() {
  local name=$1 round=$2 mode=$3 rate
  [ "$mode" = sat ] && rate=0 || rate=$mode
  local cpu0 cpu1 csw0 csw1 out="$work/bench.json" load1 cpu_pct
  load1=$(cut -d' ' -f1 /proc/loadavg)
  cpu0=$(server_cpu_us)
  csw0=$(server_csw)
  # shellcheck disable=SC2046
  if ! "${pin_load[@]}" "$bench" $(bench_args "$name") --preload 0 -r "$rate" -D "$duration" \
      --json >"$out" 2>"$work/bench.err"; then
    log "  inferencecache-bench failed: $(tail -3 "$work/bench.err")"
    return 0
  fi
  cpu1=$(server_cpu_us)
  csw1=$(server_csw)
  local qps mean p50 p99 p999 ok failed per_req
  read -r qps mean p50 p99 p999 ok failed < <(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
lat = r["latency"]
print("%.2f" % r["ok_qps"], lat["mean_us"], lat["p50_us"], lat["p99_us"], lat["p999_us"], r["ok"],
      r["sent"] - r["ok"] + r.get("not_sent", 0))' "$out")
  per_req=$(awk -v c=$((cpu1 - cpu0)) -v n="${ok:-0}" 'BEGIN {if (n > 0) printf "%.2f", c / n; else print "nan"}')
  # Server CPU over the run in % of one CPU: < ~90 % at saturation means the
  # load generator, not the server, was the limit.
  cpu_pct=$(awk -v c=$((cpu1 - cpu0)) -v d="$duration" 'BEGIN {printf "%.0f", c / (d * 10000)}')
  local csw
  csw=$(per_call $((csw1 - csw0)) "$ok")
  printf '%s\t%s\tbench\tLookupRoute\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\tnan\tnan\n' "$name" "$round" "$mode" \
    "$qps" "$mean" "$p50" "$p99" "$p999" "$per_req" "$cpu_pct" "$ok" "$failed" "$load1" "$csw" >>"$results"
  log "  bench LookupRoute $mode: $qps req/s, p50 $p50 µs, p99 $p99 µs, p99.9 $p999 µs, ${per_req} CPU-µs/req, $csw csw/req, failed $failed"
}

# per_call COUNT CALLS: COUNT / CALLS with 2 decimals, nan without calls.
per_call() {
  awk -v c="$1" -v n="${2:-0}" 'BEGIN {if (n > 0) printf "%.2f", c / n; else print "nan"}'
}

# count_run SERVER ROUND MODE: the counting pass. inferencecache-bench as in
# bench_run while perf stat counts the server's io_uring_enter and epoll_wait
# calls (all threads); recorded as tool "count" (its latencies are not used:
# the tracepoints slow every syscall a little).
count_run() {
  local name=$1 round=$2 mode=$3 rate stat="$work/count.csv" out="$work/count.json"
  [ "$mode" = sat ] && rate=0 || rate=$mode
  perf stat -x, -o "$stat" -p "$server_pid" -e syscalls:sys_enter_io_uring_enter \
    -e syscalls:sys_enter_epoll_wait -e syscalls:sys_enter_epoll_pwait >/dev/null 2>&1 &
  local perf_pid=$!
  sleep 0.2
  # shellcheck disable=SC2046
  "${pin_load[@]}" "$bench" $(bench_args "$name") --preload 0 -r "$rate" -D "$duration" \
    --json >"$out" 2>/dev/null || true
  kill -INT "$perf_pid" 2>/dev/null || true
  wait "$perf_pid" 2>/dev/null || true
  local ok enters epolls
  ok=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["ok"])' "$out" 2>/dev/null || echo 0)
  # The counters also ran for the 0.2 s before the load and the moment after
  # it: idle time, where a parked reactor makes no calls (its timers aside).
  enters=$(awk -F, '$3 ~ /io_uring_enter/ {n += $1} END {print n + 0}' "$stat")
  epolls=$(awk -F, '$3 ~ /epoll_p?wait/ {n += $1} END {print n + 0}' "$stat")
  printf '%s\t%s\tcount\tLookupRoute\t%s\tnan\tnan\tnan\tnan\tnan\tnan\tnan\t%s\t0\tnan\tnan\t%s\t%s\n' \
    "$name" "$round" "$mode" "$ok" "$(per_call "$enters" "$ok")" "$(per_call "$epolls" "$ok")" >>"$results"
  log "  count LookupRoute $mode: $(per_call "$enters" "$ok") io_uring_enter/req, $(per_call "$epolls" "$ok") epoll_wait/req"
}

median_of() {  # median_of SERVER TOOL RPC MODE COLUMN (mawk-safe: no asort)
  awk -F'\t' -v s="$1" -v t="$2" -v r="$3" -v m="$4" -v col="$5" '
    NR == 1 {for (i = 1; i <= NF; i++) idx[$i] = i; next}
    $1 == s && $3 == t && $4 == r && $5 == m && $idx[col] != "nan" {print $idx[col]}' "$results" |
    sort -g | awk '{v[NR] = $1} END {
      if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2
    }'
}

# --- the run -------------------------------------------------------------------
"$preload" --skip-ingest --emit-lookup "$work/lookup.bin" --emit-render "$work/render.bin"

# profile_server NAME: perf record (software cpu-clock: works in VMs without
# PMU access) of the whole server process during one saturation run.
profile_server() {
  local name=$1 port rpc=${PROFILE_RPC:-LookupRoute} body
  [ "$name" = ic ] && port=$ic_port || port=$base_port
  [ "$rpc" = LookupRoute ] && body="$work/lookup.bin" || body="$work/render.bin"
  start_server "$name"
  perf record -e cpu-clock -F 1999 --call-graph "${PROFILE_CALLGRAPH:-fp}" -p "$server_pid" \
    -o "$work/$name.perf" \
    >/dev/null 2>&1 &
  local perf_pid=$!
  sleep 0.5
  "${pin_load[@]}" h2load -t "$load_threads" -c "${SAT_CLIENTS:-4}" -m "${SAT_STREAMS:-16}" \
    -d "$body" -H 'content-type: application/grpc' -H 'te: trailers' \
    -D "$duration" "http://127.0.0.1:$port/$service/$rpc" >"$work/$name.h2load" 2>&1 || true
  kill -INT "$perf_pid" 2>/dev/null || true
  wait "$perf_pid" 2>/dev/null || true
  stop_server
  # The samples stay next to the summary (call graphs: perf report -i ... -g).
  cp "$work/$name.perf" "$profile_dir/$name-$rpc.perf"
  {
    echo "# $name: perf record -e cpu-clock -F 1999 -g during h2load $rpc saturation"
    echo "# $(date -u '+%Y-%m-%d %H:%M UTC'); $placement; load average $(cut -d' ' -f1-3 /proc/loadavg)"
    grep -E '^finished in|^requests:' "$work/$name.h2load" || true
    echo
    echo "## by shared object"
    perf report -i "$work/$name.perf" --stdio --no-children --sort dso -g none 2>/dev/null |
      grep -v '^#' | grep -v '^$' | sed -E 's/[[:space:]]+$//' | head -15 || true
    echo
    echo "## top symbols (self time)"
    perf report -i "$work/$name.perf" --stdio --no-children --sort dso,symbol -g none \
      --percent-limit 0.7 2>/dev/null | grep -v '^#' | grep -v '^$' |
      sed -E 's/[[:space:]]+-[[:space:]]+-[[:space:]]*$//; s/[[:space:]]+$//' | head -45 || true
  } >"$profile_dir/profile-$name-$rpc.txt"
  log "wrote $profile_dir/profile-$name-$rpc.txt"
}
if [ -n "$profile_dir" ]; then
  command -v perf >/dev/null || { log "compare.sh: perf missing (apt-get install linux-perf)"; exit 1; }
  mkdir -p "$profile_dir"
  for name in base ic; do profile_server "$name"; done
  exit 0
fi

started=$(date +%s)
lr_rates=()
rt_rates=()
for round in $(seq 1 "$rounds"); do
  for name in base ic; do
    log "round $round: $name"
    start_server "$name"
    [ "$have_bench" = 1 ] && bench_preload "$name"
    for rpc in LookupRoute RenderTemplate; do
      h2load_run "$name" "$round" "$rpc" sat
    done
    [ "$have_bench" = 1 ] && bench_run "$name" "$round" sat
    if [ ${#lr_rates[@]} -eq 0 ]; then
      # Rates come from the baseline's round-1 saturation and stay fixed.
      base_lr=$(median_of base h2load LookupRoute sat qps)
      base_rt=$(median_of base h2load RenderTemplate sat qps)
      for pct in 25 50 75; do
        lr_rates+=("$(awk -v q="$base_lr" -v p=$pct 'BEGIN {printf "%d", q * p / 100}')")
        rt_rates+=("$(awk -v q="$base_rt" -v p=$pct 'BEGIN {printf "%d", q * p / 100}')")
      done
    fi
    for i in 0 1 2; do
      h2load_run "$name" "$round" LookupRoute "${lr_rates[$i]}"
      [ "$have_bench" = 1 ] && bench_run "$name" "$round" "${lr_rates[$i]}"
      h2load_run "$name" "$round" RenderTemplate "${rt_rates[$i]}"
    done
    if [ "$have_bench" = 1 ] && [ "$have_count" = 1 ]; then
      for mode in sat "${lr_rates[@]}"; do count_run "$name" "$round" "$mode"; done
    fi
    stop_server
  done
done
elapsed=$(($(date +%s) - started))

# --- the table -----------------------------------------------------------------
# wake_targets: the wake-path and saturation figures of the reference targets
# (one wake per call at moderate load, transport near the RenderTemplate
# ceiling), each with its figure and verdict.
wake_targets() {
  [ "$have_bench" = 1 ] || return 0
  local q25=${lr_rates[0]}
  echo
  echo "## Wake path and saturation (LookupRoute, inferencecache-bench unless said)"
  echo
  awk -v csw="$(median_of ic bench LookupRoute "$q25" csw_per_req)" \
    -v enter="$(median_of ic count LookupRoute "$q25" enter_per_req)" \
    -v c25="$(median_of ic bench LookupRoute "$q25" cpu_us_per_req)" \
    -v csat="$(median_of ic bench LookupRoute sat cpu_us_per_req)" \
    -v b25="$(median_of base bench LookupRoute "$q25" cpu_us_per_req)" \
    -v bsat="$(median_of base bench LookupRoute sat cpu_us_per_req)" \
    -v pi="$(median_of ic bench LookupRoute "$q25" p99_us)" \
    -v pb="$(median_of base bench LookupRoute "$q25" p99_us)" \
    -v hi="$(median_of ic h2load LookupRoute sat cpu_us_per_req)" \
    -v hb="$(median_of base h2load LookupRoute sat cpu_us_per_req)" \
    -v ql="$(median_of ic h2load LookupRoute sat qps)" \
    -v qr="$(median_of ic h2load RenderTemplate sat qps)" -v rate="$q25" '
    function verdict(ok) { return ok ? "met" : "MISSED" }
    function num(v) { return v != "nan" && v != "" }
    BEGIN {
      if (num(csw)) printf "- 25%% load (%d/s): %.2f context switches per call (target <= 1.2: %s)\n", rate, csw, verdict(csw <= 1.2)
      if (num(enter)) printf "- 25%% load: %.2f io_uring_enter per call (target <= 1.5: %s)\n", enter, verdict(enter <= 1.5)
      if (num(c25) && num(csat) && c25 > 0 && csat > 0) printf "- 25%% load: server CPU per call %.1f µs = %.2f x its saturation figure %.1f µs (target <= 3: %s); baseline %.1f / %.1f µs = %.2f x\n", c25, c25 / csat, csat, verdict(c25 / csat <= 3), b25, bsat, (b25 > 0 && bsat > 0 ? b25 / bsat : 0)
      if (num(pi) && pb > 0) printf "- 25%% load: p99 %d / %d µs = %.2f x the baseline (target <= 0.5: %s)\n", pi, pb, pi / pb, verdict(pi / pb <= 0.5)
      if (num(hi) && num(hb) && hi > 0 && hb > 0) printf "- saturation (h2load): CPU per call %.2f / %.2f µs = %.2f x the baseline (target <= 0.12: %s)\n", hi, hb, hi / hb, verdict(hi / hb <= 0.12)
      if (num(ql) && num(qr) && ql > 0 && qr > 0) printf "- saturation (h2load): LookupRoute %.0f/s = %.0f %% of the RenderTemplate ceiling %.0f/s (target >= 90 %%: %s)\n", ql, 100 * ql / qr, qr, verdict(ql / qr >= 0.9)
    }'
}

report() {
  echo "# InferenceCache vs grpc++ baseline — $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "- machine: $(nproc) CPUs, $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo), kernel $(uname -r)"
  echo "- load average at start of report: $(cut -d' ' -f1-3 /proc/loadavg) (shared machine: others may be compiling)"
  echo "- measured: $measured"
  echo "- placement: $placement; scheduling: $priority$([ "$priority" = rt ] && echo ' (SCHED_FIFO 10 for servers and load generators: approximates dedicated cores on a shared machine)')"
  echo "- mode: $([ "$quick" = 1 ] && echo quick || echo full), $rounds round(s) B A B A, ${duration} s per run (saturation runs after a ${warmup} s warm-up), medians over rounds; elapsed ${elapsed} s"
  echo "- saturation: closed loop, ${SAT_CLIENTS:-4} connections x ${SAT_STREAMS:-16} streams (h2load and inferencecache-bench); fixed rates: h2load --rps (paced per connection)$([ "$have_bench" = 1 ] && echo ' and inferencecache-bench (open loop, latency from the intended send time: no coordinated omission)')"
  echo "- latency: h2load gives its mean only (its --log-file per-request times are unusable in 1.52); p50/p99/p99.9 come from inferencecache-bench (synthetic 90 %-hit workload, tenant bench)"
  echo "- rates: LookupRoute ${lr_rates[*]} req/s, RenderTemplate ${rt_rates[*]} req/s (25/50/75 % of the baseline's round-1 saturation)"
  [ "$have_bench" = 1 ] || echo "- inferencecache-bench was not built: h2load only"
  echo "- state: ic-perf-preload defaults (8 tenants x 1024 prefixes x 8 blocks x 2 replicas); hot request = tenant-0 prefix 0 chain (PREFIX_MATCH on 2 replicas, verified on both servers)"
  echo
  echo "## Targets (LookupRoute)"
  echo
  local t q50 tool_label
  for t in h2load bench; do
    [ "$t" = bench ] && [ "$have_bench" = 0 ] && continue
    q50=${lr_rates[1]}
    [ "$t" = h2load ] && tool_label="h2load" || tool_label="inferencecache-bench"
    awk -v tool="$tool_label" \
      -v qi="$(median_of ic "$t" LookupRoute sat qps)" -v qb="$(median_of base "$t" LookupRoute sat qps)" \
      -v pi="$(median_of ic "$t" LookupRoute "$q50" p99_us)" -v pb="$(median_of base "$t" LookupRoute "$q50" p99_us)" '
      function verdict(ok) { return ok ? "met" : "MISSED" }
      BEGIN {
        if (qb > 0 && qi != "nan") printf "- %s: saturation QPS ratio %.2f (target >= 2: %s)\n", tool, qi / qb, verdict(qi / qb >= 2)
        if (pb > 0 && pi != "nan") printf "- %s: p99 at 50%% load ratio %.2f (target <= 0.5: %s)\n", tool, pi / pb, verdict(pi / pb <= 0.5)
      }'
  done
  # When the load generator (sharing its CPU with the rest of the machine) is
  # the limit, measured QPS hides the servers' difference; CPU per request
  # does not: capacity of the server's CPUs = threads × 1 s / CPU-µs per call.
  local ci cb
  ci=$(median_of ic h2load LookupRoute sat cpu_us_per_req)
  cb=$(median_of base h2load LookupRoute sat cpu_us_per_req)
  awk -v ci="$ci" -v cb="$cb" -v t="$server_threads" 'BEGIN {
    if (ci > 0 && cb > 0)
      printf "- CPU-bound capacity at saturation (h2load, %d thread(s) x 1e6 / CPU-µs per call): InferenceCache %.0f/s, baseline %.0f/s, ratio %.2f (target >= 2: %s)\n",
        t, t * 1e6 / ci, t * 1e6 / cb, cb / ci, (cb / ci >= 2) ? "met" : "MISSED"
  }'
  wake_targets
  echo
  echo "Ratios: > 1 is better for qps; < 1 is better for latency and CPU-µs/request."
  echo "csw_per_req: server context switches (voluntary + involuntary, all threads) per call;"
  echo "enter_per_req / epoll_per_req: io_uring_enter / epoll_wait calls of the server per call"
  echo "(separate counting pass of inferencecache-bench under perf stat)."
  echo "server_cpu_pct: server CPU over the run (% of one CPU); well below 100 × threads at"
  echo "saturation means the load generator, not the server, was the limit."
  echo
  echo "| RPC | tool | load | metric | InferenceCache | grpc++ baseline | ratio IC/baseline |"
  echo "|---|---|---|---|---:|---:|---:|"
  local tool rpc mode metric ic base label rates
  for tool in h2load bench; do
    for rpc in LookupRoute RenderTemplate; do
      [ "$rpc" = LookupRoute ] && rates=("${lr_rates[@]}") || rates=("${rt_rates[@]}")
      local pcts=(25 50 75) i=0
      for mode in sat "${rates[@]}"; do
        if [ "$mode" = sat ]; then
          label="saturation"
          metrics=(qps mean_us p99_us cpu_us_per_req server_cpu_pct csw_per_req)
        else
          label="${pcts[$i]}% ($mode/s)"
          i=$((i + 1))
          metrics=(mean_us p50_us p99_us p999_us cpu_us_per_req csw_per_req)
        fi
        # The syscall counts come from the separate counting pass.
        [ "$tool" = bench ] && metrics+=(enter_per_req epoll_per_req)
        for metric in "${metrics[@]}"; do
          local src=$tool
          case $metric in enter_per_req | epoll_per_req) src=count ;; esac
          ic=$(median_of ic "$src" "$rpc" "$mode" "$metric")
          base=$(median_of base "$src" "$rpc" "$mode" "$metric")
          [ "$ic" = nan ] && [ "$base" = nan ] && continue
          ratio=$(awk -v a="$ic" -v b="$base" 'BEGIN {if (b + 0 > 0 && a != "nan") printf "%.2f", a / b; else print "n/a"}')
          echo "| $rpc | $tool | $label | $metric | $ic | $base | $ratio |"
        done
      done
    done
  done
  echo
  echo "Raw runs (one line per measurement):"
  echo
  echo '```'
  column -t -s $'\t' "$results"
  echo '```'
}
if [ -n "$out" ]; then
  report | tee "$out"
else
  report
fi
