#include "metrics/prometheus.hh"

#include <doctest/doctest.h>

#include <string>

#include "gateway/gateway_metrics.hh"
#include "metrics/core_metrics.hh"
#include "metrics/registry.hh"
#include "sharding/replica_hit_metrics.hh"
#include "templates/template_metrics.hh"

using namespace ic::metrics;

TEST_CASE("label values escape backslash, quote and newline") {
  std::string out;
  append_label_value(out, "a\\b\"c\nd");
  CHECK(out == "a\\\\b\\\"c\\nd");
}

TEST_CASE("doubles use Prometheus spellings") {
  CHECK(format_double(0.0001) == "0.0001");
  CHECK(format_double(1e-05) == "1e-05");
  CHECK(format_double(2.5e-05) == "2.5e-05");
  CHECK(format_double(0.200041) == "0.200041");
  CHECK(format_double(1.0 / 0.0) == "+Inf");
  CHECK(format_double(-1.0 / 0.0) == "-Inf");
  CHECK(format_double(0.0 / 0.0) == "NaN");
}

TEST_CASE("a known registry renders byte for byte") {
  Registry registry(1);
  // The rpc layer's family (rpc/peer_limit_metrics.cc), registered as it does.
  const CounterFamilyId peer_limit_hits = registry.add_counter_family(
      {.name = "peer_limit_hits_total",
       .help = "Hostile-peer limits hit on gRPC connections by kind (docs/hostile-peers.md).",
       .label = "kind",
       .values = {"header_timeout", "body_timeout", "window_stall", "half_closed",
                  "hpack_expansion", "rejected_headers", "flood"}});
  // The subsystems' own families, registered by them as App::register_metrics does.
  ic::templates::register_template_metrics(registry);
  ic::gateway::register_gateway_metrics(registry);
  ic::sharding::register_replica_hit_metrics(registry);
  CoreMetrics& core = registry.core(0);
  registry.bind_current_thread(0);  // their counts go to metrics::local()
  core.record_lookup("llama", "PREFIX_MATCH", true, 10);
  core.record_lookup("llama", "PREFIX_MATCH", true, 30);
  core.record_lookup("llama", "NO_HINT", false, 200001);
  core.add_collector([](CoreMetrics& self) {
    self.set_index_entries("llama", 12);
    self.set_index_entries("q\"x", 0);
    self.set_core_index_entries(15);
    self.set_mailbox_depth(2);
    self.set_ring_setup_flags(12424);  // SINGLE_ISSUER|DEFER_TASKRUN|SUBMIT_ALL|CQSIZE
    self.set_index_stats_refused(2);
  });
  core.add_tenant_evictions("team-a", 2);
  ic::templates::count_cache_bust("team-a/agent");
  core.add_index_evictions(EvictionAlgorithm::kLru, EvictionReason::kCap, 3);
  core.add_auth(AuthEndpoint::kSnapshot, AuthResult::kOk);
  core.add_prompt_text_failure(ic::metrics::PromptTextFailure::kNoTokenizer);
  ic::gateway::record_pick(ic::gateway::PickReason::kPrefixMatch, std::nullopt, 40);
  ic::gateway::record_pick(ic::gateway::PickReason::kFailOpen, ic::gateway::FailOpen::kNotJson,
                           300);
  ic::gateway::record_served(ic::gateway::Served::kFallback);
  core.add_auth(AuthEndpoint::kPolicy, AuthResult::kUnauth);
  core.add_ingest(9);
  core.add_event(4);             // CacheEvent.Type ALL_CLEARED
  core.add(peer_limit_hits, 4);  // hpack_expansion
  core.add(peer_limit_hits, 4);
  core.add(peer_limit_hits, 3);  // half_closed
  core.connection_opened(Listener::kHttp);
  core.stream_opened();
  core.add_http_request();
  core.add_policy_reload(PolicySource::kHttp, true);
  core.add_cross_core_post(true);
  const ProcessFigures process{.server_up = true,
                               .grpc_tls_enabled = false,
                               .resident_memory_bytes = 4096,
                               .start_time_seconds = 1700000000.5,
                               .build = {.version = "0.1.0",
                                         .git_commit = "0123456789ab",
                                         .build_type = "release",
                                         .compiler = "gcc 12.2.0",
                                         .liburing = "2.3",
                                         .nghttp2 = "1.52.0",
                                         .protobuf = "3.21.12",
                                         .openssl = "3.0.11"},
                               .stats = {.cpu_seconds = 1.25,
                                         .open_fds = 17,
                                         .max_fds = 1024,
                                         .resident_memory_bytes = 8192,
                                         .virtual_memory_bytes = 65536}};
  const std::string expected =
      "# HELP inferencecache_build_info Build of the running server (value is always 1).\n"
      "# TYPE inferencecache_build_info gauge\n"
      "inferencecache_build_info{version=\"0.1.0\",git_commit=\"0123456789ab\","
      "build_type=\"release\",compiler=\"gcc 12.2.0\",liburing=\"2.3\",nghttp2=\"1.52.0\","
      "protobuf=\"3.21.12\",openssl=\"3.0.11\",reactor_backend=\"io_uring\"} 1\n"
      "# HELP inferencecache_server_up 1 while the server is serving.\n"
      "# TYPE inferencecache_server_up gauge\n"
      "inferencecache_server_up 1\n"
      "# HELP inferencecache_server_grpc_tls_enabled 1 when the gRPC listener uses TLS.\n"
      "# TYPE inferencecache_server_grpc_tls_enabled gauge\n"
      "inferencecache_server_grpc_tls_enabled 0\n"
      "# HELP inferencecache_process_resident_memory_bytes Resident set size of the server "
      "process in bytes (/proc/self/statm).\n"
      "# TYPE inferencecache_process_resident_memory_bytes gauge\n"
      "inferencecache_process_resident_memory_bytes 4096\n"
      "# HELP inferencecache_process_start_time_seconds Start time of the server process since "
      "the Unix epoch in seconds.\n"
      "# TYPE inferencecache_process_start_time_seconds gauge\n"
      "inferencecache_process_start_time_seconds 1.7000000005e+09\n"
      "# HELP inferencecache_index_entries Distinct prefix keys per model (reserved tenant "
      "excluded).\n"
      "# TYPE inferencecache_index_entries gauge\n"
      "inferencecache_index_entries{model=\"llama\"} 12\n"
      "inferencecache_index_entries{model=\"q\\\"x\"} 0\n"
      "# HELP inferencecache_lookup_route_calls_total LookupRoute calls by model, reason code and "
      "whether a replica hint was returned.\n"
      "# TYPE inferencecache_lookup_route_calls_total counter\n"
      "inferencecache_lookup_route_calls_total{model=\"llama\",reason_code=\"PREFIX_MATCH\","
      "hint_used=\"true\"} 2\n"
      "inferencecache_lookup_route_calls_total{model=\"llama\",reason_code=\"NO_HINT\","
      "hint_used=\"false\"} 1\n"
      "# HELP inferencecache_lookup_route_latency_seconds LookupRoute latency in seconds.\n"
      "# TYPE inferencecache_lookup_route_latency_seconds histogram\n"
      "inferencecache_lookup_route_latency_seconds_bucket{model=\"llama\",le=\"1e-05\"} 1\n"
      "inferencecache_lookup_route_latency_seconds_bucket{model=\"llama\",le=\"2.5e-05\"} 1\n"
      "inferencecache_lookup_route_latency_seconds_bucket{model=\"llama\",le=\"5e-05\"} 2\n"
      "inferencecache_lookup_route_latency_seconds_bucket{model=\"llama\",le=\"0.0001\"} 2\n"
      "inferencecache_lookup_route_latency_seconds_bucket{model=\"llama\",le=\"0.00025\"} 2\n"
      "inferencecache_lookup_route_latency_seconds_bucket{model=\"llama\",le=\"0.0005\"} 2\n"
      "inferencecache_lookup_route_latency_seconds_bucket{model=\"llama\",le=\"0.001\"} 2\n"
      "inferencecache_lookup_route_latency_seconds_bucket{model=\"llama\",le=\"0.0025\"} 2\n"
      "inferencecache_lookup_route_latency_seconds_bucket{model=\"llama\",le=\"0.005\"} 2\n"
      "inferencecache_lookup_route_latency_seconds_bucket{model=\"llama\",le=\"0.01\"} 2\n"
      "inferencecache_lookup_route_latency_seconds_bucket{model=\"llama\",le=\"0.025\"} 2\n"
      "inferencecache_lookup_route_latency_seconds_bucket{model=\"llama\",le=\"0.05\"} 2\n"
      "inferencecache_lookup_route_latency_seconds_bucket{model=\"llama\",le=\"0.1\"} 2\n"
      "inferencecache_lookup_route_latency_seconds_bucket{model=\"llama\",le=\"+Inf\"} 3\n"
      "inferencecache_lookup_route_latency_seconds_sum{model=\"llama\"} 0.200041\n"
      "inferencecache_lookup_route_latency_seconds_count{model=\"llama\"} 3\n"
      "# HELP inferencecache_tenant_evictions_total Keys dropped by a tenant's maxIndexEntries "
      "quota.\n"
      "# TYPE inferencecache_tenant_evictions_total counter\n"
      "inferencecache_tenant_evictions_total{tenant_id=\"team-a\",reason=\"over_entries\"} 2\n"
      "# HELP inferencecache_template_cache_busts_total RenderTemplate calls whose volatile part "
      "began before a large stable section.\n"
      "# TYPE inferencecache_template_cache_busts_total counter\n"
      "inferencecache_template_cache_busts_total{template=\"team-a/agent\"} 1\n"
      "# HELP inferencecache_index_evictions_total (key, replica) entries evicted by the global "
      "cap or the TTL sweep.\n"
      "# TYPE inferencecache_index_evictions_total counter\n"
      "inferencecache_index_evictions_total{algorithm=\"lru\",reason=\"cap\"} 3\n"
      "inferencecache_index_evictions_total{algorithm=\"lru\",reason=\"ttl\"} 0\n"
      "inferencecache_index_evictions_total{algorithm=\"lfu\",reason=\"cap\"} 0\n"
      "inferencecache_index_evictions_total{algorithm=\"lfu\",reason=\"ttl\"} 0\n"
      "# HELP inferencecache_index_stats_refused_total Stats of a replica new to its (tenant, "
      "model) refused at the index's bounds on stats entries.\n"
      "# TYPE inferencecache_index_stats_refused_total counter\n"
      "inferencecache_index_stats_refused_total 2\n"
      "# HELP inferencecache_snapshot_auth_total Auth outcomes of GET /snapshot on the control "
      "listener.\n"
      "# TYPE inferencecache_snapshot_auth_total counter\n"
      "inferencecache_snapshot_auth_total{result=\"ok\"} 1\n"
      "inferencecache_snapshot_auth_total{result=\"unauth\"} 0\n"
      "inferencecache_snapshot_auth_total{result=\"forbidden\"} 0\n"
      "inferencecache_snapshot_auth_total{result=\"error\"} 0\n"
      "# HELP inferencecache_policy_auth_total Auth outcomes of POST|PUT /policy on the control "
      "listener.\n"
      "# TYPE inferencecache_policy_auth_total counter\n"
      "inferencecache_policy_auth_total{result=\"ok\"} 0\n"
      "inferencecache_policy_auth_total{result=\"unauth\"} 1\n"
      "inferencecache_policy_auth_total{result=\"forbidden\"} 0\n"
      "inferencecache_policy_auth_total{result=\"error\"} 0\n"
      "# HELP inferencecache_ingest_messages_total CacheStateUpdate messages ingested.\n"
      "# TYPE inferencecache_ingest_messages_total counter\n"
      "inferencecache_ingest_messages_total 1\n"
      "# HELP inferencecache_ingest_entries_total (key, replica) entries upserted by ingested "
      "CacheStateUpdate messages.\n"
      "# TYPE inferencecache_ingest_entries_total counter\n"
      "inferencecache_ingest_entries_total 9\n"
      "# HELP inferencecache_events_total PublishEvent messages received by event type.\n"
      "# TYPE inferencecache_events_total counter\n"
      "inferencecache_events_total{type=\"TYPE_UNSPECIFIED\"} 0\n"
      "inferencecache_events_total{type=\"PREFIX_ADDED\"} 0\n"
      "inferencecache_events_total{type=\"PREFIX_EVICTED\"} 0\n"
      "inferencecache_events_total{type=\"REPLICA_UPDATED\"} 0\n"
      "inferencecache_events_total{type=\"ALL_CLEARED\"} 1\n"
      "inferencecache_events_total{type=\"UNKNOWN\"} 0\n"
      "# HELP inferencecache_open_connections Open connections by listener.\n"
      "# TYPE inferencecache_open_connections gauge\n"
      "inferencecache_open_connections{listener=\"grpc\"} 0\n"
      "inferencecache_open_connections{listener=\"http\"} 1\n"
      "inferencecache_open_connections{listener=\"control\"} 0\n"
      "# HELP inferencecache_connections_accepted_total Connections accepted by listener.\n"
      "# TYPE inferencecache_connections_accepted_total counter\n"
      "inferencecache_connections_accepted_total{listener=\"grpc\"} 0\n"
      "inferencecache_connections_accepted_total{listener=\"http\"} 1\n"
      "inferencecache_connections_accepted_total{listener=\"control\"} 0\n"
      "# HELP inferencecache_open_streams Open HTTP/2 streams on gRPC connections.\n"
      "# TYPE inferencecache_open_streams gauge\n"
      "inferencecache_open_streams 1\n"
      "# HELP inferencecache_http_requests_total HTTP requests answered by the admin listeners.\n"
      "# TYPE inferencecache_http_requests_total counter\n"
      "inferencecache_http_requests_total 1\n"
      "# HELP inferencecache_peer_limit_hits_total Hostile-peer limits hit on gRPC connections "
      "by kind (docs/hostile-peers.md).\n"
      "# TYPE inferencecache_peer_limit_hits_total counter\n"
      "inferencecache_peer_limit_hits_total{kind=\"header_timeout\"} 0\n"
      "inferencecache_peer_limit_hits_total{kind=\"body_timeout\"} 0\n"
      "inferencecache_peer_limit_hits_total{kind=\"window_stall\"} 0\n"
      "inferencecache_peer_limit_hits_total{kind=\"half_closed\"} 1\n"
      "inferencecache_peer_limit_hits_total{kind=\"hpack_expansion\"} 2\n"
      "inferencecache_peer_limit_hits_total{kind=\"rejected_headers\"} 0\n"
      "inferencecache_peer_limit_hits_total{kind=\"flood\"} 0\n"
      "# HELP inferencecache_policy_reloads_total Policy snapshots applied (ok) or rejected "
      "(error) by source.\n"
      "# TYPE inferencecache_policy_reloads_total counter\n"
      "inferencecache_policy_reloads_total{source=\"http\",result=\"ok\"} 1\n"
      "inferencecache_policy_reloads_total{source=\"http\",result=\"error\"} 0\n"
      "inferencecache_policy_reloads_total{source=\"file\",result=\"ok\"} 0\n"
      "inferencecache_policy_reloads_total{source=\"file\",result=\"error\"} 0\n"
      "# HELP inferencecache_prompt_text_failures_total prompt_text lookups that failed open "
      "(NO_HINT) without tokens, by reason.\n"
      "# TYPE inferencecache_prompt_text_failures_total counter\n"
      "inferencecache_prompt_text_failures_total{reason=\"no_tokenizer\"} 1\n"
      "inferencecache_prompt_text_failures_total{reason=\"too_long\"} 0\n"
      "inferencecache_prompt_text_failures_total{reason=\"template\"} 0\n"
      "inferencecache_prompt_text_failures_total{reason=\"tokenize\"} 0\n"
      "inferencecache_prompt_text_failures_total{reason=\"timeout\"} 0\n"
      "inferencecache_prompt_text_failures_total{reason=\"busy\"} 0\n"
      "inferencecache_prompt_text_failures_total{reason=\"cpu_budget\"} 0\n"
      "# HELP inferencecache_gateway_picks_total Endpoint picker (ext_proc) picks by why the first "
      "endpoint was chosen.\n"
      "# TYPE inferencecache_gateway_picks_total counter\n"
      "inferencecache_gateway_picks_total{reason=\"prefix_match\"} 1\n"
      "inferencecache_gateway_picks_total{reason=\"ranked\"} 0\n"
      "inferencecache_gateway_picks_total{reason=\"load\"} 0\n"
      "inferencecache_gateway_picks_total{reason=\"fail_open\"} 1\n"
      "inferencecache_gateway_picks_total{reason=\"no_endpoint\"} 0\n"
      "inferencecache_gateway_picks_total{reason=\"shed\"} 0\n"
      "# HELP inferencecache_gateway_fail_open_total Endpoint picker picks made by load because "
      "the "
      "body gave no token ids, by reason.\n"
      "# TYPE inferencecache_gateway_fail_open_total counter\n"
      "inferencecache_gateway_fail_open_total{reason=\"not_json\"} 1\n"
      "inferencecache_gateway_fail_open_total{reason=\"no_model\"} 0\n"
      "inferencecache_gateway_fail_open_total{reason=\"no_prompt\"} 0\n"
      "inferencecache_gateway_fail_open_total{reason=\"unknown_model\"} 0\n"
      "inferencecache_gateway_fail_open_total{reason=\"template\"} 0\n"
      "inferencecache_gateway_fail_open_total{reason=\"tokenize\"} 0\n"
      "inferencecache_gateway_fail_open_total{reason=\"too_long\"} 0\n"
      "inferencecache_gateway_fail_open_total{reason=\"timeout\"} 0\n"
      "inferencecache_gateway_fail_open_total{reason=\"body_too_large\"} 0\n"
      "inferencecache_gateway_fail_open_total{reason=\"no_body\"} 0\n"
      "inferencecache_gateway_fail_open_total{reason=\"busy\"} 0\n"
      "# HELP inferencecache_gateway_served_total Picked requests whose response began, by the "
      "endpoint that served (picked or a fallback).\n"
      "# TYPE inferencecache_gateway_served_total counter\n"
      "inferencecache_gateway_served_total{endpoint=\"picked\"} 0\n"
      "inferencecache_gateway_served_total{endpoint=\"fallback\"} 1\n"
      "# HELP inferencecache_gateway_pick_latency_seconds Endpoint picker pick latency (body "
      "parsed, tokenized, looked up) in seconds.\n"
      "# TYPE inferencecache_gateway_pick_latency_seconds histogram\n"
      "inferencecache_gateway_pick_latency_seconds_bucket{le=\"1e-05\"} 0\n"
      "inferencecache_gateway_pick_latency_seconds_bucket{le=\"2.5e-05\"} 0\n"
      "inferencecache_gateway_pick_latency_seconds_bucket{le=\"5e-05\"} 1\n"
      "inferencecache_gateway_pick_latency_seconds_bucket{le=\"0.0001\"} 1\n"
      "inferencecache_gateway_pick_latency_seconds_bucket{le=\"0.00025\"} 1\n"
      "inferencecache_gateway_pick_latency_seconds_bucket{le=\"0.0005\"} 2\n"
      "inferencecache_gateway_pick_latency_seconds_bucket{le=\"0.001\"} 2\n"
      "inferencecache_gateway_pick_latency_seconds_bucket{le=\"0.0025\"} 2\n"
      "inferencecache_gateway_pick_latency_seconds_bucket{le=\"0.005\"} 2\n"
      "inferencecache_gateway_pick_latency_seconds_bucket{le=\"0.01\"} 2\n"
      "inferencecache_gateway_pick_latency_seconds_bucket{le=\"0.025\"} 2\n"
      "inferencecache_gateway_pick_latency_seconds_bucket{le=\"0.05\"} 2\n"
      "inferencecache_gateway_pick_latency_seconds_bucket{le=\"0.1\"} 2\n"
      "inferencecache_gateway_pick_latency_seconds_bucket{le=\"+Inf\"} 2\n"
      "inferencecache_gateway_pick_latency_seconds_sum 0.00034\n"
      "inferencecache_gateway_pick_latency_seconds_count 2\n"
      "# HELP inferencecache_core_lookup_route_calls_total LookupRoute calls recorded per core.\n"
      "# TYPE inferencecache_core_lookup_route_calls_total counter\n"
      "inferencecache_core_lookup_route_calls_total{core=\"0\"} 3\n"
      "# HELP inferencecache_core_cross_core_posts_total Tasks posted from this core to other "
      "cores.\n"
      "# TYPE inferencecache_core_cross_core_posts_total counter\n"
      "inferencecache_core_cross_core_posts_total{core=\"0\"} 1\n"
      "# HELP inferencecache_core_cross_core_post_drops_total Tasks this core could not post "
      "because a mailbox was full (load shed).\n"
      "# TYPE inferencecache_core_cross_core_post_drops_total counter\n"
      "inferencecache_core_cross_core_post_drops_total{core=\"0\"} 0\n"
      "# HELP inferencecache_core_mailbox_depth Tasks waiting in this core's inbound mailboxes.\n"
      "# TYPE inferencecache_core_mailbox_depth gauge\n"
      "inferencecache_core_mailbox_depth{core=\"0\"} 2\n"
      "# HELP inferencecache_core_index_entries (key, replica) entries held by this core's "
      "index shard.\n"
      "# TYPE inferencecache_core_index_entries gauge\n"
      "inferencecache_core_index_entries{core=\"0\"} 15\n"
      "# HELP inferencecache_core_io_uring_setup_flags IORING_SETUP_* flags of this core's ring "
      "(SINGLE_ISSUER 4096, DEFER_TASKRUN 8192, COOP_TASKRUN 256, SUBMIT_ALL 128, CQSIZE 8).\n"
      "# TYPE inferencecache_core_io_uring_setup_flags gauge\n"
      "inferencecache_core_io_uring_setup_flags{core=\"0\"} 12424\n"
      "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n"
      "# TYPE process_cpu_seconds_total counter\n"
      "process_cpu_seconds_total 1.25\n"
      "# HELP process_open_fds Number of open file descriptors.\n"
      "# TYPE process_open_fds gauge\n"
      "process_open_fds 17\n"
      "# HELP process_max_fds Maximum number of open file descriptors.\n"
      "# TYPE process_max_fds gauge\n"
      "process_max_fds 1024\n"
      "# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
      "# TYPE process_resident_memory_bytes gauge\n"
      "process_resident_memory_bytes 8192\n"
      "# HELP process_virtual_memory_bytes Virtual memory size in bytes.\n"
      "# TYPE process_virtual_memory_bytes gauge\n"
      "process_virtual_memory_bytes 65536\n"
      "# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.\n"
      "# TYPE process_start_time_seconds gauge\n"
      "process_start_time_seconds 1.7000000005e+09\n"
      "# HELP grpc_server_started_total Total number of RPCs started on the server.\n"
      "# TYPE grpc_server_started_total counter\n"
      "# HELP grpc_server_handled_total Total number of RPCs completed on the server, regardless "
      "of success or failure.\n"
      "# TYPE grpc_server_handled_total counter\n"
      "# HELP grpc_server_handling_seconds Histogram of response latency (seconds) of gRPC that "
      "had been application-level handled by the server.\n"
      "# TYPE grpc_server_handling_seconds histogram\n";
  const std::string rendered = render_prometheus(core.collect(), process, registry.registrations());
  CHECK(rendered == expected);
}

