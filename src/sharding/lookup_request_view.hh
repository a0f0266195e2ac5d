#pragma once
// LookupRouteRequest read straight from its wire bytes into views, for the
// local LookupRoute path (docs/architecture.md "LookupRoute path"): no
// protobuf message is filled, no string copied. It is a fast path, not a
// second parser: decode() takes only the plain encoding every client library
// writes and answers false for anything else, which the caller then parses
// with protobuf as before. Whatever it accepts, protobuf accepts with the
// same field values (tests/service/lookup_request_view_test.cc checks both
// parsers against each other), so answers do not depend on which one ran.

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "index/query.hh"

namespace ic::sharding::wire {

struct LookupRequestView {
  // Views into the decoded bytes (the caller keeps them alive).
  std::string_view model_id, tenant_id, prefix_hash, hash_scheme, adapter_id;
  std::int32_t prefix_token_count = 0;
  std::int32_t slo_ttft_ms = 0;
  std::vector<std::string_view> block_hashes;
  std::vector<std::int32_t> block_token_counts;
  std::vector<std::uint32_t> token_ids;

  // Empties every field; the vectors keep their capacity.
  void clear();
};

// Decodes `bytes` (one serialized LookupRouteRequest) into `out` (cleared
// first) and returns true, or returns false (`out` unspecified) when the
// bytes are not the plain encoding: a field number or wire type the message
// does not declare, a varint longer than 5 bytes, a string field with a byte
// ≥ 0x80 (protobuf decides its UTF-8 validity), a non-empty prompt_text (it
// is tokenized on the protobuf path), or anything protobuf would reject.
// Repeated occurrences follow protobuf: the last value of a singular field
// wins, repeated fields append, packed and unpacked alike.
bool decode(std::span<const char> bytes, LookupRequestView& out);

// The query the index reads (views into `view` and its bytes); like
// to_query(const pb::LookupRouteRequest&) without prompt_text.
index::LookupQuery to_query(const LookupRequestView& view);

}  // namespace ic::sharding::wire
