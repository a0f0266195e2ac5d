#pragma once
// The edge between the InferenceCache protobuf messages and the index's own
// types (index/query.hh, index/update.hh, index/cache_state.hh): the one
// place that knows both (docs/architecture.md "Index boundary").
//
// Requests become views into the message (no string copied); answers are
// written field by field. The shard calls below translate with buffers kept
// per thread (one per core), so a LookupRoute allocates nothing more than
// the response message itself once warm.

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "index/shard.hh"
#include "inferencecache/v1alpha1/inferencecache.pb.h"
#include "sharding/lookup_request_view.hh"

namespace ic::sharding::wire {

namespace pb = ::inferencecache::v1alpha1;

// LookupRouteRequest → LookupQuery. Views into `request`; the block hashes'
// views are written to `hashes` (cleared first), which must outlive the query.
index::LookupQuery to_query(const pb::LookupRouteRequest& request,
                            std::vector<std::string_view>& hashes);

// LookupResult → LookupRouteResponse (cleared first): every field, tier as
// CacheTier (0 = CACHE_TIER_UNSPECIFIED).
void to_response(const index::LookupResult& result, pb::LookupRouteResponse* out);

// Buffers of one CacheStateUpdate translation (reuse: they keep capacity).
struct UpdateBuffers {
  std::vector<index::PrefixReport> prefixes;
  std::vector<std::string_view> block_hashes;  // every prefix's, concatenated
};

// CacheStateUpdate → Update. Views into `update` and `buffers` (rewritten).
// Stats are present when the message has them; a prefix's tier is the wire
// enum's number (unknown values kept: the index stores them as coldest).
index::Update to_update(const pb::CacheStateUpdate& update, UpdateBuffers& buffers);

// CacheEvent → Event. Views into `event`; types other than the four known
// ones become EventType::kUnspecified (acknowledged no-ops).
index::Event to_event(const pb::CacheEvent& event);

// GetCacheStateRequest → CacheStateQuery (views into `request`).
index::CacheStateQuery to_query(const pb::GetCacheStateRequest& request);

// CacheState → GetCacheStateResponse (cleared first): the summary, then each
// replica's stats (rates narrowed to float as on the wire).
void to_response(const index::CacheState& state, pb::GetCacheStateResponse* out);

// --- the shard's calls in wire terms (this thread's buffers) ---

// LookupRoute on `shard` (index::Shard::lookup).
void lookup_route(index::Shard& shard, const pb::LookupRouteRequest& request,
                  const index::LookupContext& ctx, pb::LookupRouteResponse* out);
// The same for a request decoded into views (sharding/lookup_request_view.hh).
void lookup_route(index::Shard& shard, const LookupRequestView& request,
                  const index::LookupContext& ctx, pb::LookupRouteResponse* out);
// ReportCacheState of one message (index::Shard::ingest).
index::IngestResult ingest(index::Shard& shard, const pb::CacheStateUpdate& update,
                           std::int64_t now_wall_us);

// Capacity, in elements, of this thread's ingest translation buffers: what
// the last ingest left kept. A message that needed more than 4,096 prefixes
// or block hashes has its buffers freed after it, so this is 0 then
// (docs/hostile-peers.md "Reused state").
std::size_t kept_update_buffer_elements();
// PublishEvent (index::Shard::apply_event): (key, replica) entries removed.
std::size_t apply_event(index::Shard& shard, const pb::CacheEvent& event, std::int64_t now_wall_us);
// GetCacheState (index::Shard::get_cache_state).
void get_cache_state(const index::Shard& shard, const pb::GetCacheStateRequest& request,
                     pb::GetCacheStateResponse* out);

}  // namespace ic::sharding::wire
