// inferencecache-cli: call any InferenceCache RPC from a shell (tools/cli/README.md). Human
// output by default, the proto3 JSON mapping with --json. grpc++ sync client (a client only).
#include <google/protobuf/util/json_util.h>
#include <grpcpp/client_context.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>

#include "cli/chain_input.hh"
#include "common/channel.hh"
#include "common/cli_parse.hh"
#include "common/interrupt.hh"
#include "common/requests.hh"
#include "grpc/health/v1/health.grpc.pb.h"
#include "inferencecache/v1alpha1/inferencecache.grpc.pb.h"

namespace {

using namespace ic::tools;
namespace v1 = inferencecache::v1alpha1;

struct Global {
  std::string server = "127.0.0.1:9090";
  bool json = false;
  int timeout_ms = 5000;
};

// Everything a chain/prefix can be given as, shared by lookup and report.
struct PrefixFlags {
  std::vector<std::uint64_t> block_ids;
  std::int32_t input_length = 0;
  std::vector<std::string> block_hashes;
  std::vector<std::int32_t> block_tokens;
  std::string prefix_hash;
  std::int32_t prefix_tokens = 0;
};

// The scheme the kvevents adapter reports by default (its --hash-scheme): the fingerprint of
// token ids (docs/fingerprint.md), so a --token-ids lookup finds what the adapter stored.
constexpr const char* kTokenScheme = "vllm";
// The scheme of Mooncake trace ids (--block-ids), as the replay and the bench send them.
constexpr const char* kMooncakeScheme = "mooncake";
// minimumMatchedTokens of a tenant without a policy (docs/lookup.md "Defaults").
constexpr std::int64_t kDefaultMatchedFloor = 64;

struct Args {
  // scheme "" = by input: kTokenScheme with --token-ids or --prompt, else kMooncakeScheme.
  std::string tenant, model, scheme, adapter, replica, type = "evicted", service;
  PrefixFlags prefix;
  std::vector<std::uint32_t> token_ids;
  std::int32_t block_size = 16;
  std::string prompt;
  std::string topology, template_ref;
  std::vector<std::string> variables;  // render: name=value
  int ttft_ms = 0;
  int tier = 1;
  float pressure = -1, hit_rate = -1;
};

void add_prefix_flags(CLI::App* cmd, PrefixFlags& p) {
  cmd->add_option("--block-ids", p.block_ids, "Mooncake hash ids (decimal), 8-byte big-endian")
      ->delimiter(',');
  cmd->add_option("--input-length", p.input_length,
                  "prompt tokens: the last --block-ids block holds input_length - 512*(n-1)");
  cmd->add_option("--block-hashes", p.block_hashes, "block hashes in hex")->delimiter(',');
  cmd->add_option("--block-tokens", p.block_tokens, "tokens per --block-hashes block")
      ->delimiter(',');
  cmd->add_option("--prefix-hash", p.prefix_hash, "exact prefix hash in hex");
  cmd->add_option("--prefix-tokens", p.prefix_tokens, "tokens of --prefix-hash");
}

// Usage errors exit 2, like CLI11's own.
[[noreturn]] void usage_error(const std::string& message) {
  std::cerr << "inferencecache-cli: error: " << message << "\n";
  std::exit(2);
}

cli::Chain chain_of(const PrefixFlags& p) {
  cli::Chain chain;
  std::string error;
  if (!p.block_ids.empty() && !p.block_hashes.empty()) {
    usage_error("give --block-ids or --block-hashes, not both");
  }
  const bool ok = !p.block_ids.empty()
                      ? cli::chain_from_ids(p.block_ids, p.input_length, &chain, &error)
                      : cli::chain_from_hex(p.block_hashes, p.block_tokens, &chain, &error);
  if (!ok) usage_error(error);
  return chain;
}

std::string prefix_bytes(const PrefixFlags& p) {
  std::string bytes;
  if (!p.prefix_hash.empty() && !hex_decode(p.prefix_hash, &bytes)) {
    usage_error("--prefix-hash is not hex: " + p.prefix_hash);
  }
  return bytes;
}

std::string to_json(const google::protobuf::Message& message) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(message, &out, options);
  return out;
}

