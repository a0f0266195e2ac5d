#include "gateway/ext_proc.hh"

#include <algorithm>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "envoy/service/ext_proc/v3/external_processor.pb.h"
#include "gateway/endpoints.hh"
#include "gateway/gateway_metrics.hh"
#include "gateway/openai_body.hh"
#include "gateway/picker.hh"
#include "gateway/prompt_tokens.hh"
#include "prompt_text/scheduler.hh"
#include "rpc/typed.hh"

namespace ic::gateway {
namespace {

namespace xp = ::envoy::service::ext_proc::v3;
namespace core3 = ::envoy::config::core::v3;
using Mode = ::envoy::extensions::filters::http::ext_proc::v3::ProcessingMode;

// What one message held while a pick is on its way costs besides its bytes
// (the parsed ProcessingRequest, its queue slot), counted against the
// stream's and the core's body budgets.
constexpr std::size_t kQueuedMessageBytes = 256;
// Held messages a stream may keep whatever the core's budget: a core busy with
// other streams' large bodies does not cut every pick short at its first
// small message (trailers, a last chunk).
constexpr std::size_t kAlwaysQueuedBytes = 16 * 1024;

std::string header_value(const core3::HeaderValue& h) {
  return !h.raw_value().empty() ? h.raw_value() : h.value();
}

// The string (or list of strings, comma-joined) at namespace/key of `m`.
std::optional<std::vector<std::string>> metadata_list(const core3::Metadata& m, std::string_view ns,
                                                      std::string_view key) {
  auto n = m.filter_metadata().find(std::string(ns));
  if (n == m.filter_metadata().end()) return std::nullopt;
  auto f = n->second.fields().find(std::string(key));
  if (f == n->second.fields().end()) return std::nullopt;
  std::vector<std::string> out;
  auto add = [&out](const std::string& s) {
    for (std::size_t b = 0; b <= s.size() && out.size() < kMaxSubsetEndpoints;) {
      std::size_t e = s.find(',', b);
      if (e == std::string::npos) e = s.size();
      if (e > b) out.push_back(s.substr(b, e - b));
      b = e + 1;
    }
  };
  if (f->second.has_string_value()) add(f->second.string_value());
  if (f->second.has_list_value()) {
    for (const auto& v : f->second.list_value().values()) {
      if (v.has_string_value()) add(v.string_value());
    }
  }
  return out;
}

std::string joined(const std::vector<std::string>& endpoints) {
  std::string s;
  for (const std::string& e : endpoints) {
    if (!s.empty()) s += ',';
    s += e;
  }
  return s;
}

BodyMode mode_of(const xp::ProtocolConfiguration& c, BodyMode fallback) {
  switch (c.request_body_mode()) {
    case Mode::FULL_DUPLEX_STREAMED:
      return BodyMode::kFullDuplex;
    case Mode::BUFFERED:
    case Mode::BUFFERED_PARTIAL:
      return BodyMode::kBuffered;
    case Mode::STREAMED:
      return BodyMode::kStreamed;
    default:
      return fallback;
  }
}

// One ext_proc stream (one HTTP request). Shared so a pick coming back from
// another core finds it gone rather than freed.
class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(rpc::CallHandle call, const GatewayConfig& config, sharding::ShardedIndex& index,
           prompt_text::Scheduler* scheduler)
      : call_(std::move(call)),
        config_(config),
        index_(index),
        scheduler_(scheduler),
        mode_(config.body_mode) {}
  ~Exchange() {
    end_request();
    release_body();
    release_queue();
  }

  void on_message(std::span<const std::byte> bytes) {
    auto request = std::make_unique<xp::ProcessingRequest>();
    if (!rpc::parse_request(bytes, *request, call_)) return;
    if (first_ && request->has_protocol_config())
      mode_ = mode_of(request->protocol_config(), config_.body_mode);
    first_ = false;
    if (picking_) {
      const std::size_t cost = bytes.size() + kQueuedMessageBytes;
      if (queued_bytes_ + cost <= config_.max_body_bytes &&
          (queued_bytes_ + cost <= kAlwaysQueuedBytes ||
           core_held_bytes() + cost <= config_.max_core_body_bytes)) {
        queue(std::move(request), cost);
        return;
      }
      pick_here();  // answered, the queue drained
      if (!call_.alive()) return;
      // A held message began another pick (a gateway sending a second
      // request on the stream): this one still waits behind it, in order.
      if (picking_ || !queued_.empty()) {
        queue(std::move(request), cost);
        return;
      }
    }
    handle(*request);
  }

