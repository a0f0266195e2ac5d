// prompt_text resolution on the connection's core (service/prompt_input.hh)
// with a small model (byte tokens, template "U:<text>|A:"), and the index
// echo of the tokens it made: when it applies, what it produces, every
// fail-open reason and its count.

#include "service/prompt_input.hh"

#include <doctest/doctest.h>

#include "../tokenizer/small_tokenizer.hh"
#include "index/clock.hh"
#include "index/shard.hh"
#include "metrics/registry.hh"
#include "sharding/index_wire.hh"

namespace pb = ::inferencecache::v1alpha1;
using ic::metrics::PromptTextFailure;
using ic::service::PromptTextConfig;
using ic::service::resolve_prompt_text;

namespace {

struct Fixture {
  ic::prompt_text::ModelSet models;
  PromptTextConfig config;
  ic::index::ManualClock clock;
  ic::index::LookupContext ctx;
  ic::config::CachePolicy policy;
  // metrics::local() is this (unbound) thread's scratch registry: counts are
  // taken relative to the values at the start of the test.
  ic::metrics::Sample base = ic::metrics::local().collect();

  Fixture() {
    std::string error;
    auto m = ic::prompt_text::ModelSet::load_model(
        "tiny", ic::test::small_tokenizer({}).dump(),
        R"({"chat_template": "{% for m in messages %}U:{{ m.content }}{% endfor %}{% if add_generation_prompt %}|A:{% endif %}"})",
        error);
    REQUIRE_MESSAGE(m != nullptr, error);
    models.add(std::move(m));
    config.models = &models;
    clock.mono = 1'000;
    ctx.clock = &clock;
    ctx.start_mono_us = 1'000;
  }

  pb::LookupRouteRequest request(std::string text, std::string model = "tiny") {
    pb::LookupRouteRequest r;
    r.set_tenant_id("t");
    r.set_model_id(std::move(model));
    r.set_hash_scheme("vllm");
    r.set_prompt_text(std::move(text));
    return r;
  }
  bool resolve(pb::LookupRouteRequest& r) {
    return resolve_prompt_text(config, policy, clock, ctx, r);
  }
  std::uint64_t failures(PromptTextFailure f) {
    const auto i = static_cast<std::size_t>(f);
    return ic::metrics::local().collect().prompt_text_failures[i] - base.prompt_text_failures[i];
  }
};

std::vector<std::uint32_t> bytes_of(std::string_view s) {
  return {reinterpret_cast<const unsigned char*>(s.data()),
          reinterpret_cast<const unsigned char*>(s.data()) + s.size()};
}

}  // namespace

TEST_CASE("prompt_text becomes the template's tokens; prompt_text is cleared") {
  Fixture f;
  auto r = f.request("hello");
  REQUIRE(f.resolve(r));
  CHECK(std::vector<std::uint32_t>(r.token_ids().begin(), r.token_ids().end()) ==
        bytes_of("U:hello|A:"));
  CHECK(r.prompt_text().empty());
}

TEST_CASE("prompt_text is left alone when another input or gate comes first") {
  Fixture f;
  auto with_tokens = f.request("hello");
  with_tokens.add_token_ids(7);
  CHECK_FALSE(f.resolve(with_tokens));
  auto with_hash = f.request("hello");
  with_hash.set_prefix_hash("12345678");
  CHECK_FALSE(f.resolve(with_hash));
  auto with_chain = f.request("hello");
  with_chain.add_block_hashes("12345678");
  with_chain.add_block_token_counts(16);
  CHECK_FALSE(f.resolve(with_chain));  // chain matching on: the chain wins
  f.policy.enable_chain_matching = false;
  CHECK(f.resolve(with_chain));  // chain matching off: arrays ignored, prompt_text used
  f.policy.enable_chain_matching = true;
  f.policy.require_chain = true;
  auto needs_chain = f.request("hello");
  CHECK_FALSE(f.resolve(needs_chain));  // POLICY_REQUIRES_CHAIN comes first
  f.policy.require_chain = false;
  auto reserved = f.request("hello");
  reserved.set_tenant_id(std::string(ic::config::kReservedTenant));
  CHECK_FALSE(f.resolve(reserved));
  for (std::size_t i = 0; i < ic::metrics::kPromptTextFailureCount; ++i)
    CHECK(f.failures(static_cast<PromptTextFailure>(i)) == 0);
}

