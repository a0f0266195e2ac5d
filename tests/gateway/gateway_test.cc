// src/gateway without a server: OpenAI bodies (gateway/openai_body.hh), the
// prompt ids with reused runs (gateway/segment_tokens.hh, prompt_tokens.hh),
// endpoints (gateway/endpoints.hh). docs/gateway.md.
#include <doctest/doctest.h>

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../tokenizer/small_tokenizer.hh"
#include "gateway/endpoints.hh"
#include "gateway/gateway_metrics.hh"
#include "gateway/json_outline.hh"
#include "gateway/message_cache.hh"
#include "gateway/openai_body.hh"
#include "gateway/prompt_tokens.hh"
#include "gateway/segment_tokens.hh"
#include "prompt_text/models.hh"

namespace {

using ic::gateway::BodyError;
using ic::gateway::InferenceBody;
using ic::gateway::parse_body;

// The small byte-level tokenizer with two added tokens, ids 1000 and 1001.
std::string tokenizer_json() {
  nlohmann::json j = ic::test::small_tokenizer({{"h", "e"}, {"l", "l"}, {"he", "ll"}, {" ", "w"}});
  j["added_tokens"] =
      nlohmann::json::array({{{"id", 1000}, {"content", "<|im_start|>"}, {"special", true}},
                             {{"id", 1001}, {"content", "<|im_end|>"}, {"special", true}}});
  return j.dump();
}

// A ChatML template like Qwen's.
constexpr const char* kConfig = R"({"chat_template":
  "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if tools %}<|im_start|>tools\n{{ tools | length }}<|im_end|>\n{% endif %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"})";

std::unique_ptr<ic::prompt_text::ModelSet> models() {
  std::string error;
  auto model = ic::prompt_text::ModelSet::load_model("m", tokenizer_json(), kConfig, error);
  REQUIRE_MESSAGE(model != nullptr, error);
  auto set = std::make_unique<ic::prompt_text::ModelSet>();
  set->add(std::move(model));
  return set;
}

std::vector<std::uint32_t> whole(const ic::prompt_text::Model& model, std::string_view text) {
  ic::tokenizer::Workspace ws;
  std::vector<std::uint32_t> out;
  REQUIRE(model.tokenizer->encode(text, ws, out) == ic::tokenizer::EncodeStatus::kOk);
  return out;
}

}  // namespace

TEST_CASE("openai bodies: chat, completion text and ids, and every error") {
  InferenceBody b;
  CHECK(
      parse_body(
          "/v1/chat/completions",
          R"({"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url"},{"type":"text","text":"b"}]}],"tools":[{"type":"function"}]})",
          b) == BodyError::kNone);
  CHECK(b.model == "m");
  CHECK(b.chat);
  CHECK(b.has_tools);
  const auto& message = b.messages.as_list().at(0).as_dict();
  CHECK(ic::chat_template::find(message, "content")->as_string() == "ab");

  CHECK(parse_body("/v1/completions?x=1", R"({"model":"m","prompt":"hi"})", b) == BodyError::kNone);
  CHECK_FALSE(b.chat);
  CHECK(b.prompt == "hi");
  CHECK(parse_body("/v1/completions", R"({"model":"m","prompt":[[5,6,7]]})", b) ==
        BodyError::kNone);
  CHECK(b.prompt_is_ids);
  CHECK(b.prompt_ids == std::vector<std::uint32_t>{5, 6, 7});
  CHECK(parse_body("/other", R"({"model":"m","messages":[{"role":"user","content":"x"}]})", b) ==
        BodyError::kNone);
  CHECK(b.chat);

  CHECK(parse_body("/v1/chat/completions", "{", b) == BodyError::kNotJson);
  CHECK(parse_body("/v1/chat/completions", "[1]", b) == BodyError::kNotJson);
  CHECK(parse_body("/v1/chat/completions", R"({"messages":[]})", b) == BodyError::kNoModel);
  CHECK(parse_body("/v1/chat/completions", R"({"model":7})", b) == BodyError::kNoModel);
  CHECK(parse_body("/v1/chat/completions", R"({"model":"m","messages":"x"})", b) ==
        BodyError::kNoPrompt);
  CHECK(parse_body("/v1/chat/completions", R"({"model":"m","messages":[1]})", b) ==
        BodyError::kNoPrompt);
  CHECK(parse_body("/v1/completions", R"({"model":"m","prompt":[-1]})", b) == BodyError::kNoPrompt);
  CHECK(parse_body("/v1/completions", R"({"model":"m","prompt":[4294967296]})", b) ==
        BodyError::kNoPrompt);
  CHECK(parse_body("/v1/completions", R"({"model":"m"})", b) == BodyError::kNoPrompt);
  // Nesting past kMaxDepth inside a message.
  std::string deep = R"({"model":"m","messages":[{"role":"user","content":"x","extra":)";
  deep += std::string(100, '[') + std::string(100, ']') + "}]}";
  CHECK(parse_body("/v1/chat/completions", deep, b) == BodyError::kNotJson);
}

