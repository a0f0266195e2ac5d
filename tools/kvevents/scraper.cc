#include "kvevents/scraper.hh"

#include <httplib.h>

#include "base/log.hh"

namespace ic::tools::kvevents {

namespace v1 = inferencecache::v1alpha1;

std::optional<HttpUrl> parse_http_url(const std::string& url) {
  const std::string scheme = url.rfind("https://", 0) == 0 ? "https://" : "http://";
  if (url.rfind(scheme, 0) != 0) return std::nullopt;
  const std::size_t slash = url.find('/', scheme.size());
  HttpUrl out;
  out.scheme_host_port = url.substr(0, slash);
  out.path = slash == std::string::npos ? "/" : url.substr(slash);
  if (out.scheme_host_port.size() == scheme.size()) return std::nullopt;
  return out;
}

v1::CacheStateUpdate stats_update(const Identity& identity, const std::string& replica,
                                  const EngineStats& stats) {
  v1::CacheStateUpdate u;
  u.set_replica_id(replica);
  u.set_model_id(identity.model_id);
  u.set_tenant_id(identity.tenant_id);
  u.set_hash_scheme(identity.hash_scheme);
  v1::ReplicaStats* s = u.mutable_stats();
  s->set_replica_id(replica);
  s->set_cache_memory_bytes(stats.cache_memory_bytes);
  s->set_hit_rate(static_cast<float>(stats.hit_rate));
  s->set_pressure(static_cast<float>(stats.pressure));
  s->set_client_version(kVersion);
  s->set_t2_hit_tokens(stats.t2_hit_tokens);
  s->set_t2_query_tokens(stats.t2_query_tokens);
  s->set_prefix_cache_hit_tokens(stats.prefix_cache_hit_tokens);
  s->set_prefix_cache_query_tokens(stats.prefix_cache_query_tokens);
  return u;
}

Scraper::Scraper(const AdapterConfig& config, std::vector<std::string> replicas, Counters& counters,
                 Outbox& outbox)
    : config_(config), replicas_(std::move(replicas)), counters_(counters), outbox_(outbox) {
  for (std::size_t r = 0; r < replicas_.size(); ++r) {
    StatsOptions options = config.stats;
    if (replicas_.size() > 1) options.dp_rank = static_cast<std::int64_t>(r);
    computers_.emplace_back(std::move(options));
  }
}

Scraper::~Scraper() { stop(); }

void Scraper::start() {
  thread_ = std::thread([this] { run(); });
}

void Scraper::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Scraper::run() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    tick();
    lock.lock();
    wake_.wait_for(lock, std::chrono::microseconds(config_.stats_interval_us),
                   [this] { return stopping_; });
  }
}

void Scraper::tick() {
  counters_.add(Metric::scrapes);
  std::vector<std::optional<EngineStats>> stats(replicas_.size());
  std::string why;
  if (const auto url = parse_http_url(config_.engine_metrics_url)) {
    httplib::Client client(url->scheme_host_port);
    client.set_connection_timeout(2, 0);
    client.set_read_timeout(5, 0);
    const auto res = client.Get(url->path);
    if (!res) {
      why = "GET failed: " + httplib::to_string(res.error());
    } else if (res->status != 200) {
      why = "HTTP status " + std::to_string(res->status);
    } else {
      const auto samples = parse_exposition(res->body);
      for (std::size_t r = 0; r < replicas_.size(); ++r) stats[r] = computers_[r].compute(samples);
      if (!stats[0]) why = "no known metric family with running and waiting gauges";
    }
  } else {
    why = "not an http:// URL";
  }
  if (!stats[0]) {
    counters_.add(Metric::scrape_errors);
    if (++failures_in_a_row_ == 3) {
      base::log(base::LogLevel::warn, "load_signal_stale",
                {{"url", config_.engine_metrics_url}, {"why", why}});
    }
    return;
  }
  failures_in_a_row_ = 0;
  for (std::size_t r = 0; r < replicas_.size(); ++r) {
    if (stats[r]) outbox_.push(stats_update(config_.identity, replicas_[r], *stats[r]), 1);
  }
}

}  // namespace ic::tools::kvevents
