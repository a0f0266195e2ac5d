#include "replication/outbox.hh"

namespace ic::replication {

bool Outbox::offer(std::uint64_t sequence, std::string body) {
  std::lock_guard lock(mu_);
  if (bytes_ + body.size() > max_bytes_) return false;
  bytes_ += body.size();
  queued_.emplace(sequence, std::move(body));
  return true;
}

std::vector<Outbox::Item> Outbox::take(std::size_t max) {
  std::vector<Item> out;
  std::lock_guard lock(mu_);
  while (out.size() < max && !queued_.empty()) {
    auto node = queued_.extract(queued_.begin());
    in_flight_.emplace(node.key(), node.mapped().size());
    out.push_back(Item{node.key(), std::move(node.mapped())});
  }
  return out;
}

void Outbox::acked(std::uint64_t sequence) {
  std::lock_guard lock(mu_);
  const auto it = in_flight_.find(sequence);
  if (it == in_flight_.end()) return;  // a duplicate ack
  bytes_ -= it->second;
  in_flight_.erase(it);
}

std::size_t Outbox::acked(std::uint64_t first, std::uint64_t last) {
  std::lock_guard lock(mu_);
  std::size_t n = 0;
  for (auto it = in_flight_.lower_bound(first); it != in_flight_.end() && it->first <= last;) {
    bytes_ -= it->second;
    it = in_flight_.erase(it);
    ++n;
  }
  return n;
}

void Outbox::failed(Item item) {
  std::lock_guard lock(mu_);
  const auto it = in_flight_.find(item.sequence);
  if (it == in_flight_.end()) return;  // settled meanwhile
  in_flight_.erase(it);
  queued_.emplace(item.sequence, std::move(item.body));  // bytes unchanged
}

std::size_t Outbox::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

std::size_t Outbox::records() const {
  std::lock_guard lock(mu_);
  return queued_.size() + in_flight_.size();
}

std::size_t Outbox::queued() const {
  std::lock_guard lock(mu_);
  return queued_.size();
}

}  // namespace ic::replication
