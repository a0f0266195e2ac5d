#pragma once
// Accepted changes waiting to be appended to the replication stream
// (docs/replication.md "When NATS is slow or away"). Reactors offer records;
// the replication thread takes them to publish and the NATS library's ack
// callback settles them. Bounded in bytes: an offer over the bound is
// dropped and counted (the change stays applied locally), so a slow or absent
// NATS never grows memory without bound. Records not acknowledged (failure,
// ack timeout) go back to the queue and are published again, in origin
// sequence order; JetStream drops the duplicates by message id.

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace ic::replication {

class Outbox {
 public:
  struct Item {
    std::uint64_t sequence = 0;  // origin_sequence
    std::string body;            // serialized ReplicationRecord
  };

  // `max_bytes`: bound on queued + unacknowledged record bytes.
  explicit Outbox(std::size_t max_bytes) : max_bytes_(max_bytes) {}

  // Any thread; never blocks beyond a short lock. False = dropped.
  bool offer(std::uint64_t sequence, std::string body);
  // Up to `max` queued records, lowest sequence first, now awaiting acks.
  std::vector<Item> take(std::size_t max);
  // The stream stored record `sequence`: forget it.
  void acked(std::uint64_t sequence);
  // The same for records first..last (one batch); returns how many were held.
  std::size_t acked(std::uint64_t first, std::uint64_t last);
  // Publishing `item` failed: queue it again.
  void failed(Item item);
  // Bytes and records held (queued + awaiting acks).
  std::size_t bytes() const;
  std::size_t records() const;
  // Records queued and not yet taken.
  std::size_t queued() const;

 private:
  const std::size_t max_bytes_;
  mutable std::mutex mu_;
  std::map<std::uint64_t, std::string> queued_;
  std::map<std::uint64_t, std::size_t> in_flight_;  // sequence → bytes
  std::size_t bytes_ = 0;
};

}  // namespace ic::replication
