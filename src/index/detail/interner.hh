#pragma once
// Reference-counted string interning: tenant, model, hash scheme, adapter and
// replica ids become dense uint32 ids so index records stay small. An id is
// freed (and later reused) when its last reference goes, so names sent by a
// peer never accumulate after their entries are gone.

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "config/policy.hh"

namespace ic::index::detail {

inline constexpr std::uint32_t kNone = UINT32_MAX;

class Interner {
 public:
  // Id of `s` with one more reference (creates it at refcount 1).
  std::uint32_t acquire(std::string_view s) {
    if (auto it = ids_.find(s); it != ids_.end()) {
      ++refs_[it->second];
      return it->second;
    }
    std::uint32_t id;
    if (!free_.empty()) {
      id = free_.back();
      free_.pop_back();
      names_[id].assign(s);
      refs_[id] = 1;
    } else {
      id = static_cast<std::uint32_t>(names_.size());
      names_.emplace_back(s);
      refs_.push_back(1);
    }
    ids_.emplace(names_[id], id);
    return id;
  }
  // One more reference to a live id.
  void ref(std::uint32_t id) { ++refs_[id]; }
  // Drops one reference; the id is freed at 0. Returns true when freed.
  bool release(std::uint32_t id) {
    if (--refs_[id] != 0) return false;
    ids_.erase(names_[id]);
    names_[id].clear();
    names_[id].shrink_to_fit();
    free_.push_back(id);
    return true;
  }
  // Id of `s` or kNone; never allocates.
  std::uint32_t find(std::string_view s) const {
    auto it = ids_.find(s);
    return it == ids_.end() ? kNone : it->second;
  }
  const std::string& name(std::uint32_t id) const { return names_[id]; }
  // Upper bound of ids ever handed out (size for id-indexed vectors).
  std::size_t capacity() const { return names_.size(); }
  std::size_t live() const { return ids_.size(); }
  std::size_t memory_bytes() const {
    std::size_t b = names_.capacity() * sizeof(std::string) + refs_.capacity() * 4 +
                    free_.capacity() * 4 + ids_.size() * (sizeof(std::string) + 32);
    for (const auto& n : names_) b += n.capacity() > 15 ? 2 * n.capacity() : 0;
    return b;
  }

 private:
  std::unordered_map<std::string, std::uint32_t, config::StringHash, std::equal_to<>> ids_;
  std::vector<std::string> names_;
  std::vector<std::uint32_t> refs_;
  std::vector<std::uint32_t> free_;
};

}  // namespace ic::index::detail