TEST_CASE("an empty registry still renders every fixed family") {
  const std::string rendered = render_prometheus(Sample{}, ProcessFigures{});
  CHECK(rendered.find("inferencecache_server_up 0\n") != std::string::npos);
  CHECK(rendered.find("# TYPE inferencecache_index_entries gauge\n") != std::string::npos);
  CHECK(rendered.find("inferencecache_lookup_route_calls_total{") == std::string::npos);
  CHECK(
      rendered.find("inferencecache_index_evictions_total{algorithm=\"lfu\",reason=\"ttl\"} 0\n") !=
      std::string::npos);
}

TEST_CASE(
    "replica hit families: hints summed over tenants and cores, the engine's largest report") {
  // Core 0: tenant a's work record of r1 and r1's stats under tenant a; r2's
  // work record (no stats). Core 1: tenant b's work record of r1 and r1's
  // stats under tenant b, read a scrape earlier (smaller).
  // The sharding room's families, registered as App::register_metrics does.
  Registry registry(3);
  ic::sharding::register_replica_hit_metrics(registry);
  using ic::sharding::add_replica_hits;
  CoreMetrics& c0 = registry.core(0);
  CoreMetrics& c1 = registry.core(1);
  c0.add_collector([](CoreMetrics& m) {
    add_replica_hits(m, "llama", "r1",
                     {.hints = 3, .hinted_tokens = 3000, .predicted_hit_tokens = 1000});
    add_replica_hits(
        m, "llama", "r1",
        {.engine_hit_tokens = 900, .engine_query_tokens = 4000, .engine_reported = true});
    add_replica_hits(m, "llama", "r2", {.hints = 1, .hinted_tokens = 512});
  });
  c1.add_collector([](CoreMetrics& m) {
    add_replica_hits(m, "llama", "r1",
                     {.hints = 2, .hinted_tokens = 1000, .predicted_hit_tokens = 500});
    add_replica_hits(
        m, "llama", "r1",
        {.engine_hit_tokens = 800, .engine_query_tokens = 3500, .engine_reported = true});
  });
  Sample merged = c0.collect();
  merged.merge(c1.collect());
  const std::string rendered =
      render_prometheus(merged, ProcessFigures{}, registry.registrations());
  const std::string want =
      "# HELP inferencecache_replica_hints_total Work-aware LookupRoute answers naming the replica "
      "on top.\n"
      "# TYPE inferencecache_replica_hints_total counter\n"
      "inferencecache_replica_hints_total{model=\"llama\",replica_id=\"r1\"} 5\n"
      "inferencecache_replica_hints_total{model=\"llama\",replica_id=\"r2\"} 1\n"
      "# HELP inferencecache_replica_hinted_prompt_tokens_total Prompt tokens of those answers.\n"
      "# TYPE inferencecache_replica_hinted_prompt_tokens_total counter\n"
      "inferencecache_replica_hinted_prompt_tokens_total{model=\"llama\",replica_id=\"r1\"} 4000\n"
      "inferencecache_replica_hinted_prompt_tokens_total{model=\"llama\",replica_id=\"r2\"} 512\n"
      "# HELP inferencecache_replica_predicted_hit_tokens_total Prompt tokens those answers "
      "predicted the replica holds (stored or booked).\n"
      "# TYPE inferencecache_replica_predicted_hit_tokens_total counter\n"
      "inferencecache_replica_predicted_hit_tokens_total{model=\"llama\",replica_id=\"r1\"} 1500\n"
      "inferencecache_replica_predicted_hit_tokens_total{model=\"llama\",replica_id=\"r2\"} 0\n"
      "# HELP inferencecache_replica_engine_prefix_cache_hit_tokens_total The engine's own "
      "prefix-cache hit tokens as its adapter last reported them (all its traffic).\n"
      "# TYPE inferencecache_replica_engine_prefix_cache_hit_tokens_total counter\n"
      "inferencecache_replica_engine_prefix_cache_hit_tokens_total{model=\"llama\",replica_id="
      "\"r1\"} 900\n"
      "# HELP inferencecache_replica_engine_prefix_cache_query_tokens_total The engine's own "
      "prefix-cache query tokens as its adapter last reported them.\n"
      "# TYPE inferencecache_replica_engine_prefix_cache_query_tokens_total counter\n"
      "inferencecache_replica_engine_prefix_cache_query_tokens_total{model=\"llama\",replica_id="
      "\"r1\"} 4000\n";
  CHECK(rendered.find(want) != std::string::npos);
  // The rows are rebuilt by every scrape: a collector that stops adding them
  // leaves the families out.
  CoreMetrics& empty = registry.core(2);
  CHECK(render_prometheus(empty.collect(), ProcessFigures{}, registry.registrations())
            .find("inferencecache_replica_") == std::string::npos);
}

