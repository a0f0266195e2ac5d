#!/usr/bin/env python3
"""Offline checks of deploy/kubernetes (no cluster; check_kustomize.py builds the overlays).

Usage: check_kubernetes.py SOURCE_ROOT BUILD_ROOT

Schema-ish checks with python3-yaml: every document is a named, labelled object of a known kind;
kustomization.yaml lists exactly the manifests of the folder; the Deployment's probes are the gRPC
health check on the gRPC port (liveness) and /readyz on the public port (readiness); every container
has CPU and memory requests and limits; the Service, PodDisruptionBudget and ServiceMonitor select
what they should; the PrometheusRule carries exactly deploy/prometheus/alerts.yaml; the policy
ConfigMap's JSON is a version 3..7 CachePolicy snapshot; and every flag a container passes exists in
the binary this build installs (the server's --help; the KV-event adapter's when it is built, else
the flag list of docs/kvevents.md); the example's adapter never gates the engine's readiness; the
NetworkPolicy, evaluated as Kubernetes would, opens the gRPC and public ports to everyone and the
control port only to namespaces and pods labelled for it.
"""
import json
import os
import re
import sys

from deploy_common import (installed_executables, flag_names, flags_of, load_yaml_docs, require,
                           run_checks)

SRC, BUILD = sys.argv[1], sys.argv[2]
K8S = os.path.join(SRC, "deploy", "kubernetes", "base")
KNOWN_KINDS = {
    ("v1", "Namespace"), ("v1", "ServiceAccount"), ("v1", "Service"), ("apps/v1", "Deployment"),
    ("policy/v1", "PodDisruptionBudget"), ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("monitoring.coreos.com/v1", "PrometheusRule"), ("networking.k8s.io/v1", "NetworkPolicy"),
    ("monitoring.coreos.com/v1", "PodMonitor"),
}
# docs/kvevents.md "Flags" (names kept from the earlier sidecar) plus the replay endpoint.
KVEVENTS_FLAGS = {
    "--engine-endpoint", "--topic", "--server", "--replica-id", "--model-id", "--tenant-id",
    "--hash-scheme", "--window", "--engine-metrics-url", "--stats-interval",
    "--engine-cache-size-bytes", "--max-concurrency-ceiling", "--cache-tier",
    "--engine-model-name", "--ignore-block-removed", "--lora-adapter-names", "--replay-endpoint",
    "--dp-size",
}


def manifests():
    out = {}
    for name in sorted(os.listdir(K8S)):
        if name.endswith(".yaml") and name != "kustomization.yaml":
            out[name] = load_yaml_docs(os.path.join(K8S, name))
    return out


DOCS = manifests()
BY_KIND = {d["kind"]: d for docs in DOCS.values() for d in docs}
EXAMPLE_DIR = os.path.join(SRC, "deploy", "kubernetes", "examples", "vllm-kvevents")
EXAMPLE = load_yaml_docs(os.path.join(EXAMPLE_DIR, "deployment.yaml"))[0]
EXAMPLE_MONITOR = load_yaml_docs(os.path.join(EXAMPLE_DIR, "podmonitor.yaml"))[0]
INSTALLED = installed_executables(BUILD)


def pod_spec(deployment):
    return deployment["spec"]["template"]["spec"]


def server_container():
    return next(c for c in pod_spec(BY_KIND["Deployment"])["containers"] if c["name"] == "server")


def arg_value(container, flag):
    for a in container.get("args", []):
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def check_documents_are_named_known_objects():
    for name, docs in list(DOCS.items()) + [("examples/vllm-kvevents", [EXAMPLE, EXAMPLE_MONITOR])]:
        for d in docs:
            require((d.get("apiVersion"), d.get("kind")) in KNOWN_KINDS,
                    "%s: unknown object %s/%s" % (name, d.get("apiVersion"), d.get("kind")))
            meta = d.get("metadata", {})
            require(re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", meta.get("name", "")),
                    "%s: bad metadata.name %r" % (name, meta.get("name")))
            require("app.kubernetes.io/name" in meta.get("labels", {}),
                    "%s: %s has no app.kubernetes.io/name label" % (name, d["kind"]))


