// Tuning of the server side (kept apart from sender.hh so the flag parser needs no nghttp2).
#pragma once

#include <cstddef>
#include <string>

namespace ic::tools::kvevents {

struct SenderOptions {
  std::string server = "127.0.0.1:9090";    // host:port of the InferenceCache server
  std::size_t max_queued_entries = 262144;  // queue bound, in prefix entries
  int rpc_timeout_ms = 10000;               // deadline of each PublishEvent
  int max_events_in_flight = 256;           // pipelined PublishEvent calls
  int backoff_initial_ms = 100;             // first reconnect delay, doubled up to the max
  int backoff_max_ms = 5000;
};

}  // namespace ic::tools::kvevents
