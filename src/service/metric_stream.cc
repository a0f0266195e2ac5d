#include "service/metric_stream.hh"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>

#include "metrics/label_value.hh"
#include "rpc/typed.hh"
#include "service/inference_cache.hh"

namespace ic::service {
namespace {

namespace pb = ::inferencecache::v1alpha1;

// The Prometheus value syntax: a Go float, or +Inf / -Inf / NaN.
std::optional<double> parse_value(std::string_view v) {
  if (v == "+Inf") return HUGE_VAL;
  if (v == "-Inf") return -HUGE_VAL;
  if (v == "NaN") return std::nan("");
  const std::string s(v);
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size()) return std::nullopt;
  return d;
}

// Parses `{k="v",...}` at `text[pos]` (pos just past the '{') into `out`;
// returns the position after '}' or npos on a syntax error.
std::size_t parse_labels(std::string_view text, std::size_t pos,
                         google::protobuf::Map<std::string, std::string>& out) {
  while (pos < text.size() && text[pos] != '}') {
    const std::size_t eq = text.find('=', pos);
    if (eq == std::string_view::npos || eq + 1 >= text.size() || text[eq + 1] != '"') {
      return std::string_view::npos;
    }
    const std::string key(text.substr(pos, eq - pos));
    std::string value;
    const std::size_t close = metrics::read_label_value(text, eq + 2, value);
    if (close == std::string_view::npos) return std::string_view::npos;
    out[key] = std::move(value);
    pos = close + 1;
    if (pos < text.size() && text[pos] == ',') ++pos;
  }
  return pos < text.size() ? pos + 1 : std::string_view::npos;
}

// The family of a series name: itself if typed, else without a histogram or
// summary suffix.
std::string_view family_of(std::string_view name,
                           const std::map<std::string, std::string, std::less<>>& types) {
  if (types.contains(name)) return name;
  for (std::string_view suffix : {"_bucket", "_sum", "_count"}) {
    if (name.size() > suffix.size() && name.ends_with(suffix)) {
      const std::string_view base = name.substr(0, name.size() - suffix.size());
      if (types.contains(base)) return base;
    }
  }
  return name;
}

// One sample line "name{labels} value [ts]" into `m`; false if malformed.
bool parse_sample(std::string_view line, pb::Metric& m) {
  std::size_t pos = line.find_first_of("{ ");
  if (pos == std::string_view::npos || pos == 0) return false;
  m.set_name(std::string(line.substr(0, pos)));
  if (line[pos] == '{') {
    pos = parse_labels(line, pos + 1, *m.mutable_labels());
    if (pos == std::string_view::npos) return false;
  }
  while (pos < line.size() && line[pos] == ' ') ++pos;
  const std::size_t end = line.find(' ', pos);
  const auto value = parse_value(line.substr(pos, end == std::string_view::npos ? end : end - pos));
  if (!value) return false;
  m.set_value(*value);
  return true;
}

}  // namespace

std::vector<pb::Metric> parse_exposition(std::string_view text,
                                         const std::set<std::string, std::less<>>& names,
                                         std::int64_t timestamp_us) {
  std::map<std::string, std::string, std::less<>> types;
  std::vector<pb::Metric> out;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (line.starts_with("# TYPE ")) {
      const std::string_view rest = line.substr(7);
      const std::size_t sp = rest.find(' ');
      if (sp != std::string_view::npos)
        types[std::string(rest.substr(0, sp))] = rest.substr(sp + 1);
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    pb::Metric m;
    if (!parse_sample(line, m)) continue;
    const std::string_view family = family_of(m.name(), types);
    if (!names.empty() && !names.contains(m.name()) && !names.contains(family)) continue;
    const auto t = types.find(family);
    m.set_type(t == types.end() ? "gauge" : t->second);
    m.set_timestamp_us(timestamp_us);
    out.push_back(std::move(m));
  }
  return out;
}

namespace {

std::int64_t wall_now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// One StreamMetrics call; shared with its timer and in-flight scrapes.
struct MetricStream : std::enable_shared_from_this<MetricStream> {
  rpc::CallHandle call;
  std::set<std::string, std::less<>> names;
  ScrapeFn scrape;
  std::int64_t interval_us = 0;
  rpc::Timers* timers = nullptr;
  std::optional<rpc::Timers::TimerId> timer;
  MetricSubscribers* subscribers = nullptr;
  bool counted = false;  // holds one of subscribers' slots

