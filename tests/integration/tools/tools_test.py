#!/usr/bin/env python3
"""Integration tests of the tools against a real inferencecache-server.

Run by meson under tests/integration/support's with-server (which exports IC_GRPC_TARGET):
  tools_test.py CASE --replay BIN --bench BIN --cli BIN --trace PATH
Each CASE is one meson test. Golden numbers come from tests/tools/replay_golden.py.
"""
import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

# tests/tools/replay_golden.py TRACE 500 4 3000 12000
GOLDEN_500x4 = {"round_robin_hit_tokens": 554104, "round_robin_ttft_us_sum": 2382227332,
                "upper_bound_hit_tokens": 1167589, "prompt_tokens": 7124855}


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)


def run(cmd, timeout=300):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return "127.0.0.1:%d" % port


def case_replay_golden(a, target):
    rc, out, err = run([a.replay, "--server", target, "--trace", a.trace, "--requests", "500",
                        "--replicas", "4", "--capacity-blocks", "3000", "--prefill-rate", "12000",
                        "--speed", "40", "--json", "--no-progress", "--tenant-prefix", "golden"])
    check(rc == 0, "replay exit %d: %s" % (rc, err))
    doc = json.loads(out)
    pol = {p["policy"]: p for p in doc["policies"]}
    rr, ic = pol["round-robin"], pol["inferencecache"]
    check(doc["requests_replayed"] == 500, "requests_replayed %s" % doc["requests_replayed"])
    check(rr["hit_tokens"] == GOLDEN_500x4["round_robin_hit_tokens"],
          "round-robin hit tokens %d, want %d" % (rr["hit_tokens"],
                                                  GOLDEN_500x4["round_robin_hit_tokens"]))
    check(rr["prompt_tokens"] == GOLDEN_500x4["prompt_tokens"], "prompt tokens %d" % rr["prompt_tokens"])
    check(rr["ttft"]["count"] == 500 and
          rr["ttft"]["mean_us"] == GOLDEN_500x4["round_robin_ttft_us_sum"] // 500,
          "round-robin TTFT %s" % rr["ttft"])
    check(doc["clock"]["wall_clock"], "the inferencecache lane runs on the wall clock")
    check(doc["upper_bound"]["hit_tokens"] == GOLDEN_500x4["upper_bound_hit_tokens"],
          "upper bound %d" % doc["upper_bound"]["hit_tokens"])
    check(ic["hit_tokens"] >= rr["hit_tokens"],
          "inferencecache hits %d < round-robin %d" % (ic["hit_tokens"], rr["hit_tokens"]))
    for p in doc["policies"]:
        check(p["errors"] == {}, "%s lookup errors %s" % (p["policy"], p["errors"]))
        # Only the inferencecache lane asks the server; the others are simulations.
        want = 500 if p["policy"] == "inferencecache" else 0
        check(p["lookup_latency"]["count"] == want, "%s latency samples" % p["policy"])
        check(p["tenant_id"] == "golden-" + p["policy"], "tenant %s" % p["tenant_id"])
    check(ic["reasons"].get("PREFIX_MATCH", 0) > 0, "no PREFIX_MATCH at all: %s" % ic["reasons"])
    print("round-robin %d, inferencecache %d, upper bound %d hit tokens" %
          (rr["hit_tokens"], ic["hit_tokens"], doc["upper_bound"]["hit_tokens"]))