TEST_CASE("fail-open reasons are counted and leave the request unchanged") {
  Fixture f;
  auto unknown = f.request("hello", "other");
  CHECK_FALSE(f.resolve(unknown));
  CHECK(unknown.prompt_text() == "hello");
  CHECK(f.failures(PromptTextFailure::kNoTokenizer) == 1);

  f.config.max_prompt_bytes = 4;
  auto too_long = f.request("hello");
  CHECK_FALSE(f.resolve(too_long));
  f.config.max_prompt_bytes = 1 << 20;
  f.config.max_token_ids = 5;
  CHECK_FALSE(f.resolve(too_long));
  f.config.max_token_ids = 1'048'576;
  CHECK(f.failures(PromptTextFailure::kTooLong) == 2);

  // The deadline: the caller's has passed (the clock advances per read).
  f.ctx.deadline_mono_us = 1'000;
  auto late = f.request("hello");
  CHECK_FALSE(f.resolve(late));
  CHECK(late.token_ids_size() == 0);
  CHECK(f.failures(PromptTextFailure::kTimeout) == 1);
  // The tenant's lookupTimeoutMs bounds it when tighter: 1 ms, the clock
  // advancing 2 ms per read, so the tokenizer's poll before its first unit
  // sees it passed.
  f.ctx.deadline_mono_us = INT64_MAX;
  f.policy.lookup_timeout_ms = 1;
  f.clock.mono_step_us = 2'000;
  std::string words;
  for (int i = 0; i < 600; ++i) words += " w";
  auto slow = f.request(words);
  CHECK_FALSE(f.resolve(slow));
  CHECK(slow.prompt_text() == words);
  CHECK(f.failures(PromptTextFailure::kTimeout) == 2);

  PromptTextConfig none;
  auto no_models = f.request("hello");
  CHECK_FALSE(resolve_prompt_text(none, f.policy, f.clock, f.ctx, no_models));
  CHECK(f.failures(PromptTextFailure::kNoTokenizer) == 2);
}

TEST_CASE("a template that raises fails open as 'template'") {
  Fixture f;
  std::string error;
  auto m = ic::prompt_text::ModelSet::load_model(
      "strict", ic::test::small_tokenizer({}).dump(),
      R"({"chat_template": "{{ raise_exception('System role not supported') }}"})", error);
  REQUIRE(m != nullptr);
  f.models.add(std::move(m));
  auto r = f.request("hello", "strict");
  CHECK_FALSE(f.resolve(r));
  CHECK(f.failures(PromptTextFailure::kTemplate) == 1);
}

TEST_CASE("the index echoes tokens made from prompt_text, and only those") {
  ic::index::ManualClock clock;
  ic::index::Shard shard(ic::index::IndexConfig{}, nullptr);
  pb::LookupRouteRequest r;
  r.set_tenant_id("t");
  r.set_model_id("m");
  r.set_hash_scheme("vllm");
  for (std::uint32_t i = 0; i < 40; ++i) r.add_token_ids(i);
  ic::index::LookupContext ctx;
  ctx.clock = &clock;
  pb::LookupRouteResponse out;
  ic::sharding::wire::lookup_route(shard, r, ctx, &out);
  CHECK(out.reason_code() == "NO_HINT");
  CHECK(out.token_ids_size() == 0);  // the caller's own token_ids: no echo
  ctx.token_ids_from_prompt = true;
  ic::sharding::wire::lookup_route(shard, r, ctx, &out);
  CHECK(out.reason_code() == "NO_HINT");
  REQUIRE(out.token_ids_size() == 40);
  CHECK(out.token_ids(39) == 39);
  // A chain wins over token_ids: nothing resolved from the prompt, no echo.
  r.add_block_hashes("12345678");
  r.add_block_token_counts(16);
  ic::sharding::wire::lookup_route(shard, r, ctx, &out);
  CHECK(out.token_ids_size() == 0);
}

