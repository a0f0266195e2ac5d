// StreamMetrics: the exposition read back as Metric messages, and the stream
// (a sample at once, then one per interval, names filter, drain).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "inferencecache/v1alpha1/inferencecache.pb.h"
#include "service/metric_stream.hh"
#include "service_fixture.hh"

namespace pb = ::inferencecache::v1alpha1;
using ic::test::ServiceFixture;
using ic::test::unframe;

namespace {

constexpr char kExposition[] =
    "# HELP up_total Things.\n"
    "# TYPE up_total counter\n"
    "up_total{kind=\"a\\\"b\\\\c\\nd\",core=\"0\"} 3\n"
    "# TYPE temp gauge\n"
    "temp -1.5e-05\n"
    "# TYPE lat_seconds histogram\n"
    "lat_seconds_bucket{model=\"m\",le=\"0.001\"} 2\n"
    "lat_seconds_bucket{model=\"m\",le=\"+Inf\"} 5\n"
    "lat_seconds_sum{model=\"m\"} 0.25\n"
    "lat_seconds_count{model=\"m\"} 5\n"
    "broken{x=\"1\" 4\n";

// "name type {k=v,...} value ts" per metric.
std::string describe(const pb::Metric& m) {
  std::map<std::string, std::string> labels(m.labels().begin(), m.labels().end());
  std::string s = m.name() + " " + m.type() + " {";
  for (const auto& [k, v] : labels) s += k + "=" + v + ",";
  char value[64];
  std::snprintf(value, sizeof value, "%g", m.value());
  return s + "} " + value + " " + std::to_string(m.timestamp_us());
}

std::vector<std::string> parsed(const std::set<std::string, std::less<>>& names) {
  std::vector<std::string> out;
  for (const auto& m : ic::service::parse_exposition(kExposition, names, 77)) {
    out.push_back(describe(m));
  }
  return out;
}

}  // namespace

TEST_CASE("parse_exposition: every series with its family's type, labels unescaped") {
  CHECK(parsed({}) == std::vector<std::string>{
                          "up_total counter {core=0,kind=a\"b\\c\nd,} 3 77",
                          "temp gauge {} -1.5e-05 77",
                          "lat_seconds_bucket histogram {le=0.001,model=m,} 2 77",
                          "lat_seconds_bucket histogram {le=+Inf,model=m,} 5 77",
                          "lat_seconds_sum histogram {model=m,} 0.25 77",
                          "lat_seconds_count histogram {model=m,} 5 77",
                      });
}

TEST_CASE("parse_exposition: names select a series or a whole family") {
  CHECK(parsed({"temp", "lat_seconds_count"}) ==
        std::vector<std::string>{"temp gauge {} -1.5e-05 77",
                                 "lat_seconds_count histogram {model=m,} 5 77"});
  CHECK(parsed({"lat_seconds"}).size() == 4);
  CHECK(parsed({"nothing"}).empty());
}

TEST_CASE("StreamMetrics: a sample at once, then one per interval; ends OK at drain") {
  int scrapes = 0;
  ic::service::GrpcServiceOptions o;
  o.scrape_metrics = [&scrapes](auto done) {
    ++scrapes;
    done(std::string(kExposition));
  };
  o.metrics_interval_us = 5'000'000;
  ServiceFixture f(o);
  pb::StreamMetricsRequest req;
  req.add_names("temp");
  const auto id = f.call("/inferencecache.v1alpha1.InferenceCache/StreamMetrics", req);
  CHECK(scrapes == 1);
  CHECK(unframe(f.client.streams[id].body).size() == 1);
  f.timers.advance(4'999'999);
  f.run();
  CHECK(scrapes == 1);
  f.timers.advance(1);
  f.run();
  CHECK(scrapes == 2);
  const auto msgs = unframe(f.client.streams[id].body);
  REQUIRE(msgs.size() == 2);
  pb::Metric m;
  REQUIRE(m.ParseFromString(msgs[1]));
  CHECK(m.name() == "temp");
  CHECK(m.type() == "gauge");
  CHECK(m.value() == -1.5e-05);
  CHECK(m.timestamp_us() > 0);
  f.session->on_shutdown();
  f.run();
  CHECK(f.client.streams[id].trailer("grpc-status") == "0");
  CHECK(f.timers.pending.empty());
}

TEST_CASE("StreamMetrics: a sample a core did not answer is skipped, the stream goes on") {
  bool complete = false;
  ic::service::GrpcServiceOptions o;
  o.scrape_metrics = [&complete](auto done) {
    done(complete ? std::optional<std::string>(kExposition) : std::nullopt);
  };
  o.metrics_interval_us = 1'000'000;
  ServiceFixture f(o);
  const auto id =
      f.call("/inferencecache.v1alpha1.InferenceCache/StreamMetrics", pb::StreamMetricsRequest());
  CHECK(f.client.streams[id].body.empty());
  CHECK(f.client.streams[id].header(":status") == "200");
  complete = true;
  f.timers.advance(1'000'000);
  f.run();
  CHECK(unframe(f.client.streams[id].body).size() == 6);
}
