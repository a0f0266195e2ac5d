#include "templates/render_method.hh"

#include <memory>
#include <optional>
#include <vector>

#include "base/log.hh"
#include "inferencecache/v1alpha1/inferencecache.pb.h"
#include "rpc/typed.hh"
#include "runtime/runtime.hh"
#include "templates/template_metrics.hh"

namespace ic::templates {
namespace {

namespace pb = ::inferencecache::v1alpha1;

// At most one "template busts the prefix cache" line per 60 s across all
// cores; the rest are counted into the next line (and always in the metric).
constexpr std::int64_t kBustLogIntervalUs = 60'000'000;
base::LogRateLimit g_bust_log_limit(kBustLogIntervalUs);

void log_cache_bust(const PromptTemplate& t, const Rendered& r) {
  std::uint64_t suppressed = 0;
  if (!g_bust_log_limit.allow(base::log_clock_us(), &suppressed)) return;
  base::log(base::LogLevel::warn, "template volatile part before a large stable section",
            {{"tenant_id", t.tenant_id},
             {"template", t.name},
             {"revision", t.revision},
             {"volatile_byte_offset", r.volatile_byte_offset},
             {"stable_bytes_after_volatile", r.stable_bytes_after_volatile},
             {"stable_token_count", r.stable_token_count},
             {"hint", "move the volatile variables after the stable text (docs/templates.md)"},
             {"suppressed", suppressed}});
}

// The OK answer of a finished render.
void reply_rendered(rpc::CallHandle& call, pb::RenderTemplateResponse& response,
                    const PromptTemplate& t, Rendered& rendered) {
  response.set_reason_code("OK");
  response.set_stable_prefix_hash(rendered.stable_prefix_hash);
  response.set_volatile_byte_offset(static_cast<std::int32_t>(rendered.volatile_byte_offset));
  response.set_volatile_token_offset(rendered.volatile_token_offset);
  response.set_stable_token_count(rendered.stable_token_count);
  response.set_stable_bytes_after_volatile(
      static_cast<std::int32_t>(rendered.stable_bytes_after_volatile));
  response.set_cache_bust(rendered.cache_bust);
  if (rendered.cache_bust) {
    count_cache_bust(t.tenant_id + "/" + t.name);
    log_cache_bust(t, rendered);
  }
  response.set_rendered_prompt(std::move(rendered.prompt));
  call.reply(response);
}

void reply_render_error(rpc::CallHandle& call, pb::RenderTemplateResponse& response,
                        std::string error) {
  response.set_reason_code("RENDER_ERROR");
  response.set_error(std::move(error));
  call.reply(response);
}

// A render waiting for its stable text's tokens, one slice per reactor turn
// (prompt_text/scheduler.hh); answers the call when they are made.
class RenderJob final : public prompt_text::Scheduler::Job {
 public:
  // `set` keeps `t` alive while a newer set may be installed meanwhile.
  RenderJob(rpc::CallHandle call, pb::RenderTemplateResponse&& response,
            std::shared_ptr<const TemplateSet> set, const PromptTemplate& t,
            std::unique_ptr<TemplateRender> render, index::Clock& clock)
      : call_(std::move(call)),
        response_(std::move(response)),
        set_(std::move(set)),
        t_(t),
        render_(std::move(render)),
        clock_(clock) {}

  bool run(std::int64_t slice_end_mono_us) override {
    if (!call_.alive()) return true;  // the caller left or its deadline passed
    std::string error;
    const std::optional<bool> done = render_->step(
        [this, slice_end_mono_us] { return clock_.monotonic_us() >= slice_end_mono_us; }, error);
    if (!done) return false;
    if (*done) {
      reply_rendered(call_, response_, t_, render_->result());
    } else {
      reply_render_error(call_, response_, std::move(error));
    }
    return true;
  }

 private:
  rpc::CallHandle call_;
  pb::RenderTemplateResponse response_;
  std::shared_ptr<const TemplateSet> set_;
  const PromptTemplate& t_;
  std::unique_ptr<TemplateRender> render_;
  index::Clock& clock_;
};

void answer(const RenderService& service, prompt_text::Scheduler* scheduler, rpc::CallHandle& call,
            const pb::RenderTemplateRequest& request) {
  pb::RenderTemplateResponse response;
  response.set_tenant_namespace(request.tenant_id());
  const std::string_view ref = request.template_ref();
  const std::size_t at = ref.find('@');
  const std::string_view name = ref.substr(0, at);
  const std::string_view pinned = at == std::string_view::npos ? "" : ref.substr(at + 1);
  const std::shared_ptr<const TemplateSet>& set =
      service.catalog->on_core(runtime::current_core() % service.catalog->cores());
  const PromptTemplate* t = set->find(request.tenant_id(), name);
  if (t == nullptr || (at != std::string_view::npos && pinned != t->revision)) {
    response.set_reason_code("TEMPLATE_NOT_FOUND");
    call.reply(response);
    return;
  }
  response.set_template_revision(t->revision);
  std::vector<VariableView> variables;
  variables.reserve(static_cast<std::size_t>(request.variables_size()));
  for (const auto& [k, v] : request.variables()) variables.emplace_back(k, v);
  auto render = std::make_unique<TemplateRender>();
  std::string error;
  if (!render->start(*t, variables, service.models, service.limits, error)) {
    reply_render_error(call, response, std::move(error));
    return;
  }
  // A stable text seen before is answered now; one to tokenize waits for
  // its slices (in one go without a scheduler).
  std::optional<bool> done = render->step(
      scheduler != nullptr ? std::function<bool()>([] { return true; }) : std::function<bool()>(),
      error);
  if (!done && !scheduler->admits(request.tenant_id())) {
    call.finish({rpc::StatusCode::kResourceExhausted,
                 "this core's tokenizing queue is full (tenant or core): retry later"});
    return;
  }
  if (!done) {
    scheduler->add(request.tenant_id(),
                   std::make_unique<RenderJob>(std::move(call), std::move(response), set, *t,
                                               std::move(render), scheduler->clock()));
    return;
  }
  if (*done) {
    reply_rendered(call, response, *t, render->result());
  } else {
    reply_render_error(call, response, std::move(error));
  }
}

}  // namespace

rpc::Method render_template_method(const RenderService& service,
                                   prompt_text::Scheduler* scheduler) {
  const RenderService* s = &service;
  return rpc::single_request_method<pb::RenderTemplateRequest>(
      rpc::CallKind::kUnary,
      [s, scheduler](rpc::CallHandle call, pb::RenderTemplateRequest&& request) {
        answer(*s, scheduler, call, request);
      });
}

}  // namespace ic::templates
