#pragma once
// Protobuf request builders the tests share: the same few requests the
// integration tests send from grpc++ and from the raw nghttp2 client.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "inferencecache/v1alpha1/inferencecache.pb.h"

namespace ic::test {

// The reserved probe tenant (docs/contract.md "Reserved tenant").
inline constexpr char kProbeTenant[] = "inferencecache.io/probe";

// LookupRoute number `i` of a cold-index workload: model llama-3-8b, tenant
// team-<i % 16> (spread over the cores), prefix hash "<i>", adapter a<i>
// (echoed back, so an answer proves which request it belongs to).
inferencecache::v1alpha1::LookupRouteRequest numbered_lookup(int i);

// A request a gateway would send: tenant team-a, model llama-3-8b, an exact
// 8-byte prefix hash 01..08 and adapter lora-7.
inferencecache::v1alpha1::LookupRouteRequest gateway_request();

// A probe-tenant update from replica-1 with no prefixes (accepted, indexes
// nothing).
inferencecache::v1alpha1::CacheStateUpdate probe_update();

// Probe-tenant update number `i`: replica-<i % 4>, one 16-token prefix whose
// hash is 8 bytes of value `i`.
inferencecache::v1alpha1::CacheStateUpdate numbered_probe_update(int i);

// The 8-byte big-endian block hash of `v` (a vLLM 64-bit block hash on the wire).
std::string block_hash(std::uint64_t v);

// An update from `replica` at `timestamp_us` (µs) in one scope (tenant, model,
// hash scheme), no prefixes yet.
inferencecache::v1alpha1::CacheStateUpdate scoped_update(const std::string& tenant,
                                                         const std::string& model,
                                                         const std::string& scheme,
                                                         const std::string& replica,
                                                         std::int64_t timestamp_us);
// A LookupRouteRequest's scope (tenant, model, hash scheme), no prefix yet.
inferencecache::v1alpha1::LookupRouteRequest scoped_lookup(const std::string& tenant,
                                                           const std::string& model,
                                                           const std::string& scheme);
// An update from `replica` at `timestamp_us` (µs) with one prefix chain: a
// `per_block`-token block per entry of `blocks`, hashed with block_hash(), on
// cache tier `tier` (a CacheTier number) for LoRA adapter `adapter` ("" = base).
inferencecache::v1alpha1::CacheStateUpdate chain_update(
    const std::string& tenant, const std::string& model, const std::string& scheme,
    const std::string& replica, std::int64_t timestamp_us, const std::vector<std::uint64_t>& blocks,
    int tier = 0, const std::string& adapter = "", std::int32_t per_block = 16);
// An update from replica r1 at `timestamp_us` with one 16-token exact prefix
// per entry of `hashes` (the prefix hash bytes as given).
inferencecache::v1alpha1::CacheStateUpdate r1_update(const std::string& tenant,
                                                     const std::string& model,
                                                     const std::string& scheme,
                                                     const std::vector<std::string>& hashes,
                                                     std::int64_t timestamp_us);
// A CacheEvent of `type` from replica r1 of model m in `tenant` for prefix
// `hash` ("" for the replica-wide types) at `timestamp_us` (0: unset).
inferencecache::v1alpha1::CacheEvent r1_event(inferencecache::v1alpha1::CacheEvent::Type type,
                                              const std::string& tenant,
                                              const std::string& hash = "",
                                              std::int64_t timestamp_us = 0);
// The warm-restart and replication tests' index: tenants tenant-<first> ..
// tenant-<first + count - 1>, model m, scheme vllm, at `timestamp_us`; replica
// r-a holds a chain of four 64-token blocks 1000·t + i, r-b its first two (so
// answers rank two replicas).
std::vector<inferencecache::v1alpha1::CacheStateUpdate> two_replica_workload(
    int first, int count, std::int64_t timestamp_us);
// LookupRoute probes of tenants tenant-0 .. tenant-<tenants - 1>: the 5-block
// chain 1000·t + i (one block past what any replica holds).
std::vector<inferencecache::v1alpha1::LookupRouteRequest> two_replica_probes(int tenants);
// Wall-clock µs one hour from now: a timestamp no TTL expires during a test.
std::int64_t hour_from_now_us();

}  // namespace ic::test
