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
// The render runs on the connection's core, bounded by RenderLimits.

#include "prompt_text/models.hh"
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
// `service` outlives the method table.
rpc::Method render_template_method(const RenderService& service);

}  // namespace ic::templates
