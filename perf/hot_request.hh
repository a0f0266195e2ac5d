#pragma once
// The hot LookupRoute request of the transport benchmarks, the shape
// perf/compare.sh sends: tenant-0 / perf-model / perf-xxh3-64, a chain of 8
// blocks of 16 opaque hash bytes and 16 tokens each.

#include <string>

#include "inferencecache/v1alpha1/inferencecache.pb.h"

namespace ic::perf {

inline ::inferencecache::v1alpha1::LookupRouteRequest hot_lookup_request() {
  ::inferencecache::v1alpha1::LookupRouteRequest r;
  r.set_model_id("perf-model");
  r.set_tenant_id("tenant-0");
  r.set_hash_scheme("perf-xxh3-64");
  for (int j = 0; j < 8; ++j) {
    r.add_block_hashes(std::string(16, static_cast<char>('a' + j)));
    r.add_block_token_counts(16);
  }
  return r;
}

}  // namespace ic::perf
