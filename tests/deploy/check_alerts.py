#!/usr/bin/env python3
"""Every alert of deploy/prometheus/alerts.yaml has a `promtool test rules` case that fires it.

Usage: check_alerts.py SOURCE_ROOT

promtool itself runs the cases (the 'deploy promtool test' test); this check makes sure none is
missing: each alert needs at least one alert_rule_test entry with a non-empty exp_alerts (it fires)
and one with an empty exp_alerts (it stays quiet before its time or for a healthy instance), and
each alert carries a severity label and summary/description annotations, and a runbook_url
`docs/runbooks.md#<alert name in lower case>` naming a section of docs/runbooks.md that says what
it means, how to check and what to do (and every section there is an alert's).
"""
import re
import os
import sys

from deploy_common import load_yaml_docs, require, run_checks

PROM = os.path.join(sys.argv[1], "deploy", "prometheus")
RULES = load_yaml_docs(os.path.join(PROM, "alerts.yaml"))[0]
TESTS = load_yaml_docs(os.path.join(PROM, "alerts_test.yaml"))[0]
ALERTS = {r["alert"]: r for g in RULES["groups"] for r in g["rules"] if "alert" in r}


def cases(fires):
    return {c["alertname"] for t in TESTS["tests"] for c in t.get("alert_rule_test", [])
            if bool(c.get("exp_alerts")) == fires}


def check_every_alert_fires_in_a_test():
    missing = sorted(set(ALERTS) - cases(True))
    require(not missing, "no firing test case for %s" % missing)


def check_every_alert_stays_quiet_in_a_test():
    missing = sorted(set(ALERTS) - cases(False))
    require(not missing, "no quiet (exp_alerts: []) test case for %s" % missing)


def check_tests_name_real_alerts():
    unknown = sorted((cases(True) | cases(False)) - set(ALERTS))
    require(not unknown, "test cases for alerts that do not exist: %s" % unknown)


def check_alerts_are_described():
    for name, rule in ALERTS.items():
        require(rule.get("labels", {}).get("severity") in ("critical", "warning", "info"),
                "%s: severity" % name)
        ann = rule.get("annotations", {})
        require(ann.get("summary") and ann.get("description"), "%s: summary/description" % name)
        require(name.startswith("InferenceCache"), "%s: name prefix" % name)


def runbook_sections():
    """{anchor: section text} of docs/runbooks.md's level-2 headings (anchor = lower-cased title)."""
    with open(os.path.join(sys.argv[1], "docs", "runbooks.md"), encoding="utf-8") as f:
        parts = re.split(r"^## (.+)$", f.read(), flags=re.M)
    return {title.strip().lower(): body for title, body in zip(parts[1::2], parts[2::2])}


def check_every_alert_has_a_runbook():
    sections = runbook_sections()
    for name, rule in ALERTS.items():
        url = rule.get("annotations", {}).get("runbook_url")
        require(url == "docs/runbooks.md#" + name.lower(), "%s: runbook_url %r" % (name, url))
        body = sections.get(name.lower())
        require(body, "docs/runbooks.md has no section %s" % name)
        for part in ("**What it means.**", "**How to check.**", "**What to do.**"):
            require(part in body, "docs/runbooks.md %s lacks %s" % (name, part))
    stray = sorted(set(sections) - {n.lower() for n in ALERTS})
    require(not stray, "runbooks for alerts that do not exist: %s" % stray)


run_checks([check_every_alert_fires_in_a_test, check_every_alert_stays_quiet_in_a_test,
            check_tests_name_real_alerts, check_alerts_are_described,
            check_every_alert_has_a_runbook])