  void on_cancel() { end_request(); }

  // The gateway half-closed: OK now, or once the pick on its way (its
  // tokenizing job, the owner core) has been answered.
  void on_half_close() {
    half_closed_ = true;
    finish_if_closed();
  }

 private:
  void handle(const xp::ProcessingRequest& r) {
    if (rejected_) return;  // answered 503: Envoy sends nothing more that needs an answer
    if (r.has_metadata_context()) read_served(r.metadata_context());
    switch (r.request_case()) {
      case xp::ProcessingRequest::kRequestHeaders:
        return request_headers(r);
      case xp::ProcessingRequest::kRequestBody:
        return request_body(r.request_body());
      case xp::ProcessingRequest::kRequestTrailers:
        return request_trailers();
      case xp::ProcessingRequest::kResponseHeaders:
        return response_headers(r.response_headers());
      case xp::ProcessingRequest::kResponseBody:
        return response_body(r.response_body());
      case xp::ProcessingRequest::kResponseTrailers: {
        xp::ProcessingResponse out;
        out.mutable_response_trailers();
        call_.write(out);
        end_request();
        return;
      }
      default:
        return;
    }
  }

  // ---- request side

  void request_headers(const xp::ProcessingRequest& r) {
    start_us_ = now();
    for (const core3::HeaderValue& h : r.request_headers().headers().headers()) {
      if (h.key() == ":path") {
        path_ = header_value(h);
      } else if (h.key() == config_.tenant_header) {
        tenant_ = header_value(h);
      }
    }
    if (r.has_metadata_context())
      subset_ = metadata_list(r.metadata_context(), kSubsetNamespace, kSubsetKey);
    if (r.request_headers().end_of_stream()) {
      headers_answered_by_pick_ = true;
      begin_pick(FailOpen::kNoBody);
      return;
    }
    if (mode_ != BodyMode::kFullDuplex) {
      xp::ProcessingResponse out;
      out.mutable_request_headers();
      call_.write(out);
    }
  }

  void request_body(const xp::HttpBody& b) {
    if (picked_) {  // full duplex after an early pick (body too large): pass through
      pass_request_chunk(b.body(), b.end_of_stream());
      return;
    }
    if (!too_large_ && !fits(b.body().size())) {
      too_large_ = true;
      if (mode_ == BodyMode::kFullDuplex) {  // hold this chunk too, pick now, pass the rest
        hold(b.body());
        body_ended_ = b.end_of_stream();
        begin_pick(FailOpen::kBodyTooLarge);
        return;
      }
      release_body();
    }
    if (!too_large_) hold(b.body());
    if (!b.end_of_stream()) {
      if (mode_ != BodyMode::kFullDuplex) {
        xp::ProcessingResponse out;
        out.mutable_request_body();
        call_.write(out);
      }
      return;
    }
    body_ended_ = true;
    begin_pick(too_large_ ? std::optional(FailOpen::kBodyTooLarge) : std::nullopt);
  }

  // Whether `more` bytes may be held: this stream's body limit and the
  // core's (every stream's held bodies together).
  bool fits(std::size_t more) const {
    return body_.size() + more <= config_.max_body_bytes &&
           core_held_bytes() + more <= config_.max_core_body_bytes;
  }
  void hold(const std::string& chunk) {
    body_ += chunk;
    core_held_bytes() += chunk.size();
  }
  void release_body() {
    core_held_bytes() -= body_.size();
    std::string().swap(body_);
  }
  // Request body bytes held by this core's streams.
  static std::size_t& core_held_bytes() {
    thread_local std::size_t held = 0;
    return held;
  }