const char* tier_name(int tier) {
  switch (tier) {
    case 1:
      return "T1";
    case 2:
      return "T2";
    case 3:
      return "T3";
    default:
      return "-";
  }
}

int rpc_failed(const char* method, const grpc::Status& status) {
  std::cerr << "inferencecache-cli: " << method << " failed: " << status_name(status.error_code())
            << (status.error_message().empty() ? "" : ": " + status.error_message()) << "\n";
  return 1;
}

void set_deadline(grpc::ClientContext& context, const Global& g) {
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(g.timeout_ms));
}

// One unary call `rpc` with --timeout-ms; nullopt once rpc_failed has said why it failed.
template <typename Stub, typename Request, typename Response>
std::optional<Response> call_unary(const char* method, const Global& g, Stub& stub,
                                   grpc::Status (Stub::*rpc)(grpc::ClientContext*, const Request&,
                                                             Response*),
                                   const Request& request) {
  grpc::ClientContext context;
  set_deadline(context, g);
  Response response;
  const grpc::Status status = (stub.*rpc)(&context, request, &response);
  if (!status.ok()) {
    rpc_failed(method, status);
    return std::nullopt;
  }
  return response;
}

// The scope lookup and report share: tenant, model, hash scheme and adapter.
template <typename Message>
void set_scope(Message& m, const Args& a) {
  m.set_tenant_id(a.tenant);
  m.set_model_id(a.model);
  m.set_hash_scheme(!a.scheme.empty()                           ? a.scheme
                    : !a.token_ids.empty() || !a.prompt.empty() ? kTokenScheme
                                                                : kMooncakeScheme);
  m.set_adapter_id(a.adapter);
}

// Adds the chain given by --block-ids / --block-hashes to `m` (a LookupRouteRequest or a
// PrefixEntry); returns its tokens.
template <typename Message>
std::int32_t add_chain(Message& m, const PrefixFlags& p) {
  const auto chain = chain_of(p);
  std::int32_t total = 0;
  for (const auto& h : chain.hashes) m.add_block_hashes(h);
  for (auto t : chain.tokens) {
    m.add_block_token_counts(t);
    total += t;
  }
  return total;
}

// Adds the fingerprint chain of --token-ids (blocks of --block-size, as the server chunks a
// token_ids lookup) to `entry`; returns its tokens.
std::int32_t add_token_chain(v1::PrefixEntry& entry, const Args& a) {
  cli::Chain chain;
  std::string error;
  if (!cli::chain_from_token_ids(a.token_ids, a.block_size, &chain, &error)) usage_error(error);
  std::int32_t total = 0;
  for (std::size_t i = 0; i < chain.hashes.size(); ++i) {
    entry.add_block_hashes(chain.hashes[i]);
    entry.add_block_token_counts(chain.tokens[i]);
    total += chain.tokens[i];
  }
  return total;
}

// Prints a call's answer: the proto3 JSON mapping with --json, else `human(answer)`.
template <typename Response, typename Human>
void print_answer(const Global& g, const Response& answer, Human human) {
  if (g.json) {
    std::cout << to_json(answer);
  } else {
    human(answer);
  }
}

// call_unary, then print_answer; exit status 1 when the call failed, else 0.
template <typename Stub, typename Rpc, typename Request, typename Human>
int call_and_print(const char* method, const Global& g, Stub& stub, Rpc rpc, const Request& request,
                   Human human) {
  const auto response = call_unary(method, g, stub, rpc, request);
  if (!response) return 1;
  print_answer(g, *response, human);
  return 0;
}

