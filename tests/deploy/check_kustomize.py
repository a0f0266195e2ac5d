#!/usr/bin/env python3
"""Every kustomization under deploy/ builds with `kubectl kustomize`, and what it builds is sound.

Usage: check_kustomize.py SOURCE_ROOT KUBECTL

Offline: kustomize only reads the files. Every folder of deploy/ holding a kustomization.yaml is
built (a kind: Component cannot be built alone: each must be used by an overlay that is), and
the output is checked:
- Pod Security Standards "restricted" for every pod template (runAsNonRoot, seccomp RuntimeDefault
  or Localhost, no privilege escalation, every capability dropped, no host namespaces, ports or
  paths, read-only root file system), "baseline" only for the example's vLLM container (its image
  runs as root and writes its model cache);
- a Localhost seccomp profile names profiles/<a file of deploy/seccomp/>;
- the replicated StatefulSet's serviceName is a headless Service selecting its pods, the client
  Service "inferencecache" is still there with a cluster IP, and the pods spread over nodes;
- every ServiceMonitor, PodMonitor and PrometheusRule carries the `release` label;
- the KV-event adapter example points at the Service and namespace the base builds;
- the inference-gateway example's InferencePool has exactly the fields of the Inference
  Extension's v1 API (inference.networking.k8s.io/v1: selector.matchLabels, one targetPort,
  endpointPickerRef kind/name/port/failureMode), selects the vllm-kvevents engines, names the
  built server Service and its gRPC port as endpoint picker, and the HTTPRoute routes to it.
Skips (77) when kubectl is not installed, or its kustomize is older than v4 (Debian 12's
kubernetes-client is kubectl 1.20 with kustomize v2, which rejects `labels:` and components).
"""
import os
import re
import shutil
import subprocess
import sys

import yaml

from deploy_common import require, run_checks

SRC, KUBECTL = sys.argv[1], sys.argv[2]
DEPLOY = os.path.join(SRC, "deploy")
SECCOMP_DIR = os.path.join(DEPLOY, "seccomp")
# Containers allowed to be "baseline" rather than "restricted", with the reason.
BASELINE_ONLY = {("examples/vllm-kvevents", "vllm"): "the vLLM image runs as root"}
WORKLOAD_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "Job"}


def kustomize_version():
    if not shutil.which(KUBECTL) and not os.path.exists(KUBECTL):
        return None
    out = subprocess.run([KUBECTL, "version", "--client"], capture_output=True, text=True,
                         check=False).stdout
    m = re.search(r"Kustomize Version: v(\d+)", out)
    return int(m.group(1)) if m else 0


VERSION = kustomize_version()
if VERSION is None:
    print("SKIP: kubectl is not installed. No Debian 12 package provides a kubectl that can build "
          "these kustomizations (kubernetes-client is 1.20, kustomize v2); install kubectl >= 1.21 "
          "to run this check")
    sys.exit(77)
if VERSION < 4:
    print("SKIP: %s has kustomize %s; these kustomizations need v4 or later (kubectl >= 1.21)"
          % (KUBECTL, "v%d" % VERSION if VERSION else "v2 or none (no version line)"))
    sys.exit(77)


def kustomizations():
    """{folder relative to deploy/kubernetes or deploy/: parsed kustomization.yaml}."""
    out = {}
    for dirpath, _, files in os.walk(DEPLOY):
        if "kustomization.yaml" in files:
            rel = os.path.relpath(dirpath, os.path.join(DEPLOY, "kubernetes"))
            with open(os.path.join(dirpath, "kustomization.yaml"), encoding="utf-8") as f:
                out[rel] = yaml.safe_load(f)
    return out


KUSTOMIZATIONS = kustomizations()
BUILT = {}


