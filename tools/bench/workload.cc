#include "bench/workload.hh"

#include <random>

#include "common/grpc_frame.hh"

namespace ic::tools::bench {

namespace v1 = inferencecache::v1alpha1;

namespace {

std::shared_ptr<const std::string> frame(const google::protobuf::MessageLite& message) {
  auto body = std::make_shared<std::string>();
  append_grpc_frame(message, body.get());
  return body;
}

v1::CacheStateUpdate update_for(const Scope& scope, int replica) {
  v1::CacheStateUpdate update;
  update.set_replica_id("replica-" + std::to_string(replica));
  update.set_tenant_id(scope.tenant_id);
  update.set_model_id(scope.model_id);
  update.set_hash_scheme(scope.hash_scheme);
  return update;
}

TraceRequest random_prompt(int blocks, std::mt19937_64& rng) {
  TraceRequest r;
  r.input_length = blocks * kMooncakeBlockTokens;
  for (int b = 0; b < blocks; ++b) r.hash_ids.push_back(rng());
  return r;
}

}  // namespace

Workload synthetic_workload(const SyntheticSpec& spec, const Scope& scope, Rpc rpc) {
  Workload w;
  std::mt19937_64 rng(spec.seed);
  std::vector<TraceRequest> stored, unseen;
  for (int i = 0; i < spec.distinct; ++i) stored.push_back(random_prompt(spec.blocks, rng));
  if (rpc == Rpc::kReport) {
    w.path = kReportPath;
    for (int i = 0; i < spec.distinct; ++i) {
      auto update = update_for(scope, i % spec.replicas);
      *update.add_prefixes() = make_chain_entry(stored[static_cast<std::size_t>(i)]);
      w.bodies.push_back(frame(update));
      w.order.push_back(static_cast<std::uint32_t>(i));
    }
    return w;
  }
  for (int i = 0; i < spec.distinct; ++i) unseen.push_back(random_prompt(spec.blocks, rng));
  w.path = kLookupPath;
  for (int r = 0; r < spec.replicas; ++r) {
    auto update = update_for(scope, r);
    for (int i = r; i < spec.distinct; i += spec.replicas) {
      *update.add_prefixes() = make_chain_entry(stored[static_cast<std::size_t>(i)]);
    }
    if (update.prefixes_size() > 0) w.preload.push_back(frame(update));
  }
  for (const auto& p : stored) w.bodies.push_back(frame(make_lookup(p, scope)));
  for (const auto& p : unseen) w.bodies.push_back(frame(make_lookup(p, scope)));
  // A fixed-length schedule, so the realized hit share is the same on every run.
  constexpr std::size_t kOrderLength = 1 << 16;
  std::bernoulli_distribution hit(spec.hit_ratio);
  std::uniform_int_distribution<std::uint32_t> pick(0,
                                                    static_cast<std::uint32_t>(spec.distinct - 1));
  for (std::size_t k = 0; k < kOrderLength; ++k) {
    const bool is_hit = hit(rng);
    w.order.push_back(pick(rng) + (is_hit ? 0u : static_cast<std::uint32_t>(spec.distinct)));
  }
  return w;
}

Workload trace_workload(const std::vector<TraceRequest>& trace, const Scope& scope, Rpc rpc,
                        int replicas, bool preload) {
  Workload w;
  w.path = rpc == Rpc::kLookup ? kLookupPath : kReportPath;
  for (std::size_t i = 0; i < trace.size(); ++i) {
    auto update = update_for(scope, static_cast<int>(i % static_cast<std::size_t>(replicas)));
    *update.add_prefixes() = make_chain_entry(trace[i]);
    if (rpc == Rpc::kReport) {
      w.bodies.push_back(frame(update));
    } else {
      w.bodies.push_back(frame(make_lookup(trace[i], scope)));
      if (preload) w.preload.push_back(frame(update));
    }
    w.order.push_back(static_cast<std::uint32_t>(i));
  }
  return w;
}

}  // namespace ic::tools::bench