// Tokens of the prefix a lookup asks about, as far as the cli knows them (0: not known).
std::int64_t request_tokens(const v1::LookupRouteRequest& request) {
  std::int64_t total = 0;
  for (const auto t : request.block_token_counts()) total += t;
  if (total == 0) total = request.prefix_token_count();
  if (total == 0) total = request.token_ids_size();
  return total;
}

// AFFINITY_HINT and NO_HINT say nothing of matches under the matched-tokens floor, which the
// server drops before answering (docs/lookup.md step 10): say so, and when the whole prefix is
// under the default floor, that even a replica holding all of it is filtered.
void print_floor_note(const v1::LookupRouteResponse& response, std::int64_t tokens) {
  const std::string& reason = response.reason_code();
  if (reason != "AFFINITY_HINT" && reason != "NO_HINT") return;
  if (tokens > 0 && tokens < kDefaultMatchedFloor) {
    std::printf(
        "note: this prefix has %lld tokens, under the %lld-token matched-tokens floor: a "
        "replica holding it is matched, then filtered out, never reported as PREFIX_MATCH "
        "(minimumMatchedTokens, docs/lookup.md step 10; a policy may lower it)\n",
        static_cast<long long>(tokens), static_cast<long long>(kDefaultMatchedFloor));
  } else {
    std::printf(
        "note: no replica matched at least the matched-tokens floor (%lld tokens by default); "
        "shorter matches are filtered (minimumMatchedTokens, docs/lookup.md step 10)\n",
        static_cast<long long>(kDefaultMatchedFloor));
  }
}

// A --prompt lookup (nothing else given) whose answer echoes no token ids: the server did not
// tokenize the prompt, so nothing was looked up and no floor was involved (docs/prompt-text.md
// "Failure modes"). The answer does not say why; a TIMEOUT says the deadline passed first.
void print_not_tokenized_note(const v1::LookupRouteResponse& response, const std::string& model) {
  if (response.reason_code() == "TIMEOUT") {
    std::printf(
        "note: the prompt was not tokenized: the call's deadline passed first (--timeout-ms)\n");
    return;
  }
  std::printf(
      "note: the prompt was not tokenized, so nothing was looked up: the server has no "
      "tokenizer for model \"%s\" (start it with --tokenizer-models-dir holding a \"%s\" "
      "folder), or it gave up on this prompt (too long, busy, over its CPU budget); "
      "inferencecache_prompt_text_failures_total{reason} on /metrics says which "
      "(docs/prompt-text.md \"Failure modes\")\n",
      model.c_str(), model.c_str());
}

// The note under the reason line, when the answer needs one: a prompt the server did not tokenize,
// a lookup without a prefix, or the matched-tokens floor.
void print_note(const v1::LookupRouteResponse& response, std::int64_t tokens,
                const v1::LookupRouteRequest& request) {
  const bool no_prefix =
      tokens == 0 && request.prefix_hash().empty() && request.block_hashes_size() == 0;
  if (no_prefix && !request.prompt_text().empty()) {
    if (response.token_ids_size() == 0) {
      print_not_tokenized_note(response, request.model_id());
    } else {
      print_floor_note(response, response.token_ids_size());  // the prompt's echoed tokens
    }
  } else if (no_prefix) {
    // Nothing to match: the contract's exact lookup of the empty prefix (docs/lookup.md step 5).
    if (response.reason_code() != "NO_HINT" && response.reason_code() != "AFFINITY_HINT") return;
    std::printf(
        "note: no prefix given (--block-ids, --block-hashes, --prefix-hash, --token-ids or "
        "--prompt): the server looked up the empty prefix, which only TENANT_HOT can answer "
        "(docs/lookup.md step 5)\n");
  } else {
    print_floor_note(response, tokens);
  }
}

