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

// tokenizer.json's post_processor, parsed alone (every other member skipped).
json post_processor_of(std::string_view tokenizer_json) {
  const json top = json::parse(tokenizer_json, [](int depth, json::parse_event_t event, json& v) {
    return !(depth == 1 && event == json::parse_event_t::key && v != "post_processor");
  });
  const auto it = top.find("post_processor");
  return it != top.end() ? *it : json();
}

// The TemplateProcessing among `processor` (itself or in a Sequence), or null.
const json* template_processing(const json& processor) {
  if (!processor.is_object()) return nullptr;
  const std::string type = processor.value("type", "");
  if (type == "TemplateProcessing") return &processor;
  if (type == "Sequence" && processor.contains("processors")) {
    for (const json& p : processor["processors"]) {
      if (const json* t = template_processing(p)) return t;
    }
  }
  return nullptr;
}

// The content of config[key] ("<s>" or {"content": "<s>"}); "" when unset.
std::string special_content(const json& config, std::string_view key) {
  const auto it = config.find(key);
  if (it == config.end()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
    return (*it)["content"].get<std::string>();
  return {};
}

// Model::single_prefix / single_suffix from the post_processor and the config.
void single_special_ids(const json& processor, const json& config, Model& model) {
  const json* t = template_processing(processor);
  if (t == nullptr || !t->contains("single") || !(*t)["single"].is_array()) return;
  const json specials = t->value("special_tokens", json::object());
  auto dropped = [&config](const std::string& token) {
    for (const auto& [add, name] :
         {std::pair{"add_bos_token", "bos_token"}, std::pair{"add_eos_token", "eos_token"}}) {
      const auto flag = config.find(add);
      if (flag != config.end() && flag->is_boolean() && !flag->get<bool>() &&
          special_content(config, name) == token)
        return true;
    }
    return false;
  };
  bool after = false;
  for (const json& piece : (*t)["single"]) {
    if (piece.contains("Sequence")) {
      after = true;
      continue;
    }
    if (!piece.contains("SpecialToken")) continue;
    const std::string id = piece["SpecialToken"].value("id", "");
    if (dropped(id) || !specials.contains(id)) continue;
    for (const json& n : specials[id].value("ids", json::array())) {
      if (!n.is_number_unsigned()) continue;
      (after ? model.single_suffix : model.single_prefix).push_back(n.get<std::uint32_t>());
    }
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
    single_special_ids(post_processor_of(tokenizer_json), config, *model);
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
