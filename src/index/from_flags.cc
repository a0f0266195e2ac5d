#include "index/from_flags.hh"

namespace ic::index {

IndexConfig index_config(const config::ServerConfig& config) {
  IndexConfig ic;
  ic.default_ttl_us = config.index_ttl_us;
  ic.max_entries = static_cast<std::int64_t>(config.index_max_entries);
  ic.engine_block_size = static_cast<std::int32_t>(config.engine_block_size);
  ic.ranking = config.ranking;
  ic.load_aware = config.load_aware;
  ic.work_aware = config.work_aware;
  return ic;
}

}  // namespace ic::index
