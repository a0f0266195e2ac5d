// libFuzzer target: a byte string decoded as a sequence of Shard operations
// (ingest in chain/legacy/malformed forms, lookups of every input kind, events,
// sweeps, policy swaps with quotas and LFU) over small name alphabets, so the
// fuzzer reaches shared keys, evictions and removals. Checks the invariants
// that must hold after every operation (docs/index.md, docs/lookup.md).
//
// Fuzz (clang; after building the project with meson for the generated proto):
//   clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -I src -I build/proto
//     tests/index/fuzz_shard.cc src/index/*.cc src/fingerprint/fingerprint.cc
//     src/config/policy.cc build/proto/libicproto.a -lprotobuf -lxxhash -lcrypto
//     -o /tmp/fuzz_shard && /tmp/fuzz_shard -max_total_time=60
// meson runs it as a regression test over generated inputs (fuzz_shard_replay.cc).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "config/policy.hh"
#include "index/shard.hh"
#include "sharding/index_wire.hh"

namespace {

namespace pb = ::inferencecache::v1alpha1;
using namespace ic::index;

void require(bool ok) {
  if (!ok) std::abort();
}

struct Reader {
  const std::uint8_t* p;
  std::size_t n;
  std::uint8_t byte() {
    if (n == 0) return 0;
    --n;
    return *p++;
  }
  bool done() const { return n == 0; }
  template <std::size_t N>
  const char* pick(const char* const (&names)[N]) {
    return names[byte() % N];
  }
  std::string hash() {
    const std::uint8_t b = byte();
    const std::size_t len = b % 5 == 0 ? 1 : (b % 5 == 1 ? 12 : 8);
    return std::string(len, static_cast<char>('a' + b % 6));
  }
};

const char* const kTenants[] = {"t0", "t1", "t2", "inferencecache.io/probe", ""};
const char* const kModels[] = {"m0", "m1", ""};
const char* const kSchemes[] = {"vllm", "sglang", ""};
const char* const kReplicas[] = {"r0", "r1", "r2", "r3", ""};
const char* const kAdapters[] = {"", "", "lora"};
const char* const kPolicies[] = {
    R"({"version":7})",
    R"({"version":7,"policies":[{"namespace":"t0","eviction":"lfu","minimumMatchedTokens":0,"routingFloorScore":0}],"tenants":[{"tenantID":"t0","maxIndexEntries":5}]})",
    R"({"version":7,"policies":[{"namespace":"t1","strategy":{"requireChain":true},"lookupTimeoutMs":1,"evictionTTL":1000000000}],"tenants":[{"tenantID":"t1","maxIndexEntries":0}]})",
    R"({"version":5,"policies":[{"namespace":"t2","minimumPrefixTokens":40,"affinityRouting":false,"strategy":{"enableChainMatching":false,"enableTenantHot":false}}]})",
};

constexpr std::int64_t kBase = 1'700'000'000'000'000;

// The scope (tenant, model, hash scheme) of an update or a request, in the order the
// corpus inputs were written for.
template <class Message>
void pick_scope(Reader& in, Message& m) {
  m.set_tenant_id(in.pick(kTenants));
  m.set_model_id(in.pick(kModels));
  m.set_hash_scheme(in.pick(kSchemes));
}

void fill_prefix(Reader& in, pb::PrefixEntry* p) {
  const std::uint8_t shape = in.byte();
  const int blocks = shape % 5;
  for (int i = 0; i < blocks; ++i) {
    p->add_block_hashes(in.hash());
    p->add_block_token_counts(static_cast<std::int8_t>(in.byte()));
  }
  if (shape & 0x10) p->add_block_token_counts(16);  // malformed when it makes lengths differ
  if (shape & 0x20) p->set_prefix_hash(in.hash());
  p->set_token_count(static_cast<std::int8_t>(in.byte()));
  p->set_tier(static_cast<pb::CacheTier>(static_cast<int>(in.byte() % 7) - 2));
  p->set_adapter_id(in.pick(kAdapters));
}

void check_invariants(Shard& shard, const IndexConfig& cfg) {
  require(shard.entry_count() >= 0);
  require(shard.key_count() >= 0);
  require(shard.key_count() <= shard.entry_count());
  require(shard.entry_count() <= cfg.max_entries);
  const ShardSnapshot snap = shard.collect_snapshot();
  std::int64_t keys = 0;
  for (const TenantRow& t : snap.tenants) {
    require(t.tenant_id != "inferencecache.io/probe");
    keys += t.index_entries;
  }
  require(keys == snap.total_prefixes);
  require(keys == shard.key_count());
  std::int64_t entries = 0;
  for (const ReplicaRow& r : snap.replicas) entries += r.prefix_count;
  require(entries == shard.entry_count());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Reader in{data, size};
  IndexConfig cfg;
  cfg.max_entries = 24;
  cfg.engine_block_size = 2;
  cfg.key_seed = 1;  // a crash replays with the probe runs it had
  Shard shard(cfg, nullptr);
  ManualClock clock;
  clock.wall = kBase;
  clock.mono = 1'000'000;
  while (!in.done()) {
    const std::uint8_t op = in.byte();
    clock.wall += static_cast<std::int64_t>(in.byte()) * 10'000'000;  // up to ~42 min
    clock.mono += 100;
    switch (op % 6) {
      case 0:
      case 1: {
        pb::CacheStateUpdate u;
        pick_scope(in, u);
        u.set_replica_id(in.pick(kReplicas));
        u.set_adapter_id(in.pick(kAdapters));
        const std::uint8_t ts = in.byte();
        u.set_timestamp_us(ts == 0 ? 0 : clock.wall - static_cast<std::int64_t>(ts) * 20'000'000);
        const int prefixes = in.byte() % 4;
        for (int i = 0; i < prefixes; ++i) fill_prefix(in, u.add_prefixes());
        if (op & 0x40) {
          auto* s = u.mutable_stats();
          s->set_hit_rate(op & 0x80 ? NAN : static_cast<float>(in.byte()) / 255);
          s->set_pressure(op & 0x20 ? INFINITY : static_cast<float>(in.byte()) / 255);
          s->set_cache_memory_bytes(in.byte());
        }
        ic::sharding::wire::ingest(shard, u, clock.wall);
        break;
      }
      case 2: {
        pb::LookupRouteRequest r;
        pick_scope(in, r);
        r.set_adapter_id(in.pick(kAdapters));
        const std::uint8_t shape = in.byte();
        const int blocks = shape % 6;
        for (int i = 0; i < blocks; ++i) {
          r.add_block_hashes(in.hash());
          r.add_block_token_counts(static_cast<std::int8_t>(in.byte()));
        }
        if (shape & 0x08) r.add_block_token_counts(3);
        if (shape & 0x10) r.set_prefix_hash(in.hash());
        if (shape & 0x20) {
          for (int i = 0; i < in.byte() % 9; ++i) r.add_token_ids(in.byte());
        }
        if (shape & 0x40) r.set_prompt_text("hello");
        r.set_prefix_token_count(static_cast<std::int8_t>(in.byte()));
        r.mutable_slo()->set_ttft_ms(in.byte());
        LookupContext ctx;
        ctx.clock = &clock;
        if (shape & 0x80) ctx.deadline_mono_us = clock.mono + in.byte() % 3;
        pb::LookupRouteResponse out;
        ic::sharding::wire::lookup_route(shard, r, ctx, &out);
        require(!out.reason_code().empty());
        for (int i = 1; i < out.replica_scores_size(); ++i) {
          const auto& a = out.replica_scores(i - 1);
          const auto& b = out.replica_scores(i);
          require(a.score() > b.score() ||
                  (a.score() == b.score() && a.replica_id() < b.replica_id()));
        }
        for (const auto& s : out.replica_scores()) {
          require(std::isfinite(s.score()) && s.score() >= 0);
          require(s.estimated_cache_hit_prob() >= 0 && s.estimated_cache_hit_prob() <= 1);
        }
        break;
      }
      case 3: {
        pb::CacheEvent ev;
        ev.set_type(static_cast<pb::CacheEvent::Type>(in.byte() % 6));
        ev.set_tenant_id(in.pick(kTenants));
        ev.set_model_id(in.pick(kModels));
        ev.set_replica_id(in.pick(kReplicas));
        ev.set_adapter_id(in.pick(kAdapters));
        ev.set_prefix_hash(in.hash());
        ic::sharding::wire::apply_event(shard, ev, clock.wall);
        break;
      }
      case 4:
        shard.sweep_slice(clock.wall, 1 + in.byte() % 16);
        break;
      case 5: {
        const auto r = ic::config::parse_policy_json(in.pick(kPolicies));
        require(r.ok());
        shard.set_policies(r.set);
        break;
      }
    }
    check_invariants(shard, cfg);
    pb::GetCacheStateRequest g;
    g.set_tenant_id(in.pick(kTenants));
    g.set_model_id(in.pick(kModels));
    pb::GetCacheStateResponse gs;
    ic::sharding::wire::get_cache_state(shard, g, &gs);
    require(gs.summary().total_prefixes() >= 0);
  }
  return 0;
}
