#include "prompt_text/models.hh"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <system_error>

namespace ic::prompt_text {
namespace {

using nlohmann::json;

bool read_file(const std::filesystem::path& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return !in.bad();
}

// tokenizer_config.json's chat_template: a string, or a list of
// {"name", "template"} from which the one named "default" is used.
bool chat_template_source(const json& config, std::string& source, std::string& error) {
  const auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) {
    error = "tokenizer_config.json has no chat_template";
    return false;
  }
  if (it->is_string()) {
    source = it->get<std::string>();
    return true;
  }
  if (it->is_array()) {
    for (const json& t : *it) {
      if (t.is_object() && t.value("name", "") == "default" && t.contains("template")) {
        source = t["template"].get<std::string>();
        return true;
      }
    }
  }
  error = "chat_template is neither a string nor a list with a \"default\" template";
  return false;
}

// "bos_token": "<s>" or {"content": "<s>", …}.
void add_special(const json& config, std::string_view key, chat_template::Dict& out) {
  const auto it = config.find(key);
  if (it == config.end()) return;
  if (it->is_string()) {
    out.emplace_back(std::string(key), chat_template::Value(it->get<std::string>()));
  } else if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    out.emplace_back(std::string(key), chat_template::Value((*it)["content"].get<std::string>()));
  }
}

}  // namespace

std::unique_ptr<Model> ModelSet::load_model(std::string id, std::string_view tokenizer_json,
                                            std::string_view tokenizer_config_json,
                                            std::string& error) {
  auto model = std::make_unique<Model>();
  model->id = std::move(id);
  model->tokenizer = tokenizer::Tokenizer::load(tokenizer_json, error);
  if (!model->tokenizer) return nullptr;
  std::string source;
  try {
    const json config = json::parse(tokenizer_config_json);
    if (!chat_template_source(config, source, error)) return nullptr;
    for (std::string_view key : {"bos_token", "eos_token", "unk_token", "pad_token"})
      add_special(config, key, model->special_tokens);
  } catch (const json::exception& e) {
    error = std::string("tokenizer_config.json: ") + e.what();
    return nullptr;
  }
  std::string template_error;
  model->chat_template = chat_template::Template::parse(source, template_error);
  if (!model->chat_template) {
    error = "chat_template: " + template_error;
    return nullptr;
  }
  return model;
}

bool ModelSet::load_dir(const std::string& dir, std::vector<LoadReport>& reports,
                        std::string& error) {
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec);
  if (ec) {
    error = "cannot list " + dir + ": " + ec.message();
    return false;
  }
  load_folders(dir, "", reports);
  return true;
}

// Every subdirectory of `dir` (sorted, hidden ones left out), each model id `prefix` + its
// name: a folder with both
// files is a model; with one of them, a model missing the other (reported); with neither, an
// organization folder (`Qwen/`) when it is first-level and holds model folders, else reported.
bool ModelSet::load_folders(const std::filesystem::path& dir, const std::string& prefix,
                            std::vector<LoadReport>& reports) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> subdirs;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    // Hidden folders are no models: a mounted ConfigMap's "..data", a download's ".cache".
    if (it->path().filename().string().starts_with('.')) continue;
    if (it->is_directory(ec)) subdirs.push_back(it->path());
  }
  std::sort(subdirs.begin(), subdirs.end());
  bool any = false;
  for (const fs::path& sub : subdirs) {
    const std::string id = prefix + sub.filename().string();
    const fs::path tok = sub / "tokenizer.json", cfg = sub / "tokenizer_config.json";
    const bool has_tok = fs::exists(tok, ec), has_cfg = fs::exists(cfg, ec);
    if (has_tok && has_cfg) {
      reports.push_back(load_folder(id, tok, cfg));
    } else if (has_tok || has_cfg) {
      reports.push_back(
          {id, false,
           std::string("missing ") + (has_tok ? "tokenizer_config.json" : "tokenizer.json")});
    } else if (!prefix.empty() || !load_folders(sub, id + "/", reports)) {
      reports.push_back({id, false,
                         "no tokenizer.json and tokenizer_config.json" +
                             std::string(prefix.empty() ? ", nor model folders" : "")});
    }
    any = true;
  }
  return any;
}

LoadReport ModelSet::load_folder(const std::string& id, const std::filesystem::path& tok,
                                 const std::filesystem::path& cfg) {
  LoadReport report{id, false, ""};
  std::string tok_text, cfg_text;
  if (!read_file(tok, tok_text) || !read_file(cfg, cfg_text)) {
    report.detail = "cannot read the tokenizer files";
  } else if (auto model = load_model(report.model_id, tok_text, cfg_text, report.detail)) {
    report.loaded = true;
    report.detail = "vocab " + std::to_string(model->tokenizer->vocab_size());
    add(std::move(model));
  }
  return report;
}

void ModelSet::add(std::unique_ptr<Model> model) {
  const std::string id = model->id;
  models_[id] = std::move(model);
}

const Model* ModelSet::find(std::string_view model_id) const {
  const auto it = models_.find(model_id);
  return it == models_.end() ? nullptr : it->second.get();
}

}  // namespace ic::prompt_text
