#pragma once
// Tenant → owner core (docs/architecture.md rule 8): a seeded, stable hash so every
// core, every restart and every build agrees on which core owns a tenant.

#include <cstdint>
#include <string_view>

namespace ic::index {

// XXH3-64 seed of the tenant partitioning hash (fixed forever: changing it
// moves tenants between cores across versions, which is harmless but pointless).
inline constexpr std::uint64_t kPartitionSeed = 0x1C0DE5EEDull;

// Index of the core that owns `tenant_id`'s whole index state:
// XXH3_64bits_withSeed(tenant_id, kPartitionSeed) % cores. cores == 0 → 0.
unsigned owner_core(std::string_view tenant_id, unsigned cores) noexcept;

}  // namespace ic::index
