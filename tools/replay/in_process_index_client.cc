#include "replay/in_process_index_client.hh"

#include <algorithm>
#include <climits>
#include <cmath>
#include <utility>

#include "config/policy_store.hh"
#include "index/from_flags.hh"
#include "sharding/index_wire.hh"
#include "sharding/pd_wire.hh"

namespace ic::tools::replay {

namespace v1 = inferencecache::v1alpha1;

namespace {

index::IndexConfig in_process_config(const config::ServerConfig& config) {
  index::IndexConfig c = index::index_config(config);
  c.key_seed = InProcessIndexClient::kKeySeed;
  return c;
}

}  // namespace

InProcessIndexClient::InProcessIndexClient(const config::ServerConfig& config,
                                           std::shared_ptr<const config::PolicySet> policies)
    : has_pd_topologies_(policies != nullptr && !policies->pd_topologies().empty()),
      shard_(
          std::make_unique<index::Shard>(in_process_config(config), nullptr, std::move(policies))),
      sweep_interval_us_(config.sweep_interval_us),
      next_sweep_us_(kEpochWallUs + config.sweep_interval_us) {
  clock_.wall = kEpochWallUs;
  clock_.mono = kEpochWallUs;
}

InProcessIndexClient::Made InProcessIndexClient::from_server_args(
    const std::vector<std::string>& args) {
  std::vector<const char*> argv{"inferencecache-server"};
  for (const auto& a : args) argv.push_back(a.c_str());
  config::FlagsOutcome parsed = config::parse_flags(static_cast<int>(argv.size()), argv.data());
  if (!parsed.config) return {nullptr, parsed.exit_code, parsed.message};
  std::shared_ptr<const config::PolicySet> policies = config::PolicySet::defaults();
  if (!parsed.config->policy_file.empty()) {
    config::PolicyStore store(parsed.config->policy_file);
    if (!store.load()) return {nullptr, 2, "--policy-file: " + store.last_error()};
    policies = store.current();
  }
  return {std::make_unique<InProcessIndexClient>(*parsed.config, std::move(policies)), 0, {}};
}

void InProcessIndexClient::at(double trace_ms) {
  const std::int64_t now =
      std::max(clock_.wall, kEpochWallUs + static_cast<std::int64_t>(std::llround(trace_ms * 1e3)));
  clock_.wall = now;
  clock_.mono = now;
  if (now < next_sweep_us_) return;
  // The server's slices (index::Shard::kSweepSliceEntries), run to the pass's end at once; the
  // server spreads them over loop turns of the same instant.
  while (!shard_->sweep_slice(now, index::Shard::kSweepSliceEntries)) {
  }
  next_sweep_us_ = now + sweep_interval_us_;
}

index::LookupContext InProcessIndexClient::context() {
  index::LookupContext ctx;
  ctx.clock = &clock_;
  ctx.deadline_mono_us = INT64_MAX;  // no deadline: nothing here waits on a transport
  return ctx;
}

LookupCall InProcessIndexClient::lookup(const v1::LookupRouteRequest& request,
                                        v1::LookupRouteResponse* response) {
  sharding::wire::lookup_route(*shard_, request, context(), response);
  return {true, "OK", 0};
}

LookupCall InProcessIndexClient::lookup_pd(const v1::LookupPDRouteRequest& request,
                                           v1::LookupPDRouteResponse* response) {
  sharding::wire::lookup_pd_route(*shard_, request, context(), response);
  return {true, "OK", 0};
}

bool InProcessIndexClient::report(std::size_t, const v1::CacheStateUpdate& update, std::string*) {
  sharding::wire::ingest(*shard_, update, clock_.wall);
  return true;
}

void InProcessIndexClient::publish(const v1::CacheEvent& event) {
  sharding::wire::apply_event(*shard_, event, clock_.wall);
}

}  // namespace ic::tools::replay