def build(rel):
    if rel not in BUILT:
        r = subprocess.run([KUBECTL, "kustomize", os.path.join(DEPLOY, "kubernetes", rel)],
                           capture_output=True, text=True, check=False, timeout=60)
        require(r.returncode == 0, "kubectl kustomize %s:\n%s" % (rel, r.stderr.strip()))
        BUILT[rel] = [d for d in yaml.safe_load_all(r.stdout) if d]
    return BUILT[rel]


def overlays():
    return sorted(rel for rel, k in KUSTOMIZATIONS.items() if k.get("kind") != "Component")


def find(docs, kind, name=None):
    return [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]


def check_every_kustomization_builds():
    require(len(overlays()) >= 6, "only %s found" % overlays())
    for rel in overlays():
        docs = build(rel)
        require(docs, "%s builds nothing" % rel)
        print("     %-32s %d objects" % (rel, len(docs)))


def check_inference_gateway():
    docs = build("examples/inference-gateway")
    pools = find(docs, "InferencePool")
    require(len(pools) == 1, "one InferencePool, got %d" % len(pools))
    pool = pools[0]
    require(pool["apiVersion"] == "inference.networking.k8s.io/v1", pool["apiVersion"])
    spec = pool["spec"]
    require(set(spec) == {"selector", "targetPorts", "endpointPickerRef"}, sorted(spec))
    require(set(spec["selector"]) == {"matchLabels"}, spec["selector"])
    require(len(spec["targetPorts"]) == 1 and set(spec["targetPorts"][0]) == {"number"}
            and 1 <= spec["targetPorts"][0]["number"] <= 65535, spec["targetPorts"])
    ref = spec["endpointPickerRef"]
    require(set(ref) <= {"group", "kind", "name", "port", "failureMode"}, sorted(ref))
    require(ref.get("kind", "Service") == "Service" and ref.get("group", "") == "", ref)
    require(ref.get("failureMode", "FailClose") in ("FailOpen", "FailClose"), ref)
    services = find(docs, "Service", ref["name"])
    require(len(services) == 1, "the endpoint picker Service %s is built" % ref["name"])
    svc = services[0]
    require(svc["metadata"]["namespace"] == pool["metadata"]["namespace"],
            "the picker Service is in the pool's namespace")
    grpc_ports = [p["port"] for p in svc["spec"]["ports"] if p["name"] == "grpc"]
    require(set(ref["port"]) == {"number"} and [ref["port"]["number"]] == grpc_ports,
            "endpointPickerRef.port is the gRPC port %s" % grpc_ports)
    server = find(docs, "Deployment", "inferencecache")[0]["spec"]["template"]["spec"]
    args = server["containers"][0]["args"]
    require("--gateway-default-tenant=" + pool["metadata"]["namespace"] in args,
            "the server's default tenant is the engines' namespace")
    require(not find(docs, "Namespace"), "the engines' namespace is not built here")
    engines = [d for d in build("examples/vllm-kvevents") if d["kind"] == "Deployment"]
    labels = engines[0]["spec"]["template"]["metadata"]["labels"]
    require(all(labels.get(k) == v for k, v in spec["selector"]["matchLabels"].items()),
            "the pool selects the vllm-kvevents engines")
    side = next(c for c in engines[0]["spec"]["template"]["spec"]["containers"]
                if c["name"] == "kvevents")
    replica = [a.split("=", 1)[1] for a in side["args"] if a.startswith("--replica-id=")]
    require(replica == ["$(POD_IP):%d" % spec["targetPorts"][0]["number"]],
            "the adapters report the pool's endpoints $(POD_IP):<targetPort>: %s" % replica)
    routes = find(docs, "HTTPRoute")
    require(len(routes) == 1 and routes[0]["apiVersion"] == "gateway.networking.k8s.io/v1", routes)
    backends = [b for r in routes[0]["spec"]["rules"] for b in r["backendRefs"]]
    require(backends == [{"group": "inference.networking.k8s.io", "kind": "InferencePool",
                          "name": pool["metadata"]["name"]}], backends)