void print_route(const v1::LookupRouteResponse& response, std::int64_t tokens,
                 const v1::LookupRouteRequest& request) {
  std::printf("reason: %s  (server lookup latency %lld us)\n", response.reason_code().c_str(),
              static_cast<long long>(response.lookup_latency_us()));
  print_note(response, tokens, request);
  if (response.replica_scores_size() == 0) {
    std::printf("no replica scores: route as usual\n");
  } else {
    std::printf("%-24s %12s %10s %8s %5s\n", "replica", "score", "matched", "p(hit)", "tier");
    for (const auto& s : response.replica_scores()) {
      std::printf("%-24s %12.3f %10d %8.3f %5s\n", s.replica_id().c_str(), s.score(),
                  s.matched_tokens(), s.estimated_cache_hit_prob(), tier_name(s.tier()));
    }
  }
  if (response.token_ids_size() > 0) {
    std::printf("token ids: %d\n", response.token_ids_size());
  }
}

int do_lookup(v1::InferenceCache::Stub& stub, const Global& g, const Args& a) {
  v1::LookupRouteRequest request;
  set_scope(request, a);
  if (a.ttft_ms > 0) request.mutable_slo()->set_ttft_ms(a.ttft_ms);
  if (!a.prefix.block_ids.empty() || !a.prefix.block_hashes.empty()) add_chain(request, a.prefix);
  request.set_prefix_hash(prefix_bytes(a.prefix));
  request.set_prefix_token_count(a.prefix.prefix_tokens);
  for (auto t : a.token_ids) request.add_token_ids(t);
  request.set_prompt_text(a.prompt);
  const std::int64_t tokens = request_tokens(request);
  return call_and_print("LookupRoute", g, stub, &v1::InferenceCache::Stub::LookupRoute, request,
                        [tokens, &request](const v1::LookupRouteResponse& response) {
                          print_route(response, tokens, request);
                        });
}

void print_pd_route(const v1::LookupPDRouteResponse& r) {
  std::printf("reason: %s  (server lookup latency %lld us)\n", r.reason_code().c_str(),
              static_cast<long long>(r.lookup_latency_us()));
  if (r.prefill_replica_id().empty() && r.decode_replica_id().empty()) {
    std::printf("no pair: route as usual\n");
    return;
  }
  std::printf("prefill: %s  matched %d  score %.3f\n",
              r.prefill_replica_id().empty() ? "-" : r.prefill_replica_id().c_str(),
              r.prefill_matched_tokens(), r.prefill_score());
  std::printf("decode:  %s  matched %d  score %.3f\n",
              r.decode_replica_id().empty() ? "-" : r.decode_replica_id().c_str(),
              r.decode_matched_tokens(), r.decode_score());
  std::printf("transport: %s  uncached tokens: %d\n",
              r.transport_hint().empty() ? "-" : r.transport_hint().c_str(), r.uncached_tokens());
}

// LookupPDRoute (docs/pd-routing.md): the prompt given as lookup's is.
int do_pd_lookup(v1::InferenceCache::Stub& stub, const Global& g, const Args& a) {
  v1::LookupPDRouteRequest request;
  set_scope(request, a);
  request.set_pd_topology_ref(a.topology);
  if (a.ttft_ms > 0) request.mutable_slo()->set_ttft_ms(a.ttft_ms);
  if (!a.prefix.block_ids.empty() || !a.prefix.block_hashes.empty()) add_chain(request, a.prefix);
  request.set_prefix_hash(prefix_bytes(a.prefix));
  request.set_prefix_token_count(a.prefix.prefix_tokens);
  for (auto t : a.token_ids) request.add_token_ids(t);
  request.set_prompt_text(a.prompt);
  return call_and_print("LookupPDRoute", g, stub, &v1::InferenceCache::Stub::LookupPDRoute, request,
                        print_pd_route);
}