TEST_CASE("prompt ids: the runs' reuse gives exactly the whole prompt's ids") {
  auto set = models();
  const ic::prompt_text::Model& model = *set->find("m");
  const std::string long_text(600, 'h');  // runs of 128 bytes and more are cached
  InferenceBody b;
  const std::string turn1 = R"({"model":"m","messages":[{"role":"system","content":")" + long_text +
                            R"("},{"role":"user","content":"hello world"}]})";
  REQUIRE(parse_body("/v1/chat/completions", turn1, b) == BodyError::kNone);
  std::string rendered, error;
  REQUIRE(ic::gateway::render_chat(model, b, rendered, error));
  CHECK(rendered ==
        "<|im_start|>system\n" + long_text +
            "<|im_end|>\n<|im_start|>user\nhello world<|im_end|>\n<|im_start|>assistant\n");
  std::vector<std::uint32_t> ids;
  auto& cache = ic::gateway::SegmentTokens::local();
  const auto hits = cache.hits(), misses = cache.misses();
  REQUIRE(ic::gateway::prompt_tokens(set.get(), b, 1 << 20, {}, ids) ==
          ic::gateway::TokensError::kNone);
  CHECK(ids == whole(model, rendered));
  CHECK(cache.misses() == misses + 1);  // the system run
  CHECK(cache.hits() == hits);
  // The next turn: the system run comes from the cache, the ids are the same as a whole encode.
  const std::string turn2 =
      R"({"model":"m","messages":[{"role":"system","content":")" + long_text +
      R"("},{"role":"user","content":"hello world"},{"role":"assistant","content":"hell"},{"role":"user","content":"well"}],"tools":[{},{}]})";
  REQUIRE(parse_body("/v1/chat/completions", turn2, b) == BodyError::kNone);
  REQUIRE(ic::gateway::render_chat(model, b, rendered, error));
  CHECK(rendered.find("<|im_start|>tools\n2<|im_end|>") != std::string::npos);
  REQUIRE(ic::gateway::prompt_tokens(set.get(), b, 1 << 20, {}, ids) ==
          ic::gateway::TokensError::kNone);
  CHECK(ids == whole(model, rendered));
  CHECK(cache.hits() == hits + 1);
  CHECK(cache.misses() == misses + 1);

  // Completions: text as it is, ids as given; limits and an unknown model.
  REQUIRE(parse_body("/v1/completions", R"({"model":"m","prompt":"<|im_start|>hello"})", b) ==
          BodyError::kNone);
  REQUIRE(ic::gateway::prompt_tokens(set.get(), b, 1 << 20, {}, ids) ==
          ic::gateway::TokensError::kNone);
  CHECK(ids == whole(model, "<|im_start|>hello"));
  CHECK(ids.front() == 1000);
  CHECK(ic::gateway::prompt_tokens(set.get(), b, 2, {}, ids) == ic::gateway::TokensError::kTooLong);
  CHECK(ic::gateway::prompt_tokens(
            set.get(), b, 1 << 20, [] { return true; }, ids) == ic::gateway::TokensError::kTimeout);
  REQUIRE(parse_body("/v1/completions", R"({"model":"other","prompt":"x"})", b) ==
          BodyError::kNone);
  CHECK(ic::gateway::prompt_tokens(set.get(), b, 1 << 20, {}, ids) ==
        ic::gateway::TokensError::kUnknownModel);
  REQUIRE(parse_body("/v1/completions", R"({"model":"other","prompt":[1,2]})", b) ==
          BodyError::kNone);
  CHECK(ic::gateway::prompt_tokens(nullptr, b, 1 << 20, {}, ids) ==
        ic::gateway::TokensError::kNone);
  CHECK(ids == std::vector<std::uint32_t>{1, 2});
}

