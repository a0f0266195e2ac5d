#include "metrics/prometheus.hh"

#include "metrics/exposition.hh"
#include "metrics/grpc_server_metrics.hh"
#include "metrics/process.hh"

#include <charconv>
#include <cmath>
#include <initializer_list>
#include <type_traits>
#include <utility>

namespace ic::metrics {

namespace {

std::string core_label(unsigned core) { return std::to_string(core); }

void render_process(Writer& w, const ProcessFigures& p) {
  w.family("build_info", "gauge", "Build of the running server (value is always 1).");
  const buildinfo::BuildInfo& b = p.build;
  w.sample("build_info",
           {{"version", b.version},
            {"git_commit", b.git_commit},
            {"build_type", b.build_type},
            {"compiler", b.compiler},
            {"liburing", b.liburing},
            {"nghttp2", b.nghttp2},
            {"protobuf", b.protobuf},
            {"openssl", b.openssl},
            {"reactor_backend", p.reactor_backend}},
           1);
  w.single("server_up", "gauge", "1 while the server is serving.", p.server_up ? 1 : 0);
  w.single("server_grpc_tls_enabled", "gauge", "1 when the gRPC listener uses TLS.",
           p.grpc_tls_enabled ? 1 : 0);
  w.single("process_resident_memory_bytes", "gauge",
           "Resident set size of the server process in bytes (/proc/self/statm).",
           p.resident_memory_bytes);
  w.single("process_start_time_seconds", "gauge",
           "Start time of the server process since the Unix epoch in seconds.",
           p.start_time_seconds);
}

// The subsystems' process-wide families (Registry::add_group), in
// registration order.
void render_groups(Writer& w, const std::vector<Group>& groups) {
  for (const Group& group : groups) {
    if (!group.shown()) continue;
    for (const Family& family : group.families) {
      w.family(family.name, family.type, family.help);
      family.samples(w, family.name);
    }
  }
}

// The subsystems' per-core families (Registry::add_core_family) that render
// after `after`, in registration order; a family the sample holds no value of
// (an empty Sample) renders as its zeroed value would.
void render_core_families(Writer& w, const Sample& s, const Registrations& registered,
                          RenderAfter after) {
  for (std::size_t i = 0; i < registered.core_families.size(); ++i) {
    const CoreFamily& family = registered.core_families[i];
    if (family.after != after) continue;
    const CoreFamilyState* state = i < s.families.size() ? s.families[i].get() : nullptr;
    if (state != nullptr) {
      state->render(w);
    } else {
      family.make()->render(w);
    }
  }
}

void render_lookups(Writer& w, const Sample& s) {
  w.family("index_entries", "gauge", "Distinct prefix keys per model (reserved tenant excluded).");
  for (const auto& [model, keys] : s.index_entries) {
    w.sample("index_entries", {{"model", model}}, keys);
  }
  w.family("lookup_route_calls_total", "counter",
           "LookupRoute calls by model, reason code and whether a replica hint was returned.");
  for (const auto& [model, series] : s.lookups) {
    for (std::size_t r = 0; r < kReasonCount; ++r) {
      for (int hint = 0; hint < 2; ++hint) {
        const std::uint64_t n = series.calls[r][hint];
        if (n == 0) continue;
        w.sample("lookup_route_calls_total",
                 {{"model", model},
                  {"reason_code", to_label(static_cast<Reason>(r))},
                  {"hint_used", hint != 0 ? "true" : "false"}},
                 n);
      }
    }
  }
  w.family("lookup_route_latency_seconds", "histogram", "LookupRoute latency in seconds.");
  for (const auto& [model, series] : s.lookups) {
    std::uint64_t cumulative = 0;
    for (std::size_t b = 0; b < kLatencyBucketCount; ++b) {
      cumulative += series.buckets[b];
      const std::string le = format_double(static_cast<double>(kLatencyBucketsUs[b]) / 1e6);
      w.sample("lookup_route_latency_seconds", {{"model", model}, {"le", le}}, cumulative,
               "_bucket");
    }
    w.sample("lookup_route_latency_seconds", {{"model", model}, {"le", "+Inf"}}, series.count,
             "_bucket");
    w.sample("lookup_route_latency_seconds", {{"model", model}},
             static_cast<double>(series.sum_us) / 1e6, "_sum");
    w.sample("lookup_route_latency_seconds", {{"model", model}}, series.count, "_count");
  }
}

void render_evictions(Writer& w, const Sample& s, const Registrations& registered) {
  w.family("tenant_evictions_total", "counter",
           "Keys dropped by a tenant's maxIndexEntries quota.");
  for (const auto& [tenant, n] : s.tenant_evictions) {
    w.sample("tenant_evictions_total", {{"tenant_id", tenant}, {"reason", "over_entries"}}, n);
  }
  render_core_families(w, s, registered, RenderAfter::kTenantEvictions);
  w.family("index_evictions_total", "counter",
           "(key, replica) entries evicted by the global cap or the TTL sweep.");
  for (std::size_t a = 0; a < kEvictionAlgorithmCount; ++a) {
    for (std::size_t r = 0; r < kEvictionReasonCount; ++r) {
      w.sample("index_evictions_total",
               {{"algorithm", to_label(static_cast<EvictionAlgorithm>(a))},
                {"reason", to_label(static_cast<EvictionReason>(r))}},
               s.index_evictions[a][r]);
    }
  }
  w.single("index_stats_refused_total", "counter",
           "Stats of a replica new to its (tenant, model) refused at the index's bounds on stats "
           "entries.",
           s.index_stats_refused);
}

void render_auth(Writer& w, const Sample& s) {
  constexpr std::array<std::string_view, kAuthEndpointCount> kNames = {"snapshot_auth_total",
                                                                       "policy_auth_total"};
  constexpr std::array<std::string_view, kAuthEndpointCount> kHelp = {
      "Auth outcomes of GET /snapshot on the control listener.",
      "Auth outcomes of POST|PUT /policy on the control listener."};
  for (std::size_t e = 0; e < kAuthEndpointCount; ++e) {
    w.family(kNames[e], "counter", kHelp[e]);
    for (std::size_t r = 0; r < kAuthResultCount; ++r) {
      w.sample(kNames[e], {{"result", to_label(static_cast<AuthResult>(r))}}, s.auth[e][r]);
    }
  }
}

void render_traffic(Writer& w, const Sample& s) {
  w.single("ingest_messages_total", "counter", "CacheStateUpdate messages ingested.",
           s.ingest_messages);
  w.single("ingest_entries_total", "counter",
           "(key, replica) entries upserted by ingested CacheStateUpdate messages.",
           s.ingest_entries);
  w.family("events_total", "counter", "PublishEvent messages received by event type.");
  for (std::size_t t = 0; t < kEventTypeCount; ++t) {
    w.sample("events_total", {{"type", event_label(t)}}, s.events[t]);
  }
  w.family("open_connections", "gauge", "Open connections by listener.");
  for (std::size_t l = 0; l < kListenerCount; ++l) {
    w.sample("open_connections", {{"listener", to_label(static_cast<Listener>(l))}},
             s.open_connections[l]);
  }
  w.family("connections_accepted_total", "counter", "Connections accepted by listener.");
  for (std::size_t l = 0; l < kListenerCount; ++l) {
    w.sample("connections_accepted_total", {{"listener", to_label(static_cast<Listener>(l))}},
             s.accepted_connections[l]);
  }
  w.single("open_streams", "gauge", "Open HTTP/2 streams on gRPC connections.", s.open_streams);
  w.single("http_requests_total", "counter", "HTTP requests answered by the admin listeners.",
           s.http_requests);
}

// The subsystems' per-core counter families (Registry::add_counter_family),
// summed over the cores, in registration order.
void render_counter_families(Writer& w, const Sample& s,
                             const std::vector<CounterFamily>& families) {
  std::size_t at = 0;
  for (const CounterFamily& family : families) {
    w.family(family.name, "counter", family.help);
    for (const std::string_view value : family.values) {
      w.sample(family.name, {{family.label, value}}, at < s.counters.size() ? s.counters[at] : 0);
      ++at;
    }
  }
}

void render_reloads(Writer& w, const Sample& s) {
  w.family("policy_reloads_total", "counter",
           "Policy snapshots applied (ok) or rejected (error) by source.");
  for (std::size_t src = 0; src < kPolicySourceCount; ++src) {
    for (int ok = 0; ok < 2; ++ok) {
      w.sample("policy_reloads_total",
               {{"source", to_label(static_cast<PolicySource>(src))},
                {"result", ok == 0 ? "ok" : "error"}},
               s.policy_reloads[src][ok]);
    }
  }
  w.family("prompt_text_failures_total", "counter",
           "prompt_text lookups that failed open (NO_HINT) without tokens, by reason.");
  for (std::size_t r = 0; r < kPromptTextFailureCount; ++r) {
    w.sample("prompt_text_failures_total",
             {{"reason", to_label(static_cast<PromptTextFailure>(r))}}, s.prompt_text_failures[r]);
  }
}

void render_cores(Writer& w, const Sample& s) {
  struct Column {
    std::string_view name, type, help;
    std::int64_t (*get)(const CoreFigures&);
  };
  const std::array<Column, 6> columns = {{
      {"core_lookup_route_calls_total", "counter", "LookupRoute calls recorded per core.",
       [](const CoreFigures& c) { return static_cast<std::int64_t>(c.lookups); }},
      {"core_cross_core_posts_total", "counter", "Tasks posted from this core to other cores.",
       [](const CoreFigures& c) { return static_cast<std::int64_t>(c.cross_core_posts); }},
      {"core_cross_core_post_drops_total", "counter",
       "Tasks this core could not post because a mailbox was full (load shed).",
       [](const CoreFigures& c) { return static_cast<std::int64_t>(c.cross_core_post_drops); }},
      {"core_mailbox_depth", "gauge", "Tasks waiting in this core's inbound mailboxes.",
       [](const CoreFigures& c) { return c.mailbox_depth; }},
      {"core_index_entries", "gauge", "(key, replica) entries held by this core's index shard.",
       [](const CoreFigures& c) { return c.index_entries; }},
      {"core_io_uring_setup_flags", "gauge",
       "IORING_SETUP_* flags of this core's ring (SINGLE_ISSUER 4096, DEFER_TASKRUN 8192, "
       "COOP_TASKRUN 256, SUBMIT_ALL 128, CQSIZE 8).",
       [](const CoreFigures& c) { return c.ring_setup_flags; }},
  }};
  for (const Column& col : columns) {
    w.family(col.name, col.type, col.help);
    for (const CoreFigures& c : s.cores) {
      w.sample(col.name, {{"core", core_label(c.core)}}, col.get(c));
    }
  }
}

}  // namespace

std::string render_prometheus(const Sample& sample, const ProcessFigures& process,
                              const Registrations& registered) {
  std::string out;
  out.reserve(4096 + sample.lookups.size() * 2048);
  Writer w(out);
  render_process(w, process);
  render_groups(w, registered.groups);
  render_lookups(w, sample);
  render_evictions(w, sample, registered);
  render_core_families(w, sample, registered, RenderAfter::kIndexEvictions);
  render_auth(w, sample);
  render_traffic(w, sample);
  render_counter_families(w, sample, registered.counter_families);
  render_reloads(w, sample);
  render_core_families(w, sample, registered, RenderAfter::kPromptTextFailures);
  render_cores(w, sample);
  render_process_collector(out, process.stats, process.start_time_seconds);
  render_grpc_server(out, sample.rpc);
  return out;
}

}  // namespace ic::metrics