def check_every_component_is_used():
    used = set()
    for rel in overlays():
        for c in KUSTOMIZATIONS[rel].get("components", []):
            used.add(os.path.normpath(os.path.join(rel, c)))
    for rel, k in KUSTOMIZATIONS.items():
        if k.get("kind") == "Component":
            require(rel in used, "component %s is used by no overlay, so no build checks it" % rel)


def pod_templates(docs):
    for d in docs:
        if d["kind"] in WORKLOAD_KINDS:
            yield d, d["spec"]["template"]["spec"]


def check_pod_security():
    problems = []
    for rel in overlays():
        for workload, spec in pod_templates(build(rel)):
            where = "%s %s/%s" % (rel, workload["kind"], workload["metadata"]["name"])
            problems += pod_problems(rel, where, spec)
    require(not problems, "; ".join(problems))


def check_namespace_enforces_restricted():
    for rel in ("base", "replicated", "io-uring", "replicated-io-uring"):
        ns = find(build(rel), "Namespace")[0]["metadata"]["labels"]
        require(ns.get("pod-security.kubernetes.io/enforce") == "restricted",
                "%s: the namespace does not enforce Pod Security restricted: %s" % (rel, ns))


def pod_problems(rel, where, spec):
    out = []
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(key):
            out.append("%s: %s" % (where, key))
    if any("hostPath" in v for v in spec.get("volumes", [])):
        out.append("%s: hostPath volume" % where)
    pod_sc = spec.get("securityContext", {})
    seccomp = pod_sc.get("seccompProfile", {})
    if seccomp.get("type") not in ("RuntimeDefault", "Localhost"):
        out.append("%s: seccompProfile %s (want RuntimeDefault or Localhost)" % (where, seccomp))
    if seccomp.get("type") == "Localhost":
        profile = seccomp.get("localhostProfile", "")
        if not (profile.startswith("profiles/") and os.path.exists(
                os.path.join(SECCOMP_DIR, profile[len("profiles/"):]))):
            out.append("%s: Localhost profile %r is not profiles/<file of deploy/seccomp>"
                       % (where, profile))
    for c in spec.get("initContainers", []) + spec["containers"]:
        sc = c.get("securityContext", {})
        name = "%s container %s" % (where, c["name"])
        if sc.get("privileged") or any(p.get("hostPort") for p in c.get("ports", [])):
            out.append("%s: privileged or hostPort" % name)
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append("%s: allowPrivilegeEscalation must be false" % name)
        if sc.get("capabilities", {}).get("drop") != ["ALL"] or sc.get("capabilities", {}).get("add"):
            out.append("%s: capabilities must drop ALL and add none" % name)
        if (rel, c["name"]) in BASELINE_ONLY:
            continue
        if not (sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) is True):
            out.append("%s: runAsNonRoot" % name)
        if sc.get("readOnlyRootFilesystem") is not True:
            out.append("%s: readOnlyRootFilesystem" % name)
    return out


def selects(selector, labels):
    return all(labels.get(k) == v for k, v in selector.items())