  void request_trailers() {
    trailers_pending_ = true;
    if (!picked_ && !picking_) {
      begin_pick(too_large_ ? std::optional(FailOpen::kBodyTooLarge) : std::nullopt);
    } else if (picked_) {
      answer_trailers();
    }
  }

  void answer_trailers() {
    trailers_pending_ = false;
    xp::ProcessingResponse out;
    out.mutable_request_trailers();
    call_.write(out);
  }

  void pass_request_chunk(const std::string& chunk, bool end) {
    xp::ProcessingResponse out;
    auto* streamed = out.mutable_request_body()
                         ->mutable_response()
                         ->mutable_body_mutation()
                         ->mutable_streamed_response();
    streamed->set_body(chunk);
    streamed->set_end_of_stream(end);
    call_.write(out);
  }

  // ---- the pick

  // `fail`: why the body cannot give token ids, known before reading it.
  // A body to tokenize waits for its tokens as a job of the core's scheduler
  // (TokensJob below); messages that arrive meanwhile are queued (picking_),
  // so a stream has at most one job at a time.
  void begin_pick(std::optional<FailOpen> fail) {
    PickRequest request;
    request.tenant_id = tenant_.empty() ? config_.default_tenant : tenant_;
    request.pool_tenant = config_.default_tenant;
    request.shed_queue_us = config_.shed_queue_us;
    tenant_id_ = request.tenant_id;
    request.subset = subset_;
    request.hash_scheme = config_.hash_scheme;
    const std::int64_t start = now();
    pick_start_us_ = start;
    picking_ = true;
    if (!fail) {
      InferenceBody body;
      fail = fail_open_of(parse_body(path_, body_, body));
      request.model_id = body.model;
      if (!fail) {
        // Ids as given, or no tokenizer for the model: nothing to tokenize, answered at once.
        const bool tokenizes = !body.prompt_is_ids && config_.models != nullptr &&
                               config_.models->find(body.model) != nullptr;
        auto tokens = std::make_unique<PromptTokensJob>(config_.models, std::move(body),
                                                        config_.max_token_ids);
        if (scheduler_ == nullptr || !tokenizes) {  // in one go (tests; nothing to tokenize)
          fail = tokens_in_one_go(*tokens, start + config_.tokenize_budget_us, request);
        } else if (!scheduler_->admits(request.tenant_id)) {
          fail = FailOpen::kBusy;
        } else {
          const std::string tenant = request.tenant_id;
          scheduler_->add(tenant,
                          std::make_unique<TokensJob>(
                              weak_from_this(), generation_, std::move(tokens), std::move(request),
                              start, start + config_.tokenize_budget_us, index_.clock()));
          return;
        }
      }
    }
    finish_pick(std::move(request), fail, start);
  }

  std::optional<FailOpen> tokens_in_one_go(PromptTokensJob& tokens, std::int64_t deadline,
                                           PickRequest& request) {
    index::Clock& clock = index_.clock();
    const TokensError t =
        tokens.step([&clock, deadline] { return clock.monotonic_us() >= deadline; })
            .value_or(TokensError::kTimeout);
    if (t == TokensError::kNone) request.token_ids = std::move(tokens.ids());
    return fail_open_of(t);
  }

  // A pick's body being tokenized, one slice per reactor turn
  // (prompt_text/scheduler.hh); the pick goes on when the ids are made, or
  // by load once the deadline (--gateway-tokenize-budget after the body's
  // end, waiting included) passes.
  class TokensJob final : public prompt_text::Scheduler::Job {
   public:
    TokensJob(std::weak_ptr<Exchange> exchange, std::uint32_t generation,
              std::unique_ptr<PromptTokensJob> tokens, PickRequest&& request, std::int64_t start,
              std::int64_t deadline, index::Clock& clock)
        : exchange_(std::move(exchange)),
          generation_(generation),
          tokens_(std::move(tokens)),
          request_(std::move(request)),
          start_(start),
          deadline_(deadline),
          clock_(clock) {}

