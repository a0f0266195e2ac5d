#include "metrics/core_metrics.hh"

#include <doctest/doctest.h>

#include <string>

#include "metrics/registry.hh"

using namespace ic::metrics;

TEST_CASE("reason codes map both ways") {
  CHECK(reason_from_code("PREFIX_MATCH") == Reason::kPrefixMatch);
  CHECK(reason_from_code("UNKNOWN_HASH_SCHEME") == Reason::kUnknownHashScheme);
  CHECK(reason_from_code("NO_HINT") == Reason::kNoHint);
  CHECK(reason_from_code("OTHER") == Reason::kOther);
  CHECK(reason_from_code("prefix_match") == Reason::kOther);
  CHECK(to_label(Reason::kPolicyRequiresChain) == "POLICY_REQUIRES_CHAIN");
  CHECK(event_slot(4) == 4);
  CHECK(event_label(event_slot(4)) == "ALL_CLEARED");
  CHECK(event_label(event_slot(0)) == "TYPE_UNSPECIFIED");
  CHECK(event_slot(5) == 5);
  CHECK(event_slot(-1) == 5);
  CHECK(event_label(event_slot(-1)) == "UNKNOWN");
}

TEST_CASE("record_lookup counts per reason and hint and fills latency buckets") {
  CoreMetrics m(3);
  m.record_lookup("llama", "PREFIX_MATCH", true, 10);    // bucket 10µs (inclusive)
  m.record_lookup("llama", "PREFIX_MATCH", true, 11);    // bucket 25µs
  m.record_lookup("llama", Reason::kNoHint, false, -5);  // clamped to 0 → bucket 10µs
  m.record_lookup("llama", "NO_HINT", false, 200000);    // over 0.1 s → +Inf only
  m.record_lookup("qwen", "TIMEOUT", false, 100);        // bucket 100µs
  Sample s = m.collect();
  REQUIRE(s.lookups.size() == 2);
  const LookupSeries& llama = s.lookups.at("llama");
  CHECK(llama.calls[0][1] == 2);
  CHECK(llama.calls[0][0] == 0);
  CHECK(llama.calls[3][0] == 2);
  CHECK(llama.buckets[0] == 2);
  CHECK(llama.buckets[1] == 1);
  CHECK(llama.count == 4);
  CHECK(llama.sum_us == 200021);
  const LookupSeries& qwen = s.lookups.at("qwen");
  CHECK(qwen.calls[5][0] == 1);
  CHECK(qwen.buckets[3] == 1);
  REQUIRE(s.cores.size() == 1);
  CHECK(s.cores[0].core == 3);
  CHECK(s.cores[0].lookups == 5);
}

TEST_CASE("dynamic labels fold into the overflow series past the limit") {
  CoreMetrics m(0);
  for (std::size_t i = 0; i < kMaxDynamicSeries + 10; ++i) {
    m.record_lookup("model-" + std::to_string(i), Reason::kNoHint, false, 1);
  }
  Sample s = m.collect();
  CHECK(s.lookups.size() == kMaxDynamicSeries);
  // kMaxDynamicSeries - 1 real models, the rest (11) in the overflow series.
  CHECK(s.lookups.at(std::string(kOverflowLabel)).count == 11);
  CHECK(s.lookups.count("model-1022") == 1);
  CHECK(s.lookups.count("model-1023") == 0);
}

TEST_CASE("collect resets index_entries gauges before collectors so a drained model shows 0") {
  CoreMetrics m(0);
  int round = 0;
  m.add_collector([&round](CoreMetrics& self) {
    if (round == 0) self.set_index_entries("llama", 12);
    self.set_index_entries("qwen", 3 + round);
    self.set_core_index_entries(40);
    self.set_mailbox_depth(7);
  });
  Sample first = m.collect();
  CHECK(first.index_entries.at("llama") == 12);
  CHECK(first.index_entries.at("qwen") == 3);
  round = 1;
  Sample second = m.collect();
  CHECK(second.index_entries.at("llama") == 0);
  CHECK(second.index_entries.at("qwen") == 4);
  CHECK(second.cores[0].index_entries == 40);
  CHECK(second.cores[0].mailbox_depth == 7);
}