TEST_CASE("prompt ids in steps (the server's slices): the ids of one go, the runs kept the same") {
  auto set = models();
  const ic::prompt_text::Model& model = *set->find("m");
  // Distinct words so the units are many; runs over 128 bytes are cached.
  std::string system;
  for (int i = 0; i < 2000; ++i)
    system += "hel" + std::string(static_cast<std::size_t>(i % 7), 'l') + " ";
  const std::string body = R"({"model":"m","messages":[{"role":"system","content":")" + system +
                           R"("},{"role":"user","content":"hello world"}]})";
  InferenceBody b;
  REQUIRE(parse_body("/v1/chat/completions", body, b) == BodyError::kNone);
  std::string rendered, error;
  REQUIRE(ic::gateway::render_chat(model, b, rendered, error));
  auto& cache = ic::gateway::SegmentTokens::local();
  const auto hits = cache.hits(), misses = cache.misses();
  // Stopped at every other poll: one unit (or one run) per step at most.
  ic::gateway::PromptTokensJob job(set.get(), InferenceBody(b), 1 << 20);
  int polls = 0, steps = 0;
  std::optional<ic::gateway::TokensError> done;
  while (!(done = job.step([&polls] { return ++polls % 2 == 0; })) && steps < 100'000) ++steps;
  REQUIRE(done == ic::gateway::TokensError::kNone);
  CHECK(steps >= 4);  // a poll every few KiB of the tokenizer's work, and between runs
  CHECK(job.ids() == whole(model, rendered));
  CHECK(cache.misses() == misses + 1);  // the system run, made in steps and kept
  CHECK(cache.hits() == hits);
  // In one go now: the kept run answers, the ids are the same.
  std::vector<std::uint32_t> ids;
  REQUIRE(ic::gateway::prompt_tokens(set.get(), b, 1 << 20, {}, ids) ==
          ic::gateway::TokensError::kNone);
  CHECK(ids == job.ids());
  CHECK(cache.hits() == hits + 1);
  // A stop true from the start: no work, paused; then on to the end.
  ic::gateway::PromptTokensJob paused(set.get(), InferenceBody(b), 1 << 20);
  CHECK_FALSE(paused.step([] { return true; }).has_value());
  CHECK(paused.step({}) == ic::gateway::TokensError::kNone);
  CHECK(paused.ids() == ids);
  // The errors of one go: too many ids, an unknown model, ids as given, a long word.
  ic::gateway::PromptTokensJob too_many(set.get(), InferenceBody(b), 2);
  CHECK(too_many.step({}) == ic::gateway::TokensError::kTooLong);
  InferenceBody other = b;
  other.model = "other";
  ic::gateway::PromptTokensJob unknown(set.get(), std::move(other), 1 << 20);
  CHECK(unknown.step({}) == ic::gateway::TokensError::kUnknownModel);
  REQUIRE(parse_body("/v1/completions", R"({"model":"x","prompt":[1,2]})", b) == BodyError::kNone);
  ic::gateway::PromptTokensJob given(nullptr, InferenceBody(b), 1 << 20);
  CHECK(given.step({}) == ic::gateway::TokensError::kNone);
  CHECK(given.ids() == std::vector<std::uint32_t>{1, 2});
  const std::string word = R"({"model":"m","messages":[{"role":"user","content":")" +
                           std::string(1 << 20, 'a') + R"("}]})";
  REQUIRE(parse_body("/v1/chat/completions", word, b) == BodyError::kNone);
  ic::gateway::PromptTokensJob long_word(set.get(), InferenceBody(b), 1 << 20);
  polls = 0;
  while (!(done = long_word.step([&polls] { return ++polls % 2 == 0; }))) {
  }
  CHECK(done == ic::gateway::TokensError::kTokenize);
  CHECK(ic::gateway::prompt_tokens(set.get(), b, 1 << 20, {}, ids) ==
        ic::gateway::TokensError::kTokenize);
}

