// The model folders of --tokenizer-models-dir (prompt_text/models.hh, docs/prompt-text.md
// "Models"): what loads under which model id, and the reason for every folder left out.
#include "prompt_text/models.hh"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../tokenizer/small_tokenizer.hh"
#include "support/temp_dir.hh"

namespace {

using ic::prompt_text::LoadReport;
using ic::prompt_text::ModelSet;

constexpr const char* kConfig = R"({"chat_template": "{{ messages[0].content }}"})";

// Writes the files named in `files` ("tokenizer.json", "tokenizer_config.json") into dir/sub.
void model_folder(const ic::test::TempDir& dir, const std::string& sub,
                  std::vector<std::string> files) {
  std::filesystem::create_directories(dir.path / sub);
  for (const std::string& name : files) {
    std::ofstream(dir.path / sub / name)
        << (name == "tokenizer.json" ? ic::test::small_tokenizer({}).dump() : kConfig);
  }
}

struct Row {
  std::string model_id;
  bool loaded;
  std::string detail;
  bool operator==(const Row&) const = default;
};

std::vector<Row> rows(const std::vector<LoadReport>& reports) {
  std::vector<Row> out;
  for (const LoadReport& r : reports) out.push_back({r.model_id, r.loaded, r.detail});
  return out;
}

}  // namespace

namespace doctest {
template <>
struct StringMaker<Row> {
  static String convert(const Row& r) {
    return (r.model_id + (r.loaded ? " loaded: " : " not loaded: ") + r.detail).c_str();
  }
};
}  // namespace doctest

TEST_CASE("model folders: flat and org/name ids load; every folder left out says why") {
  ic::test::TempDir dir("ic-models");
  model_folder(dir, "tiny", {"tokenizer.json", "tokenizer_config.json"});
  model_folder(dir, "Qwen/Qwen3-8B", {"tokenizer.json", "tokenizer_config.json"});
  model_folder(dir, "Qwen/half", {"tokenizer.json"});
  model_folder(dir, "Qwen/notes", {});
  model_folder(dir, "no-config", {"tokenizer.json"});
  model_folder(dir, "no-tokenizer", {"tokenizer_config.json"});
  model_folder(dir, "empty", {});
  model_folder(dir, "..data", {"tokenizer.json", "tokenizer_config.json"});  // a ConfigMap's
  std::ofstream(dir.path / "README") << "not a folder";

  ModelSet models;
  std::vector<LoadReport> reports;
  std::string error;
  REQUIRE(models.load_dir(dir.path.string(), reports, error));
  CHECK(error.empty());
  const std::vector<Row> want{
      {"Qwen/Qwen3-8B", true, "vocab 256"},
      {"Qwen/half", false, "missing tokenizer_config.json"},
      {"Qwen/notes", false, "no tokenizer.json and tokenizer_config.json"},
      {"empty", false, "no tokenizer.json and tokenizer_config.json, nor model folders"},
      {"no-config", false, "missing tokenizer_config.json"},
      {"no-tokenizer", false, "missing tokenizer.json"},
      {"tiny", true, "vocab 256"},
  };
  CHECK(rows(reports) == want);
  CHECK(models.size() == 2);
  REQUIRE(models.find("Qwen/Qwen3-8B") != nullptr);
  CHECK(models.find("Qwen/Qwen3-8B")->id == "Qwen/Qwen3-8B");
  CHECK(models.find("tiny") != nullptr);
  CHECK(models.find("Qwen") == nullptr);
  CHECK(models.find("Qwen3-8B") == nullptr);
  CHECK(models.find("..data") == nullptr);
}

TEST_CASE("model folders: a directory that cannot be listed is an error") {
  ModelSet models;
  std::vector<LoadReport> reports;
  std::string error;
  CHECK_FALSE(models.load_dir("/nonexistent/models", reports, error));
  CHECK(error == "cannot list /nonexistent/models: No such file or directory");
  CHECK(reports.empty());
}

namespace {

// A model whose tokenizer.json has `post_processor` and whose config adds `config_extra`.
std::unique_ptr<ic::prompt_text::Model> with_processor(const nlohmann::json& post_processor,
                                                       const std::string& config_extra = "") {
  nlohmann::json tok = ic::test::small_tokenizer({});
  tok["post_processor"] = post_processor;
  const std::string config =
      R"({"chat_template": "x", "bos_token": "<s>", "eos_token": "</s>")" + config_extra + "}";
  std::string error;
  auto model = ModelSet::load_model("m", tok.dump(), config, error);
  REQUIRE_MESSAGE(model != nullptr, error);
  return model;
}

// TemplateProcessing as huggingface tokenizers writes it: BOS id 1, EOS id 2.
nlohmann::json template_processing(bool eos) {
  using nlohmann::json;
  json single = json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                             {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}});
  if (eos) single.push_back({{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}});
  return {{"type", "TemplateProcessing"},
          {"single", single},
          {"pair", json::array()},
          {"special_tokens",
           {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}},
            {"</s>", {{"id", "</s>"}, {"ids", {2}}, {"tokens", {"</s>"}}}}}}};
}

using Ids = std::vector<std::uint32_t>;

}  // namespace

TEST_CASE("model folders: the special tokens a tokenizer adds around one sequence") {
  // TemplateProcessing: before and after $A.
  auto m = with_processor(template_processing(false));
  CHECK(m->single_prefix == Ids{1});
  CHECK(m->single_suffix == Ids{});
  m = with_processor(template_processing(true));
  CHECK(m->single_prefix == Ids{1});
  CHECK(m->single_suffix == Ids{2});
  // Inside a Sequence of processors (Llama 3's ByteLevel, then TemplateProcessing).
  m = with_processor(
      {{"type", "Sequence"},
       {"processors",
        {{{"type", "ByteLevel"}, {"trim_offsets", false}}, template_processing(false)}}});
  CHECK(m->single_prefix == Ids{1});
  // add_bos_token / add_eos_token false drop them; true changes nothing.
  m = with_processor(template_processing(true), R"(, "add_bos_token": false)");
  CHECK(m->single_prefix == Ids{});
  CHECK(m->single_suffix == Ids{2});
  m = with_processor(template_processing(true),
                     R"(, "add_bos_token": true, "add_eos_token": false)");
  CHECK(m->single_prefix == Ids{1});
  CHECK(m->single_suffix == Ids{});
  // Another processor (Qwen3's ByteLevel), or none: nothing added.
  m = with_processor({{"type", "ByteLevel"}, {"trim_offsets", false}});
  CHECK(m->single_prefix == Ids{});
  CHECK(m->single_suffix == Ids{});
  m = with_processor(nullptr);
  CHECK(m->single_prefix == Ids{});
}
