#!/usr/bin/env python3
"""Every PromQL expression of the Grafana dashboard parses, checked by promtool.

Usage: check_dashboard.py SOURCE_ROOT PROMTOOL OUT_DIR

Grafana variables are replaced by values of the right type ($__rate_interval → 1m, $job → a
label value, $instance → a regex), each panel target becomes a recording rule in
OUT_DIR/dashboard_rules.yaml, and `promtool check rules` must accept the file. The template
variables' label_values() selectors are checked the same way. Also: panel ids are unique, every
panel has a title and the dashboard uses the ${datasource} variable (no hard-wired data source).
"""
import json
import os
import re
import subprocess
import sys

import yaml

from deploy_common import require, run_checks

SRC, PROMTOOL, OUT = sys.argv[1], sys.argv[2], sys.argv[3]
with open(os.path.join(SRC, "deploy", "grafana", "inferencecache-dashboard.json"),
          encoding="utf-8") as f:
    DASH = json.load(f)
SUBSTITUTIONS = [
    (r"\$__rate_interval|\$\{__rate_interval\}|\$__interval|\$\{__interval\}", "1m"),
    (r"\$__range|\$\{__range\}", "1h"),
    (r"\$\{?job\}?", "inferencecache"),
    (r"\$\{?instance\}?", ".*"),
]


def panels():
    for p in DASH["panels"]:
        yield p
        yield from p.get("panels", [])


def substitute(expr):
    for pattern, value in SUBSTITUTIONS:
        expr = re.sub(pattern, value, expr)
    require("$" not in expr, "unknown Grafana variable left in %r" % expr)
    return expr


def expressions():
    out = []
    for p in panels():
        for t in p.get("targets", []):
            out.append(("panel_%d_%s" % (p["id"], t["refId"]), t["expr"]))
    for v in DASH["templating"]["list"]:
        if v["type"] == "query":
            m = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", v["query"]["query"])
            require(m, "variable %s: expected label_values(selector, label)" % v["name"])
            out.append(("variable_" + v["name"], m.group(1)))
    return out


def check_panels():
    ids = [p["id"] for p in panels()]
    require(len(ids) == len(set(ids)), "duplicate panel ids")
    for p in panels():
        require(p.get("title"), "panel %d has no title" % p["id"])
        if p["type"] != "row":
            require(p["datasource"]["uid"] == "${datasource}", "panel %d data source" % p["id"])
            require(p.get("targets"), "panel %d has no query" % p["id"])
    require(DASH.get("uid") and DASH.get("title"), "dashboard uid/title")


def check_promtool_accepts_every_expression():
    rules = [{"record": "dashboard:" + name, "expr": substitute(expr)}
             for name, expr in expressions()]
    require(len(rules) >= 20, "only %d expressions found" % len(rules))
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, "dashboard_rules.yaml")
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, f, sort_keys=False)
    r = subprocess.run([PROMTOOL, "check", "rules", path], capture_output=True, text=True,
                       check=False)
    require(r.returncode == 0, "promtool check rules:\n" + r.stdout + r.stderr)
    print("     %d expressions: %s" % (len(rules), r.stdout.strip().splitlines()[-1].strip()))


def check_replication_state_and_adapter_panels():
    """The operator's questions the alerts of those areas raise have a panel each."""
    exprs = " ".join(e for _, e in expressions())
    for family in ("inferencecache_replication_connected", "inferencecache_replication_lag_records",
                   "inferencecache_replication_dropped_total", "inferencecache_state_saves_total",
                   "inferencecache_state_last_save_timestamp_seconds",
                   "inferencecache_kvevents_server_connected", "inferencecache_kvevents_resyncs_total"):
        require(family in exprs, "no dashboard panel plots %s" % family)


run_checks([check_panels, check_promtool_accepts_every_expression,
            check_replication_state_and_adapter_panels])