TEST_CASE("json outline: the members and messages as written, or none") {
  ic::gateway::JsonOutline o;
  REQUIRE(ic::gateway::outline_json(
      R"( { "stream" : true, "model":"m\"x", "messages" : [ {"role":"user","content":"a]}\\"} ,{"c":[1,{"d":"}"}]} ], "tools":[{}], "n": -1.5e3 } )",
      o, 64));
  CHECK(o.model == R"("m\"x")");
  CHECK(o.tools == "[{}]");
  CHECK(o.has_messages);
  CHECK(o.messages == std::vector<std::string_view>{R"({"role":"user","content":"a]}\\"})",
                                                    R"({"c":[1,{"d":"}"}]})"});
  for (const char* bad : {"", "[]", "{", R"({"a":[1})", R"({"a":{]})", R"({"a":1,})", R"({"a" 1})",
                          R"({"a":"x)", R"({"a":1} x)", R"({"messages":[1,]})"}) {
    CAPTURE(bad);
    CHECK_FALSE(ic::gateway::outline_json(bad, o, 64));
  }
  CHECK_FALSE(ic::gateway::outline_json(R"({"a":[[[[1]]]]})", o, 3));
  CHECK(ic::gateway::outline_json(R"({"a":[[[1]]]})", o, 3));
}

TEST_CASE("chat bodies: messages seen before are not parsed again, and give the same prompt") {
  auto set = models();
  const ic::prompt_text::Model& model = *set->find("m");
  auto& cache = ic::gateway::MessageCache::local();
  const std::string system = R"({"role":"system","content":"cached system prompt"})";
  InferenceBody first, next;
  const auto misses = cache.misses(), hits = cache.hits();
  REQUIRE(
      parse_body("/v1/chat/completions",
                 R"({"model":"m","messages":[)" + system + R"(,{"role":"user","content":"q1"}]})",
                 first) == BodyError::kNone);
  CHECK(cache.misses() == misses + 2);
  REQUIRE(parse_body("/v1/chat/completions",
                     R"({"model":"m","messages":[)" + system +
                         R"(,{"role":"user","content":"q1"},{"role":"user","content":"q2"}]})",
                     next) == BodyError::kNone);
  CHECK(cache.hits() == hits + 2);
  CHECK(cache.misses() == misses + 3);
  std::string a, error;
  REQUIRE(ic::gateway::render_chat(model, next, a, error));
  CHECK(a ==
        "<|im_start|>system\ncached system prompt<|im_end|>\n<|im_start|>user\nq1<|im_end|>\n"
        "<|im_start|>user\nq2<|im_end|>\n<|im_start|>assistant\n");
  // The same body with its outline unusable (a trailing comma elsewhere) is parsed whole: refused.
  CHECK(parse_body("/v1/chat/completions", R"({"model":"m","messages":[)" + system + R"(],})",
                   next) == BodyError::kNotJson);
}

