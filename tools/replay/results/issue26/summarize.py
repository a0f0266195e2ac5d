#!/usr/bin/env python3
"""Tabulates the replays run.sh wrote to OUTDIR and checks issue 26's acceptance ratios.

usage: tools/replay/results/issue26/summarize.py OUTDIR
Per run: mean / p90 TTFT and hit ratio of least-work (LW), full-knowledge (FK) and inferencecache
(IC), then IC/FK mean (<= 1.10), IC/FK p90 (<= 1.20), IC/LW mean (<= 0.95), IC/FK hit (>= 0.90);
for the follow-half runs only IC/LW mean (<= 1.00). "ok" or "NO" after each ratio. "LATE" marks a
run whose events ran more than 250 ms of trace time behind the wall clock (p99): rerun it.
"""
import glob
import json
import os
import sys


def main():
    rows = []
    for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
        with open(path) as f:
            doc = json.load(f)
        pol = {p["policy"]: p for p in doc["policies"]}
        lw, fk, ic = pol["least-work"], pol["full-knowledge"], pol["inferencecache"]

        def mean(p):
            return p["ttft"]["mean_us"] / 1e6

        def p90(p):
            return p["ttft"]["p90_us"] / 1e6

        name = os.path.basename(path)[:-5]
        # How late events ran behind the wall clock, in trace time (the replay warns past 250 ms).
        lag_ms = doc["clock"]["lag"]["p99_us"] / 1000.0 * doc["clock"]["speed"]
        checks = []

        def ratio(label, value, bound, upper=True):
            good = value <= bound if upper else value >= bound
            checks.append("%s %.2f %s" % (label, value, "ok" if good else "NO"))
            return good

        if name.endswith("follow-half"):
            ok = ratio("IC/LW mean", mean(ic) / mean(lw), 1.00)
        else:
            ok = all([ratio("IC/FK mean", mean(ic) / mean(fk), 1.10),
                      ratio("IC/FK p90", p90(ic) / p90(fk), 1.20),
                      ratio("IC/LW mean", mean(ic) / mean(lw), 0.95),
                      ratio("IC/FK hit", ic["hit_ratio"] / max(fk["hit_ratio"], 1e-9), 0.90,
                            upper=False)])
        rows.append("| %s | %.2f / %.2f / %.1f%% | %.2f / %.2f / %.1f%% | %.2f / %.2f / %.1f%% | %.2f | %.0f%s | %s | %s |" % (
            name, mean(lw), p90(lw), 100 * lw["hit_ratio"], mean(fk), p90(fk), 100 * fk["hit_ratio"],
            mean(ic), p90(ic), 100 * ic["hit_ratio"], ic["balance"]["max_over_mean"], lag_ms,
            " LATE" if lag_ms > 250 else "", "; ".join(checks), "PASS" if ok else "fail"))
    print("| run | least-work mean / p90 s / hit | full-knowledge | inferencecache | IC req max/mean | lag p99 trace ms | ratios | |")
    print("|---|---|---|---|---:|---:|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
