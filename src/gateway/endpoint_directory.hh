#pragma once
// The endpoints the whole server knows from reports (docs/gateway.md
// "Endpoints"): every replica with stats in any shard, of any tenant, whose id
// is an endpoint (gateway/endpoints.hh), by model. What a pick chooses among
// when the owner of its (tenant, model) knows none: a tenant with no reports
// of its own yet (engines serve every tenant; the index keeps tenants apart),
// or a model no engine reported (then the endpoints of every model). Without
// it such a pick saw only the endpoints its own core had sent requests to,
// and a core that had sent none answered 503.
//
// Per core, a copy made from every shard (runtime::map_reduce over
// index::Shard::export_stats, O(stats entries) per core) when the copy is
// older than kFreshUs: at most one refresh a second per core, however many
// picks or model names ask, so a peer naming random models cannot make the
// cores scan their stats per request. Bounded: kMaxPairs (model, endpoint)
// pairs; what lies past that is left out of the copy.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sharding/sharded_index.hh"

namespace ic::gateway {

class EndpointDirectory {
 public:
  // Age (µs, the index's monotonic clock) up to which the copy answers as is.
  static constexpr std::int64_t kFreshUs = 1'000'000;
  // How long a refresh waits for the cores (µs); a core that did not answer
  // by then is left out of this copy.
  static constexpr std::int64_t kRefreshDeadlineUs = 50'000;
  static constexpr std::size_t kMaxPairs = 65'536;

  using Done = std::function<void(std::vector<std::string>)>;

  // Calls `done` on this core with the endpoints of `model` (sorted; every
  // model's when `model` is "" or no shard knows it): at once when the copy
  // is fresh, else once the refresh it starts or joins ended. `index`
  // outlives the call.
  void find(sharding::ShardedIndex& index, std::string model, Done done);
  // The same from the copy as it is, without a refresh: for a pick that does
  // not wait (a full owner mailbox, a pick made on the stream's core).
  std::vector<std::string> cached(std::string_view model) const;

  // This core's copy.
  static EndpointDirectory& local();

 private:
  using Pairs = std::vector<std::pair<std::string, std::string>>;  // (model, endpoint)
  void refreshed(std::int64_t now_mono_us, std::vector<Pairs>&& per_core);

  std::unordered_map<std::string, std::vector<std::string>> by_model_;
  std::vector<std::string> all_;  // every model's, sorted, distinct
  std::int64_t fetched_mono_us_ = 0;
  bool fetched_ = false;
  bool refreshing_ = false;
  // Picks waiting for the refresh in flight: one per stream at most (a
  // stream has one pick on its way), so bounded by the core's streams.
  std::vector<std::pair<std::string, Done>> waiting_;
};

}  // namespace ic::gateway