TEST_CASE("endpoints: ip:port only, ordered by load") {
  using ic::gateway::is_endpoint;
  CHECK(is_endpoint("10.0.0.1:8000"));
  CHECK(is_endpoint("[fd00::7]:8000"));
  CHECK_FALSE(is_endpoint("10.0.0.1"));
  CHECK_FALSE(is_endpoint("10.0.0.1:0"));
  CHECK_FALSE(is_endpoint("10.0.0.1:65536"));
  CHECK_FALSE(is_endpoint("10.0.0.1:80x"));
  CHECK_FALSE(is_endpoint("pod-a:8000"));
  CHECK_FALSE(is_endpoint("fd00::7:8000"));
  CHECK_FALSE(is_endpoint(""));

  ic::gateway::EndpointLoad load;
  load.started("a:1", 1);
  load.started("a:1", 2);
  load.started("b:1", 3);
  load.first_byte("b:1", 800, 4);
  load.first_byte("b:1", 1600, 5);  // mean moves 1/8 of the way
  CHECK(load.mean_ttft_us("b:1") == 900);
  auto rank = [&load](const char* endpoint) {
    const ic::gateway::EndpointLoad::Rank r = load.rank(endpoint);
    return std::to_string(r.in_flight) + "/" + std::to_string(r.ttft_us);
  };
  CHECK(rank("a:1") == "2/0");
  CHECK(rank("b:1") == "1/900");
  CHECK(rank("c:1") == "0/0");
  load.ended("a:1", 6);
  load.ended("a:1", 7);
  load.ended("a:1", 8);  // never below 0
  CHECK(load.in_flight("a:1") == 0);
  CHECK(rank("a:1") == "0/0");
}

TEST_CASE(
    "gateway figures: picks, fail-opens, served and the latency histogram summed over cores") {
  ic::gateway::GatewayFigures a;
  ic::gateway::GatewayFigures b;
  a.add_pick(ic::gateway::PickReason::kPrefixMatch, std::nullopt, 40);  // (25, 50] µs
  b.add_pick(ic::gateway::PickReason::kFailOpen, ic::gateway::FailOpen::kNoBody, -3);  // as 0
  b.add_pick(ic::gateway::PickReason::kLoad, std::nullopt, 200'000);  // over the last bound
  ++b.served[static_cast<std::size_t>(ic::gateway::Served::kFallback)];
  a.merge(b);
  CHECK(a.picks == std::array<std::uint64_t, ic::gateway::kPickReasonCount>{1, 0, 1, 1, 0});
  CHECK(a.fail_open[static_cast<std::size_t>(ic::gateway::FailOpen::kNoBody)] == 1);
  CHECK(a.served == std::array<std::uint64_t, ic::gateway::kServedCount>{0, 1});
  CHECK(a.buckets[0] == 1);  // 0 µs: the 10 µs bucket
  CHECK(a.buckets[2] == 1);
  CHECK(a.count == 3);
  CHECK(a.sum_us == 200'040);
}

TEST_CASE("message cache: full, the oldest goes unless hit since; a hit one gets a second chance") {
  using ic::gateway::MessageCache;
  MessageCache cache;
  const auto bytes = [](std::size_t i) { return "piece " + std::to_string(i); };
  for (std::size_t i = 0; i < MessageCache::kMaxEntries; ++i)
    cache.insert(bytes(i), ic::chat_template::Value(static_cast<std::int64_t>(i)));
  REQUIRE(cache.find(bytes(0)).has_value());  // the oldest, hit: kept once more
  cache.insert(bytes(MessageCache::kMaxEntries), ic::chat_template::Value(std::int64_t{-1}));
  CHECK_FALSE(cache.find(bytes(1)).has_value());  // the oldest not hit: evicted
  const auto kept = cache.find(bytes(0));
  REQUIRE(kept.has_value());
  CHECK(kept->as_int() == 0);
  CHECK(cache.find(bytes(MessageCache::kMaxEntries))->as_int() == -1);
  CHECK(cache.find(bytes(2))->as_int() == 2);
  // More hit entries at the back than second chances: the insert still evicts one, the 17th.
  for (std::size_t i = 3; i < 3 + 20; ++i) REQUIRE(cache.find(bytes(i)).has_value());
  cache.insert(bytes(MessageCache::kMaxEntries + 1), ic::chat_template::Value(std::int64_t{-2}));
  // 2 was hit after the first insert, so it and 3..17 (16 second chances) go to the front; 18 goes.
  CHECK(cache.find(bytes(2)).has_value());
  CHECK(cache.find(bytes(17)).has_value());
  CHECK_FALSE(cache.find(bytes(18)).has_value());
  CHECK(cache.find(bytes(19)).has_value());
}