def check_kustomization_lists_every_manifest():
    kust = load_yaml_docs(os.path.join(K8S, "kustomization.yaml"))[0]
    require(sorted(kust["resources"]) == sorted(DOCS), "resources %s != files %s"
            % (sorted(kust["resources"]), sorted(DOCS)))
    for gen in kust.get("configMapGenerator", []):
        for f in gen["files"]:
            require(os.path.exists(os.path.join(K8S, f.split("=")[-1])), "missing %s" % f)


def check_probes():
    c = server_container()
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    grpc_port = int(arg_value(c, "--grpc-bind-address").rsplit(":", 1)[1])
    http_port = int(arg_value(c, "--http-bind-address").rsplit(":", 1)[1])
    require(ports.get("grpc") == grpc_port and ports.get("http") == http_port,
            "container ports %s do not match the bind flags" % ports)
    live = c["livenessProbe"]
    require(live.get("grpc", {}).get("port") == grpc_port,
            "liveness must be the gRPC health probe on %d: %s" % (grpc_port, live))
    ready = c["readinessProbe"].get("httpGet", {})
    require(ready.get("path") == "/readyz" and ports.get(ready.get("port"), ready.get("port"))
            == http_port, "readiness must be GET /readyz on %d: %s" % (http_port, ready))


def check_resources():
    for deployment in (BY_KIND["Deployment"], EXAMPLE):
        for c in pod_spec(deployment)["containers"]:
            res = c.get("resources", {})
            for kind in ("requests", "limits"):
                require("memory" in res.get(kind, {}), "%s: no memory %s" % (c["name"], kind))
            require("cpu" in res.get("requests", {}), "%s: no cpu request" % c["name"])
    res = server_container()["resources"]
    require(res["requests"] == res["limits"], "server should be Guaranteed QoS: %s" % res)
    cpus = res["limits"]["cpu"]
    require(str(cpus).isdigit() and arg_value(server_container(), "--threads") == str(cpus),
            "--threads must equal the whole-CPU limit %s" % cpus)


