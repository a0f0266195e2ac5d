#include "templates/render_method.hh"

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

void answer(const RenderService& service, rpc::CallHandle& call,
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
  Rendered rendered;
  std::string error;
  if (!render_template(*t, variables, service.models, service.limits, rendered, error)) {
    response.set_reason_code("RENDER_ERROR");
    response.set_error(error);
    call.reply(response);
    return;
  }
  response.set_reason_code("OK");
  response.set_stable_prefix_hash(rendered.stable_prefix_hash);
  response.set_volatile_byte_offset(static_cast<std::int32_t>(rendered.volatile_byte_offset));
  response.set_volatile_token_offset(rendered.volatile_token_offset);
  response.set_stable_token_count(rendered.stable_token_count);
  response.set_stable_bytes_after_volatile(
      static_cast<std::int32_t>(rendered.stable_bytes_after_volatile));
  response.set_cache_bust(rendered.cache_bust);
  if (rendered.cache_bust) {
    count_cache_bust(t->tenant_id + "/" + t->name);
    log_cache_bust(*t, rendered);
  }
  response.set_rendered_prompt(std::move(rendered.prompt));
  call.reply(response);
}

}  // namespace

rpc::Method render_template_method(const RenderService& service) {
  const RenderService* s = &service;
  return rpc::single_request_method<pb::RenderTemplateRequest>(
      rpc::CallKind::kUnary, [s](rpc::CallHandle call, pb::RenderTemplateRequest&& request) {
        answer(*s, call, request);
      });
}

}  // namespace ic::templates
