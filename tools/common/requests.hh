// Trace requests → InferenceCache wire messages (docs/contract.md; chain form per docs/lookup.md
// step 5 and docs/index.md "Ingest"), shared by replay and bench so both send byte-identical calls.
#pragma once

#include <string>

#include "common/trace.hh"
#include "inferencecache/v1alpha1/inferencecache.pb.h"

namespace ic::tools {

// The (tenant, model, hash scheme) a tool speaks for. hash_scheme must be non-empty: an empty
// scheme is never a domain on the server (docs/index.md ingest step 3).
struct Scope {
  std::string tenant_id;
  std::string model_id;
  std::string hash_scheme = "mooncake";
};

// LookupRoute with the request's chain: block_hashes = 8-byte big-endian hash ids,
// block_token_counts = 512 each, the last input_length − 512·(n−1).
inferencecache::v1alpha1::LookupRouteRequest make_lookup(const TraceRequest& request,
                                                         const Scope& scope);

// One chain-form PrefixEntry holding every block of `request` (tier T1).
inferencecache::v1alpha1::PrefixEntry make_chain_entry(const TraceRequest& request);

// Decodes a hex string (even length, [0-9a-fA-F]) into bytes; false on bad input.
bool hex_decode(const std::string& hex, std::string* bytes);

// Lower-case hex of `bytes`.
std::string hex_encode(const std::string& bytes);

}  // namespace ic::tools
