#pragma once
// The edge between LookupPDRoute's protobuf messages and the index's own
// types (index/pd_query.hh), beside index_wire.hh's LookupRoute edge.

#include <string_view>
#include <vector>

#include "index/shard.hh"
#include "inferencecache/v1alpha1/inferencecache.pb.h"

namespace ic::sharding::wire {

namespace pb = ::inferencecache::v1alpha1;

// LookupPDRouteRequest → LookupQuery (the LookupRoute inputs: fields 1–4,
// 6–12). Views into `request`; the block hashes' views go to `hashes`
// (cleared first), which must outlive the query.
index::LookupQuery to_query(const pb::LookupPDRouteRequest& request,
                            std::vector<std::string_view>& hashes);

// PdResult → LookupPDRouteResponse (cleared first): every field.
void to_response(const index::PdResult& result, pb::LookupPDRouteResponse* out);

// LookupPDRoute on `shard` (index::Shard::lookup_pd), with this thread's buffers.
void lookup_pd_route(index::Shard& shard, const pb::LookupPDRouteRequest& request,
                     const index::LookupContext& ctx, pb::LookupPDRouteResponse* out);

}  // namespace ic::sharding::wire
