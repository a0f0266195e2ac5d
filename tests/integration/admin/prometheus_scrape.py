#!/usr/bin/env python3
"""A real Prometheus server (Debian `prometheus`) scrapes the server's /metrics.

Run by meson under tests/integration/support's with-server, which exports
IC_HTTP_PORT. Starts Prometheus on a free loopback port with a temporary config
and data dir (scrape interval 1 s), waits (bounded) until the target is healthy
and series are queryable through the HTTP API, checks a few exact values, and
stops Prometheus. Exit 0 on success, 1 with a reason otherwise.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

DEADLINE_S = 90


def fail(message, log_path=None):
    print("FAIL: " + message)
    if log_path and os.path.exists(log_path):
        with open(log_path, encoding="utf-8", errors="replace") as f:
            print("--- prometheus log ---\n" + f.read()[-4000:])
    sys.exit(1)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def get_json(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read().decode())


def query(base, expr):
    doc = get_json(base + "/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
    if doc.get("status") != "success":
        return None
    return doc["data"]["result"]


def main():
    prometheus = shutil.which("prometheus")
    if prometheus is None:
        print("prometheus not installed (Debian package `prometheus`)")
        return 77  # meson's "skipped"
    target = "127.0.0.1:%s" % os.environ["IC_HTTP_PORT"]
    work = tempfile.mkdtemp(prefix="ic-prometheus-")
    config = os.path.join(work, "prometheus.yml")
    with open(config, "w", encoding="utf-8") as f:
        f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                "  evaluation_interval: 1s\n"
                "scrape_configs:\n  - job_name: inferencecache\n"
                "    static_configs:\n      - targets: ['%s']\n" % target)
    port = free_port()
    base = "http://127.0.0.1:%d" % port
    log_path = os.path.join(work, "prometheus.log")
    log = open(log_path, "w", encoding="utf-8")
    proc = subprocess.Popen([prometheus, "--config.file=" + config,
                             "--storage.tsdb.path=" + os.path.join(work, "data"),
                             "--web.listen-address=127.0.0.1:%d" % port,
                             "--log.level=warn"], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + DEADLINE_S
        health = None
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                fail("prometheus exited with %d" % proc.returncode, log_path)
            try:
                targets = get_json(base + "/api/v1/targets")["data"]["activeTargets"]
                health = [(t["health"], t.get("lastError", "")) for t in targets]
                up = query(base, 'inferencecache_server_up{job="inferencecache"}')
                if health == [("up", "")] and up:
                    break
            except OSError:
                pass  # not listening yet
            time.sleep(0.5)
        else:
            fail("no healthy scrape within %d s (targets: %s)" % (DEADLINE_S, health), log_path)

        checks = {
            'inferencecache_server_up{job="inferencecache"}': "1",
            'up{job="inferencecache"}': "1",
            'inferencecache_server_grpc_tls_enabled': "0",
            'inferencecache_index_evictions_total{algorithm="lru",reason="cap"}': "0",
            'inferencecache_policy_auth_total{result="forbidden"}': "0",
            'count(inferencecache_build_info{version!=""})': "1",
        }
        for expr, want in checks.items():
            result = query(base, expr)
            if not result or result[0]["value"][1] != want:
                fail("%s = %s, want %s" % (expr, result, want), log_path)
        # Prometheus kept the metric types the exposition declared.
        meta = get_json(base + "/api/v1/metadata?metric=inferencecache_lookup_route_latency_seconds")
        types = [m["type"] for m in meta["data"].get("inferencecache_lookup_route_latency_seconds", [])]
        if types != ["histogram"]:
            fail("latency metadata %s" % meta, log_path)
        print("ok: Prometheus scraped %s and answered %d queries" % (target, len(checks)))
        return 0
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