def duration_s(text):
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    return sum(float(n) * units[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", text))


def check_security_and_shutdown():
    spec = pod_spec(BY_KIND["Deployment"])
    require(spec["securityContext"].get("runAsNonRoot") is True, "runAsNonRoot")
    sc = server_container()["securityContext"]
    require(sc.get("allowPrivilegeEscalation") is False and sc.get("readOnlyRootFilesystem")
            and sc.get("capabilities", {}).get("drop") == ["ALL"], "container securityContext %s"
            % sc)
    grace = duration_s(arg_value(server_container(), "--shutdown-grace") or "10s")
    require(spec["terminationGracePeriodSeconds"] > grace,
            "terminationGracePeriodSeconds must exceed --shutdown-grace")
    mounts = {m["name"] for m in server_container()["volumeMounts"]}
    require(mounts == {v["name"] for v in spec["volumes"]}, "volume mounts and volumes differ")
    token = arg_value(server_container(), "--control-token-file")
    require(token and any(token.startswith(m["mountPath"] + "/")
                          for m in server_container()["volumeMounts"]),
            "--control-token-file is not on a mounted volume")


def check_seccomp_runtime_default_and_profile():
    """Without kubectl too: the base runs under RuntimeDefault (never Unconfined, which Pod
    Security "baseline" refuses), and the io_uring component selects the shipped profile."""
    profile = pod_spec(BY_KIND["Deployment"])["securityContext"]["seccompProfile"]
    require(profile == {"type": "RuntimeDefault"}, "base seccompProfile %s" % profile)
    component = os.path.join(SRC, "deploy", "kubernetes", "components", "io-uring",
                             "kustomization.yaml")
    with open(component, encoding="utf-8") as f:
        text = f.read()
    named = re.findall(r"localhostProfile: profiles/(\S+)", text)
    require(named and all(os.path.exists(os.path.join(SRC, "deploy", "seccomp", n)) for n in named),
            "the io-uring component names %s, not a file of deploy/seccomp" % named)


def selects(selector, labels):
    return all(labels.get(k) == v for k, v in selector.items())


def check_selectors():
    deployment = BY_KIND["Deployment"]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    require(selects(deployment["spec"]["selector"]["matchLabels"], pod_labels),
            "the Deployment's selector misses its own pods")
    service = BY_KIND["Service"]
    require(selects(service["spec"]["selector"], pod_labels), "the Service selects no pod")
    container_ports = {p["name"] for p in server_container()["ports"]}
    for p in service["spec"]["ports"]:
        require(p["targetPort"] in container_ports, "Service targetPort %s" % p["targetPort"])
    pdb = BY_KIND["PodDisruptionBudget"]
    require(selects(pdb["spec"]["selector"]["matchLabels"], pod_labels), "the PDB selects no pod")
    monitor = BY_KIND["ServiceMonitor"]
    require(selects(monitor["spec"]["selector"]["matchLabels"], service["metadata"]["labels"]),
            "the ServiceMonitor selects no Service")
    service_ports = {p["name"] for p in service["spec"]["ports"]}
    for ep in monitor["spec"]["endpoints"]:
        require(ep["port"] in service_ports and ep.get("path") == "/metrics",
                "ServiceMonitor endpoint %s" % ep)
    require(service["metadata"]["name"] == "inferencecache",
            "alerts.yaml expects job=\"inferencecache\" (the Service's name)")


def check_prometheus_rule_matches_alerts():
    alerts = load_yaml_docs(os.path.join(SRC, "deploy", "prometheus", "alerts.yaml"))[0]
    require(BY_KIND["PrometheusRule"]["spec"]["groups"] == alerts["groups"],
            "prometheusrule.yaml differs from deploy/prometheus/alerts.yaml")


def check_policy_configmap():
    with open(os.path.join(K8S, "policy.json"), encoding="utf-8") as f:
        policy = json.load(f)
    require(3 <= policy.get("version", 0) <= 7, "policy version %s" % policy.get("version"))
    c = server_container()
    mount = next(m for m in c["volumeMounts"] if m["name"] == "policy")["mountPath"]
    require(arg_value(c, "--policy-file") == mount + "/policy.json", "--policy-file path")


def check_server_flags_exist():
    server = INSTALLED.get("inferencecache-server")
    require(server, "the build installs no inferencecache-server")
    unknown = sorted(set(flag_names(server_container()["args"])) - flags_of(server))
    require(not unknown, "deployment.yaml passes flags the server does not have: %s" % unknown)


def check_example_sidecar():
    containers = {c["name"]: c for c in pod_spec(EXAMPLE)["containers"]}
    side = containers["kvevents"]
    require(side["command"][0].endswith("/inferencecache-kvevents"), "sidecar command")
    built = INSTALLED.get(os.path.basename(side["command"][0]))
    known = flags_of(built) if built else KVEVENTS_FLAGS
    unknown = sorted(set(flag_names(side["args"])) - known)
    require(not unknown, "the sidecar passes unknown flags %s" % unknown)
    for flag in ("--replica-id", "--model-id"):
        require(arg_value(side, flag), "the sidecar needs %s" % flag)
    env = {e["name"] for e in side.get("env", [])}
    for ref in re.findall(r"\$\((\w+)\)", " ".join(side["args"])):
        require(ref in env, "$(%s) is not in the sidecar's env" % ref)
    engine = " ".join(containers["vllm"]["args"])
    config = json.loads(engine.split("--kv-events-config=", 1)[1].split(" --")[0])
    require(config["enable_kv_cache_events"] and config["publisher"] == "zmq", "kv-events-config")
    port = config["endpoint"].rsplit(":", 1)[1]
    require(arg_value(side, "--engine-endpoint").endswith(":" + port),
            "the sidecar subscribes to another port than vLLM publishes on")
    require(arg_value(side, "--topic") == config["topic"], "topic mismatch")
    require(config["endpoint"].startswith("tcp://127.0.0.1:"),
            "vLLM must publish on the pod's loopback (token ids stay in the pod): %s" % config)


def check_example_sidecar_never_gates_the_engine():
    """Fail-open: the adapter has no readiness probe (a pod is ready only when every container
    is), its liveness is its own /healthz (never /readyz, which follows the server), and the
    engine's probes name only the engine's own port."""
    containers = {c["name"]: c for c in pod_spec(EXAMPLE)["containers"]}
    side = containers["kvevents"]
    require("readinessProbe" not in side and "startupProbe" not in side,
            "the adapter must not have a readiness or startup probe")
    live = side.get("livenessProbe", {}).get("httpGet", {})
    require(live.get("path") == "/healthz", "adapter liveness must be GET /healthz: %s" % live)
    side_ports = {p["name"] for p in side["ports"]} | {p["containerPort"] for p in side["ports"]}
    require(live.get("port") in side_ports, "adapter liveness probes another container's port")
    engine_ports = {p["name"] for p in containers["vllm"]["ports"]} | {
        p["containerPort"] for p in containers["vllm"]["ports"]}
    for kind in ("readinessProbe", "livenessProbe", "startupProbe"):
        probe = containers["vllm"].get(kind)
        if probe:
            require(probe.get("httpGet", {}).get("port") in engine_ports and "exec" not in probe,
                    "vLLM's %s must probe vLLM itself: %s" % (kind, probe))
    downward = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in side["env"]
                if "fieldRef" in e.get("valueFrom", {})}
    require(downward == {"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace",
                         "POD_IP": "status.podIP"}, "downward API env %s" % downward)
    engine_port = next(p["containerPort"] for p in containers["vllm"]["ports"] if p["name"] == "http")
    require(arg_value(side, "--replica-id") == "$(POD_IP):%d" % engine_port,
            "the replica id must be the endpoint $(POD_IP):<vLLM's port>: %s"
            % arg_value(side, "--replica-id"))
    monitor_port = EXAMPLE_MONITOR["spec"]["podMetricsEndpoints"][0]["port"]
    require(monitor_port in side_ports, "the PodMonitor scrapes port %s" % monitor_port)
    require(arg_value(side, "--http-bind-address").endswith(":%d" % side["ports"][0]["containerPort"]),
            "the adapter's --http-bind-address is not its declared port")


def labels_match(selector, labels):
    """A LabelSelector (matchLabels only, as ours use) against a label set."""
    require(set(selector) <= {"matchLabels"}, "unsupported selector %s" % selector)
    return selects(selector.get("matchLabels", {}), labels)


def network_policy_allows(policy, port_name, peer_ns_labels, peer_labels, same_namespace):
    """Kubernetes' ingress decision for one policy that selects the server pods: some rule whose
    ports include port_name (or that lists none) and whose peers (or no peers) match."""
    for rule in policy["spec"].get("ingress", []):
        ports = rule.get("ports")
        if ports and port_name not in {p["port"] for p in ports}:
            continue
        peers = rule.get("from")
        if not peers:
            return True
        for peer in peers:
            ns_sel, pod_sel = peer.get("namespaceSelector"), peer.get("podSelector")
            ns_ok = labels_match(ns_sel, peer_ns_labels) if ns_sel is not None else same_namespace
            pod_ok = labels_match(pod_sel, peer_labels) if pod_sel is not None else True
            if ns_ok and pod_ok:
                return True
    return False


def check_network_policy():
    policy = BY_KIND["NetworkPolicy"]
    pod_labels = BY_KIND["Deployment"]["spec"]["template"]["metadata"]["labels"]
    require(labels_match(policy["spec"]["podSelector"], pod_labels), "the policy selects no server pod")
    require(policy["spec"]["policyTypes"] == ["Ingress"], "policyTypes %s" % policy["spec"]["policyTypes"])
    ports = {p["name"] for p in server_container()["ports"]}
    require(ports == {"grpc", "http", "control"}, "server ports %s" % ports)
    grant = {"inferencecache.io/control-access": "allowed"}
    gateway = ({"kubernetes.io/metadata.name": "gateways"}, {"app": "gateway"}, False)
    cases = [
        ("grpc", gateway, True), ("http", gateway, True), ("control", gateway, False),
        ("control", ({"kubernetes.io/metadata.name": "inferencecache"}, {}, True), False),
        ("control", (grant, {"app": "policy-controller"}, False), True),
        ("control", ({}, grant, True), True),
        # A pod labelled for access in ANOTHER namespace is not enough: its namespace must be.
        ("control", ({}, grant, False), False),
    ]
    for port, (ns_labels, labels, same_ns), want in cases:
        got = network_policy_allows(policy, port, ns_labels, labels, same_ns)
        require(got == want, "port %s from ns %s pod %s (same namespace %s): allowed=%s, want %s"
                % (port, ns_labels, labels, same_ns, got, want))


REPLICATED = os.path.join(SRC, "deploy", "kubernetes", "replicated")


def check_replicated_variant():
    """deploy/kubernetes/replicated (docs/replication.md): the base with its Deployment replaced
    by a StatefulSet of 3 replicas whose server passes the base's flags plus --nats-url (naming
    the NATS Service of nats.yaml), a --state-file on a volume per pod, and a liveness probe
    that stays up while a pod catches up with the stream."""
    kust = load_yaml_docs(os.path.join(REPLICATED, "kustomization.yaml"))[0]
    files = sorted(f for f in os.listdir(REPLICATED) if f.endswith(".yaml") and f != "kustomization.yaml")
    require(sorted(kust["resources"]) == sorted(["../base"] + files), "replicated resources %s" % kust["resources"])
    deleted = [yaml_patch for yaml_patch in kust.get("patches", [])
               if "$patch: delete" in yaml_patch["patch"] and "kind: Deployment" in yaml_patch["patch"]]
    require(deleted, "the replicated variant must delete the base's single-replica Deployment")
    docs = {d["kind"] + "/" + d["metadata"]["name"]: d
            for f in files for d in load_yaml_docs(os.path.join(REPLICATED, f))}
    sts = docs["StatefulSet/inferencecache"]
    require(sts["spec"]["replicas"] >= 3, "fewer than 3 replicas")
    require(selects(BY_KIND["Service"]["spec"]["selector"], sts["spec"]["template"]["metadata"]["labels"]),
            "the base Service does not select the StatefulSet's pods")
    c = next(c for c in pod_spec(sts)["containers"] if c["name"] == "server")
    base = set(flag_names(server_container()["args"]))
    require(base <= set(flag_names(c["args"])), "flags of the base missing: %s"
            % sorted(base - set(flag_names(c["args"]))))
    unknown = sorted(set(flag_names(c["args"])) - flags_of(INSTALLED["inferencecache-server"]))
    require(not unknown, "statefulset.yaml passes flags the server does not have: %s" % unknown)
    # Scale-out rebalancing (deploy/README.md "More than one server"): connections age out.
    require(arg_value(c, "--max-connection-age") == "30m", "replicated: no --max-connection-age=30m")
    require(arg_value(c, "--max-connection-age-grace") == "1m",
            "replicated: no --max-connection-age-grace=1m")
    nats = docs["Service/nats"]
    port = nats["spec"]["ports"][0]["port"]
    require(arg_value(c, "--nats-url") == "nats://nats:%d" % port, "--nats-url is not the nats Service")
    state_dir = arg_value(c, "--state-file").rsplit("/", 1)[0]
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    claims = {t["metadata"]["name"] for t in sts["spec"]["volumeClaimTemplates"]}
    require(mounts.get(state_dir) in claims, "--state-file is not on a volume per pod")
    # The gRPC health check is NOT_SERVING while a pod catches up with the stream: liveness
    # must not use it, or a long catch-up is killed by its own probe.
    live = c["livenessProbe"].get("httpGet", {})
    require(live.get("path") == "/healthz", "replicated liveness must be GET /healthz: %s"
            % c["livenessProbe"])
    headless = docs.get("Service/" + sts["spec"]["serviceName"])
    require(headless and headless["spec"].get("clusterIP") == "None",
            "the StatefulSet's serviceName must be a headless Service of the overlay")
    require(pod_spec(sts).get("topologySpreadConstraints"), "the replicated pods do not spread")
    require(pod_spec(sts)["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"},
            "the StatefulSet must run under RuntimeDefault like the base")
    nats_policy = docs["NetworkPolicy/nats"]
    nats_pods = docs["StatefulSet/nats"]["spec"]["template"]["metadata"]["labels"]
    require(labels_match(nats_policy["spec"]["podSelector"], nats_pods), "the NATS policy selects no pod")
    server_pods = sts["spec"]["template"]["metadata"]["labels"]
    for labels, same_ns, want in ((server_pods, True, True), (server_pods, False, False),
                                  ({"app": "gateway"}, True, False)):
        got = network_policy_allows(nats_policy, "client", {}, labels, same_ns)
        require(got == want, "NATS client port from %s (same namespace %s): %s, want %s"
                % (labels, same_ns, got, want))
    js = docs["StatefulSet/nats"]
    require("--jetstream" in pod_spec(js)["containers"][0]["args"], "NATS without JetStream")


run_checks([check_documents_are_named_known_objects, check_kustomization_lists_every_manifest,
            check_probes, check_resources, check_security_and_shutdown, check_selectors,
            check_prometheus_rule_matches_alerts, check_policy_configmap, check_server_flags_exist,
            check_example_sidecar, check_example_sidecar_never_gates_the_engine,
            check_network_policy, check_seccomp_runtime_default_and_profile,
            check_replicated_variant])