void print_render(const v1::RenderTemplateResponse& r) {
  std::printf("reason: %s%s%s\n", r.reason_code().c_str(),
              r.error().empty() ? "" : "  error: ", r.error().c_str());
  if (r.reason_code() != "OK") return;
  std::printf("revision: %s\n", r.template_revision().c_str());
  std::printf("stable prefix hash: %s  (%d stable tokens)\n",
              hex_encode(r.stable_prefix_hash()).c_str(), r.stable_token_count());
  if (r.cache_bust()) {
    std::printf(
        "cache bust: a volatile variable renders at byte %d (token %d), before %d stable bytes "
        "(docs/templates.md)\n",
        r.volatile_byte_offset(), r.volatile_token_offset(), r.stable_bytes_after_volatile());
  }
  std::printf("--- rendered prompt (%zu bytes)\n%s\n", r.rendered_prompt().size(),
              r.rendered_prompt().c_str());
}

// RenderTemplate (docs/templates.md); exit status 1 unless OK.
int do_render(v1::InferenceCache::Stub& stub, const Global& g, const Args& a) {
  v1::RenderTemplateRequest request;
  request.set_tenant_id(a.tenant);
  request.set_template_ref(a.template_ref);
  for (const std::string& v : a.variables) {
    const std::size_t eq = v.find('=');
    if (eq == std::string::npos || eq == 0) usage_error("--var wants name=value, got: " + v);
    (*request.mutable_variables())[v.substr(0, eq)] = v.substr(eq + 1);
  }
  const auto response =
      call_unary("RenderTemplate", g, stub, &v1::InferenceCache::Stub::RenderTemplate, request);
  if (!response) return 1;
  print_answer(g, *response, print_render);
  return response->reason_code() == "OK" ? 0 : 1;
}

// Prints an Ack (human or JSON); exit status 0 when accepted, 1 otherwise.
int print_ack(const v1::Ack& ack, const Global& g) {
  print_answer(g, ack, [](const v1::Ack& a) {
    std::printf("accepted: %s%s%s\n", a.accepted() ? "yes" : "no",
                a.reason_code().empty() ? "" : "  reason: ", a.reason_code().c_str());
  });
  return ack.accepted() ? 0 : 1;
}

int do_report(v1::InferenceCache::Stub& stub, const Global& g, const Args& a) {
  v1::CacheStateUpdate update;
  update.set_replica_id(a.replica);
  set_scope(update, a);
  const bool has_chain = !a.prefix.block_ids.empty() || !a.prefix.block_hashes.empty();
  const bool has_tokens = !a.token_ids.empty();
  if (has_chain && has_tokens) usage_error("give --token-ids or a block chain, not both");
  const std::string exact = prefix_bytes(a.prefix);
  if (has_chain || has_tokens || !exact.empty()) {
    auto* entry = update.add_prefixes();
    entry->set_tier(static_cast<v1::CacheTier>(a.tier));
    if (has_chain) entry->set_token_count(add_chain(*entry, a.prefix));
    if (has_tokens) entry->set_token_count(add_token_chain(*entry, a));
    if (!exact.empty()) {
      entry->set_prefix_hash(exact);
      entry->set_token_count(a.prefix.prefix_tokens);
    }
  }
  if (a.pressure >= 0 || a.hit_rate >= 0) {
    auto* stats = update.mutable_stats();
    stats->set_replica_id(a.replica);
    stats->set_pressure(std::max(a.pressure, 0.0f));
    stats->set_hit_rate(std::max(a.hit_rate, 0.0f));
    stats->set_client_version("inferencecache-cli");
  }
  if (update.prefixes_size() == 0 && !update.has_stats()) {
    usage_error(
        "report needs a prefix (--block-ids, --block-hashes, --token-ids, --prefix-hash) or "
        "stats (--pressure, --hit-rate)");
  }
  grpc::ClientContext context;
  set_deadline(context, g);
  v1::Ack ack;
  auto writer = stub.ReportCacheState(&context, &ack);
  writer->Write(update);
  writer->WritesDone();
  const auto status = writer->Finish();
  if (!status.ok()) return rpc_failed("ReportCacheState", status);
  return print_ack(ack, g);
}

