#!/usr/bin/env python3
"""Per request of the inferencecache lane (the "D" lines of ../../greedy-noise/estimate-error.patch):
picks worse than the full-knowledge rule on the same cluster state, by reason code, and picks on
the odd (half-speed) replicas. usage: picks.py STDERR_FILE"""
import collections
import sys

rows = []
for line in open(sys.argv[1]):
    if line.startswith("D "):
        p = line.split()
        rows.append(dict(i=int(p[1]), reason=p[3], pick=int(p[4]), truth=float(p[6]),
                         best=int(p[7]), best_truth=float(p[8]), prompt=int(p[9])))
worse = [r for r in rows if r["truth"] - r["best_truth"] > 1.0]
print(f"requests {len(rows)}; picks worse than the exact rule's by > 1 ms: {len(worse)}, "
      f"summed extra wait {sum(r['truth'] - r['best_truth'] for r in rows) / 1000:.2f} s")
by = collections.defaultdict(lambda: [0, 0.0])
for r in worse:
    by[r["reason"]][0] += 1
    by[r["reason"]][1] += (r["truth"] - r["best_truth"]) / 1000
for reason, (n, s) in sorted(by.items()):
    print(f"  {reason}: {n} worse picks, {s:.2f} s extra")
picks = collections.Counter((r["reason"], "half-speed" if r["pick"] % 2 else "full-speed")
                            for r in rows)
for (reason, speed), n in sorted(picks.items()):
    print(f"answers {reason} on a {speed} replica: {n}")
print("worse picks on half-speed replicas:", sum(1 for r in worse if r["pick"] % 2),
      f"{sum(r['truth'] - r['best_truth'] for r in worse if r['pick'] % 2) / 1000:.2f} s extra")
print("request reason pick true-wait-ms exact-pick its-wait-ms prompt-tokens (worst 10)")
for r in sorted(worse, key=lambda r: r["best_truth"] - r["truth"])[:10]:
    print(r["i"], r["reason"], r["pick"], round(r["truth"]), r["best"], round(r["best_truth"]),
          r["prompt"])
