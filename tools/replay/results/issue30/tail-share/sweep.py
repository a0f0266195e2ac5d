#!/usr/bin/env python3
"""Issue 30: the P/D replay's simulated lanes at several loads, with tail-share.patch applied.

usage (from the repository root, the patched replay built in BUILD):
  tools/replay/results/issue30/tail-share/sweep.py BUILD/tools/replay/inferencecache-replay [W,...]

For each prefill rate and request count: decode-first's p90 time between tokens and the share of
its requests above 31.05 ms, then LookupPDRoute's rule with exact counts (PDX=100) for each stall
weight W (STALLW): mean TTFT / the full-knowledge router's, p90 TBT, share above 31.05 ms.
Simulated only (no server): deterministic.
"""
import os
import re
import subprocess
import sys

replay = sys.argv[1]
weights = [float(w) for w in (sys.argv[2] if len(sys.argv) > 2 else "1,2,2.5,3,4").split(",")]


def run(n, rate, env, policies):
    e = dict(os.environ, TAIL="1", **env)
    out = subprocess.run([replay, "--requests", str(n), "--prefill-rate", str(rate), "--pd",
                          "--pd-policies", policies, "--no-progress"],
                         env=e, capture_output=True, text=True, check=True)
    text = out.stdout + out.stderr
    res = {}
    for m in re.finditer(r"^TAIL (\S+) n=\d+ >31.0:[\d.]+% >31.05:([\d.]+)%", text, re.M):
        res.setdefault(m.group(1), {})["tail"] = float(m.group(2))
    for m in re.finditer(r"^(full-knowledge|decode-first)\s+([\d.]+)(?:\s+[\d.]+){4}\s+([\d.]+)",
                         text, re.M):
        res.setdefault(m.group(1), {}).update(ttft=float(m.group(2)), p90=float(m.group(3)))
    return res


print("| rate | requests | decode-first p90 TBT ms (share > 31.05) | " +
      " | ".join(f"W={w}: TTFT/FK, p90 TBT, share" for w in weights) + " |")
print("|---|---|---|" + "---|" * len(weights))
for rate in [8000, 8500, 9000, 9500, 10000, 11000]:
    for n in [1500, 2000]:
        base = run(n, rate, {}, "full-knowledge,decode-first")
        fk = base["full-knowledge"]["ttft"]
        df = base["decode-first"]
        row = f"| {rate} | {n} | {df['p90']:.2f} ({df['tail']:.2f} %) |"
        for w in weights:
            r = run(n, rate, {"PDX": "100", "STALLW": str(w)}, "full-knowledge")["full-knowledge"]
            row += f" {r['ttft'] / fk:.2f}x, {r['p90']:.2f}, {r['tail']:.2f} % |"
        print(row, flush=True)