int do_event(v1::InferenceCache::Stub& stub, const Global& g, const Args& a) {
  static const std::map<std::string, v1::CacheEvent::Type> kTypes = {
      {"added", v1::CacheEvent::PREFIX_ADDED},
      {"evicted", v1::CacheEvent::PREFIX_EVICTED},
      {"replica-updated", v1::CacheEvent::REPLICA_UPDATED},
      {"all-cleared", v1::CacheEvent::ALL_CLEARED}};
  v1::CacheEvent event;
  event.set_type(kTypes.at(a.type));
  event.set_replica_id(a.replica);
  event.set_tenant_id(a.tenant);
  event.set_model_id(a.model);
  event.set_adapter_id(a.adapter);
  std::string hash = prefix_bytes(a.prefix);
  if (hash.empty() && a.prefix.block_ids.size() == 1) {
    hash = block_hash_bytes(a.prefix.block_ids[0]);
  }
  event.set_prefix_hash(hash);
  const auto ack =
      call_unary("PublishEvent", g, stub, &v1::InferenceCache::Stub::PublishEvent, event);
  return ack ? print_ack(*ack, g) : 1;
}

void print_state(const v1::GetCacheStateResponse& response) {
  std::printf("prefixes: %lld (hot %lld)\n",
              static_cast<long long>(response.summary().total_prefixes()),
              static_cast<long long>(response.summary().hot_prefixes()));
  if (response.replicas_size() > 0) {
    std::printf("%-24s %9s %9s %16s %14s %14s\n", "replica", "hit rate", "pressure", "cache bytes",
                "t2 hit tok", "t2 query tok");
  }
  for (const auto& r : response.replicas()) {
    std::printf("%-24s %9.3f %9.3f %16lld %14lld %14lld\n", r.replica_id().c_str(), r.hit_rate(),
                r.pressure(), static_cast<long long>(r.cache_memory_bytes()),
                static_cast<long long>(r.t2_hit_tokens()),
                static_cast<long long>(r.t2_query_tokens()));
  }
}

int do_state(v1::InferenceCache::Stub& stub, const Global& g, const Args& a) {
  v1::GetCacheStateRequest request;
  request.set_tenant_id(a.tenant);
  request.set_model_id(a.model);
  return call_and_print("GetCacheState", g, stub, &v1::InferenceCache::Stub::GetCacheState, request,
                        print_state);
}

