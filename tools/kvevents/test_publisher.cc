#include "kvevents/test_publisher.hh"

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include <array>
#include <charconv>
#include <future>
#include <stdexcept>

namespace ic::tools::kvevents {
namespace {

std::array<std::uint8_t, 8> be64(std::uint64_t v) {
  std::array<std::uint8_t, 8> out{};
  for (int i = 0; i < 8; ++i) out[i] = static_cast<std::uint8_t>(v >> (56 - 8 * i));
  return out;
}

}  // namespace

int endpoint_port(const std::string& endpoint) {
  const std::size_t colon = endpoint.rfind(':');
  int port = 0;
  if (colon == std::string::npos) return 0;
  std::from_chars(endpoint.data() + colon + 1, endpoint.data() + endpoint.size(), port);
  return port;
}

struct TestPublisher::Sockets {
  zmq::context_t context{1};
  zmq::socket_t pub{context, zmq::socket_type::xpub};
};

TestPublisher::TestPublisher(PublisherOptions options)
    : options_(std::move(options)), sockets_(std::make_unique<Sockets>()) {
  sockets_->pub.set(zmq::sockopt::linger, 0);
  sockets_->pub.set(zmq::sockopt::sndhwm, 100000);
  try {
    sockets_->pub.bind(options_.endpoint);
  } catch (const zmq::error_t& e) {
    throw std::runtime_error("cannot bind " + options_.endpoint + ": " + e.what());
  }
  endpoint_ = sockets_->pub.get(zmq::sockopt::last_endpoint);
  if (options_.replay_endpoint.empty()) return;
  std::promise<std::string> bound;
  auto bound_future = bound.get_future();
  replay_thread_ = std::thread([this, &bound] {
    zmq::socket_t router(sockets_->context, zmq::socket_type::router);
    router.set(zmq::sockopt::linger, 0);
    try {
      router.bind(options_.replay_endpoint);
    } catch (const zmq::error_t& e) {
      bound.set_exception(std::make_exception_ptr(
          std::runtime_error("cannot bind " + options_.replay_endpoint + ": " + e.what())));
      return;
    }
    bound.set_value(router.get(zmq::sockopt::last_endpoint));
    while (!stop_) {
      zmq::pollitem_t item{router.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, std::chrono::milliseconds(20));
      std::vector<zmq::message_t> request;
      while (zmq::recv_multipart(router, std::back_inserter(request), zmq::recv_flags::dontwait)) {
        // [identity, "", start_seq]
        if (request.size() == 3 && request[2].size() == 8) {
          std::uint64_t start = 0;
          for (std::size_t i = 0; i < 8; ++i)
            start = (start << 8) | request[2].data<std::uint8_t>()[i];
          std::vector<std::pair<std::uint64_t, std::string>> replies;
          {
            std::lock_guard lock(mutex_);
            for (const auto& entry : buffer_) {
              if (entry.first >= start) replies.push_back(entry);
            }
          }
          replies.emplace_back(~0ull, std::string());
          for (const auto& [seq, payload] : replies) {
            std::vector<zmq::message_t> out;
            out.emplace_back(request[0].data(), request[0].size());
            out.emplace_back();
            if (options_.topic_in_replay)
              out.emplace_back(options_.topic.data(), options_.topic.size());
            const auto seq_bytes = be64(seq);
            out.emplace_back(seq_bytes.data(), seq_bytes.size());
            out.emplace_back(payload.data(), payload.size());
            zmq::send_multipart(router, out);
          }
          ++replays_served_;
        }
        request.clear();
      }
    }
  });
  replay_endpoint_ = bound_future.get();
}

TestPublisher::~TestPublisher() {
  stop_ = true;
  if (replay_thread_.joinable()) replay_thread_.join();
}

bool TestPublisher::wait_for_subscriber(std::chrono::milliseconds timeout) {
  zmq::pollitem_t item{sockets_->pub.handle(), 0, ZMQ_POLLIN, 0};
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    zmq::poll(&item, 1, std::chrono::milliseconds(50));
    zmq::message_t message;
    while (sockets_->pub.recv(message, zmq::recv_flags::dontwait)) {
      if (message.size() > 0 && message.data<std::uint8_t>()[0] == 1) return true;  // subscribe
    }
  }
  return false;
}

std::uint64_t TestPublisher::keep(const std::string& payload) {
  std::lock_guard lock(mutex_);
  const std::uint64_t seq = next_seq_++;
  buffer_.emplace_back(seq, payload);
  while (buffer_.size() > options_.buffer_steps) buffer_.pop_front();
  return seq;
}

std::uint64_t TestPublisher::publish(const std::string& payload) {
  const std::uint64_t seq = keep(payload);
  const auto seq_bytes = be64(seq);
  std::array<zmq::const_buffer, 3> frames = {zmq::buffer(options_.topic), zmq::buffer(seq_bytes),
                                             zmq::buffer(payload)};
  zmq::send_multipart(sockets_->pub, frames);
  return seq;
}

std::uint64_t TestPublisher::publish_lost(const std::string& payload) { return keep(payload); }

void TestPublisher::send_frames(const std::vector<std::string>& frames) {
  std::vector<zmq::const_buffer> buffers;
  for (const auto& f : frames) buffers.push_back(zmq::buffer(f));
  zmq::send_multipart(sockets_->pub, buffers);
}

void TestPublisher::restart() {
  std::lock_guard lock(mutex_);
  next_seq_ = 0;
  buffer_.clear();
}

}  // namespace ic::tools::kvevents
