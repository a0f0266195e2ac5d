#!/usr/bin/env python3
"""Every metric the alert rules, the dashboard and the runbooks name is one that really exists.

Usage (under tests/integration/support's with-server, which exports IC_HTTP_PORT; the server was
started with --policy-file deploy/kubernetes/base/policy.json, --state-file and a --nats-url, so
that the inferencecache_state_* and inferencecache_replication_* families are there):
    check_metric_names.py SOURCE_ROOT [KVEVENTS_BINARY]

Scrapes the server's /metrics once, and the KV-event adapter's (started here on a free loopback
port, pointed at nothing) when its binary is given; collects the families from their `# TYPE`
lines (a histogram also exposes _bucket, _sum and _count), and checks every metric name in
deploy/prometheus/alerts.yaml, the Grafana dashboard and docs/runbooks.md against them,
`__name__=~"a_(x|y)"` matchers expanded: inferencecache_kvevents_* against the adapter, the rest
against the server. `up` is Prometheus' own. The server runs with the Kubernetes policy
ConfigMap's JSON as --policy-file: it would exit 2 at startup on an invalid CachePolicy snapshot,
and must not have counted a rejected file since.
"""
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request

from deploy_common import load_yaml_docs, require, run_checks

SRC = sys.argv[1]
KVEVENTS = sys.argv[2] if len(sys.argv) > 2 else None
URL = "http://127.0.0.1:%s/metrics" % os.environ["IC_HTTP_PORT"]
with urllib.request.urlopen(URL, timeout=10) as r:
    SCRAPE = r.read().decode()


def adapter_scrape():
    """The adapter's /metrics text, or None without the binary."""
    if not KVEVENTS:
        return None
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([KVEVENTS, "--replica-id", "r1", "--model-id", "m",
                             "--server", "127.0.0.1:1", "--engine-endpoint", "tcp://127.0.0.1:1",
                             "--engine-metrics-url", "", "--http-bind-address",
                             "127.0.0.1:%d" % port], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=2) as r:
                    return r.read().decode()
            except OSError:
                require(proc.poll() is None and time.monotonic() < deadline,
                        "the adapter did not serve /metrics")
                time.sleep(0.05)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


ADAPTER_SCRAPE = adapter_scrape()
PROMETHEUS_OWN = {"up"}


def exposed(scrape):
    names = set()
    for m in re.finditer(r"^# TYPE (\S+) (\S+)$", scrape, re.M):
        names.add(m.group(1))
        if m.group(2) == "histogram":
            names |= {m.group(1) + s for s in ("_bucket", "_sum", "_count")}
    return names


EXPOSED = exposed(SCRAPE)
ADAPTER_EXPOSED = exposed(ADAPTER_SCRAPE) if ADAPTER_SCRAPE is not None else None


def referenced(expr):
    """Metric names an expression selects (identifiers before { or [ or ending a selector)."""
    names = set()
    for m in re.finditer(r'__name__=~"([^"]+)"', expr):
        group = re.search(r"\(([^()]*)\)", m.group(1))
        alternatives = group.group(1).split("|") if group else [""]
        for alt in alternatives:
            names.add(m.group(1).replace(group.group(0), alt) if group else m.group(1))
    stripped = re.sub(r'"[^"]*"', '""', expr)
    stripped = re.sub(r"\{[^}]*\}", "{}", stripped)
    stripped = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ",
                      stripped)
    for m in re.finditer(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(?=[{\[]|\s*(?:[)<>=!]|$))", stripped):
        names.add(m.group(1))
    keywords = {"by", "without", "and", "or", "unless", "on", "ignoring", "group_left",
                "group_right", "bool", "offset"}
    return {n for n in names if n not in keywords and ("_" in n or n in PROMETHEUS_OWN)}


def alert_exprs():
    rules = load_yaml_docs(os.path.join(SRC, "deploy", "prometheus", "alerts.yaml"))[0]
    return [(r["alert"], r["expr"]) for g in rules["groups"] for r in g["rules"]]


def dashboard_exprs():
    with open(os.path.join(SRC, "deploy", "grafana", "inferencecache-dashboard.json"),
              encoding="utf-8") as f:
        dash = json.load(f)
    out = []
    for p in dash["panels"]:
        for t in p.get("targets", []):
            out.append((p["title"], t["expr"]))
    for v in dash["templating"]["list"]:
        if v["type"] == "query":
            m = re.fullmatch(r"label_values\((.+),\s*\w+\)", v["query"]["query"])
            out.append(("variable " + v["name"], m.group(1) if m else v["query"]["query"]))
    return out


def missing(names):
    """Names neither the server nor (for inferencecache_kvevents_*) the adapter exposes."""
    out = set()
    for n in names - PROMETHEUS_OWN:
        if n.startswith("inferencecache_kvevents_"):
            if ADAPTER_EXPOSED is not None and n not in ADAPTER_EXPOSED:
                out.add(n)
        elif n not in EXPOSED:
            out.add(n)
    return out


def check(exprs):
    problems, seen = [], 0
    for where, expr in exprs:
        names = referenced(expr)
        require(names, "%s: no metric name found in %r" % (where, expr))
        seen += len(names)
        problems += ["%s: %s" % (where, n) for n in sorted(missing(names))]
    require(not problems, "not exposed by the server: " + "; ".join(problems))
    print("     %d expressions, %d metric references" % (len(exprs), seen))


def check_alert_metrics_exist():
    check(alert_exprs())


def check_dashboard_metrics_exist():
    check(dashboard_exprs())


def check_runbook_metrics_exist():
    with open(os.path.join(SRC, "docs", "runbooks.md"), encoding="utf-8") as f:
        text = f.read()
    names = set(re.findall(r"`(inferencecache_[a-z0-9_]+)(?:\{[^`]*\})?`", text))
    require(len(names) >= 20, "only %d metric names found in docs/runbooks.md" % len(names))
    unknown = sorted(missing(names))
    require(not unknown, "docs/runbooks.md names metrics nobody exposes: %s" % unknown)


def check_adapter_was_scraped():
    if ADAPTER_EXPOSED is None:
        print("     no adapter binary given (built without kvevents): its names were not checked")
        return
    require("inferencecache_kvevents_server_connected" in ADAPTER_EXPOSED, "adapter scrape")


def check_kubernetes_policy_accepted():
    # A --policy-file the server rejects at startup exits 2, so with-server would not get here;
    # once running, the file must not have been rejected since.
    line = 'inferencecache_policy_reloads_total{source="file",result="error"} 0'
    require(line in SCRAPE.splitlines(), "the server rejected deploy/kubernetes/base/policy.json")


run_checks([check_adapter_was_scraped, check_alert_metrics_exist, check_dashboard_metrics_exist,
            check_runbook_metrics_exist, check_kubernetes_policy_accepted])
