#include "replay/cluster.hh"

#include <algorithm>

namespace ic::tools::replay {

Cluster::Cluster(std::vector<double> rates, std::size_t capacity_blocks) {
  replicas_.reserve(rates.size());
  for (double rate : rates) replicas_.emplace_back(rate, capacity_blocks);
}

std::int64_t Cluster::leading_tokens(const Replica& r, const TraceRequest& request,
                                     bool count_pending) const {
  const auto& ids = request.hash_ids;
  std::size_t run = 0;
  while (run < ids.size() &&
         (r.cache.contains(ids[run]) || (count_pending && r.pending_blocks.contains(ids[run])))) {
    ++run;
  }
  if (run == ids.size()) return request.input_length;
  return static_cast<std::int64_t>(run) * kMooncakeBlockTokens;
}

std::int64_t Cluster::expected_hit_tokens(std::size_t replica, const TraceRequest& request) const {
  return leading_tokens(replicas_[replica], request, true);
}

std::optional<double> Cluster::enqueue(std::size_t replica, std::size_t index,
                                       const TraceRequest& request, double now_ms) {
  auto& r = replicas_[replica];
  Job job{index, &request, now_ms, request.input_length - leading_tokens(r, request, true)};
  for (auto id : request.hash_ids) ++r.pending_blocks[id];
  r.waiting_prompt_tokens += request.input_length;
  ++r.routed;
  r.waiting.push_back(job);
  if (r.running) return std::nullopt;
  r.running_start_ms = now_ms;
  return start_next(r);
}

// Moves the first waiting job into prefill at running_start_ms: the engine checks its cache when
// it schedules the request, so the hit is what is cached NOW, not what was cached at routing.
double Cluster::start_next(Replica& r) {
  Job job = r.waiting.front();
  r.waiting.pop_front();
  r.waiting_prompt_tokens -= job.trace->input_length;
  r.running_hit_tokens = leading_tokens(r, *job.trace, false);
  r.running_end_ms =
      r.running_start_ms + prefill_ms(job.trace->input_length - r.running_hit_tokens, r.rate);
  r.running = job;
  return r.running_end_ms;
}

Finished Cluster::finish(std::size_t replica, std::optional<double>* next_end) {
  auto& r = replicas_[replica];
  const Job job = *r.running;
  const TraceRequest& request = *job.trace;
  Finished out;
  out.replica = replica;
  out.request = job.request;
  out.arrival_ms = job.arrival_ms;
  out.start_ms = r.running_start_ms;
  out.end_ms = r.running_end_ms;
  out.hit_tokens = r.running_hit_tokens;
  out.prompt_tokens = request.input_length;
  r.cache.store(request.hash_ids, &out.evicted);
  for (auto id : request.hash_ids) {
    auto it = r.pending_blocks.find(id);
    if (--it->second == 0) r.pending_blocks.erase(it);
  }
  r.hit_tokens += out.hit_tokens;
  r.prompt_tokens += out.prompt_tokens;
  r.running.reset();
  *next_end = std::nullopt;
  if (!r.waiting.empty()) {
    r.running_start_ms = out.end_ms;
    *next_end = start_next(r);
  }
  return out;
}

std::vector<std::uint64_t> Cluster::store(std::size_t replica, const TraceRequest& request) {
  std::vector<std::uint64_t> evicted;
  replicas_[replica].cache.store(request.hash_ids, &evicted);
  return evicted;
}

std::size_t Cluster::outstanding(std::size_t replica) const {
  const auto& r = replicas_[replica];
  return r.waiting.size() + (r.running ? 1 : 0);
}

double Cluster::outstanding_prompt_ms(std::size_t replica, double now_ms) const {
  const auto& r = replicas_[replica];
  double running = 0;
  if (r.running) {
    running = std::max(
        0.0, prefill_ms(r.running->trace->input_length, r.rate) - (now_ms - r.running_start_ms));
  }
  return running + prefill_ms(r.waiting_prompt_tokens, r.rate);
}

double Cluster::expected_wait_ms(std::size_t replica, double now_ms) const {
  const auto& r = replicas_[replica];
  const double running = r.running ? std::max(0.0, r.running_end_ms - now_ms) : 0.0;
  std::int64_t queued = 0;
  for (const auto& job : r.waiting) queued += job.expected_uncached;
  return running + prefill_ms(queued, r.rate);
}

float Cluster::pressure(std::size_t replica, int slots) const {
  return std::min(
      1.0f, static_cast<float>(outstanding(replica)) / static_cast<float>(std::max(slots, 1)));
}

float Cluster::hit_rate(std::size_t replica) const {
  const auto& r = replicas_[replica];
  if (r.prompt_tokens == 0) return 0.0f;
  return static_cast<float>(static_cast<double>(r.hit_tokens) /
                            static_cast<double>(r.prompt_tokens));
}

std::string replica_id(std::size_t index) { return "replica-" + std::to_string(index); }

}  // namespace ic::tools::replay