def case_cli(a, target):
    base = [a.cli, "--server", target]
    scope = ["--tenant", "cli-t", "--model", "m"]
    rc, out, err = run(base + ["health"])
    check(rc == 0 and out.strip() == "SERVING", "health: %d %r %r" % (rc, out, err))
    rc, out, err = run(base + ["report"] + scope + ["--replica", "r-1", "--block-ids", "7,8,9",
                                                    "--input-length", "1100"])
    check(rc == 0 and "accepted: yes" in out, "report: %d %r %r" % (rc, out, err))
    rc, out, err = run(base + ["--json", "lookup"] + scope + ["--block-ids", "7,8,9",
                                                              "--input-length", "1100"])
    check(rc == 0, "lookup: %d %r" % (rc, err))
    doc = json.loads(out)
    check(doc["reason_code"] == "PREFIX_MATCH", "lookup reason %s" % doc["reason_code"])
    check(doc["replica_scores"][0]["replica_id"] == "r-1", "replica %s" % doc["replica_scores"])
    check(doc["replica_scores"][0]["matched_tokens"] == 1100, "matched %s" % doc["replica_scores"])
    rc, out, err = run(base + ["lookup"] + scope + ["--block-ids", "7,8,9", "--input-length", "1100"])
    check(rc == 0 and "reason: PREFIX_MATCH" in out and "r-1" in out, "human lookup %r" % out)
    rc, out, err = run(base + ["--json", "state"] + scope)
    check(rc == 0 and json.loads(out)["summary"]["total_prefixes"] == "3",
          "state: %d %r %r" % (rc, out, err))
    rc, out, err = run(base + ["event"] + scope + ["--replica", "r-1", "--type", "evicted",
                                                   "--block-id", "7"])
    check(rc == 0 and "accepted: yes" in out, "event: %d %r %r" % (rc, out, err))
    rc, out, err = run(base + ["--json", "lookup"] + scope + ["--block-ids", "7,8,9"])
    check(rc == 0 and json.loads(out)["reason_code"] != "PREFIX_MATCH",
          "after eviction: %r" % out)
    rc, out, err = run(base + ["lookup"] + scope + ["--block-hashes", "00", "--block-tokens", "1,2"])
    check(rc == 2 and "--block-hashes has 1 entries" in err, "usage error: %d %r" % (rc, err))

    # Token ids: report stores the fingerprint chain (blocks of 16, the server's default
    # --engine-block-size), lookup lets the server chunk them; both default to the scheme the
    # kvevents adapter reports (vllm), so they meet.
    tokens = ["--tenant", "cli-tok", "--model", "m"]
    ids80 = ",".join(str(i) for i in range(1, 81))
    rc, out, err = run(base + ["report"] + tokens + ["--replica", "r-t", "--token-ids", ids80])
    check(rc == 0 and "accepted: yes" in out, "report --token-ids: %d %r %r" % (rc, out, err))
    rc, out, err = run(base + ["--json", "lookup"] + tokens + ["--token-ids", ids80])
    doc = json.loads(out)
    check(rc == 0 and doc["reason_code"] == "PREFIX_MATCH", "token lookup: %d %r" % (rc, out))
    check(doc["replica_scores"][0]["replica_id"] == "r-t" and
          doc["replica_scores"][0]["matched_tokens"] == 80, "token match %r" % out)
    rc, out, err = run(base + ["--json", "lookup"] + tokens + ["--scheme", "vllm", "--token-ids", ids80])
    check(rc == 0 and json.loads(out)["reason_code"] == "PREFIX_MATCH", "--scheme vllm: %r" % out)
    rc, out, err = run(base + ["--json", "lookup"] + tokens + ["--hash-scheme", "sglang",
                                                               "--token-ids", ids80])
    check(rc == 0 and json.loads(out)["reason_code"] == "UNKNOWN_HASH_SCHEME",
          "explicit --hash-scheme: %r" % out)
    # A 48-token prefix the replica holds whole: matched, then dropped by the 64-token floor.
    # The miss then gets NO_HINT: r-t is the only replica known in the scope, and the
    # work-aware ranking leaves a miss with fewer than two known replicas to the gateway
    # (docs/ranking.md "Cost"); the note still says what the floor filtered.
    ids48 = ",".join(str(i) for i in range(1001, 1049))
    rc, out, err = run(base + ["report"] + tokens + ["--replica", "r-t", "--token-ids", ids48])
    check(rc == 0 and "accepted: yes" in out, "report 48 tokens: %d %r %r" % (rc, out, err))
    rc, out, err = run(base + ["lookup"] + tokens + ["--token-ids", ids48])
    check(rc == 0 and out.startswith("reason: NO_HINT  (server lookup latency "),
          "48-token lookup: %d %r" % (rc, out))
    check("note: this prefix has 48 tokens, under the 64-token matched-tokens floor: a replica "
          "holding it is matched, then filtered out, never reported as PREFIX_MATCH "
          "(minimumMatchedTokens, docs/lookup.md step 10; a policy may lower it)\n" in out,
          "48-token lookup says nothing of the floor: %r" % out)
    # A prompt this server (no --tokenizer-models-dir) cannot tokenize: the note says so, not
    # that a floor filtered a match (nothing was looked up).
    rc, out, err = run(base + ["lookup"] + tokens + ["--prompt", "hello world"])
    check(rc == 0 and out.startswith("reason: NO_HINT  (server lookup latency ") and
          out.split("\n", 1)[1] ==
          "note: the prompt was not tokenized, so nothing was looked up: the server has no "
          "tokenizer for model \"m\" (start it with --tokenizer-models-dir holding a \"m\" folder), "
          "or it gave up on this prompt (too long, busy, over its CPU budget); "
          "inferencecache_prompt_text_failures_total{reason} on /metrics says which "
          "(docs/prompt-text.md \"Failure modes\")\nno replica scores: route as usual\n",
          "untokenized prompt lookup: %d %r" % (rc, out))
    # No prefix at all: the note says so, not that a floor filtered a match.
    rc, out, err = run(base + ["lookup"] + tokens + ["--hash-scheme", "vllm"])
    check(rc == 0 and out.startswith("reason: NO_HINT  (server lookup latency ") and
          out.split("\n", 1)[1] ==
          "note: no prefix given (--block-ids, --block-hashes, --prefix-hash, --token-ids or "
          "--prompt): the server looked up the empty prefix, which only TENANT_HOT can answer "
          "(docs/lookup.md step 5)\nno replica scores: route as usual\n",
          "lookup without a prefix: %d %r" % (rc, out))
    rc, out, err = run(base + ["report"] + tokens + ["--replica", "r-t", "--token-ids", "1,2,3"])
    check(rc == 2 and "--token-ids has 3 tokens, fewer than one block of --block-size 16" in err,
          "short --token-ids: %d %r" % (rc, err))


