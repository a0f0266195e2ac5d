#pragma once
// The endpoint picker's settings (docs/gateway.md "Flags"), from the
// --gateway-* flags (config/flags.cc), shared read-only by every core.

#include <cstddef>
#include <cstdint>
#include <string>

#include "prompt_text/models.hh"

namespace ic::gateway {

// How the gateway sends the request body when its first ext_proc message
// carries no ProtocolConfiguration (older Envoy): Envoy's
// ProcessingMode.request_body_mode the filter is configured with.
enum class BodyMode : std::uint8_t {
  kFullDuplex,  // FULL_DUPLEX_STREAMED (the Inference Extension's): headers held, body passed back
  kBuffered,    // BUFFERED / BUFFERED_PARTIAL: the pick rides on the body response
  kStreamed,    // STREAMED: chunks answered at once, the pick on the last one's response
};

struct GatewayConfig {
  // Tokenizer models (--tokenizer-models-dir); nullptr: every body fails
  // open (unknown_model) except completions given as token ids.
  const prompt_text::ModelSet* models = nullptr;
  // Request header naming the tenant (lower case); absent → default_tenant.
  std::string tenant_header = "x-tenant-id";
  std::string default_tenant = "default";
  // The hash scheme the engines' reports use (the kvevents adapter's
  // --hash-scheme): the lookup's token ids are fingerprinted under it.
  std::string hash_scheme = "vllm";
  BodyMode body_mode = BodyMode::kFullDuplex;
  // Request body bytes held per stream; a longer body is picked by load
  // (body_too_large) and, in full-duplex mode, passed through from there.
  std::size_t max_body_bytes = 4u << 20;
  // Request body bytes held by all the streams of one core together (a peer
  // opening many streams holds no more); past it a body is treated as too large.
  std::size_t max_core_body_bytes = 64u << 20;
  // Prompt ids at most (more: too_long, by load).
  std::size_t max_token_ids = 1'048'576;
  // Tokenizing time one pick may take on the reactor, µs (past it: timeout, by load).
  std::int64_t tokenize_budget_us = 20'000;
  // Endpoints in one answer: the pick and its fallbacks.
  std::size_t max_endpoints = 4;
  // Shedding (docs/gateway.md "Shedding"): when every eligible endpoint has
  // more prefill work queued than this (the work-aware ranking's bookings),
  // the request is answered 429. µs; 0 = never.
  std::int64_t shed_queue_us = 0;
};

// The Endpoint Picker Protocol's names (gateway-api-inference-extension
// docs/proposals/004-endpoint-picker-protocol, v1.0.0).
inline constexpr std::string_view kDestinationHeader = "x-gateway-destination-endpoint";
inline constexpr std::string_view kLbNamespace = "envoy.lb";
inline constexpr std::string_view kSubsetNamespace = "envoy.lb.subset_hint";
inline constexpr std::string_view kSubsetKey = "x-gateway-destination-endpoint-subset";
// Endpoints of a subset hint the picker reads; later ones are ignored
// (an InferencePool's endpoints are far fewer; docs/gateway.md "Endpoints").
inline constexpr std::size_t kMaxSubsetEndpoints = 1024;
inline constexpr std::string_view kServedKey = "x-gateway-destination-endpoint-served";
inline constexpr std::string_view kExtProcService = "envoy.service.ext_proc.v3.ExternalProcessor";

}  // namespace ic::gateway
