#pragma once
// A tenant placement beyond the tenant-hash owner (docs/placement.md): the
// hooks ShardedIndex calls so an opt-in placement can keep read copies of a
// tenant's index on other cores. Without one (the default) every call of a
// tenant runs on its owner core (docs/index.md "Partitioning").
//
// Every hook runs on the core it names; the owner core stays the single
// writer of its tenants: copies only ever apply what the owner applied, in
// the owner's order (docs/placement.md "Ordering").

#include <cstdint>
#include <memory>
#include <string_view>

#include "config/policy.hh"
#include "index/change.hh"
#include "index/shard.hh"
#include "inferencecache/v1alpha1/inferencecache.pb.h"

namespace ic::sharding {

class Placement {
 public:
  virtual ~Placement() = default;

  // On core `core`: the shard that answers `tenant`'s LookupRoute here when
  // `core` is not its owner (a live read copy), or nullptr (go to the owner).
  virtual index::Shard* copy_for(unsigned core, std::string_view tenant) = 0;

  // On owner core `core`, right before it applies an ingest or event of
  // `tenant`: sends the owner's removals reported since its last input first.
  virtual void before_apply(unsigned core, std::string_view tenant) = 0;
  // On owner core `core`, right after it applied `update` (resp. `event`)
  // with wall clock `now_wall_us`: forwards it, then the removals it caused.
  virtual void applied(unsigned core, const ::inferencecache::v1alpha1::CacheStateUpdate& update,
                       std::int64_t now_wall_us) = 0;
  virtual void applied(unsigned core, const ::inferencecache::v1alpha1::CacheEvent& event,
                       std::int64_t now_wall_us) = 0;

  // On core `core`: a new policy set reached that core's shard.
  virtual void policies_changed(unsigned core,
                                const std::shared_ptr<const config::PolicySet>& set) = 0;
  // On core `core`: the StreamCacheEvents sink of its shard (nullptr: none).
  // The placement sees the shard's changes first and passes every one on.
  virtual void set_change_sink(unsigned core, index::ChangeSink* sink) = 0;
};

}  // namespace ic::sharding
