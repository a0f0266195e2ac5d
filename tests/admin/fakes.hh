#pragma once
// In-memory stand-ins for the socket and the reactor timers, so HttpSession
// is driven byte by byte without I/O.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "admin/http_session.hh"
#include "net/session.hh"

namespace ic::admin::testing {

class FakeConnection final : public net::Connection {
 public:
  void send(std::span<const std::byte> bytes) override {
    out.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    if (on_send) on_send(out);
  }
  std::size_t queued_bytes() const override { return queued; }
  void pause_reading() override {
    ++pauses;
    reading = false;
  }
  void resume_reading() override {
    ++resumes;
    reading = true;
  }
  void request_flush() override {
    ++flush_requests;
    if (on_request_flush) on_request_flush();
  }
  void close(bool abort) override {
    closed = true;
    aborted = abort;
    if (on_close) on_close();
  }
  unsigned core() const override { return core_index; }
  std::string_view peer() const override { return "127.0.0.1:1"; }

  std::string out;
  std::size_t queued = 0;
  int pauses = 0;
  int resumes = 0;
  int flush_requests = 0;
  bool reading = true;
  bool closed = false;
  bool aborted = false;
  unsigned core_index = 0;
  std::function<void(const std::string&)> on_send;
  std::function<void()> on_request_flush;
  std::function<void()> on_close;
};

class FakeTimers final : public TimerSource {
 public:
  std::int64_t now_us() const override { return 0; }
  std::uint64_t add_timer(std::int64_t delay_us, runtime::Task task) override {
    const std::uint64_t id = ++next_id;
    pending.emplace(id, Entry{delay_us, std::move(task)});
    return id;
  }
  void cancel_timer(std::uint64_t id) override { pending.erase(id); }
  // Fires every pending timer (in id order); returns how many fired.
  int fire_all() {
    auto due = std::move(pending);
    pending.clear();
    int n = 0;
    for (auto& [id, entry] : due) {
      entry.task();
      ++n;
    }
    return n;
  }
  // Delay of the only pending timer, -1 if none or several.
  std::int64_t only_delay() const {
    return pending.size() == 1 ? pending.begin()->second.delay_us : -1;
  }

  struct Entry {
    std::int64_t delay_us;
    runtime::Task task;
  };
  std::map<std::uint64_t, Entry> pending;
  std::uint64_t next_id = 0;
};

inline std::span<const std::byte> bytes_of(std::string_view s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

}  // namespace ic::admin::testing
