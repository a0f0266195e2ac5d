#include "kvevents/encode.hh"

#include <msgpack.hpp>

#include <cstring>

namespace ic::tools::kvevents {
namespace {

using Packer = msgpack::packer<msgpack::sbuffer>;

struct Writer {
  msgpack::sbuffer& buffer;
  Packer& pk;
  bool signed_hashes;

  // Always a float64, as Python's msgpack writes a float (packer::pack_double turns integral
  // values into integers).
  void float64(double d) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, &d, sizeof bits);
    char out[9];
    out[0] = static_cast<char>(0xcb);
    for (int i = 0; i < 8; ++i) out[1 + i] = static_cast<char>(bits >> (56 - 8 * i));
    buffer.write(out, sizeof out);
  }

  void str(std::string_view s) {
    pk.pack_str(static_cast<std::uint32_t>(s.size()));
    pk.pack_str_body(s.data(), static_cast<std::uint32_t>(s.size()));
  }
  void hash(std::uint64_t h) {
    if (signed_hashes) {
      pk.pack_int64(static_cast<std::int64_t>(h));
    } else {
      pk.pack_uint64(h);
    }
  }
  void hashes(const std::vector<std::uint64_t>& hs) {
    pk.pack_array(static_cast<std::uint32_t>(hs.size()));
    for (auto h : hs) hash(h);
  }
  void opt_str(const std::optional<std::string>& s) {
    if (s) {
      str(*s);
    } else {
      pk.pack_nil();
    }
  }
  void opt_int(const std::optional<std::int64_t>& v) {
    if (v) {
      pk.pack_int64(*v);
    } else {
      pk.pack_nil();
    }
  }
  void tokens(const std::vector<std::uint32_t>& t) {
    pk.pack_array(static_cast<std::uint32_t>(t.size()));
    for (auto v : t) pk.pack_uint32(v);
  }
  void parent(const std::optional<std::uint64_t>& p) {
    if (p) {
      hash(*p);
    } else {
      pk.pack_nil();
    }
  }

  void stored_array(const BlockStored& e) {
    pk.pack_array(10);
    str("BlockStored");
    hashes(e.block_hashes);
    parent(e.parent_block_hash);
    tokens(e.token_ids);
    pk.pack_int64(e.block_size);
    opt_int(e.lora_id);
    opt_str(e.medium);
    opt_str(e.lora_name);
    if (e.cache_salt) {
      pk.pack_array(1);
      pk.pack_array(1);
      pk.pack_map(1);
      str("cache_salt");
      str(*e.cache_salt);
    } else {
      pk.pack_nil();
    }
    pk.pack_int64(e.group_idx);
  }

  void stored_map(const BlockStored& e) {
    pk.pack_map(e.cache_salt ? 10 : 9);
    str("type");
    str("BlockStored");
    str("block_hashes");
    hashes(e.block_hashes);
    str("parent_block_hash");
    parent(e.parent_block_hash);
    str("token_ids");
    tokens(e.token_ids);
    str("block_size");
    pk.pack_int64(e.block_size);
    str("lora_id");
    opt_int(e.lora_id);
    str("medium");
    opt_str(e.medium);
    str("lora_name");
    opt_str(e.lora_name);
    str("group_idx");
    pk.pack_int64(e.group_idx);
    if (e.cache_salt) {
      str("cache_salt");
      str(*e.cache_salt);
    }
  }

  void removed(const BlockRemoved& e, Encoding enc) {
    if (enc == Encoding::array) {
      pk.pack_array(4);
      str("BlockRemoved");
      hashes(e.block_hashes);
      opt_str(e.medium);
      pk.pack_int64(e.group_idx);
      return;
    }
    pk.pack_map(4);
    str("type");
    str("BlockRemoved");
    str("block_hashes");
    hashes(e.block_hashes);
    str("medium");
    opt_str(e.medium);
    str("group_idx");
    pk.pack_int64(e.group_idx);
  }

  void event(const Event& e, Encoding enc) {
    if (const auto* s = std::get_if<BlockStored>(&e)) {
      enc == Encoding::array ? stored_array(*s) : stored_map(*s);
    } else if (const auto* r = std::get_if<BlockRemoved>(&e)) {
      removed(*r, enc);
    } else if (enc == Encoding::array) {
      pk.pack_array(1);
      str("AllBlocksCleared");
    } else {
      pk.pack_map(1);
      str("type");
      str("AllBlocksCleared");
    }
  }
};

}  // namespace

std::string encode_batch(const Batch& batch, Encoding encoding, bool signed_hashes) {
  msgpack::sbuffer buffer;
  Packer pk(buffer);
  Writer w{buffer, pk, signed_hashes};
  if (encoding == Encoding::array) {
    pk.pack_array(3);
    w.float64(batch.ts);
  } else {
    pk.pack_map(3);
    w.str("ts");
    w.float64(batch.ts);
    w.str("events");
  }
  pk.pack_array(static_cast<std::uint32_t>(batch.events.size()));
  for (const Event& e : batch.events) w.event(e, encoding);
  if (encoding == Encoding::map) w.str("data_parallel_rank");
  w.opt_int(batch.dp_rank);
  return std::string(buffer.data(), buffer.size());
}

}  // namespace ic::tools::kvevents
