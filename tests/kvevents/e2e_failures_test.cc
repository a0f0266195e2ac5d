// Every failure kind of docs/kvevents.md through the real sockets: publisher → adapter → real
// server → grpc++ LookupRoute, with the adapter's counters.
#include <doctest/doctest.h>

#include <fstream>
#include <string>
#include <thread>

#include "e2e.hh"
#include "support/text.hh"

namespace ic::tools::kvevents::test {
namespace {

constexpr auto kWait = std::chrono::seconds(30);

bool matches(std::uint16_t port, const Query& q, const std::string& want) {
  return summary(wait_lookup(port, q, [&](const Answer& a) { return summary(a) == want; })) == want;
}

struct Rig {
  std::unique_ptr<TestPublisher> pub;
  std::unique_ptr<AdapterProcess> adapter;
  std::string tenant_id;
  std::uint16_t port;

  Rig(int tenant_index, bool replay_socket, bool adapter_replay, std::size_t buffer_steps = 10000,
      std::vector<std::string> extra = {})
      : pub(make_publisher(replay_socket, buffer_steps)),
        tenant_id(tenant(tenant_index)),
        port(shared_server().grpc_port()) {
    auto flags = adapter_flags(*pub, port, tenant_id, adapter_replay);
    flags.insert(flags.end(), extra.begin(), extra.end());
    adapter = std::make_unique<AdapterProcess>(flags);
    REQUIRE(pub->wait_for_subscriber(kWait));
  }
  double metric(const std::string& name, const std::string& labels = "") const {
    return adapter->metric("inferencecache_kvevents_" + name, labels).value_or(-1);
  }
  bool has(const std::vector<std::uint32_t>& t, int matched = 16,
           const std::string& adapter_id = "") {
    return matches(port, by_tokens(tenant_id, t, adapter_id),
                   "PREFIX_MATCH r:" + std::to_string(matched));
  }
  bool absent(const std::vector<std::uint32_t>& t, const std::string& adapter_id = "") {
    return lookup(port, by_tokens(tenant_id, t, adapter_id)).reason != "PREFIX_MATCH";
  }
};

}  // namespace

TEST_CASE("dropped seq 2 of 0..3 is replayed and applied in order; the re-sent 3 applies once") {
  Rig rig(30, true, true);
  const auto x = tokens(1), y = tokens(2), w = tokens(3);
  rig.pub->publish(batch({store({1}, x)}));                // seq 0
  rig.pub->publish(batch({store({2}, y)}));                // seq 1
  rig.pub->publish_lost(batch({store({3}, w)}));           // seq 2, lost live
  rig.pub->publish(batch({removal({3}), store({1}, x)}));  // seq 3: W goes, X gets a 2nd copy
  CHECK(rig.adapter->wait_metric("inferencecache_kvevents_replays_total", "", 1));
  // The replay holds what the publisher has when it answers: let it answer (seq 2 and 3) before
  // seq 4 exists, or a slow machine replays 4 and the barrier too.
  const auto until = std::chrono::steady_clock::now() + kWait;
  while (rig.pub->replays_served() < 1 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(rig.pub->replays_served() == 1);
  rig.pub->publish(batch({removal({1})}));  // seq 4: one copy of X left
  barrier(*rig.pub, rig.port, rig.tenant_id);
  CHECK(rig.has(x));
  CHECK(rig.has(y));
  CHECK(rig.absent(w));  // applying live seq 3 before the replayed seq 2 would resurrect W
  CHECK(rig.metric("seq_gaps_total") == 1);
  CHECK(rig.metric("replays_total") == 1);
  CHECK(rig.metric("replayed_batches_total") == 2);
  CHECK(rig.metric("duplicate_batches_total") == 1);  // seq 3 live and replayed
  CHECK(rig.metric("unknown_removals_total") == 0);   // seq 3's removal ran once
  CHECK(rig.metric("duplicate_blocks_total") == 1);
  CHECK(rig.metric("resyncs_total", "reason=\"replay_overrun\"") == 0);
  CHECK(rig.pub->replays_served() == 1);
}

TEST_CASE("replay overrun: the publisher no longer holds the gap → ALL_CLEARED resync, counted") {
  Rig rig(31, true, true, /*buffer_steps=*/2);
  const auto a = tokens(1), b = tokens(2), e = tokens(5), f = tokens(6);
  rig.pub->publish(batch({store({1}, a)}));               // 0
  rig.pub->publish_lost(batch({store({2}, b)}));          // 1
  rig.pub->publish_lost(batch({store({3}, tokens(3))}));  // 2
  rig.pub->publish_lost(batch({store({5}, e)}));          // 3 (still buffered)
  rig.pub->publish(batch({store({6}, f)}));               // 4: gap, replay from 1 answers 3, 4
  // Publishing more before the replay is served would push seq 3 out of the buffer too.
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  while (rig.pub->replays_served() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(rig.pub->replays_served() == 1);
  barrier(*rig.pub, rig.port, rig.tenant_id);
  CHECK(rig.metric("resyncs_total", "reason=\"replay_overrun\"") == 1);
  CHECK(rig.absent(a));  // cleared by the resync
  CHECK(rig.absent(b));
  CHECK(rig.has(e));
  CHECK(rig.has(f));
}

TEST_CASE("no replay endpoint: a gap resyncs with ALL_CLEARED, counted") {
  Rig rig(32, false, false);
  const auto a = tokens(1), c = tokens(3);
  rig.pub->publish(batch({store({1}, a)}));
  CHECK(rig.has(a));
  rig.pub->publish_lost(batch({store({2}, tokens(2))}));
  rig.pub->publish(batch({store({3}, c)}));
  barrier(*rig.pub, rig.port, rig.tenant_id);
  CHECK(rig.metric("resyncs_total", "reason=\"no_replay_endpoint\"") == 1);
  CHECK(rig.absent(a));
  CHECK(rig.absent(tokens(2)));
  CHECK(rig.has(c));
}

// VmHWM of `pid`, bytes.
std::int64_t peak_rss(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  return -1;
}

TEST_CASE("a message over 64 MiB is refused before it is received; later batches still apply") {
  Rig rig(34, false, false);
  const auto a = tokens(1), c = tokens(3);
  rig.pub->publish(batch({store({1}, a)}));
  CHECK(rig.has(a));
  const std::int64_t before = peak_rss(rig.adapter->pid());
  REQUIRE(before > 0);
  // 200 MiB: received whole, it would cost the adapter at least that much (twice, copied).
  rig.pub->publish(std::string(std::size_t{200} << 20, '\x90'));
  // ZeroMQ dropped the connection at the frame's size; the adapter opens a
  // fresh socket. The publisher drops what it sends before the subscription
  // is back (and may not even see it come back: it can still count the old
  // one), so send the next batch until it applies.
  bool applied = false;
  for (int i = 0; i < 60 && !applied; ++i) {
    rig.pub->publish(batch({store({3}, c)}));
    applied = summary(wait_lookup(
                  rig.port, by_tokens(rig.tenant_id, c),
                  [](const Answer& a) { return summary(a) == "PREFIX_MATCH r:16"; },
                  std::chrono::seconds(1))) == "PREFIX_MATCH r:16";
  }
  REQUIRE(applied);
  barrier(*rig.pub, rig.port, rig.tenant_id);
  CHECK(rig.has(c));
  CHECK(rig.metric("resyncs_total", "reason=\"no_replay_endpoint\"") == 1);  // the lost seq
  CHECK(peak_rss(rig.adapter->pid()) - before < (std::int64_t{64} << 20));
}

TEST_CASE("a batch of a million events is applied in chunks: memory stays near one chunk") {
  Rig rig(41, false, false);
  const auto a = tokens(1), c = tokens(3);
  rig.pub->publish(batch({store({1}, a)}));
  CHECK(rig.has(a));
  const std::int64_t before = peak_rss(rig.adapter->pid());
  REQUIRE(before > 0);
  // 1M removals of blocks never stored: 28 MB of msgpack. Decoded whole (every event's msgpack
  // objects and the decoded events at once), it raised the adapter's peak by ~450 MB.
  std::vector<Event> removals;
  removals.reserve(1'000'000);
  for (std::uint64_t h = 0; h < 1'000'000; ++h) removals.emplace_back(removal({(1ull << 40) + h}));
  const std::string payload = batch(std::move(removals));
  REQUIRE(payload.size() > (std::size_t{20} << 20));
  rig.pub->publish(payload);
  rig.pub->publish(batch({store({3}, c)}));
  CHECK(rig.has(c));
  CHECK(rig.metric("unknown_removals_total") == 1'000'000);
  // The payload as ZeroMQ received it and as the sequencer holds it (2 × 28 MB), one chunk of
  // 4,096 decoded events and one event's msgpack objects (docs/kvevents.md "Bounds").
  const std::int64_t grown = peak_rss(rig.adapter->pid()) - before;
  MESSAGE("adapter peak grew by " << grown / (1 << 20) << " MiB for a "
                                  << payload.size() / (1 << 20) << " MiB batch of 1M events");
#ifndef IC_SANITIZED  // ASan's quarantine holds every freed chunk: the peak says nothing there
  CHECK(grown < (std::int64_t{96} << 20));
#endif
}

TEST_CASE("publisher restart: seq back to 0 → resync") {
  Rig rig(33, true, true);
  const auto a = tokens(1), b = tokens(2), c = tokens(3);
  rig.pub->publish(batch({store({1}, a)}));
  rig.pub->publish(batch({store({2}, b)}));
  CHECK(rig.has(b));
  rig.pub->restart();
  rig.pub->publish(batch({store({3}, c)}));  // seq 0 again
  barrier(*rig.pub, rig.port, rig.tenant_id);
  CHECK(rig.metric("resyncs_total", "reason=\"publisher_restart\"") == 1);
  CHECK(rig.absent(a));
  CHECK(rig.absent(b));
  CHECK(rig.has(c));
}

TEST_CASE("duplicate physical copies: evicted only when the last copy goes") {
  Rig rig(34, false, false);
  const auto a = tokens(1);
  rig.pub->publish(batch({store({1}, a), store({1}, a), store({1}, a)}));
  rig.pub->publish(batch({removal({1}), removal({1})}));
  barrier(*rig.pub, rig.port, rig.tenant_id);
  CHECK(rig.has(a));
  CHECK(rig.metric("duplicate_blocks_total") == 2);
  rig.pub->publish(batch({removal({1})}));
  barrier(*rig.pub, rig.port, rig.tenant_id);
  CHECK(rig.absent(a));
  CHECK(rig.metric("server_events_total", "type=\"PREFIX_EVICTED\"") >= 1);
}

TEST_CASE("data parallel: rank r on port + r is attributed to <replica>/dp<r> by its dp_rank") {
  const std::uint16_t port = shared_server().grpc_port();
  const std::string tenant_id = tenant(35);
  std::unique_ptr<TestPublisher> rank0, rank1;
  for (int attempt = 0; attempt < 20 && !rank1; ++attempt) {
    rank0 = make_publisher(false);
    PublisherOptions o;
    o.endpoint = itest::numbered("tcp://127.0.0.1:", endpoint_port(rank0->endpoint()) + 1);
    try {
      rank1 = std::make_unique<TestPublisher>(o);
    } catch (const std::runtime_error&) {
      rank0.reset();  // port + 1 taken: try another base port
    }
  }
  REQUIRE(rank1);
  auto flags = adapter_flags(*rank0, port, tenant_id, false);
  flags.insert(flags.end(), {"--dp-size", "2"});
  AdapterProcess adapter(flags);
  REQUIRE(rank0->wait_for_subscriber(kWait));
  REQUIRE(rank1->wait_for_subscriber(kWait));
  const auto a = tokens(1), b = tokens(2);
  rank0->publish(batch({store({1}, a)}, Encoding::array, 0));
  rank1->publish(batch({store({1}, b)}, Encoding::map, 1));  // same engine hash, other rank
  CHECK(matches(port, by_tokens(tenant_id, a), "PREFIX_MATCH r/dp0:16"));
  CHECK(matches(port, by_tokens(tenant_id, b), "PREFIX_MATCH r/dp1:16"));
  // A rank-1 clear leaves rank 0 alone.
  rank1->publish(batch({AllBlocksCleared{}}, Encoding::array, 1));
  CHECK(summary(wait_lookup(port, by_tokens(tenant_id, b), [](const Answer& x) {
          return x.reason != "PREFIX_MATCH";
        })) != "PREFIX_MATCH r/dp1:16");
  CHECK(summary(lookup(port, by_tokens(tenant_id, a))) == "PREFIX_MATCH r/dp0:16");
}

TEST_CASE("LoRA: a mapped lora_id lands in the adapter's partition; an unmapped one is dropped") {
  Rig rig(36, false, false, 10000, {"--lora-adapter-names", "7=sql-lora,8=chat-lora"});
  const auto a = tokens(1), b = tokens(2), c = tokens(3);
  auto mapped = store({1}, a);
  mapped.lora_id = 7;
  auto unmapped = store({2}, b);
  unmapped.lora_id = 9;
  auto named = store({3}, c);
  named.lora_id = 3;
  named.lora_name = "chat-lora";
  rig.pub->publish(batch({mapped, unmapped, named}, Encoding::map));
  barrier(*rig.pub, rig.port, rig.tenant_id);
  CHECK(rig.has(a, 16, "sql-lora"));
  CHECK(rig.absent(a));
  CHECK(rig.has(c, 16, "chat-lora"));
  CHECK(rig.absent(b));
  CHECK(rig.absent(b, "sql-lora"));
  CHECK(rig.metric("dropped_events_total", "reason=\"lora_unmapped\"") == 1);
}

TEST_CASE("cache_salt: salted blocks never match an unsalted lookup") {
  Rig rig(37, false, false);
  const auto a = tokens(1), plain = tokens(2);
  auto salted = store({1}, a);
  salted.cache_salt = "tenant-x";
  rig.pub->publish(batch({salted, store({2}, plain)}));
  barrier(*rig.pub, rig.port, rig.tenant_id);
  CHECK(rig.has(plain));
  CHECK(rig.absent(a));
  CHECK(rig.metric("blocks_total", "op=\"stored\"") == 3);  // salted, plain, barrier marker
}

TEST_CASE("group_idx ≠ 0 is not indexed and its removals leave group 0 alone") {
  Rig rig(38, false, false);
  const auto a = tokens(1), b = tokens(2);
  auto window = store({2}, b);
  window.group_idx = 1;
  BlockRemoved window_removal = removal({1});
  window_removal.group_idx = 1;
  rig.pub->publish(batch({store({1}, a), window, window_removal}, Encoding::map));
  barrier(*rig.pub, rig.port, rig.tenant_id);
  CHECK(rig.has(a));
  CHECK(rig.absent(b));
  CHECK(rig.metric("skipped_group_events_total") == 2);
}

TEST_CASE("a block size other than the server's is logged once and counted") {
  Rig rig(39, false, false);
  for (int i = 0; i < 3; ++i) {
    auto big =
        store({static_cast<std::uint64_t>(10 + i)}, tokens(static_cast<std::uint32_t>(10 + i), 2));
    big.block_size = 32;
    rig.pub->publish(batch({big}));
  }
  barrier(*rig.pub, rig.port, rig.tenant_id);
  CHECK(rig.metric("block_size_mismatch_total") == 3);
  const std::string log = rig.adapter->log();
  const std::string line = "engine block size differs from --engine-block-size";
  CHECK(log.find(line) != std::string::npos);
  CHECK(log.find(line) == log.rfind(line));
}

TEST_CASE("malformed batches, frames and events are skipped and counted; the connection lives") {
  Rig rig(40, false, false);
  const auto a = tokens(1), b = tokens(2);
  rig.pub->publish("\xc1 not msgpack");                     // malformed batch
  rig.pub->send_frames({"kv-events", "short", "payload"});  // seq frame not 8 bytes
  // [1.0, [["BlockStored", "x"], <a good store>]]: one bad event, one good.
  std::string good_and_bad = batch({store({1}, a)});
  // Bytes 0..9 are fixarray(3) and the float64 ts; byte 10 is the events fixarray(1).
  REQUIRE(static_cast<unsigned char>(good_and_bad[10]) == 0x91);
  rig.pub->publish(good_and_bad.substr(0, 10) +
                   "\x92\x92\xab"
                   "BlockStored"
                   "\xa1x" +
                   good_and_bad.substr(11));
  rig.pub->publish(batch({store({2}, b)}));
  barrier(*rig.pub, rig.port, rig.tenant_id);
  CHECK(rig.has(a));
  CHECK(rig.has(b));
  CHECK(rig.metric("malformed_batches_total") == 2);
  CHECK(rig.metric("malformed_events_total") == 1);
  CHECK(rig.metric("seq_gaps_total") == 0);
}

}  // namespace ic::tools::kvevents::test