TEST_CASE("grpc_server_* families: go-grpc-prometheus names, labels and every code per method") {
  CoreMetrics core(0);
  RpcSeries* lookup = core.rpc().declare("/pkg.Cache/Lookup", RpcType::kUnary);
  core.rpc().declare("/pkg.Cache/Report", RpcType::kClientStream);
  CHECK(core.rpc().find("/pkg.Cache/Lookup") == lookup);
  CHECK(core.rpc().find("/pkg.Cache/Nope") == nullptr);
  RpcMetrics::started(*lookup);
  RpcMetrics::started(*lookup);
  RpcMetrics::started(*lookup);
  RpcMetrics::handled(*lookup, 0, 40);           // OK, 40 µs: the 50 µs bucket
  RpcMetrics::handled(*lookup, 8, 2'000'000);    // ResourceExhausted, 2 s: the 2.5 s bucket
  RpcMetrics::handled(*lookup, 99, 20'000'000);  // out of range → Unknown; over 10 s: +Inf only
  // A second core's copy is summed in.
  CoreMetrics other(1);
  RpcMetrics::started(*other.rpc().declare("/pkg.Cache/Lookup", RpcType::kUnary));
  Sample merged = core.collect();
  merged.merge(other.collect());
  std::string out;
  render_grpc_server(out, merged.rpc);
  std::string expected =
      "# HELP grpc_server_started_total Total number of RPCs started on the server.\n"
      "# TYPE grpc_server_started_total counter\n"
      "grpc_server_started_total{grpc_method=\"Lookup\",grpc_service=\"pkg.Cache\","
      "grpc_type=\"unary\"} 4\n"
      "grpc_server_started_total{grpc_method=\"Report\",grpc_service=\"pkg.Cache\","
      "grpc_type=\"client_stream\"} 0\n"
      "# HELP grpc_server_handled_total Total number of RPCs completed on the server, regardless "
      "of success or failure.\n"
      "# TYPE grpc_server_handled_total counter\n";
  const char* codes[] = {
      "OK",       "Canceled",       "Unknown",          "InvalidArgument",   "DeadlineExceeded",
      "NotFound", "AlreadyExists",  "PermissionDenied", "ResourceExhausted", "FailedPrecondition",
      "Aborted",  "OutOfRange",     "Unimplemented",    "Internal",          "Unavailable",
      "DataLoss", "Unauthenticated"};
  const auto handled = [&](const char* method, const char* type, const char* code, int n) {
    expected += std::string("grpc_server_handled_total{grpc_code=\"") + code + "\",grpc_method=\"" +
                method + "\",grpc_service=\"pkg.Cache\",grpc_type=\"" + type + "\"} " +
                std::to_string(n) + "\n";
  };
  for (const char* code : codes) {
    const std::string c = code;
    handled("Lookup", "unary", code, c == "OK" || c == "ResourceExhausted" || c == "Unknown");
  }
  for (const char* code : codes) handled("Report", "client_stream", code, 0);
  expected +=
      "# HELP grpc_server_handling_seconds Histogram of response latency (seconds) of gRPC that "
      "had been application-level handled by the server.\n"
      "# TYPE grpc_server_handling_seconds histogram\n";
  const char* bounds[] = {"5e-05", "0.0001", "0.00025", "0.0005", "0.001", "0.0025",
                          "0.005", "0.01",   "0.025",   "0.05",   "0.1",   "0.25",
                          "0.5",   "1",      "2.5",     "5",      "10"};
  const auto histogram = [&](const char* method, const char* type, std::vector<int> cumulative,
                             int count, const char* sum) {
    const std::string labels = std::string("grpc_method=\"") + method +
                               "\",grpc_service=\"pkg.Cache\",grpc_type=\"" + type + "\"";
    for (std::size_t b = 0; b < std::size(bounds); ++b) {
      expected += "grpc_server_handling_seconds_bucket{" + labels + ",le=\"" + bounds[b] + "\"} " +
                  std::to_string(cumulative[b]) + "\n";
    }
    expected += "grpc_server_handling_seconds_bucket{" + labels + ",le=\"+Inf\"} " +
                std::to_string(count) + "\n";
    expected += "grpc_server_handling_seconds_sum{" + labels + "} " + sum + "\n";
    expected +=
        "grpc_server_handling_seconds_count{" + labels + "} " + std::to_string(count) + "\n";
  };
  histogram("Lookup", "unary", {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2}, 3, "22.00004");
  histogram("Report", "client_stream", std::vector<int>(17, 0), 0, "0");
  CHECK(out == expected);
}
