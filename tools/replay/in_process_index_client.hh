// The replay's index in its own process: one ic::index::Shard, built as inferencecache-server
// builds its shards from its flags (index/from_flags.hh), driven through the server's own
// translation layer (sharding/index_wire.hh, sharding/pd_wire.hh) on a ManualClock that the
// replay sets to its trace time before every call (IndexClient::at). No server, no gRPC: a replay
// of the inferencecache policy runs in virtual time (seconds of wall time) and is deterministic.
//
// What it is not: one shard (the server partitions tenants over one shard per core; a replay's
// one tenant lives on one of them anyway), no transport (no deadlines, no shedding, no
// asynchrony: every update and event is applied before the next call, where a server applies
// them as its streams deliver), no prompt_text tokenizer (the replay sends block hashes), and
// the key table's seed is fixed (the server draws one) so that two runs are identical.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/flags.hh"
#include "config/policy.hh"
#include "index/clock.hh"
#include "index/shard.hh"
#include "replay/index_client.hh"

namespace ic::tools::replay {

class InProcessIndexClient final : public IndexClient {
 public:
  // Wall µs at trace time 0 (the index tests' kNow): wall = kEpochWallUs + trace ms × 1000.
  static constexpr std::int64_t kEpochWallUs = 1'700'000'000'000'000;
  // The key table's seed (index::IndexConfig::key_seed), fixed for identical runs.
  static constexpr std::uint64_t kKeySeed = 0x1CEC0FFEEull;

  // The index inferencecache-server builds from `config` (its defaults: ServerConfig{}), with
  // the policy set `policies` (nullptr: the defaults, as without --policy-file).
  explicit InProcessIndexClient(const config::ServerConfig& config = {},
                                std::shared_ptr<const config::PolicySet> policies = nullptr);

  // What from_server_args made: a client, or the exit code and text of the server's parser
  // (0 with the usage text for --help; 2 with a one-line reason for a bad flag or policy file).
  struct Made {
    std::unique_ptr<InProcessIndexClient> client;
    int exit_code = 0;
    std::string message;
  };
  // The index of `inferencecache-server ARGS...`: `args` ("--uncached-weight=0.5", ...) go
  // through the server's own flag parser (config/flags.hh parse_flags, so INFERENCECACHE_*
  // variables and --config count as for the server) and its --policy-file is loaded as the
  // server loads it. Flags that do not shape the index (listeners, threads, ...) are accepted
  // and have no effect.
  static Made from_server_args(const std::vector<std::string>& args);

  // Sets the clock to trace time `trace_ms` (never backwards) and runs the TTL sweep when its
  // --sweep-interval has passed on that clock, as the server's timer would.
  void at(double trace_ms) override;

  LookupCall lookup(const inferencecache::v1alpha1::LookupRouteRequest& request,
                    inferencecache::v1alpha1::LookupRouteResponse* response) override;
  LookupCall lookup_pd(const inferencecache::v1alpha1::LookupPDRouteRequest& request,
                       inferencecache::v1alpha1::LookupPDRouteResponse* response) override;
  // Applies `update` now; timestamp_us 0 is stamped with the clock's wall time, as the server's
  // ingest does. Never fails.
  bool report(std::size_t stream, const inferencecache::v1alpha1::CacheStateUpdate& update,
              std::string* error) override;
  // Applies `event` now (timestamp_us 0 = the clock's wall time).
  void publish(const inferencecache::v1alpha1::CacheEvent& event) override;
  bool finish(std::string*) override { return true; }
  std::int64_t failed_events() const override { return 0; }

  // Whether its policy set holds a P/D topology (LookupPDRoute answers
  // UNKNOWN_TOPOLOGY to every request without one).
  bool has_pd_topologies() const { return has_pd_topologies_; }

  // The clock's wall time, µs.
  std::int64_t wall_us() const { return clock_.wall; }
  index::Shard& shard() { return *shard_; }

 private:
  // A call's context: this clock, no deadline.
  index::LookupContext context();

  index::ManualClock clock_;
  bool has_pd_topologies_;  // before shard_: read from the policies the shard takes
  std::unique_ptr<index::Shard> shard_;
  std::int64_t sweep_interval_us_;
  std::int64_t next_sweep_us_;
};

}  // namespace ic::tools::replay