TOPOLOGY = {"version": 7, "policies": [], "pdTopologies": [
    {"name": "pd", "transport": "NIXL",
     "prefill": [{"replica": "p-0"}, {"replica": "p-1"}],
     "decode": [{"replica": "d-0"}, {"replica": "d-1"}]}]}


def case_cli_pd_render(a, target):
    """pd-lookup and render (the server runs with --insecure-disable-auth: the topology is
    pushed to its control listener first)."""
    import urllib.request
    req = urllib.request.Request("http://127.0.0.1:%s/policy" % os.environ["IC_SNAPSHOT_PORT"],
                                 data=json.dumps(TOPOLOGY).encode(), method="POST")
    check(urllib.request.urlopen(req, timeout=10).status == 204, "policy push")
    base = [a.cli, "--server", target]
    scope = ["--tenant", "cli-pd", "--model", "m", "--topology", "pd"]
    # 3,000 token ids: 187 whole 16-token blocks (2,992 tokens), held nowhere, over the
    # 2,048-token disaggregation threshold: a pair.
    ids = ",".join(str(i) for i in range(1, 3001))
    rc, out, err = run(base + ["--json", "pd-lookup"] + scope + ["--token-ids", ids])
    check(rc == 0, "pd-lookup: %d %r" % (rc, err))
    doc = json.loads(out)
    check(doc["reason_code"] == "DISAGGREGATED" and doc["transport_hint"] == "NIXL" and
          doc["uncached_tokens"] == 2992 and doc["prefill_replica_id"] in ("p-0", "p-1") and
          doc["decode_replica_id"] in ("d-0", "d-1"), "pd-lookup pair: %r" % out)
    # 20 tokens: one whole block, under the threshold: the decode replica prefills itself.
    rc, out, err = run(base + ["pd-lookup"] + scope + ["--token-ids", ",".join(map(str, range(1, 21)))])
    check(rc == 0 and out.startswith("reason: DECODE_ONLY_SHORT  (server lookup latency ") and
          "prefill: -  matched 0" in out and "uncached tokens: 16\n" in out,
          "pd-lookup decode-only: %d %r" % (rc, out))
    rc, out, err = run(base + ["pd-lookup", "--tenant", "cli-pd", "--model", "m", "--topology",
                               "nope", "--token-ids", ids])
    check(rc == 0 and out.startswith("reason: UNKNOWN_TOPOLOGY") and "no pair: route as usual" in out,
          "unknown topology: %d %r" % (rc, out))
    rc, out, err = run(base + ["render", "--tenant", "cli-pd", "--template", "agent", "--var", "q=hi"])
    check(rc == 1 and out == "reason: TEMPLATE_NOT_FOUND\n", "render unknown: %d %r %r" % (rc, out, err))
    rc, out, err = run(base + ["--json", "render", "--tenant", "cli-pd", "--template", "agent"])
    check(rc == 1 and json.loads(out)["reason_code"] == "TEMPLATE_NOT_FOUND", "render --json: %r" % out)
    rc, out, err = run(base + ["render", "--tenant", "cli-pd", "--template", "agent", "--var", "q"])
    check(rc == 2 and "--var wants name=value, got: q" in err, "render usage: %d %r" % (rc, err))