    bool run(std::int64_t slice_end_mono_us) override {
      const std::shared_ptr<Exchange> exchange = exchange_.lock();
      if (!exchange || !exchange->call_.alive()) return true;  // the stream ended
      if (exchange->generation_ != generation_) return true;   // answered without it
      const std::int64_t stop_at = std::min(slice_end_mono_us, deadline_);
      std::optional<TokensError> done =
          clock_.monotonic_us() >= deadline_
              ? std::optional(TokensError::kTimeout)
              : tokens_->step([this, stop_at] { return clock_.monotonic_us() >= stop_at; });
      if (!done && clock_.monotonic_us() < deadline_) return false;
      const TokensError t = done.value_or(TokensError::kTimeout);
      if (t == TokensError::kNone) request_.token_ids = std::move(tokens_->ids());
      exchange->finish_pick(std::move(request_), fail_open_of(t), start_);
      return true;
    }

   private:
    std::weak_ptr<Exchange> exchange_;
    std::uint32_t generation_;
    std::unique_ptr<PromptTokensJob> tokens_;
    PickRequest request_;
    std::int64_t start_, deadline_;
    index::Clock& clock_;
  };

  // The pick itself, once the body gave its token ids or `fail`.
  void finish_pick(PickRequest&& request, std::optional<FailOpen> fail, std::int64_t start) {
    request.failed_open = fail.has_value();
    fail_ = fail;
    std::weak_ptr<Exchange> self = weak_from_this();
    // A stream gone before its pick comes back still ends what the owner booked.
    pick(index_, std::move(request), config_.max_endpoints,
         [self, start, generation = generation_, sharded = &index_, tenant = tenant_id_](Pick&& p) {
           if (auto exchange = self.lock()) {
             exchange->picked(std::move(p), start, generation);
           } else {
             feedback(*sharded, tenant, index::BookingFeedback::Kind::kEnded, p.booking);
           }
         });
  }

  // The stream cannot wait for the pick on its way: more than max_body_bytes
  // of messages came meanwhile (Envoy passing a long body on in full-duplex
  // mode while the owner core answers). Answered by load from what this core
  // knows (gateway/picker.hh pick_here), counted busy unless the body had
  // already failed; the pick on its way is dropped when it comes back.
  void pick_here() {
    ++generation_;
    PickRequest request;
    request.tenant_id = tenant_id_;
    request.subset = subset_;
    request.failed_open = true;
    if (!fail_) fail_ = FailOpen::kBusy;
    picked(gateway::pick_here(request, config_.max_endpoints), pick_start_us_, generation_);
  }

  void picked(Pick&& pick, std::int64_t start, std::uint32_t generation) {
    if (generation != generation_) {  // answered by pick_here(): end what the owner booked
      feedback(index_, tenant_id_, index::BookingFeedback::Kind::kEnded, pick.booking);
      return;
    }
    picking_ = false;
    picked_ = true;
    answer(std::move(pick), start);
    finish_if_closed();
  }

  void answer(Pick&& pick, std::int64_t start) {
    record_pick(pick.reason, fail_, now() - start);
    if (pick.reason == PickReason::kShed) {
      reject(::envoy::type::v3::TooManyRequests, "every eligible endpoint is over its queue bound",
             "inferencecache_shed");
      return;
    }
    if (pick.endpoints.empty()) {
      reject(::envoy::type::v3::ServiceUnavailable, "no eligible endpoint",
             "inferencecache_no_endpoint");
      return;
    }
    booking_ = pick.booking;
    answered_ = pick.endpoints;
    held_tokens_ = pick.held_tokens;
    picked_endpoint_ = pick.endpoints.front();
    served_ = picked_endpoint_;
    pick_sent_us_ = now();
    EndpointLoad::local().started(served_, pick_sent_us_);
    in_flight_ = true;
    send_pick(pick.endpoints);
    release_body();
    drain();
  }

  // Ends the stream once the gateway half-closed and no pick is on its way.
  void finish_if_closed() {
    if (half_closed_ && !picking_ && call_.alive()) call_.finish(rpc::Status::ok());
  }

