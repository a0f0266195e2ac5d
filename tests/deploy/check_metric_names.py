#!/usr/bin/env python3
"""Every metric the alert rules and the dashboard query is one the real server exposes.

Usage (under tests/integration/support's with-server, which exports IC_HTTP_PORT; the server was
started with --policy-file deploy/kubernetes/base/policy.json):
    check_metric_names.py SOURCE_ROOT

Scrapes /metrics once, collects the families from its `# TYPE` lines (a histogram also exposes
_bucket, _sum and _count), and checks every metric name in deploy/prometheus/alerts.yaml and the
Grafana dashboard against them, `__name__=~"a_(x|y)"` matchers expanded. `up` is Prometheus' own.
The server runs with the Kubernetes policy ConfigMap's JSON as --policy-file: it would exit 2 at
startup on an invalid CachePolicy snapshot, and must not have counted a rejected file since.
"""
import json
import os
import re
import sys
import urllib.request

from deploy_common import load_yaml_docs, require, run_checks

SRC = sys.argv[1]
URL = "http://127.0.0.1:%s/metrics" % os.environ["IC_HTTP_PORT"]
with urllib.request.urlopen(URL, timeout=10) as r:
    SCRAPE = r.read().decode()
PROMETHEUS_OWN = {"up"}


def exposed():
    names = set()
    for m in re.finditer(r"^# TYPE (\S+) (\S+)$", SCRAPE, re.M):
        names.add(m.group(1))
        if m.group(2) == "histogram":
            names |= {m.group(1) + s for s in ("_bucket", "_sum", "_count")}
    return names


EXPOSED = exposed()


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


def check(exprs):
    problems, seen = [], 0
    for where, expr in exprs:
        names = referenced(expr)
        require(names, "%s: no metric name found in %r" % (where, expr))
        seen += len(names)
        problems += ["%s: %s" % (where, n) for n in sorted(names - EXPOSED - PROMETHEUS_OWN)]
    require(not problems, "not exposed by the server: " + "; ".join(problems))
    print("     %d expressions, %d metric references" % (len(exprs), seen))


def check_alert_metrics_exist():
    check(alert_exprs())


def check_dashboard_metrics_exist():
    check(dashboard_exprs())


def check_kubernetes_policy_accepted():
    # A --policy-file the server rejects at startup exits 2, so with-server would not get here;
    # once running, the file must not have been rejected since.
    line = 'inferencecache_policy_reloads_total{source="file",result="error"} 0'
    require(line in SCRAPE.splitlines(), "the server rejected deploy/kubernetes/base/policy.json")


run_checks([check_alert_metrics_exist, check_dashboard_metrics_exist,
            check_kubernetes_policy_accepted])
