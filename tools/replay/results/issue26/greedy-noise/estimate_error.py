#!/usr/bin/env python3
"""Reads the "D" lines estimate-error.patch makes the replay print to stderr (one per
inferencecache-lane request) and prints how the server's pick and estimate compare with the
truth of the replay's own cluster at that moment.

D line: D index trace_ms reason picked_replica predicted_wait_ms(wall, weight-1 score) truth_ms_at_pick
        best_replica truth_ms_at_best prompt_tokens then per replica queue_ms/outstanding.
The predicted wait is read back from the top PREFIX_MATCH score, score = T / (T + wait) with T the
prompt at --prefill-rate (10,000 tokens/s), in wall ms; x SPEED gives trace ms. Valid only for a
server whose pick weighs the request's own prefill at 1 (score = T / (T + wait)).

usage: estimate_error.py STDERR_FILE [SPEED=3]
"""
import statistics
import sys

speed = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
rows = []
for line in open(sys.argv[1]):
    if not line.startswith("D "):
        continue
    p = line.split()
    rows.append(dict(reason=p[3], pick=int(p[4]), pred=float(p[5]), truth=float(p[6]),
                     best=int(p[7]), best_truth=float(p[8])))
regret = sum(r["truth"] - r["best_truth"] for r in rows)
worse = sum(1 for r in rows if r["truth"] - r["best_truth"] > 1.0)
print(f"requests {len(rows)}; picks worse than the exact rule's by > 1 ms: {worse}; "
      f"summed extra wait {regret / 1000:.3f} s")
pm = [r for r in rows if r["pred"] >= 0]
err = [r["pred"] * speed - r["truth"] for r in pm]
print(f"PREFIX_MATCH answers {len(pm)}: predicted - true wait at the pick, trace ms: "
      f"median {statistics.median(err):.1f}, mean {statistics.mean(err):.1f}, "
      f"median |error| {statistics.median(abs(e) for e in err):.1f}")
rel = sorted((r["pred"] * speed - r["truth"]) / r["truth"] for r in pm if r["truth"] > 200)
print(f"relative error where the true wait > 200 ms ({len(rel)}): median {statistics.median(rel):.4f}, "
      f"p10 {rel[len(rel) // 10]:.4f}, p90 {rel[len(rel) * 9 // 10]:.4f}")