def check_replicated_services_and_spread():
    for rel in ("replicated", "replicated-io-uring"):
        docs = build(rel)
        require(not find(docs, "Deployment", "inferencecache"), "%s keeps the Deployment" % rel)
        sts = find(docs, "StatefulSet", "inferencecache")[0]
        labels = sts["spec"]["template"]["metadata"]["labels"]
        governing = find(docs, "Service", sts["spec"]["serviceName"])
        require(governing and governing[0]["spec"].get("clusterIP") == "None",
                "%s: serviceName %s is not a headless Service" % (rel, sts["spec"]["serviceName"]))
        require(selects(governing[0]["spec"]["selector"], labels), "headless Service selects no pod")
        client = find(docs, "Service", "inferencecache")
        require(client and client[0]["spec"].get("clusterIP") != "None"
                and selects(client[0]["spec"]["selector"], labels), "the client Service is gone")
        spec = sts["spec"]["template"]["spec"]
        keys = {(t["topologyKey"], t["whenUnsatisfiable"]) for t in spec["topologySpreadConstraints"]
                if selects(t["labelSelector"]["matchLabels"], labels)}
        require(("kubernetes.io/hostname", "DoNotSchedule") in keys
                and ("topology.kubernetes.io/zone", "ScheduleAnyway") in keys,
                "spread over nodes (required) and zones (preferred): %s" % keys)
        anti = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        require(any(t["topologyKey"] == "kubernetes.io/hostname"
                    and selects(t["labelSelector"]["matchLabels"], labels) for t in anti),
                "no pod anti-affinity per node")
        monitors = find(docs, "ServiceMonitor")
        require(all(not selects(m["spec"]["selector"]["matchLabels"], governing[0]["metadata"]["labels"])
                    for m in monitors), "the ServiceMonitor would scrape every pod twice")


def check_every_statefulset_has_a_headless_service():
    for rel in overlays():
        docs = build(rel)
        for sts in find(docs, "StatefulSet"):
            governing = find(docs, "Service", sts["spec"]["serviceName"])
            require(governing and governing[0]["spec"].get("clusterIP") == "None",
                    "%s: StatefulSet %s's serviceName %s is not a headless Service"
                    % (rel, sts["metadata"]["name"], sts["spec"]["serviceName"]))


def check_io_uring_overlays_use_the_profile():
    for rel, kind in (("io-uring", "Deployment"), ("replicated-io-uring", "StatefulSet")):
        workload = find(build(rel), kind, "inferencecache")[0]
        profile = workload["spec"]["template"]["spec"]["securityContext"]["seccompProfile"]
        require(profile == {"type": "Localhost",
                            "localhostProfile": "profiles/inferencecache-io-uring.json"},
                "%s: %s" % (rel, profile))
    for rel in ("base", "replicated"):
        workload = [w for w, _ in pod_templates(build(rel)) if w["metadata"]["name"] == "inferencecache"][0]
        profile = workload["spec"]["template"]["spec"]["securityContext"]["seccompProfile"]
        require(profile == {"type": "RuntimeDefault"}, "%s: %s" % (rel, profile))


def check_monitoring_release_label():
    for rel in overlays():
        for d in build(rel):
            if d["kind"] in ("ServiceMonitor", "PodMonitor", "PrometheusRule"):
                release = d["metadata"].get("labels", {}).get("release")
                want = "monitoring" if rel == "examples/prometheus-release" else "kube-prometheus-stack"
                require(release == want, "%s %s: release=%s, want %s" % (rel, d["kind"], release, want))


def check_adapter_example_points_at_the_base():
    base = build("base")
    service = find(base, "Service", "inferencecache")[0]
    grpc = next(p["port"] for p in service["spec"]["ports"] if p["name"] == "grpc")
    want = "%s.%s.svc:%d" % (service["metadata"]["name"], service["metadata"]["namespace"], grpc)
    engine = find(build("examples/vllm-kvevents"), "Deployment")[0]
    side = next(c for c in engine["spec"]["template"]["spec"]["containers"] if c["name"] == "kvevents")
    servers = [a.split("=", 1)[1] for a in side["args"] if a.startswith("--server=")]
    require(servers == [want], "the adapter reports to %s, the base serves %s" % (servers, want))
    require(side["command"] == ["/usr/local/bin/inferencecache-kvevents"],
            "the adapter container must run the adapter, not the image's server entrypoint")


run_checks([check_every_kustomization_builds, check_every_component_is_used, check_pod_security,
            check_namespace_enforces_restricted,
            check_replicated_services_and_spread, check_every_statefulset_has_a_headless_service,
            check_io_uring_overlays_use_the_profile,
            check_monitoring_release_label, check_adapter_example_points_at_the_base,
            check_inference_gateway])
