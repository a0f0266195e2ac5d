#pragma once
// The index of a two-core server in one thread: two shards behind the sharded
// facade, their cross-core mailboxes and timers a FakeLink the test runs by hand.

#include <cstdint>

#include "fake_link.hh"
#include "index/clock.hh"
#include "index/shard.hh"
#include "sharding/sharded_index.hh"

namespace ic::test {

struct TwoCoreIndex {
  // `config` for both shards; the index clock starts at `wall_us` (wall, µs)
  // and 1 s of monotonic time.
  explicit TwoCoreIndex(index::IndexConfig config = {},
                        std::int64_t wall_us = 1'700'000'000'000'000)
      : link(2),
        shard0(config, &globals),
        shard1(config, &globals),
        index(link, {&shard0, &shard1}, clock) {
    clock.wall = wall_us;
    clock.mono = 1'000'000;
  }

  FakeLink link;
  index::ManualClock clock;
  index::IndexGlobals globals;
  index::Shard shard0;
  index::Shard shard1;
  sharding::ShardedIndex index;
};

}  // namespace ic::test
