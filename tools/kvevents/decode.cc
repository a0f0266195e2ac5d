#include "kvevents/decode.hh"

#include <msgpack.hpp>

#include <limits>

namespace ic::tools::kvevents {
namespace {

using msgpack::object;
namespace mtype = msgpack::type;

// Thrown inside this file only: one event (or the batch) has the wrong shape.
struct Malformed {};

bool is_nil(const object* o) { return o == nullptr || o->type == mtype::NIL; }

std::string_view as_str(const object& o) {
  if (o.type != mtype::STR) throw Malformed{};
  return {o.via.str.ptr, o.via.str.size};
}

std::int64_t as_int(const object& o) {
  if (o.type == mtype::POSITIVE_INTEGER) {
    if (o.via.u64 > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      throw Malformed{};
    }
    return static_cast<std::int64_t>(o.via.u64);
  }
  if (o.type == mtype::NEGATIVE_INTEGER) return o.via.i64;
  throw Malformed{};
}

std::optional<std::int64_t> opt_int(const object* o) {
  if (is_nil(o)) return std::nullopt;
  return as_int(*o);
}

std::optional<std::string> opt_str(const object* o) {
  if (is_nil(o)) return std::nullopt;
  return std::string(as_str(*o));
}

std::uint64_t as_hash(const object& o) {
  std::optional<std::uint64_t> h;
  if (o.type == mtype::POSITIVE_INTEGER) h = o.via.u64;
  if (o.type == mtype::NEGATIVE_INTEGER) h = static_cast<std::uint64_t>(o.via.i64);
  if (o.type == mtype::BIN) h = normalise_hash_bytes({o.via.bin.ptr, o.via.bin.size});
  if (!h) throw Malformed{};
  return *h;
}

std::vector<std::uint64_t> as_hashes(const object* o) {
  if (o == nullptr || o->type != mtype::ARRAY) throw Malformed{};
  std::vector<std::uint64_t> out;
  out.reserve(o->via.array.size);
  for (std::uint32_t i = 0; i < o->via.array.size; ++i) out.push_back(as_hash(o->via.array.ptr[i]));
  return out;
}

std::vector<std::uint32_t> as_tokens(const object* o) {
  if (o == nullptr || o->type != mtype::ARRAY) throw Malformed{};
  std::vector<std::uint32_t> out;
  out.reserve(o->via.array.size);
  for (std::uint32_t i = 0; i < o->via.array.size; ++i) {
    const object& t = o->via.array.ptr[i];
    if (t.type != mtype::POSITIVE_INTEGER ||
        t.via.u64 > std::numeric_limits<std::uint32_t>::max()) {
      throw Malformed{};
    }
    out.push_back(static_cast<std::uint32_t>(t.via.u64));
  }
  return out;
}

const object* map_get(const object& map, std::string_view key) {
  for (std::uint32_t i = 0; i < map.via.map.size; ++i) {
    const auto& kv = map.via.map.ptr[i];
    if (kv.key.type == mtype::STR &&
        std::string_view(kv.key.via.str.ptr, kv.key.via.str.size) == key) {
      return &kv.val;
    }
  }
  return nullptr;
}

// Keys a map may carry beside the positional fields (SGLang puts {"cache_salt": …} in a trailing
// slot; a map event carries them at top level).
void read_side_keys(const object& map, BlockStored& e) {
  if (const object* salt = map_get(map, "cache_salt"); !is_nil(salt)) e.cache_salt = opt_str(salt);
  if (const object* name = map_get(map, "lora_name"); !is_nil(name) && !e.lora_name) {
    e.lora_name = opt_str(name);
  }
}

// extra_keys: one entry per block (nil or a list of keys). Only the first block's matter: a bare
// string is the LoRA name (never a multimodal hash); a map may carry cache_salt; tuples
// (multimodal hashes with offsets) are ignored.
void read_extra_keys(const object* extra, BlockStored& e) {
  if (is_nil(extra)) return;
  if (extra->type != mtype::ARRAY) throw Malformed{};
  if (extra->via.array.size == 0) return;
  const object& first = extra->via.array.ptr[0];
  if (first.type == mtype::NIL) return;
  const object* keys = &first;
  std::uint32_t n = 1;
  if (first.type == mtype::ARRAY) {
    keys = first.via.array.ptr;
    n = first.via.array.size;
  }
  for (std::uint32_t i = 0; i < n; ++i) {
    const object& k = keys[i];
    if (k.type == mtype::STR && !e.lora_name) e.lora_name = std::string(as_str(k));
    if (k.type == mtype::MAP) read_side_keys(k, e);
  }
}

// Positional BlockStored: [tag, hashes, parent, token_ids, block_size, lora_id, medium,
// lora_name, extra_keys, group_idx, kind, sliding_window, locality…].
BlockStored stored_from_array(const object* f, std::uint32_t n) {
  auto at = [&](std::uint32_t i) -> const object* { return i < n ? &f[i] : nullptr; };
  BlockStored e;
  e.block_hashes = as_hashes(at(1));
  if (!is_nil(at(2))) e.parent_block_hash = as_hash(*at(2));
  e.token_ids = as_tokens(at(3));
  if (at(4) == nullptr) throw Malformed{};
  e.block_size = as_int(*at(4));
  e.lora_id = opt_int(at(5));
  e.medium = opt_str(at(6));
  for (std::uint32_t i = 7; i < n; ++i) {
    if (f[i].type == mtype::MAP) read_side_keys(f[i], e);
  }
  if (at(7) != nullptr && at(7)->type != mtype::MAP) e.lora_name = opt_str(at(7));
  if (at(8) != nullptr && at(8)->type != mtype::MAP) read_extra_keys(at(8), e);
  if (at(9) != nullptr && at(9)->type != mtype::MAP) e.group_idx = opt_int(at(9)).value_or(0);
  return e;
}

BlockStored stored_from_map(const object& m) {
  BlockStored e;
  e.block_hashes = as_hashes(map_get(m, "block_hashes"));
  if (const object* p = map_get(m, "parent_block_hash"); !is_nil(p))
    e.parent_block_hash = as_hash(*p);
  e.token_ids = as_tokens(map_get(m, "token_ids"));
  const object* bs = map_get(m, "block_size");
  if (bs == nullptr) throw Malformed{};
  e.block_size = as_int(*bs);
  e.lora_id = opt_int(map_get(m, "lora_id"));
  e.medium = opt_str(map_get(m, "medium"));
  read_side_keys(m, e);
  read_extra_keys(map_get(m, "extra_keys"), e);
  e.group_idx = opt_int(map_get(m, "group_idx")).value_or(0);
  return e;
}

BlockRemoved removed_from(const object* hashes, const object* medium, const object* group) {
  BlockRemoved e;
  e.block_hashes = as_hashes(hashes);
  e.medium = opt_str(medium);
  e.group_idx = opt_int(group).value_or(0);
  return e;
}

// One event in either shape; nullopt for an unknown tag. Throws Malformed.
std::optional<Event> decode_event(const object& o) {
  if (o.type == mtype::ARRAY) {
    const object* f = o.via.array.ptr;
    const std::uint32_t n = o.via.array.size;
    if (n == 0) throw Malformed{};
    auto at = [&](std::uint32_t i) -> const object* { return i < n ? &f[i] : nullptr; };
    const std::string_view tag = as_str(f[0]);
    if (tag == "BlockStored") return stored_from_array(f, n);
    if (tag == "BlockRemoved") return removed_from(at(1), at(2), at(3));
    if (tag == "AllBlocksCleared") return AllBlocksCleared{};
    return std::nullopt;
  }
  if (o.type == mtype::MAP) {
    const object* type = map_get(o, "type");
    if (type == nullptr) throw Malformed{};
    const std::string_view tag = as_str(*type);
    if (tag == "BlockStored") return stored_from_map(o);
    if (tag == "BlockRemoved") {
      return removed_from(map_get(o, "block_hashes"), map_get(o, "medium"),
                          map_get(o, "group_idx"));
    }
    if (tag == "AllBlocksCleared") return AllBlocksCleared{};
    return std::nullopt;
  }
  throw Malformed{};
}

double as_seconds(const object* o) {
  if (o == nullptr) throw Malformed{};
  if (o->type == mtype::FLOAT64 || o->type == mtype::FLOAT32) return o->via.f64;
  return static_cast<double>(as_int(*o));
}

std::optional<std::int64_t> rank_of(const object* o) {
  if (is_nil(o)) return std::nullopt;
  return as_int(*o);
}

Batch decode_events(double ts, const object* events, std::optional<std::int64_t> rank) {
  if (events == nullptr || events->type != mtype::ARRAY) throw Malformed{};
  Batch batch;
  batch.ts = ts;
  batch.dp_rank = rank;
  batch.events.reserve(events->via.array.size);
  for (std::uint32_t i = 0; i < events->via.array.size; ++i) {
    try {
      auto event = decode_event(events->via.array.ptr[i]);
      if (event) {
        batch.events.push_back(std::move(*event));
      } else {
        ++batch.unknown_events;
      }
    } catch (const Malformed&) {
      ++batch.malformed_events;
    }
  }
  return batch;
}

Batch decode_root(const object& root) {
  if (root.type == mtype::ARRAY) {
    const std::uint32_t n = root.via.array.size;
    if (n < 2) throw Malformed{};
    const object* f = root.via.array.ptr;
    return decode_events(as_seconds(&f[0]), &f[1], n > 2 ? rank_of(&f[2]) : std::nullopt);
  }
  if (root.type == mtype::MAP) {
    const object* rank = map_get(root, "data_parallel_rank");
    if (rank == nullptr) rank = map_get(root, "dp_rank");
    if (rank == nullptr) rank = map_get(root, "attn_dp_rank");
    return decode_events(as_seconds(map_get(root, "ts")), map_get(root, "events"), rank_of(rank));
  }
  throw Malformed{};
}

}  // namespace

std::optional<std::uint64_t> normalise_hash_bytes(std::string_view bin) {
  if (bin.empty()) return std::nullopt;
  const std::size_t take = bin.size() < 8 ? bin.size() : 8;
  std::uint64_t v = 0;
  for (std::size_t i = bin.size() - take; i < bin.size(); ++i) {
    v = (v << 8) | static_cast<std::uint8_t>(bin[i]);
  }
  return v;
}

DecodeResult decode_batch(std::string_view payload) {
  DecodeResult result;
  if (payload.size() > kMaxPayloadBytes) {
    result.error = "payload of " + std::to_string(payload.size()) + " bytes is over the limit";
    return result;
  }
  // Limits bound what a hostile payload can make msgpack allocate.
  const msgpack::unpack_limit limit(/*array=*/1u << 22, /*map=*/1u << 16, /*str=*/1u << 20,
                                    /*bin=*/1u << 20, /*ext=*/0, /*depth=*/16);
  try {
    std::size_t offset = 0;
    msgpack::object_handle handle =
        msgpack::unpack(payload.data(), payload.size(), offset, nullptr, nullptr, limit);
    if (offset != payload.size()) {
      result.error = "trailing bytes after the batch";
      return result;
    }
    result.batch = decode_root(handle.get());
  } catch (const Malformed&) {
    result.error = "not an event batch ([ts, events, dp_rank?] or {ts, events})";
  } catch (const std::exception& e) {
    result.error = std::string("undecodable msgpack: ") + e.what();
  }
  return result;
}

}  // namespace ic::tools::kvevents
