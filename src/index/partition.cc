#include "index/partition.hh"

#include <xxhash.h>

namespace ic::index {

unsigned owner_core(std::string_view tenant_id, unsigned cores) noexcept {
  if (cores <= 1) return 0;
  return static_cast<unsigned>(
      XXH3_64bits_withSeed(tenant_id.data(), tenant_id.size(), kPartitionSeed) % cores);
}

}  // namespace ic::index