  // Ends the call (if open) and gives its slot back; idempotent.
  void end(const rpc::Status& status) {
    stop();
    call.finish(status);
    if (counted) subscribers->remove();
    counted = false;
  }

  // Takes a sample now; the next one is armed when this one was sent.
  void tick() {
    timer.reset();
    if (!call.alive()) return;
    std::weak_ptr<MetricStream> weak = weak_from_this();
    scrape([weak](std::optional<std::string> text) {
      const auto self = weak.lock();
      if (self) self->send(text);
    });
  }
  void send(const std::optional<std::string>& text) {
    if (!call.alive()) return;
    if (text) {
      for (const pb::Metric& m : parse_exposition(*text, names, wall_now_us())) call.write(m);
    }
    const std::size_t max_unsent = subscribers->limits().max_unsent_bytes;
    if (call.unsent_bytes() > max_unsent) {
      end({rpc::StatusCode::kResourceExhausted, "metrics subscriber too slow: more than " +
                                                    std::to_string(max_unsent) + " bytes unread"});
      return;
    }
    std::weak_ptr<MetricStream> weak = weak_from_this();
    timer = timers->add_timer(interval_us, [weak] {
      if (const auto self = weak.lock()) self->tick();
    });
  }
  void stop() {
    if (timer) timers->cancel_timer(*timer);
    timer.reset();
  }
};

class StreamMetricsHandler final : public rpc::CallHandler {
 public:
  StreamMetricsHandler(rpc::CallHandle call, ScrapeFn scrape, std::int64_t interval_us,
                       rpc::Timers& timers, MetricSubscribers& subscribers)
      : stream_(std::make_shared<MetricStream>()) {
    stream_->call = std::move(call);
    stream_->scrape = std::move(scrape);
    stream_->interval_us = interval_us;
    stream_->timers = &timers;
    stream_->subscribers = &subscribers;
  }
  ~StreamMetricsHandler() override { stream_->end(rpc::Status::ok()); }

  void on_message(std::span<const std::byte> message) override {
    if (have_request_) {
      stream_->call.finish({rpc::StatusCode::kInternal, "StreamMetrics takes one request"});
      return;
    }
    pb::StreamMetricsRequest request;
    if (!rpc::parse_request(message, request, stream_->call)) return;
    have_request_ = true;
    stream_->names.insert(request.names().begin(), request.names().end());
  }
  void on_half_close() override {
    if (!have_request_) {
      stream_->call.finish({rpc::StatusCode::kInternal, "no request message before half-close"});
      return;
    }
    if (!stream_->subscribers->try_add()) {
      stream_->call.finish({rpc::StatusCode::kResourceExhausted,
                            "too many metrics subscribers (max " +
                                std::to_string(stream_->subscribers->limits().max_subscriptions) +
                                ")"});
      return;
    }
    stream_->counted = true;
    stream_->call.send_headers();
    stream_->tick();
  }
  void on_cancel() override { stream_->end({rpc::StatusCode::kCancelled, "call ended"}); }
  void on_shutdown() override { stream_->end(rpc::Status::ok()); }

 private:
  std::shared_ptr<MetricStream> stream_;
  bool have_request_ = false;
};

}  // namespace

void add_metric_stream(rpc::MethodTable& methods, ScrapeFn scrape, std::int64_t interval_us,
                       rpc::Timers& timers, MetricSubscribers& subscribers) {
  rpc::Method m;
  m.kind = rpc::CallKind::kServerStreaming;
  m.make = [scrape = std::move(scrape), interval_us, &timers,
            &subscribers](rpc::CallHandle call) -> std::unique_ptr<rpc::CallHandler> {
    return std::make_unique<StreamMetricsHandler>(std::move(call), scrape, interval_us, timers,
                                                  subscribers);
  };
  methods.add("/" + std::string(kInferenceCacheService) + "/StreamMetrics", std::move(m));
}

}  // namespace ic::service
