// Batch → msgpack in either wire shape (docs/kvevents.md "What it accepts on the wire"), as vLLM
// and SGLang publish it. Used by the test publisher and the tests; the adapter itself only decodes.
#pragma once

#include <string>

#include "kvevents/event.hh"

namespace ic::tools::kvevents {

enum class Encoding {
  array,  // [ts, [["BlockStored", …], …], dp_rank] (vLLM ≤ 0.23, SGLang)
  map,    // {"ts", "events": [{"type": "BlockStored", …}], "data_parallel_rank"} (vLLM ≥ 0.26)
};

// Encodes `batch` (its events, ts and dp_rank; the malformed/unknown counts are ignored). Array
// events carry a salt as extra_keys [[{"cache_salt": salt}]], map events as a "cache_salt" key.
// `signed_hashes` writes hashes ≥ 2^63 as negative int64, as SGLang does.
std::string encode_batch(const Batch& batch, Encoding encoding, bool signed_hashes = false);

}  // namespace ic::tools::kvevents
