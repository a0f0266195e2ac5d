#!/usr/bin/env python3
"""How far the full-knowledge TTFT router itself moves when its estimates are slightly off.

Runs the replay's full-knowledge lane alone on the virtual clock (no server), 16 times per
configuration: seed 0 is the trace as committed with exact estimates (the lane issue 26's
acceptance compares against); seeds 0-15 add 0-3 ms of jitter to each arrival (seed 0: none) and
perturb every estimate by a relative error uniform in +-NOISE (greedy-noise.patch, FK_NOISE).
Prints, per workload and prefill rate, the mean TTFT of the 16 noisy runs as a ratio to the exact
run (mean, max, how many above 1.10), the largest p90 ratio and the smallest hit-ratio ratio.

usage (from the repository root, with the patch applied to a build's replay):
  study.py REPLAY [FK_NOISE=0.02] [FK_ALPHA=-0.3]
"""
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile

WORKLOADS = (("toolagent", "tools/replay/workloads/toolagent.jsonl"),
             ("conversation", "tests/data/traces/mooncake_fast25_conversation_trace.jsonl"))
RATES = ("9000", "6000", "8000,4000", "12000,6000")
SEEDS = 16
REQUESTS = 1500


def jitter(path, seed, out):
    rng = random.Random(seed)
    with open(path) as f, open(out, "w") as o:
        for i, line in enumerate(f):
            if i >= REQUESTS + 100:
                break
            r = json.loads(line)
            if seed:
                r["timestamp"] += rng.randint(0, 3)
            o.write(json.dumps(r) + "\n")


def run(replay, trace, rate, env):
    out = subprocess.run([replay, "--requests", str(REQUESTS), "--no-progress", "--trace", trace,
                          "--prefill-rate", rate, "--policies", "full-knowledge", "--clock",
                          "virtual", "--json"], env=env, capture_output=True, text=True,
                         check=True).stdout
    p = json.loads(out)["policies"][0]
    return p["ttft"]["mean_us"], p["ttft"]["p90_us"], p["hit_ratio"]


def main():
    replay = sys.argv[1]
    exact = {k: v for k, v in os.environ.items() if not k.startswith("FK_")}
    noisy = dict(exact)
    for a in sys.argv[2:]:
        k, v = a.split("=", 1)
        noisy[k] = v
    print("noisy lanes:", " ".join(sys.argv[2:]) or "(none)")
    with tempfile.TemporaryDirectory() as tmp:
        for name, path in WORKLOADS:
            traces = []
            for s in range(SEEDS):
                traces.append(os.path.join(tmp, f"{name}{s}.jsonl"))
                jitter(path, s, traces[-1])
            for rate in RATES:
                b = run(replay, traces[0], rate, exact)
                r = [run(replay, t, rate, noisy) for t in traces]
                m = [x[0] / b[0] for x in r]
                p = [x[1] / b[1] for x in r]
                h = [x[2] / b[2] for x in r]
                print(f"{name:12s} {rate:11s} exact {b[0] / 1e6:.2f} s | mean ratio "
                      f"{statistics.mean(m):.3f} max {max(m):.2f} above 1.10: {sum(x > 1.10 for x in m):2d}"
                      f"/{SEEDS} | p90 ratio max {max(p):.2f} | hit ratio min {min(h):.2f}",
                      flush=True)


if __name__ == "__main__":
    main()
