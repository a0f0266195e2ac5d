#include "kvevents/decode.hh"

#include <msgpack.hpp>

#include <algorithm>
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

// What a hostile payload may make msgpack allocate (elements, bytes, nesting).
constexpr std::uint32_t kMaxArray = 1u << 22;
constexpr std::uint32_t kMaxMap = 1u << 16;
constexpr std::uint32_t kMaxStr = 1u << 20;
constexpr std::uint32_t kMaxBin = 1u << 20;
constexpr std::size_t kMaxDepth = 16;

const msgpack::unpack_limit& limits() {
  static const msgpack::unpack_limit limit(kMaxArray, kMaxMap, kMaxStr, kMaxBin, /*ext=*/0,
                                           kMaxDepth);
  return limit;
}

// Checks the payload's msgpack without building objects, refusing what the unpack limits refuse,
// so a batch found malformed has applied nothing.
struct Checker : msgpack::null_visitor {
  std::size_t depth = 0;
  bool visit_str(const char*, std::uint32_t size) { return size <= kMaxStr; }
  bool visit_bin(const char*, std::uint32_t size) { return size <= kMaxBin; }
  bool visit_ext(const char*, std::uint32_t) { return false; }
  bool start_array(std::uint32_t n) { return n <= kMaxArray && ++depth <= kMaxDepth; }
  bool end_array() {
    --depth;
    return true;
  }
  bool start_map(std::uint32_t n) { return n <= kMaxMap && ++depth <= kMaxDepth; }
  bool end_map() {
    --depth;
    return true;
  }
};

// Where each part of the batch starts in the payload (checked by Checker).
struct Layout {
  std::size_t ts = 0, events = 0, rank = 0;
  bool has_ts = false, has_events = false, has_rank = false;
};

// The offset just past the object at `off` (already checked).
std::size_t skip(std::string_view p, std::size_t off) {
  msgpack::null_visitor v;
  if (!msgpack::parse(p.data(), p.size(), off, v)) throw Malformed{};
  return off;
}

std::uint32_t big_endian(std::string_view p, std::size_t at, std::size_t bytes) {
  if (at + bytes > p.size()) throw Malformed{};
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < bytes; ++i) v = (v << 8) | static_cast<std::uint8_t>(p[at + i]);
  return v;
}

// The element count of the array (or pair count of the map, `map`) whose header is at `off`;
// nullopt when another type is there. Moves `off` past the header.
std::optional<std::uint32_t> container_header(std::string_view p, std::size_t& off, bool map) {
  if (off >= p.size()) throw Malformed{};
  const auto b = static_cast<std::uint8_t>(p[off]);
  const std::uint8_t fix = map ? 0x80 : 0x90, c16 = map ? 0xde : 0xdc, c32 = map ? 0xdf : 0xdd;
  std::uint32_t n = 0;
  std::size_t header = 1;
  if ((b & 0xf0) == fix) {
    n = b & 0x0f;
  } else if (b == c16) {
    n = big_endian(p, off + 1, 2);
    header = 3;
  } else if (b == c32) {
    n = big_endian(p, off + 1, 4);
    header = 5;
  } else {
    return std::nullopt;
  }
  off += header;
  return n;
}

// One small object (a key, ts, rank) unpacked into `zone`.
object unpack_at(msgpack::zone& zone, std::string_view p, std::size_t off) {
  return msgpack::unpack(zone, p.data(), p.size(), off, nullptr, nullptr, limits());
}

