#!/usr/bin/env bash
# LookupRoute load with h2load (Debian nghttp2-client) against a running
# inferencecache-server: writes a gRPC-framed LookupRouteRequest body file,
# checks one call with nghttp (grpc-status 0 in the trailers; h2load does not
# read trailers), then runs h2load and prints its report.
#
#   h2load_lookup.sh [-p PORT] [-n REQUESTS] [-c CLIENTS] [-m STREAMS] [--check]
#
# PORT defaults to $IC_GRPC_PORT (set by with-server), else 9090. --check
# (used by the meson test) exits 1 unless every request succeeded.
set -euo pipefail

port="${IC_GRPC_PORT:-9090}"
requests=100000
clients=4
streams=32
check=0
while [ $# -gt 0 ]; do
  case "$1" in
    -p) port="$2"; shift 2 ;;
    -n) requests="$2"; shift 2 ;;
    -c) clients="$2"; shift 2 ;;
    -m) streams="$2"; shift 2 ;;
    --check) check=1; shift ;;
    *) echo "usage: $0 [-p PORT] [-n REQUESTS] [-c CLIENTS] [-m STREAMS] [--check]" >&2; exit 2 ;;
  esac
done
for tool in h2load nghttp; do
  command -v "$tool" >/dev/null || { echo "$tool missing (apt-get install nghttp2-client)" >&2; exit 1; }
done

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
body="$work/lookup.grpc"

# LookupRouteRequest (docs/contract.md field numbers), protobuf wire format:
#   1 model_id "llama-3-8b" | 2 tenant_id "team-a" | 3 prefix_hash 01..08 | 5 hash_scheme "vllm-sha256"
payload='\x0a\x0allama-3-8b\x12\x06team-a\x1a\x08\x01\x02\x03\x04\x05\x06\x07\x08\x2a\x0bvllm-sha256'
printf "$payload" >"$work/payload.bin"
len=$(stat -c %s "$work/payload.bin")
# gRPC length prefix: compressed flag 0, 4-byte big-endian length (< 256 here).
printf "\\x00\\x00\\x00\\x00\\x$(printf %02x "$len")" >"$body"
cat "$work/payload.bin" >>"$body"

url="http://127.0.0.1:${port}/inferencecache.v1alpha1.InferenceCache/LookupRoute"

# One call first: h2load counts HTTP 200 as success, gRPC errors ride in trailers.
one="$(nghttp -v -H ':method: POST' -H 'content-type: application/grpc' -H 'te: trailers' \
  -d "$body" "$url" 2>&1 | tr -d '\0' || true)"
if ! grep -q 'grpc-status: 0' <<<"$one"; then
  echo "LookupRoute did not answer grpc-status 0:" >&2
  echo "$one" >&2
  exit 1
fi

cmd=(h2load -n "$requests" -c "$clients" -m "$streams"
     -H 'content-type: application/grpc' -H 'te: trailers' -d "$body" "$url")
printf '+'; printf ' %q' "${cmd[@]}"; echo
out="$("${cmd[@]}")"
echo "$out"

if [ "$check" -eq 1 ]; then
  summary="$(grep -E '^requests: ' <<<"$out")"
  want="requests: ${requests} total, ${requests} started, ${requests} done, ${requests} succeeded, 0 failed, 0 errored, 0 timeout"
  if [ "$summary" != "$want" ]; then
    echo "h2load: want \"$want\", got \"$summary\"" >&2
    exit 1
  fi
  grep -qE '^status codes: [0-9]+ 2xx, 0 3xx, 0 4xx, 0 5xx' <<<"$out" || {
    echo "h2load: non-2xx responses" >&2
    exit 1
  }
fi
