#!/usr/bin/env python3
"""The P/D replay on the in-process index over several loads and lengths of the conversation trace.

Usage (from the repository root): sweep.py [REPLAY ARGS...]
  env R (default build/tools/replay/inferencecache-replay), LOADS (prefill tokens/s, comma list,
  default 8000,8500,9000,9500,10000,11000,12000), REQS (default 1500,3000), TOPO_ARGS (extra
  arguments of --pd-topology-out, e.g. "--pd-affinity-weight 0.5").

One line per configuration: InferenceCache / full-knowledge mean TTFT, / decode-first mean TTFT,
/ decode-first p90 time between tokens, the p90 margin (how many more InferenceCache requests
could be slower than decode-first's p90 before its own p90 passed it; needs pd_dump.patch
applied to tools/replay/pd_run.cc, else "-"), the decode-only answers and the OVERLOADED ones;
then how many meet all three targets of issue 30 (<= 1.10, <= 0.85, <= 1.00), the worst ratios and
the least margin.
"""
import json, math, os, subprocess, sys

R = os.environ.get("R", "build/tools/replay/inferencecache-replay")
loads = [int(x) for x in os.environ.get("LOADS", "8000,8500,9000,9500,10000,11000,12000").split(",")]
reqs = [int(x) for x in os.environ.get("REQS", "1500,3000").split(",")]
env = dict(os.environ, PD_DUMP="1")
rows = []
for n in reqs:
    for load in loads:
        topo = f"/tmp/pdsw-{load}.json"
        subprocess.run([R, "--requests", str(n), "--prefill-rate", str(load), "--pd", "--index",
                        "in-process", "--pd-topology-out", topo]
                       + os.environ.get("TOPO_ARGS", "").split(), capture_output=True, check=True)
        out = f"/tmp/pdsw-{load}-{n}.out.json"
        subprocess.run([R, "--index", "in-process", "--index-flag", f"policy-file={topo}",
                        "--requests", str(n), "--no-progress", "--prefill-rate", str(load), "--pd",
                        "--json-out", out] + sys.argv[1:], capture_output=True, check=True, env=env)
        j = json.load(open(out))
        pol = {p["policy"]: p for p in j["policies"]}
        ic = pol["inferencecache"]
        margin = None
        if "tbt" in ic:
            over = sum(1 for t in ic["tbt"] if t > pol["decode-first"]["tbt_p90_ms"] + 1e-9)
            margin = len(ic["tbt"]) - math.ceil(0.9 * len(ic["tbt"])) - over
        overloaded = ic["reasons"].get("OVERLOADED", 0)
        rows.append((n, load, j["ic_over_fk_ttft_mean"], j["ic_over_df_ttft_mean"],
                     j["ic_over_df_tbt_p90"], margin, ic["decode_only"], overloaded))
        print("%5d %6d  fk %.3f  df %.3f  tbt %.3f  margin %4s  donly %d  overloaded %d"
              % (rows[-1][:5] + ("-" if margin is None else margin,) + rows[-1][6:]), flush=True)
ok = sum(1 for r in rows if r[2] <= 1.10 and r[3] <= 0.85 and r[4] <= 1.0)
margins = [r[5] for r in rows if r[5] is not None]
print("pass %d/%d  mean fk %.3f  worst fk %.3f  worst tbt %.3f  least margin %s"
      % (ok, len(rows), sum(r[2] for r in rows) / len(rows), max(r[2] for r in rows),
         max(r[4] for r in rows), min(margins) if margins else "-"))