TEST_CASE("tokenizing runs in slices with the tokens of one go; cut by its CPU budget") {
  Fixture f;
  f.config.default_budget_us = 60'000'000;  // the deadline out of the way
  std::string text;
  for (int i = 0; i < 20'000; ++i) text += " w";
  text += " " + std::string(9'000, 'q') + " end";
  auto whole = f.request(text);
  REQUIRE(f.resolve(whole));  // frozen clock: one go
  const auto want = std::vector<std::uint32_t>(whole.token_ids().begin(), whole.token_ids().end());

  // Each clock read advances 50 µs: a 500 µs slice stops after ~10 polls.
  f.clock.mono_step_us = 50;
  auto sliced = f.request(text);
  const auto plan = ic::service::plan_prompt_text(f.config, f.policy, f.clock, f.ctx, sliced);
  REQUIRE(plan.model != nullptr);
  ic::service::PromptTokenizing job(f.config, plan, sliced.prompt_text());
  int slices = 1;
  while (!job.run_slice(f.clock, f.clock.mono + 500)) ++slices;
  REQUIRE(job.ok());
  CHECK(slices > 3);
  CHECK(job.tokens() == want);

  // 2 ms of work allowed: the same text is cut and counted as cpu_budget.
  f.config.max_cpu_us = 2'000;
  auto costly = f.request(text);
  CHECK_FALSE(f.resolve(costly));
  CHECK(costly.prompt_text() == text);
  CHECK(f.failures(PromptTextFailure::kCpuBudget) == 1);
  CHECK(f.failures(PromptTextFailure::kTimeout) == 0);
}

TEST_CASE("a pre-token over 64 KiB fails open as too_long; one under it is tokenized") {
  Fixture f;
  auto huge = f.request(std::string(70'000, 'a'));
  CHECK_FALSE(f.resolve(huge));
  CHECK(f.failures(PromptTextFailure::kTooLong) == 1);
  auto big = f.request(std::string(60'000, 'a'));
  CHECK(f.resolve(big));
  CHECK(big.token_ids_size() > 0);
  CHECK(f.failures(PromptTextFailure::kTooLong) == 1);
}

TEST_CASE("a prompt_text that is not UTF-8 is removed before parsing and fails open") {
  Fixture f;
  pb::LookupRouteRequest r = f.request("x");
  r.add_block_hashes("h");
  std::string bytes = r.SerializeAsString();
  std::string valid = bytes;
  CHECK_FALSE(ic::service::drop_invalid_prompt_text(valid));  // valid: untouched
  CHECK(valid == bytes);
  // prompt_text (field 10) "\xFF\xFE" appended twice: protobuf refuses the message.
  const std::string bad = std::string("\x52\x02\xFF\xFE", 4);
  bytes += bad + bad;
  pb::LookupRouteRequest parsed;
  CHECK_FALSE(parsed.ParseFromString(bytes));
  REQUIRE(ic::service::drop_invalid_prompt_text(bytes));
  REQUIRE(parsed.ParseFromString(bytes));
  CHECK(parsed.prompt_text().empty());  // the valid "x" goes too: the message's text is bad
  CHECK(parsed.tenant_id() == "t");
  CHECK(parsed.block_hashes_size() == 1);
  // Counted once when prompt_text would have been the input.
  f.policy.enable_chain_matching = false;
  ic::service::count_invalid_prompt_text(f.config, f.policy, parsed);
  CHECK(f.failures(PromptTextFailure::kTokenize) == 1);
  f.policy.enable_chain_matching = true;  // the chain comes first: not counted
  ic::service::count_invalid_prompt_text(f.config, f.policy, parsed);
  CHECK(f.failures(PromptTextFailure::kTokenize) == 1);
  // Bytes it cannot walk stay as they are (protobuf answers INVALID_ARGUMENT).
  std::string truncated = std::string("\x52\x05\xFF", 3);
  CHECK_FALSE(ic::service::drop_invalid_prompt_text(truncated));
  CHECK(truncated.size() == 3);
}