  // Answers the request itself (ImmediateResponse) instead of picking.
  void reject(::envoy::type::v3::StatusCode code, std::string body, std::string details) {
    xp::ProcessingResponse out;
    auto* immediate = out.mutable_immediate_response();
    immediate->mutable_status()->set_code(code);
    immediate->set_body(std::move(body));
    immediate->set_details(std::move(details));
    call_.write(out);
    rejected_ = true;
    release_body();
    release_queue();
  }

  void send_pick(const std::vector<std::string>& endpoints) {
    const std::string list = joined(endpoints);
    xp::ProcessingResponse out;
    const bool on_headers = headers_answered_by_pick_ || mode_ == BodyMode::kFullDuplex;
    xp::CommonResponse* common = on_headers ? out.mutable_request_headers()->mutable_response()
                                            : out.mutable_request_body()->mutable_response();
    auto* header = common->mutable_header_mutation()->add_set_headers();
    header->mutable_header()->set_key(std::string(kDestinationHeader));
    header->mutable_header()->set_raw_value(list);
    header->set_append_action(core3::HeaderValueOption::OVERWRITE_IF_EXISTS_OR_ADD);
    common->set_clear_route_cache(true);
    auto& lb = (*out.mutable_dynamic_metadata()->mutable_fields())[std::string(kLbNamespace)];
    (*lb.mutable_struct_value()->mutable_fields())[std::string(kDestinationHeader)]
        .set_string_value(list);
    call_.write(out);
    if (mode_ == BodyMode::kFullDuplex && !headers_answered_by_pick_)
      pass_request_chunk(body_, body_ended_ && !trailers_pending_);
    if (trailers_pending_) answer_trailers();
  }

  void queue(std::unique_ptr<xp::ProcessingRequest> request, std::size_t cost) {
    queued_.push_back({std::move(request), cost});
    queued_bytes_ += cost;
    core_held_bytes() += cost;
  }

  // Nothing more is handled (answered 503 / 429): the held messages go.
  void release_queue() {
    core_held_bytes() -= queued_bytes_;
    queued_bytes_ = 0;
    queued_.clear();
  }

  void drain() {
    while (!queued_.empty() && !picking_ && call_.alive()) {
      Queued next = std::move(queued_.front());
      queued_.pop_front();
      queued_bytes_ -= next.cost;
      core_held_bytes() -= next.cost;
      handle(*next.request);
    }
  }

  // ---- response side

  void read_served(const core3::Metadata& m) {
    auto served = metadata_list(m, kLbNamespace, kServedKey);
    if (!served || served->empty() || !in_flight_ || served->front() == served_) return;
    // Only an endpoint of the answer's own list counts: Envoy retries down that
    // list, so any other name is not where this pick's request went, and
    // following it would let a response steer the tenant's later picks.
    const auto at = std::find(answered_.begin(), answered_.end(), served->front());
    if (at == answered_.end()) return;
    const std::int64_t t = now();
    EndpointLoad::local().ended(served_, t);
    served_ = *at;
    EndpointLoad::local().started(served_, t);
    served_elsewhere_ = true;
    // The ranking's booking follows, priced by what the served endpoint holds
    // of the prompt (0 for one ranked by load).
    const std::int64_t held = held_tokens_[static_cast<std::size_t>(at - answered_.begin())];
    feedback(index_, tenant_id_, index::BookingFeedback::Kind::kServedBy, booking_, served_, held);
  }

  void first_response_byte() {
    if (first_byte_seen_ || !in_flight_) return;
    first_byte_seen_ = true;
    const std::int64_t t = now();
    EndpointLoad::local().first_byte(served_, t - pick_sent_us_, t);
    record_served(served_elsewhere_ ? Served::kFallback : Served::kPicked);
    feedback(index_, tenant_id_, index::BookingFeedback::Kind::kFirstByte, booking_);
  }

  void response_headers(const xp::HttpHeaders& h) {
    first_response_byte();
    xp::ProcessingResponse out;
    out.mutable_response_headers();
    call_.write(out);
    if (h.end_of_stream()) end_request();
  }