int do_health(const std::shared_ptr<grpc::Channel>& channel, const Global& g, const Args& a) {
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(a.service);
  const auto response =
      call_unary("Health/Check", g, *stub, &grpc::health::v1::Health::Stub::Check, request);
  if (!response) return 1;
  using Health = grpc::health::v1::HealthCheckResponse;
  print_answer(g, *response, [](const Health& h) {
    std::printf("%s\n", Health::ServingStatus_Name(h.status()).c_str());
  });
  return response->status() == Health::SERVING ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Call the InferenceCache gRPC API from a shell", "inferencecache-cli"};
  app.require_subcommand(1);
  Global g;
  Args a;
  app.add_option("--server", g.server, "gRPC host:port")->capture_default_str();
  app.add_flag("--json", g.json, "print the response in the proto3 JSON mapping");
  app.add_option("--timeout-ms", g.timeout_ms, "deadline of the call (and of connecting)")
      ->capture_default_str();

  auto* lookup = app.add_subcommand("lookup", "LookupRoute: which replica holds this prefix");
  auto* report = app.add_subcommand("report", "ReportCacheState: a replica now holds a prefix");
  auto* event = app.add_subcommand("event", "PublishEvent: evictions, liveness, clears");
  auto* state = app.add_subcommand("state", "GetCacheState: the (tenant, model) aggregate");
  auto* health = app.add_subcommand("health", "grpc.health.v1 Check");
  auto* pd_lookup = app.add_subcommand(
      "pd-lookup", "LookupPDRoute: the prefill/decode pair for this prompt (docs/pd-routing.md)");
  auto* render = app.add_subcommand(
      "render", "RenderTemplate: a tenant's template rendered, its stable prefix hash");
  for (auto* cmd : {lookup, report, event, state, pd_lookup}) {
    cmd->add_option("--tenant", a.tenant, "tenant_id")->required();
    cmd->add_option("--model", a.model, "model_id")->required();
  }
  pd_lookup->add_option("--topology", a.topology, "pd_topology_ref (a pdTopologies name)")
      ->required();
  render->add_option("--tenant", a.tenant, "tenant_id")->required();
  render->add_option("--template", a.template_ref, "template_ref: name or name@revision")
      ->required();
  render->add_option("--var", a.variables, "a variable as name=value (repeat the flag)");
  for (auto* cmd : {lookup, report, pd_lookup}) {
    cmd->add_option("--hash-scheme,--scheme", a.scheme,
                    "hash_scheme; default: vllm with --token-ids or --prompt (what "
                    "inferencecache-kvevents reports by default), mooncake otherwise");
    add_prefix_flags(cmd, a.prefix);
    cmd->add_option("--token-ids", a.token_ids,
                    "token ids (lookup: the server fingerprints them; report: fingerprinted here "
                    "in blocks of --block-size)")
        ->delimiter(',');
  }
  report
      ->add_option("--block-size", a.block_size,
                   "--token-ids: tokens per KV block, the server's --engine-block-size")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  for (auto* cmd : {lookup, report, event, pd_lookup})
    cmd->add_option("--adapter", a.adapter, "adapter_id");
  for (auto* cmd : {lookup, pd_lookup}) {
    cmd->add_option("--prompt", a.prompt, "prompt text (needs a server-side tokenizer)");
    cmd->add_option("--ttft-ms", a.ttft_ms, "SLO ttft_ms (0 < v < 200 is 'tight')");
  }
  for (auto* cmd : {report, event})
    cmd->add_option("--replica", a.replica, "replica_id")->required();
  report->add_option("--tier", a.tier, "1 = T1 (engine), 2 = T2 (offload), 3 = T3 (remote)")
      ->check(CLI::Range(0, 3))
      ->capture_default_str();
  report->add_option("--pressure", a.pressure, "stats: pressure in [0, 1]");
  report->add_option("--hit-rate", a.hit_rate, "stats: hit rate in [0, 1]");
  add_choice(*event, "--type", a.type, "added | evicted | replica-updated | all-cleared",
             {"added", "evicted", "replica-updated", "all-cleared"});
  event->add_option("--prefix-hash", a.prefix.prefix_hash, "prefix hash in hex");
  event->add_option("--block-id", a.prefix.block_ids, "a Mooncake id instead of --prefix-hash")
      ->expected(1);
  health->add_option("--service", a.service, "service name (\"\" = the whole server)");
  standard_flags(app);
  parse_or_exit(app, argc, argv);
  install_exit_on_interrupt("inferencecache-cli: interrupted\n");

  std::string error;
  auto channel = connect_channel(g.server, g.timeout_ms, "cli", &error);
  if (!channel) {
    std::cerr << "inferencecache-cli: error: " << error << "\n";
    return 1;
  }
  auto stub = v1::InferenceCache::NewStub(channel);
  if (lookup->parsed()) return do_lookup(*stub, g, a);
  if (report->parsed()) return do_report(*stub, g, a);
  if (event->parsed()) return do_event(*stub, g, a);
  if (state->parsed()) return do_state(*stub, g, a);
  if (pd_lookup->parsed()) return do_pd_lookup(*stub, g, a);
  if (render->parsed()) return do_render(*stub, g, a);
  return do_health(channel, g, a);
}
