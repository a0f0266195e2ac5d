#pragma once
// RenderTemplate over the per-core template sets (docs/templates.md,
// docs/contract.md "RPCs"): reason_code OK with the rendered
// prompt and its stable prefix; TEMPLATE_NOT_FOUND for an unknown
// (tenant_id, template_ref); RENDER_ERROR (and `error`) for the caller's
// variables or a render that fails. The caller's mistakes never end the call
// with a gRPC error; only an undecodable request is INVALID_ARGUMENT.
//
// template_ref: "<name>" (the revision in force) or "<name>@<revision>"
// (that revision only: another one in force is TEMPLATE_NOT_FOUND).
// The render runs on the connection's core, bounded by RenderLimits; a stable
// text not seen before is tokenized as a job of the core's scheduler
// (prompt_text/scheduler.hh: one slice per reactor turn, tenants in turn,
// shared with LookupRoute and the endpoint picker), and the call is answered
// when its job ends. The scheduler full for the core or the tenant:
// RESOURCE_EXHAUSTED (the server's overload, not the caller's mistake: retry
// later). The caller's grpc-timeout passing ends the call DEADLINE_EXCEEDED
// and the job with it.

#include "prompt_text/models.hh"
#include "prompt_text/scheduler.hh"
#include "rpc/call.hh"
#include "templates/catalog.hh"
#include "templates/render.hh"

namespace ic::templates {

struct RenderService {
  const Catalog* catalog = nullptr;               // outlives the servers
  const prompt_text::ModelSet* models = nullptr;  // nullptr: every render fails (no tokenizer)
  RenderLimits limits;
};

// The method for "/inferencecache.v1alpha1.InferenceCache/RenderTemplate".
// `service` outlives the method table; `scheduler` is this core's (outlives
// it too), nullptr: the stable text is tokenized in one go (tests, tools).
rpc::Method render_template_method(const RenderService& service,
                                   prompt_text::Scheduler* scheduler = nullptr);

}  // namespace ic::templates