TEST_CASE("merge sums counters and gauges per label set and appends core rows") {
  CoreMetrics a(0);
  CoreMetrics b(1);
  a.record_lookup("llama", "PREFIX_MATCH", true, 30);
  b.record_lookup("llama", "PREFIX_MATCH", true, 40);
  b.record_lookup("qwen", "UNKNOWN_MODEL", false, 5);
  a.add_ingest(5);
  b.add_ingest(7);
  a.add_event(2);  // PREFIX_EVICTED
  b.add_event(2);  // PREFIX_EVICTED
  a.add_tenant_evictions("team-a", 2);
  b.add_tenant_evictions("team-a", 3);
  a.add_index_evictions(EvictionAlgorithm::kLfu, EvictionReason::kTtl, 4);
  b.add_auth(AuthEndpoint::kPolicy, AuthResult::kForbidden);
  a.connection_opened(Listener::kGrpc);
  a.connection_opened(Listener::kGrpc);
  a.connection_closed(Listener::kGrpc);
  b.connection_opened(Listener::kGrpc);
  b.stream_opened();
  b.add_policy_reload(PolicySource::kFile, false);
  a.add_cross_core_post(true);
  a.add_cross_core_post(false);

  Sample merged;
  merged.merge(a.collect());
  merged.merge(b.collect());
  CHECK(merged.lookups.at("llama").calls[0][1] == 2);
  CHECK(merged.lookups.at("llama").sum_us == 70);
  CHECK(merged.lookups.at("llama").buckets[2] == 2);  // (25, 50] µs
  CHECK(merged.lookups.at("qwen").calls[7][0] == 1);
  CHECK(merged.ingest_messages == 2);
  CHECK(merged.ingest_entries == 12);
  CHECK(merged.events[2] == 2);
  CHECK(merged.tenant_evictions.at("team-a") == 5);
  CHECK(merged.index_evictions[1][1] == 4);
  CHECK(merged.auth[1][2] == 1);
  CHECK(merged.open_connections[0] == 2);
  CHECK(merged.accepted_connections[0] == 3);
  CHECK(merged.open_streams == 1);
  CHECK(merged.policy_reloads[1][1] == 1);
  REQUIRE(merged.cores.size() == 2);
  CHECK(merged.cores[0].cross_core_posts == 1);
  CHECK(merged.cores[0].cross_core_post_drops == 1);
  CHECK(merged.cores[1].core == 1);
  CHECK(merged.cores[1].lookups == 2);
}

TEST_CASE("registry binds local() per thread; unbound threads get a scratch registry") {
  Registry registry(2);
  CHECK(registry.cores() == 2);
  CoreMetrics& scratch = local();
  CHECK(&scratch != &registry.core(0));
  registry.bind_current_thread(1);
  CHECK(&local() == &registry.core(1));
  local().add_ingest(1);
  CHECK(registry.core(1).collect().ingest_messages == 1);
  registry.set_server_up(true);
  ProcessFigures p = registry.process_figures();
  CHECK(p.server_up);
  CHECK_FALSE(p.grpc_tls_enabled);
  CHECK(p.resident_memory_bytes > 0);
  CHECK(p.build.version == "0.1.0");
  CHECK(p.build.git_commit.size() >= 7);  // a commit hash, or "unknown" outside git
  CHECK(p.stats.open_fds >= 3);           // stdin, stdout, stderr at least
  CHECK(p.stats.max_fds >= p.stats.open_fds);
  CHECK(p.stats.resident_memory_bytes > 0);
  CHECK(p.stats.virtual_memory_bytes >= p.stats.resident_memory_bytes);
  CHECK(p.stats.cpu_seconds >= 0);
}

TEST_CASE("collectors copy cumulative eviction totals kept by the shard") {
  CoreMetrics m(0);
  std::uint64_t cap = 5;
  m.add_collector([&cap](CoreMetrics& self) {
    self.set_index_evictions(EvictionAlgorithm::kLfu, EvictionReason::kCap, cap);
    self.set_tenant_evictions("team-b", cap * 2);
  });
  CHECK(m.collect().index_evictions[1][0] == 5);
  cap = 8;
  Sample s = m.collect();
  CHECK(s.index_evictions[1][0] == 8);
  CHECK(s.tenant_evictions.at("team-b") == 16);
}

TEST_CASE("alternating models land in their own series") {
  CoreMetrics m(0);
  for (int i = 0; i < 6; ++i) m.record_lookup(i % 2 == 0 ? "a" : "bb", Reason::kTenantHot, true, 1);
  m.record_lookup("a", Reason::kTenantHot, false, 1);
  Sample s = m.collect();
  CHECK(s.lookups.at("a").calls[1][1] == 3);
  CHECK(s.lookups.at("a").calls[1][0] == 1);
  CHECK(s.lookups.at("bb").calls[1][1] == 3);
}