  void response_body(const xp::HttpBody& b) {
    first_response_byte();
    xp::ProcessingResponse out;
    if (mode_ == BodyMode::kFullDuplex) {
      auto* streamed = out.mutable_response_body()
                           ->mutable_response()
                           ->mutable_body_mutation()
                           ->mutable_streamed_response();
      streamed->set_body(b.body());
      streamed->set_end_of_stream(b.end_of_stream());
    } else {
      out.mutable_response_body();
    }
    call_.write(out);
    if (b.end_of_stream()) end_request();
  }

  void end_request() {
    if (!in_flight_) return;
    in_flight_ = false;
    EndpointLoad::local().ended(served_, now());
    feedback(index_, tenant_id_, index::BookingFeedback::Kind::kEnded, booking_);
    booking_ = index::BookingRef{};
  }

  std::int64_t now() const { return index_.clock().monotonic_us(); }

  rpc::CallHandle call_;
  const GatewayConfig& config_;
  sharding::ShardedIndex& index_;
  prompt_text::Scheduler* scheduler_;  // this core's; nullptr: tokenized in one go
  BodyMode mode_;
  bool first_ = true;
  std::string path_;
  std::string tenant_;
  std::optional<std::vector<std::string>> subset_;
  std::string body_;  // held request body (≤ max_body_bytes + one chunk)
  bool body_ended_ = false;
  bool too_large_ = false;
  bool trailers_pending_ = false;
  bool headers_answered_by_pick_ = false;  // a body-less request: the pick rides on the headers
  bool picking_ = false;
  bool half_closed_ = false;
  bool picked_ = false;
  bool rejected_ = false;
  std::optional<FailOpen> fail_;
  struct Queued {
    std::unique_ptr<xp::ProcessingRequest> request;
    std::size_t cost;  // its wire bytes + kQueuedMessageBytes
  };
  std::deque<Queued> queued_;
  std::size_t queued_bytes_ = 0;  // the sum of queued_'s costs
  std::uint32_t generation_ = 0;  // of the pick on its way; pick_here() moves it on
  std::int64_t pick_start_us_ = 0;
  std::string tenant_id_;                  // the pick's tenant (its owner core holds the booking)
  index::BookingRef booking_;              // the pick's booking; none after the end
  std::vector<std::string> answered_;      // the endpoints answered, best first
  std::vector<std::int64_t> held_tokens_;  // prompt tokens each holds
  std::string picked_endpoint_;
  std::string served_;
  bool served_elsewhere_ = false;
  bool in_flight_ = false;
  bool first_byte_seen_ = false;
  std::int64_t start_us_ = 0;
  std::int64_t pick_sent_us_ = 0;
};

class ExtProcHandler final : public rpc::CallHandler {
 public:
  ExtProcHandler(rpc::CallHandle call, const GatewayConfig& config, sharding::ShardedIndex& index,
                 prompt_text::Scheduler* scheduler)
      : call_(call),
        exchange_(std::make_shared<Exchange>(std::move(call), config, index, scheduler)) {}
  void on_message(std::span<const std::byte> message) override { exchange_->on_message(message); }
  void on_half_close() override { exchange_->on_half_close(); }
  void on_cancel() override { exchange_->on_cancel(); }
  void on_shutdown() override {}  // in-flight requests finish; Envoy opens new streams elsewhere

 private:
  rpc::CallHandle call_;
  std::shared_ptr<Exchange> exchange_;
};

}  // namespace

rpc::Method ext_proc_method(const GatewayConfig& config, sharding::ShardedIndex& index,
                            prompt_text::Scheduler* scheduler) {
  rpc::Method m;
  m.kind = rpc::CallKind::kBidiStreaming;
  m.make = [&config, &index, scheduler](rpc::CallHandle call) -> std::unique_ptr<rpc::CallHandler> {
    return std::make_unique<ExtProcHandler>(std::move(call), config, index, scheduler);
  };
  return m;
}

void add_ext_proc(rpc::MethodTable& methods, const GatewayConfig& config,
                  sharding::ShardedIndex& index, prompt_text::Scheduler* scheduler) {
  methods.add("/" + std::string(kExtProcService) + "/Process",
              ext_proc_method(config, index, scheduler));
}

}  // namespace ic::gateway
