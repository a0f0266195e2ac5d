#include "common/trace.hh"

#include <nlohmann/json.hpp>

namespace ic::tools {
namespace {

// Reads a non-negative integer field; sets *error when absent or of the wrong type.
bool read_count(const nlohmann::json& object, const char* name, std::int64_t max, std::int64_t* out,
                std::string* error) {
  auto it = object.find(name);
  if (it == object.end()) {
    *error = std::string("missing field \"") + name + "\"";
    return false;
  }
  if (!it->is_number_integer() || it->get<std::int64_t>() < 0 || it->get<std::int64_t>() > max) {
    *error = std::string("field \"") + name + "\" must be an integer in [0, " +
             std::to_string(max) + "]";
    return false;
  }
  *out = it->get<std::int64_t>();
  return true;
}

}  // namespace

std::optional<TraceRequest> parse_trace_line(std::string_view line, std::string* error) {
  nlohmann::json object = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (object.is_discarded()) {
    *error = "not valid JSON";
    return std::nullopt;
  }
  if (!object.is_object()) {
    *error = "not a JSON object";
    return std::nullopt;
  }
  TraceRequest request;
  std::int64_t input = 0;
  std::int64_t output = 0;
  constexpr std::int64_t kMaxTokens = 1 << 30;
  if (!read_count(object, "timestamp", INT64_MAX / 1000, &request.timestamp_ms, error) ||
      !read_count(object, "input_length", kMaxTokens, &input, error) ||
      !read_count(object, "output_length", kMaxTokens, &output, error)) {
    return std::nullopt;
  }
  if (input == 0) {
    *error = "field \"input_length\" must be > 0";
    return std::nullopt;
  }
  request.input_length = static_cast<std::int32_t>(input);
  request.output_length = static_cast<std::int32_t>(output);
  auto ids = object.find("hash_ids");
  if (ids == object.end() || !ids->is_array()) {
    *error = "field \"hash_ids\" must be an array";
    return std::nullopt;
  }
  request.hash_ids.reserve(ids->size());
  for (const auto& id : *ids) {
    if (!id.is_number_unsigned()) {
      *error = "field \"hash_ids\" must hold non-negative integers";
      return std::nullopt;
    }
    request.hash_ids.push_back(id.get<std::uint64_t>());
  }
  const auto expected =
      static_cast<std::size_t>((input + kMooncakeBlockTokens - 1) / kMooncakeBlockTokens);
  if (request.hash_ids.size() != expected) {
    *error = "hash_ids has " + std::to_string(request.hash_ids.size()) + " blocks, input_length " +
             std::to_string(input) + " needs " + std::to_string(expected);
    return std::nullopt;
  }
  return request;
}

std::vector<std::int32_t> block_token_counts(const TraceRequest& request) {
  const std::size_t n = request.hash_ids.size();
  std::vector<std::int32_t> counts(n, kMooncakeBlockTokens);
  if (n > 0) {
    counts[n - 1] = request.input_length - kMooncakeBlockTokens * static_cast<std::int32_t>(n - 1);
  }
  return counts;
}

std::string block_hash_bytes(std::uint64_t hash_id) {
  std::string bytes(8, '\0');
  for (int i = 7; i >= 0; --i) {
    bytes[static_cast<std::size_t>(i)] = static_cast<char>(hash_id & 0xff);
    hash_id >>= 8;
  }
  return bytes;
}

std::optional<BadLinePolicy> parse_bad_line_policy(std::string_view text) {
  if (text == "skip") return BadLinePolicy::kSkip;
  if (text == "fail") return BadLinePolicy::kFail;
  return std::nullopt;
}

TraceReader::TraceReader(const std::string& path) : in_(path) {
  ok_ = in_.is_open();
  if (!ok_) error_ = "cannot open trace file " + path;
}

TraceReader::Next TraceReader::next(TraceRequest* request) {
  while (std::getline(in_, line_)) {
    ++line_number_;
    if (line_.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::string reason;
    auto parsed = parse_trace_line(line_, &reason);
    if (!parsed) {
      error_ = "line " + std::to_string(line_number_) + ": " + reason;
      return Next::kBadLine;
    }
    *request = std::move(*parsed);
    return Next::kRequest;
  }
  return Next::kEnd;
}

TraceLoad load_trace(const std::string& path, BadLinePolicy policy, std::int64_t limit,
                     const std::function<void(const std::string&)>& on_bad_line) {
  TraceLoad load;
  TraceReader reader(path);
  if (!reader.ok()) {
    load.error = reader.error();
    return load;
  }
  TraceRequest request;
  while (limit <= 0 || static_cast<std::int64_t>(load.requests.size()) < limit) {
    const auto next = reader.next(&request);
    if (next == TraceReader::Next::kEnd) break;
    if (next == TraceReader::Next::kRequest) {
      load.requests.push_back(std::move(request));
      continue;
    }
    ++load.bad_lines;
    on_bad_line(reader.error());
    if (policy == BadLinePolicy::kFail) {
      load.failed_line = reader.line_number();
      load.error = reader.error();
      break;
    }
  }
  return load;
}

}  // namespace ic::tools