def case_bench(a, target):
    rc, out, err = run([a.bench, "--server", target, "-D", "1", "-r", "200", "-c", "2", "-m", "4",
                        "--blocks", "4", "--replicas", "2", "--hit-ratio", "1", "--json"])
    check(rc == 0, "bench exit %d: %s" % (rc, err))
    doc = json.loads(out)
    check(doc["sent"] == 200, "sent %d, want 200 (open loop, 1 s at 200/s)" % doc["sent"])
    check(doc["completed"] == 200 and doc["ok"] == 200, "completed %d ok %d" % (doc["completed"], doc["ok"]))
    check(doc["reasons"] == {"PREFIX_MATCH": 200}, "reasons %s" % doc["reasons"])
    check(doc["latency"]["count"] == 200, "latency count")
    rc, out, err = run([a.bench, "--server", target, "-D", "1", "-r", "100", "--rpc", "report",
                        "--json"])
    check(rc == 0, "bench report exit %d: %s" % (rc, err))
    doc = json.loads(out)
    check(doc["ok"] == 100 and doc["statuses"] == {"OK": 100}, "report statuses %s" % doc["statuses"])


def case_bench_header(a, target):
    # The header is on stderr as the run starts, long before the 3 s run ends.
    p = subprocess.Popen([a.bench, "--server", target, "-D", "3", "-r", "100", "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = p.stderr.readline()
    running = p.poll() is None
    second = p.stderr.readline()
    out = p.stdout.read()
    rest = p.stderr.read()
    p.wait(timeout=60)
    check(first == "inferencecache-bench: /inferencecache.v1alpha1.InferenceCache/LookupRoute "
          "open loop at 100 calls/s, 4 connections x 16 streams, 1 thread(s), 3.0 s\n",
          "first stderr line %r" % first)
    check(running, "the header came only when the run had ended")
    check(second == "  requests: synthetic, server %s\n" % target, "second line %r" % second)
    check(rest == "", "rest of stderr %r" % rest)
    check(p.returncode == 0 and json.loads(out)["sent"] == 300, "bench: %d %r" % (p.returncode, out))


def case_missing_server(a, target):
    dead = closed_port()
    for name, cmd in (("replay", [a.replay, "--server", dead, "--trace", a.trace, "--limit", "5",
                                  "--connect-timeout-ms", "500"]),
                      ("bench", [a.bench, "--server", dead, "-D", "1"]),
                      ("cli", [a.cli, "--server", dead, "--timeout-ms", "500", "health"])):
        started = time.monotonic()
        rc, out, err = run(cmd)
        check(rc == 1, "%s against a closed port: exit %d" % (name, rc))
        check("cannot" in err and dead in err, "%s error message %r" % (name, err))
        if name != "bench":
            check("connection refused by " + dead in err, "%s refused %r" % (name, err))
    # An unknown host is named at once too (.invalid never resolves, RFC 6761); the timeout is
    # far above what a refused or unresolvable address may take.
    for name, cmd in (("replay", [a.replay, "--server", "nohost.invalid:9090", "--trace", a.trace,
                                  "--limit", "5", "--connect-timeout-ms", "60000"]),
                      ("cli", [a.cli, "health", "--server", "nohost.invalid:9090",
                               "--timeout-ms", "60000"])):
        started = time.monotonic()
        rc, out, err = run(cmd)
        check(rc == 1 and 'cannot resolve host "nohost.invalid"' in err, "%s: %d %r" % (name, rc, err))
        check(time.monotonic() - started < 30, "%s waited for the timeout" % name)


def case_usage(a, target):
    # Every usage error exits 2 with one "error:" line (never CLI11's 104..109).
    for cmd in ([a.cli], [a.cli, "lookup"], [a.cli, "nope"], [a.cli, "health", "--bogus"],
                [a.cli, "report", "--tier", "9", "--tenant", "t", "--model", "m", "--replica", "r"],
                [a.replay, "--replicas", "0"], [a.replay, "--policies", "random"],
                [a.replay, "extra"], [a.replay, "--stats", "often"], [a.replay, "--stats", "0"],
                [a.replay, "--prefill-rate", "0"], [a.replay, "--follow-fraction", "1.5"],
                [a.bench, "-c", "x"], [a.bench, "--rpc", "nope"]):
        rc, out, err = run(cmd)
        check(rc == 2, "%s: exit %d %r" % (cmd[1:], rc, err))
        check(": error: " in err and err.endswith("run with --help for usage\n"), "%r" % err)
    for tool in (a.cli, a.replay, a.bench):
        rc, out, err = run([tool, "--version"])
        check(rc == 0 and out.startswith(os.path.basename(tool) + " 0.1.0\ncommit: ")
              and "\nopenssl: " in out, "%s --version %r" % (tool, out))
        rc, out, err = run([tool, "--help"])
        check(rc == 0 and "Usage" in out, "%s --help %d" % (tool, rc))
    # Global options before or after the subcommand.
    for cmd in ([a.cli, "--server", target, "--json", "health"],
                [a.cli, "health", "--server", target, "--json"],
                [a.cli, "--json", "health", "--server", target]):
        rc, out, err = run(cmd)
        check(rc == 0 and '"SERVING"' in out, "%s: %d %r %r" % (cmd[1:], rc, out, err))


def case_replay_checks(a, target):
    # An unwritable --svg fails before the replay starts (exit 2, nothing sent).
    rc, out, err = run([a.replay, "--server", target, "--trace", a.trace, "--limit", "5",
                        "--svg", "/nonexistent-dir/chart.svg"])
    check(rc == 2 and "--svg: directory /nonexistent-dir does not exist" in err, "svg %d %r" % (rc, err))
    check(out == "", "nothing replayed %r" % out)
    # 25 bad lines: the first 10 are shown, the rest counted.
    good = '{"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [0, 1]}\n'
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        f.write(good + "not json\n" * 25 + good)
        path = f.name
    try:
        rc, out, err = run([a.replay, "--server", target, "--trace", path, "--no-progress"])
        check(rc == 0, "replay with bad lines: %d %r" % (rc, err))
        check(err.count("bad trace line:") == 10, "shown %r" % err)
        check("15 more bad trace lines not shown (25 in all)" in err, "cap %r" % err)
    finally:
        os.unlink(path)


def case_bad_lines(a, target):
    good = '{"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [0, 1]}\n'
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        f.write(good + '{"timestamp": 1, "input_length": 600}\n' + good)
        path = f.name
    try:
        rc, out, err = run([a.replay, "--server", target, "--trace", path, "--on-bad-line=fail"])
        check(rc == 1 and "line 2: missing field \"output_length\"" in err, "fail: %d %r" % (rc, err))
        rc, out, err = run([a.replay, "--server", target, "--trace", path, "--json"])
        check(rc == 0, "skip: exit %d %r" % (rc, err))
        check("line 2" in err, "skip must still report the line: %r" % err)
        doc = json.loads(out)
        check(doc["trace"]["bad_lines"] == 1 and doc["requests_replayed"] == 2, "skip doc %s" % doc["trace"])
        rc, out, err = run([a.bench, "--server", target, "--trace", path, "--on-bad-line=fail", "-D", "1"])
        check(rc == 1 and "line 2" in err, "bench fail: %d %r" % (rc, err))
    finally:
        os.unlink(path)


def interrupt(cmd, after_s):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(after_s)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    return p.returncode, out, err


def prefixes_of(a, target, tenant):
    rc, out, err = run([a.cli, "--server", target, "--json", "state", "--tenant", tenant,
                        "--model", "mooncake-conversation"])
    check(rc == 0, "state %d %r" % (rc, err))
    return int(json.loads(out).get("summary", {}).get("total_prefixes", "0"))


def case_interrupt(a, target):
    rc, out, err = interrupt([a.replay, "--server", target, "--trace", a.trace, "--realtime"], 1.5)
    check(rc == 130, "replay after Ctrl-C: exit %d %r" % (rc, err))
    check("(INTERRUPTED)" in out and "round-robin" in out, "replay summary %r" % out)
    check("interrupted; removed the replayed entries (ALL_CLEARED for every replica of tenants "
          in err, "replay cleanup report %r" % err)
    # What it wrote is gone; with --keep-state it stays (and is reported).
    check(prefixes_of(a, target, err.split("tenants ")[1].split(",")[0]) == 0, "after cleanup")
    rc, out, err = interrupt([a.replay, "--server", target, "--trace", a.trace, "--realtime",
                              "--keep-state", "--tenant-prefix", "kept"], 1.5)
    check(rc == 130 and "--keep-state: the replayed entries stay in the server under tenants "
          "kept-inferencecache" in err, "keep-state report %r" % err)
    check(prefixes_of(a, target, "kept-inferencecache") > 0, "kept entries")
    rc, out, err = interrupt([a.bench, "--server", target, "-D", "30", "-r", "100"], 1.5)
    check(rc == 130, "bench after Ctrl-C: exit %d %r" % (rc, err))
    check("(INTERRUPTED)" in out and "calls: sent" in out, "bench summary %r" % out)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("case")
    for flag in ("--replay", "--bench", "--cli", "--trace"):
        parser.add_argument(flag, required=True)
    a = parser.parse_args()
    target = os.environ["IC_GRPC_TARGET"]
    globals()["case_" + a.case](a, target)
    print("ok: " + a.case)


if __name__ == "__main__":
    main()
