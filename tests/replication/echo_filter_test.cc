// The echo rule (src/replication/echo_filter.hh, docs/replication.md
// "Applying the stream"): the exact skip decisions with interleaved foreign
// records, and the state the origin ends with, asserted key by key against a
// server that applies the stream in order. The state is the index's model:
// each change writes (key → value) or removes keys, last writer wins.

#include <doctest/doctest.h>

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "replication/echo_filter.hh"

namespace ic::replication {
namespace {

constexpr int kRemove = -1;

// One change: its tenant and what it writes. origin_sequence > 0 marks the
// origin server's own records.
struct Change {
  std::string tenant;
  std::uint64_t own = 0;
  std::vector<std::pair<std::string, int>> writes;  // key → value, kRemove = remove
};

using State = std::map<std::string, int>;

void write(State& state, const Change& c) {
  for (const auto& [key, value] : c.writes) {
    if (value == kRemove) {
      state.erase(c.tenant + "/" + key);
    } else {
      state[c.tenant + "/" + key] = value;
    }
  }
}

// The origin server: its early applies and the stream, through the filter.
struct Origin {
  EchoFilter filter;
  State state;
  int applied = 0;  // stream records applied (not skipped)
  void early(const Change& c) {
    if (filter.early_apply(c.tenant, c.own)) write(state, c);
  }
  void stream(const Change& c) {
    if (filter.stream_record(c.tenant, c.own)) {
      write(state, c);
      ++applied;
    }
  }
};

State in_stream_order(const std::vector<Change>& stream) {
  State state;
  for (const Change& c : stream) write(state, c);
  return state;
}

TEST_CASE("no foreign record between: every echo is skipped, the state is the stream's") {
  const Change r1{"t", 1, {{"a", 1}, {"b", 1}}};
  const Change r2{"t", 2, {{"a", 2}}};
  const Change r3{"t", 3, {{"b", kRemove}}};
  Origin o;
  o.early(r1);
  o.early(r2);
  o.early(r3);
  CHECK(o.filter.waiting() == 3);
  o.stream(r1);
  o.stream(r2);
  o.stream(r3);
  CHECK(o.applied == 0);
  CHECK(o.filter.waiting() == 0);
  CHECK(o.state == State{{"t/a", 2}});
  CHECK(o.state == in_stream_order({r1, r2, r3}));
}

TEST_CASE("a foreign record of the tenant before the echo: the echo is applied again") {
  // Local: R1 early; the stream stores F (another server's) before R1.
  const Change r1{"t", 1, {{"a", 1}}};
  const Change f{"t", 0, {{"a", 9}, {"b", 9}}};
  const Change r2{"t", 2, {{"b", 2}}};  // accepted after F ran here
  Origin o;
  o.early(r1);
  o.stream(f);
  CHECK(o.state == State{{"t/a", 9}, {"t/b", 9}});  // out of stream order for now
  o.early(r2);                                      // after F: clean so far
  o.stream(r1);  // dirty: applied, and so R2 (applied before it here) is dirty now
  CHECK(o.applied == 2);
  o.stream(r2);
  CHECK(o.applied == 3);
  CHECK(o.state == State{{"t/a", 1}, {"t/b", 2}});
  CHECK(o.state == in_stream_order({f, r1, r2}));
}

TEST_CASE("a foreign record of another tenant does not make an echo dirty; a policy does") {
  const Change r1{"t", 1, {{"a", 1}}};
  const Change other{"u", 0, {{"a", 5}}};
  const Change r2{"t", 2, {{"a", 2}}};
  Origin o;
  o.early(r1);
  o.stream(other);
  o.stream(r1);
  CHECK(o.applied == 1);  // only `other`
  o.early(r2);
  o.filter.stream_all();
  o.stream(r2);
  CHECK(o.applied == 2);  // r2 applied again after the policy
  CHECK(o.state == State{{"t/a", 2}, {"u/a", 5}});
}

TEST_CASE("echoes out of local order: the overtaken record is applied again after") {
  // Local order P, R (two cores accepted them); the stream has R, P.
  const Change p{"t", 2, {{"a", 2}, {"b", 2}}};
  const Change r{"t", 1, {{"a", 1}}};
  Origin o;
  o.early(p);
  o.early(r);
  o.stream(r);  // clean: skipped, and P is now dirty
  CHECK(o.applied == 0);
  o.stream(p);
  CHECK(o.applied == 1);
  CHECK(o.state == State{{"t/a", 2}, {"t/b", 2}});
  CHECK(o.state == in_stream_order({r, p}));
}

TEST_CASE("an echo that ran before its early apply drops the late early apply") {
  const Change r1{"t", 1, {{"a", 1}}};
  const Change f{"t", 0, {{"a", 9}}};
  Origin o;
  o.stream(r1);  // its early apply has not run yet (slow mailbox, or shed)
  o.stream(f);
  CHECK(o.filter.early_echoes() == 1);
  o.early(r1);  // would put R1 after F: dropped
  CHECK(o.filter.early_echoes() == 0);
  CHECK(o.filter.waiting() == 0);
  CHECK(o.state == State{{"t/a", 9}});
  CHECK(o.state == in_stream_order({r1, f}));
}

TEST_CASE("a record whose echo never comes does not stop later skips; duplicates reapply") {
  const Change lost{"t", 1, {{"a", 1}}};  // dropped from the outbox: no echo
  const Change r2{"t", 2, {{"a", 2}}};
  Origin o;
  o.early(lost);
  o.early(r2);
  o.stream(r2);
  CHECK(o.applied == 0);
  o.stream(r2);  // stored twice (a republished batch): applied at its second place
  CHECK(o.applied == 1);
  CHECK(o.state == State{{"t/a", 2}});
  CHECK(o.filter.waiting() == 1);  // `lost`, until the bound forgets it
}

TEST_CASE("over its bounds the filter forgets, and forgotten echoes are applied") {
  EchoFilter filter;
  for (std::uint64_t s = 1; s <= EchoFilter::kMaxWaiting; ++s) {
    REQUIRE(filter.early_apply("t", s));
  }
  CHECK(filter.waiting() == EchoFilter::kMaxWaiting);
  REQUIRE(filter.early_apply("t", EchoFilter::kMaxWaiting + 1));
  CHECK(filter.waiting() == 1);
  CHECK_FALSE(filter.stream_record("t", EchoFilter::kMaxWaiting + 1));
  CHECK(filter.stream_record("t", 1));  // forgotten: applied (an early echo to it)
  CHECK(filter.early_echoes() == 1);
  for (std::uint64_t s = 2; s <= EchoFilter::kMaxEarlyEchoes; ++s) {
    REQUIRE(filter.stream_record("t", s));
  }
  CHECK(filter.early_echoes() == EchoFilter::kMaxEarlyEchoes);
  CHECK(filter.stream_record("t", EchoFilter::kMaxEarlyEchoes + 1));
  CHECK(filter.early_echoes() == 1);
}

// Random histories: two tenants, three keys each, the origin's records
// accepted in origin order but applied early in a slightly shuffled order
// (several accepting cores), some early applies shed, echoes stored in a
// slightly shuffled order (republished batches), some twice, interleaved
// with other servers' records; the origin ends with exactly the state of a
// server that applied the stream in order.
TEST_CASE("random interleavings: the origin ends with the stream-order state, key by key") {
  std::mt19937 rng(20261201);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  auto random_change = [&](std::uint64_t own) {
    Change c{pick(2) == 0 ? "t" : "u", own, {}};
    const int n = 1 + pick(2);
    for (int i = 0; i < n; ++i) {
      c.writes.emplace_back(std::string(1, static_cast<char>('a' + pick(3))),
                            pick(5) == 0 ? kRemove : pick(1000));
    }
    return c;
  };
  auto nudge = [&](std::vector<Change>& v) {  // a few neighbour swaps
    for (std::size_t i = 1; i < v.size(); ++i) {
      if (pick(6) == 0) std::swap(v[i - 1], v[i]);
    }
  };
  int skipped = 0, histories = 0;
  for (int history = 0; history < 2000; ++history) {
    const int own_n = 1 + pick(12);
    std::vector<Change> own;
    for (int i = 1; i <= own_n; ++i) own.push_back(random_change(static_cast<std::uint64_t>(i)));
    std::vector<Change> local = own;
    nudge(local);
    std::vector<Change> echoes = own;
    nudge(echoes);
    if (pick(4) == 0) echoes.push_back(echoes[static_cast<std::size_t>(pick(own_n))]);
    // The stream: echoes in their order, foreign records between.
    std::vector<Change> stream;
    for (const Change& e : echoes) {
      while (pick(3) == 0) stream.push_back(random_change(0));
      stream.push_back(e);
    }
    // The origin: its early applies and the stream interleaved; an echo may
    // come before its early apply, and one early apply in 10 is shed.
    Origin o;
    std::size_t li = 0, si = 0;
    while (li < local.size() || si < stream.size()) {
      if (li < local.size() && (si == stream.size() || pick(2) == 0)) {
        if (pick(10) != 0) o.early(local[li]);
        ++li;
      } else {
        o.stream(stream[si++]);
      }
    }
    REQUIRE(o.state == in_stream_order(stream));
    skipped += static_cast<int>(stream.size()) - o.applied;
    ++histories;
  }
  CHECK(histories == 2000);
  CHECK(skipped > 1000);  // the rule does skip, not only stay correct
}

}  // namespace
}  // namespace ic::replication
