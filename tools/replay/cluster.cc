#include "replay/cluster.hh"

#include <algorithm>

namespace ic::tools::replay {

Cluster::Cluster(std::size_t replicas, std::size_t capacity_blocks, EngineModel model)
    : model_(model) {
  replicas_.reserve(replicas);
  for (std::size_t i = 0; i < replicas; ++i) replicas_.emplace_back(capacity_blocks);
}

int Cluster::in_flight(std::size_t replica, std::int64_t now_ms) {
  auto& ends = replicas_[replica].ends_ms;
  while (!ends.empty() && ends.top() <= static_cast<double>(now_ms)) ends.pop();
  return static_cast<int>(ends.size());
}

float Cluster::pressure(std::size_t replica, std::int64_t now_ms) {
  const int slots = std::max(model_.slots, 1);
  return std::min(1.0f, static_cast<float>(in_flight(replica, now_ms)) / static_cast<float>(slots));
}

std::size_t Cluster::least_loaded(std::int64_t now_ms) {
  std::size_t best = 0;
  int best_load = in_flight(0, now_ms);
  for (std::size_t i = 1; i < replicas_.size(); ++i) {
    const int load = in_flight(i, now_ms);
    if (load < best_load || (load == best_load && replicas_[i].served < replicas_[best].served)) {
      best = i;
      best_load = load;
    }
  }
  return best;
}

Served Cluster::serve(std::size_t replica, const TraceRequest& request) {
  auto& r = replicas_[replica];
  Served out;
  out.replica = replica;
  out.prompt_tokens = request.input_length;
  const auto counts = block_token_counts(request);
  const std::size_t hits = r.cache.leading_hits(request.hash_ids);
  for (std::size_t i = 0; i < hits; ++i) out.hit_tokens += counts[i];
  r.cache.store(request.hash_ids, &out.evicted);
  const double service_ms =
      static_cast<double>(out.prompt_tokens - out.hit_tokens) / model_.prefill_tokens_per_ms +
      static_cast<double>(request.output_length) * model_.decode_ms_per_token;
  r.ends_ms.push(static_cast<double>(request.timestamp_ms) + service_ms);
  ++r.served;
  r.hit_tokens += out.hit_tokens;
  r.prompt_tokens += out.prompt_tokens;
  return out;
}

float Cluster::hit_rate(std::size_t replica) const {
  const auto& r = replicas_[replica];
  if (r.prompt_tokens == 0) return 0.0f;
  return static_cast<float>(static_cast<double>(r.hit_tokens) /
                            static_cast<double>(r.prompt_tokens));
}

std::string replica_id(std::size_t index) { return "replica-" + std::to_string(index); }

}  // namespace ic::tools::replay
