#pragma once
// What an operator does with the `nats` CLI, for the replication tests:
// create the changes stream with limits of its own (docs/replication.md
// "Flags": an existing stream is used as it is) and read its message count.

#include <chrono>
#include <cstdint>
#include <string>

namespace ic::itest {

// Creates stream `name` (subjects `subject`, by default "<name>.changes", file
// storage) with MaxAge `max_age`; throws std::runtime_error when JetStream refuses.
void create_changes_stream(const std::string& url, const std::string& name,
                           std::chrono::milliseconds max_age, const std::string& subject = {});
// Messages stored in stream `name` now; -1 when it cannot be read.
std::int64_t stream_messages(const std::string& url, const std::string& name);
// The last sequence of stream `name` (a message holds a batch of records, so
// sequences count messages, not changes); -1 when it cannot be read.
std::int64_t stream_last_sequence(const std::string& url, const std::string& name);
// Deletes stream `name` (what `nats stream rm` does); throws when it cannot.
void delete_stream(const std::string& url, const std::string& name);
// Publishes `body` on `subject` with header Nats-Msg-Id `id` through
// JetStream (anyone allowed to publish there can); true when stored, false
// when the stream dropped it as a duplicate. Throws on other errors.
bool publish_with_id(const std::string& url, const std::string& subject, const std::string& id,
                     const std::string& body);

}  // namespace ic::itest