// `[ts, events, dp_rank?]` or `{ts, events, data_parallel_rank | dp_rank | attn_dp_rank}` (the
// first of each key, as map_get reads it).
Layout layout_of(std::string_view p, msgpack::zone& zone) {
  Layout l;
  std::size_t off = 0;
  if (const auto n = container_header(p, off, false)) {
    if (*n < 2) throw Malformed{};
    l.ts = off, l.has_ts = true;
    l.events = skip(p, l.ts), l.has_events = true;
    if (*n > 2) l.rank = skip(p, l.events), l.has_rank = true;
    return l;
  }
  const auto pairs = container_header(p, off, true);
  if (!pairs) throw Malformed{};
  int rank_rank = 4;  // data_parallel_rank (0) before dp_rank (1) before attn_dp_rank (2)
  for (std::uint32_t i = 0; i < *pairs; ++i) {
    const object key = unpack_at(zone, p, off);
    const std::size_t value = skip(p, off);
    off = skip(p, value);
    if (key.type != mtype::STR) continue;
    const std::string_view k(key.via.str.ptr, key.via.str.size);
    if (k == "ts" && !l.has_ts) l.ts = value, l.has_ts = true;
    if (k == "events" && !l.has_events) l.events = value, l.has_events = true;
    const int r = k == "data_parallel_rank" ? 0 : k == "dp_rank" ? 1 : k == "attn_dp_rank" ? 2 : 4;
    if (r < rank_rank) l.rank = value, l.has_rank = true, rank_rank = r;
  }
  zone.clear();
  return l;
}

std::string walk_batch(std::string_view p, std::size_t chunk_events,
                       const std::function<void(const Batch&)>& apply) {
  Checker checker;
  std::size_t end = 0;
  if (!msgpack::parse(p.data(), p.size(), end, checker)) return "undecodable msgpack";
  if (end != p.size()) return "trailing bytes after the batch";
  msgpack::zone zone;
  Batch chunk;
  std::size_t off = 0;
  std::uint32_t count = 0;
  try {
    const Layout l = layout_of(p, zone);
    if (!l.has_ts || !l.has_events) throw Malformed{};
    const object ts = unpack_at(zone, p, l.ts);
    chunk.ts = as_seconds(&ts);
    if (l.has_rank) {
      const object rank = unpack_at(zone, p, l.rank);
      chunk.dp_rank = rank_of(&rank);
    }
    off = l.events;
    const auto n = container_header(p, off, false);
    if (!n) throw Malformed{};
    count = *n;
  } catch (const Malformed&) {
    return "not an event batch ([ts, events, dp_rank?] or {ts, events})";
  }
  chunk.events.reserve(std::min<std::size_t>(count, chunk_events));
  for (std::uint32_t i = 0; i < count; ++i) {
    zone.clear();
    const std::size_t at = off;
    off = skip(p, at);
    try {
      auto event = decode_event(unpack_at(zone, p, at));
      if (event) {
        chunk.events.push_back(std::move(*event));
      } else {
        ++chunk.unknown_events;
      }
    } catch (const Malformed&) {
      ++chunk.malformed_events;
    } catch (const std::exception&) {  // over an unpack limit the check let through
      ++chunk.malformed_events;
    }
    if (chunk.events.size() >= chunk_events) {
      apply(chunk);
      chunk.events.clear();
      chunk.malformed_events = chunk.unknown_events = 0;
    }
  }
  if (!chunk.events.empty() || chunk.malformed_events > 0 || chunk.unknown_events > 0 ||
      count == 0) {
    apply(chunk);
  }
  return {};
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

std::string decode_batch_chunks(std::string_view payload, std::size_t chunk_events,
                                const std::function<void(const Batch&)>& apply) {
  if (payload.size() > kMaxPayloadBytes) {
    return "payload of " + std::to_string(payload.size()) + " bytes is over the limit";
  }
  try {
    return walk_batch(payload, chunk_events == 0 ? 1 : chunk_events, apply);
  } catch (const Malformed&) {
    return "not an event batch ([ts, events, dp_rank?] or {ts, events})";
  } catch (const std::exception& e) {
    return std::string("undecodable msgpack: ") + e.what();
  }
}

DecodeResult decode_batch(std::string_view payload) {
  DecodeResult result;
  Batch whole;
  bool any = false;
  result.error = decode_batch_chunks(payload, kChunkEvents, [&](const Batch& chunk) {
    if (!any) whole.ts = chunk.ts, whole.dp_rank = chunk.dp_rank, any = true;
    whole.events.insert(whole.events.end(), chunk.events.begin(), chunk.events.end());
    whole.malformed_events += chunk.malformed_events;
    whole.unknown_events += chunk.unknown_events;
  });
  if (result.error.empty()) result.batch = std::move(whole);
  return result;
}

}  // namespace ic::tools::kvevents
