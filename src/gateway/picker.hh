#pragma once
// One pick of the endpoint picker (docs/gateway.md "The pick"): the index
// and ranking LookupRoute uses, reached the way LookupRoute reaches them —
// the tenant's owner core through the runtime's one cross-core verb
// (sharding/sharded_index.hh, runtime/submit.hh), inline when this core owns
// the tenant — with LookupRoute's side effects (the work-aware booking of
// the answered replica, docs/ranking.md "Bookings").
//
// On the owner: LookupRoute of (tenant, model, token ids) when there are
// token ids, and GetCacheState of (tenant, model) for the replicas known
// from reports. Back here, the answer is a list of endpoints, best first:
// the ranked replicas that are endpoints (gateway/endpoints.hh) and
// eligible, then the other eligible endpoints by load (fewest requests in
// flight, then the shorter measured time to first byte, then the lower
// reported pressure; none reported counts as 0). Eligible: the subset hint
// when the gateway sent one, else every endpoint known from reports of
// (tenant, model); when that tenant has none (a tenant the engines do not
// report as), the endpoints reported for (pool tenant, model), asked of the
// pool tenant's owner core in a second hop; with no model named (a body that
// did not parse, was too long, or has none), the pool tenant's endpoints of
// every model, asked of that core alone; when there are still none (nothing
// reported, the hop refused), the endpoints this core has sent requests to.
// Candidates beyond kMaxCandidates (the first reported, or the hint's first),
// or reported after kMaxReportsVisited reports, are not considered.
// At most max_endpoints; empty → the stream answers 503.
//
// Shedding (docs/gateway.md "Shedding"): with shed_queue_us > 0, when every
// eligible endpoint the owner knows had more prefill work queued than that
// before this request (the work-aware ranking's booked work,
// index::Shard::queued_work), the answer is kShed (the stream answers 429)
// and nothing is booked. A pick among the pool tenant's endpoints for a named
// model is bounded by the pool tenant's queues (and books nothing).
//
// Bookings (docs/ranking.md "Feedback"): the lookup books its top replica;
// on the owner, before anything else runs there, a booked replica the answer
// does not name first (not an endpoint, outside the subset hint) has its
// booking moved to the first eligible ranked endpoint, or ended when none is
// (a pick by load, a shed, a 503): only what is answered stays booked. The
// stream then reports the response side with feedback().

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sharding/sharded_index.hh"

namespace ic::gateway {

// Why the first endpoint was chosen, for inferencecache_gateway_picks_total
// {reason} (gateway/gateway_metrics.hh): "prefix_match" (the index's
// PREFIX_MATCH), "ranked" (another ranked answer), "load" (no ranked endpoint
// was eligible), "fail_open" (the body gave no token ids), "no_endpoint"
// (nothing eligible: 503), "shed" (the shedding bound: 429).
enum class PickReason : std::uint8_t {
  kPrefixMatch,
  kRanked,
  kLoad,
  kFailOpen,
  kNoEndpoint,
  kShed
};
inline constexpr std::size_t kPickReasonCount = 6;

// Endpoints a pick orders by load at most: the first reported of (tenant,
// model) (index::Shard::for_each_reporter) or the subset hint's first (as
// many as it reads, kMaxSubsetEndpoints); an InferencePool's endpoints are
// far fewer, a hostile reporter's are not.
inline constexpr std::size_t kMaxCandidates = 1024;
// Visits the owner core makes for them at most (a report is one, replica ids
// that are not endpoints included; with no model named, each model of the
// pool tenant is one too): its share of a pick stays bounded.
inline constexpr std::size_t kMaxReportsVisited = 4096;

struct PickRequest {
  std::string tenant_id;
  // Whose reports list the pool's endpoints when tenant_id has none: the
  // engines' tenant (GatewayConfig::default_tenant, the adapter's
  // --tenant-id); "" = none. Only this tenant's reports reach other tenants'
  // picks: a report as tenant B adds nothing to tenant C's (reports are not
  // authenticated; docs/gateway.md "Endpoints").
  std::string pool_tenant;
  std::string model_id;                            // "" when the body named none
  std::string hash_scheme;                         // of the reports (GatewayConfig::hash_scheme)
  std::vector<std::uint32_t> token_ids;            // empty: no lookup, by load
  bool failed_open = false;                        // the body's tokens are missing for a reason
  std::optional<std::vector<std::string>> subset;  // the gateway's subset hint
  std::int64_t deadline_mono_us = INT64_MAX;
  // Shed when every eligible endpoint has more prefill work queued, µs; 0: never.
  std::int64_t shed_queue_us = 0;
};

struct Pick {
  std::vector<std::string> endpoints;  // best first; empty: 503
  PickReason reason = PickReason::kNoEndpoint;
  std::string reason_code;  // the index's LookupRoute reason code ("" without a lookup)
  // Prompt tokens each of `endpoints` holds (its LookupRoute matched_tokens; 0
  // for one picked by load): what a booking moved there is priced by.
  std::vector<std::int64_t> held_tokens;
  // The booking of endpoints.front() on the tenant's owner core; none when
  // the lookup booked nothing (feedback() then does nothing).
  index::BookingRef booking;
};

// Picks for `request` and calls `done` on this core (now when this core owns
// the tenant). A full owner mailbox picks by load from this core's endpoints
// (and the subset hint). `index` outlives the call.
void pick(sharding::ShardedIndex& index, PickRequest&& request, std::size_t max_endpoints,
          std::function<void(Pick&&)> done);

// A pick by load from what this core knows alone, without asking the owner:
// the subset hint when sent, else the endpoints this core has sent requests
// to (what a full owner mailbox gets too). Nothing is booked; reason kLoad,
// or kFailOpen with request.failed_open; no endpoints: kNoEndpoint (503).
Pick pick_here(const PickRequest& request, std::size_t max_endpoints);

// Tells the work-aware ranking on the owner core of `tenant_id` what became
// of the request `booking` priced (index::BookingFeedback: the endpoint that
// served it and the prompt tokens it holds, its first byte, its end). One
// way; a full owner mailbox is retried for up to 1 s, then the feedback is
// dropped (the booking ends at its bound). Nothing for an invalid booking.
void feedback(sharding::ShardedIndex& index, std::string_view tenant_id,
              index::BookingFeedback::Kind kind, index::BookingRef booking,
              std::string replica_id = {}, std::int64_t held_tokens = 0);

}  // namespace ic::gateway
