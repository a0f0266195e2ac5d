#pragma once
// The tokenizer models of --tokenizer-models-dir (docs/prompt-text.md
// "Models"): every DIR/<model_id>/ holding tokenizer.json and
// tokenizer_config.json, a slashed model id (`Qwen/Qwen3-8B`) as nested
// folders DIR/Qwen/Qwen3-8B/, loaded once at startup, immutable afterwards and
// shared by every core. A request's model_id is only ever looked up in this
// set, never joined onto a path.

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "chat_template/template.hh"
#include "tokenizer/tokenizer.hh"

namespace ic::prompt_text {

struct Model {
  std::string id;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;
  std::unique_ptr<chat_template::Template> chat_template;
  // bos_token, eos_token, unk_token, pad_token of tokenizer_config.json (those
  // set, as strings), passed to the template as transformers does.
  chat_template::Dict special_tokens;
  // The special tokens the tokenizer adds around one sequence when asked to
  // (transformers' encode(text), i.e. add_special_tokens=True, as vLLM
  // tokenizes a /v1/completions prompt; a chat prompt's template writes its
  // own): the SpecialToken ids before and after "$A" in tokenizer.json's
  // post_processor TemplateProcessing "single" (itself, or in a Sequence of
  // processors; none for another processor, e.g. Qwen3's ByteLevel), less a
  // bos_token / eos_token that tokenizer_config.json's add_bos_token /
  // add_eos_token set to false (huggingface tokenizers' TemplateProcessing).
  std::vector<std::uint32_t> single_prefix, single_suffix;
};

// One model directory's outcome, for the startup log.
struct LoadReport {
  std::string model_id;
  bool loaded = false;
  std::string detail;  // loaded: "vocab N, M added tokens"; else why not
};

class ModelSet {
 public:
  // Loads every subdirectory of `dir` holding both files, as model id its
  // name; a first-level folder holding neither file is an organization whose
  // subdirectories are models "<org>/<name>". Every folder left out has its
  // reason in `reports` (in path order): one of the two files missing ("missing
  // tokenizer_config.json"), neither file nor model folders inside, files that
  // do not parse or use anything outside the supported subset. False + `error`
  // when `dir` cannot be listed.
  bool load_dir(const std::string& dir, std::vector<LoadReport>& reports, std::string& error);

  // Builds one model from the two files' contents; nullptr + `error`.
  static std::unique_ptr<Model> load_model(std::string id, std::string_view tokenizer_json,
                                           std::string_view tokenizer_config_json,
                                           std::string& error);

  // Adds a built model (replacing one of the same id).
  void add(std::unique_ptr<Model> model);

  // The model loaded under exactly `model_id`, or nullptr.
  const Model* find(std::string_view model_id) const;
  std::size_t size() const { return models_.size(); }

 private:
  // The model folders under `dir` with ids "<prefix><name>"; false when it has no subdirectory.
  bool load_folders(const std::filesystem::path& dir, const std::string& prefix,
                    std::vector<LoadReport>& reports);
  // One model folder's two files, loaded (and added) or not, with why.
  LoadReport load_folder(const std::string& id, const std::filesystem::path& tok,
                         const std::filesystem::path& cfg);

  std::map<std::string, std::unique_ptr<Model>, std::less<>> models_;
};

}  // namespace ic::prompt_text
