#!/usr/bin/env python3
"""Independent reference for the replay's golden numbers (tests/tools, tests/integration/tools).

Written from the replay's definition (tools/README.md) and nothing of the C++. N FIFO prefill
replicas at RATE tokens/s, each with an LRU of CAPACITY blocks of 512 tokens (the last block of a
request holds input_length - 512*(n-1)). A request routed to a replica at its arrival time starts
when the replica is free (the requests before it there have all ended and stored their blocks), so
its hit is the longest leading run of its blocks in the cache as those stores left it; it ends
(uncached tokens / RATE) later and then stores its blocks in order (a cached block becomes most
recent, a new one evicts the least recent past capacity). TTFT = end - arrival. This closed form
(a replica's schedule is fixed at enqueue) stands in for the C++'s event queue.

Policies:
  round-robin     request i -> replica i mod N.
  least-work      least outstanding prompt work as if nothing were cached: the prompts of the
                  requests queued (not started) / RATE, plus for the one in prefill its whole
                  prompt / RATE less the time since it started (never below 0); then fewest
                  requests routed, then lowest index.
  full-knowledge  least (running prefill's remaining time + queued requests' expected uncached
                  tokens / RATE) + (prompt - expected hit tokens) / RATE, where expected hits =
                  the leading run of blocks cached now (stores of requests ended by the arrival)
                  or belonging to a request queued or running there; ties as least-work.
The upper bound is one cache that never evicts.

usage: replay_golden.py TRACE LIMIT REPLICAS CAPACITY [RATE]   (LIMIT 0 = whole trace)
prints {"round-robin": {...}, "least-work": {...}, "full-knowledge": {...}, "upper_bound_hit_tokens",
"prompt_tokens"}; per policy hit_tokens, ttft_us_sum (each TTFT rounded to the nearest µs).
"""
import json
import math
import sys
from collections import OrderedDict

BLOCK = 512


def tokens(r):
    n = len(r["hash_ids"])
    return [BLOCK] * (n - 1) + [r["input_length"] - BLOCK * (n - 1)]


def leading(r, has):
    hit = 0
    for b, t in zip(r["hash_ids"], tokens(r)):
        if not has(b):
            break
        hit += t
    return hit


def store(cache, blocks, capacity):
    for b in blocks:
        if b in cache:
            cache.move_to_end(b)
        else:
            cache[b] = True
            if len(cache) > capacity:
                cache.popitem(last=False)


class Replica:
    def __init__(self, capacity, rate):
        self.capacity, self.rate = capacity, rate
        self.jobs = []          # [request, arrival, start, end, expected_uncached], routing order
        self.cache_all = OrderedDict()   # after every routed request's store
        self.cache_now = OrderedDict()   # after the stores of requests ended by "now"
        self.stored_now = 0              # jobs applied to cache_now
        self.routed = 0

    def advance(self, now):
        while self.stored_now < len(self.jobs) and self.jobs[self.stored_now][3] <= now:
            store(self.cache_now, self.jobs[self.stored_now][0]["hash_ids"], self.capacity)
            self.stored_now += 1

    def unfinished(self):
        return self.jobs[self.stored_now:]

    def ms(self, toks):
        return toks * 1000.0 / self.rate

    def outstanding_prompt_ms(self, now):
        running, queued = 0.0, 0
        for j in self.unfinished():
            if j[2] <= now:
                running = max(0.0, self.ms(j[0]["input_length"]) - (now - j[2]))
            else:
                queued += j[0]["input_length"]
        return running + self.ms(queued)

    def expected_hit(self, r):
        pending = set()
        for j in self.unfinished():
            pending.update(j[0]["hash_ids"])
        return leading(r, lambda b: b in self.cache_now or b in pending)

    def expected_wait(self, now):
        wait, queued = 0.0, 0
        for j in self.unfinished():
            if j[2] <= now:
                wait = max(0.0, j[3] - now)
            else:
                queued += j[4]
        return wait + self.ms(queued)

    def enqueue(self, r, now):
        expected_uncached = r["input_length"] - self.expected_hit(r)
        start = max(now, self.jobs[-1][3]) if self.jobs else now
        hit = leading(r, lambda b: b in self.cache_all)
        end = start + self.ms(r["input_length"] - hit)
        store(self.cache_all, r["hash_ids"], self.capacity)
        self.jobs.append([r, now, start, end, expected_uncached])
        self.routed += 1
        return hit, end - now


def simulate(reqs, policy, replicas, capacity, rate):
    reps = [Replica(capacity, rate) for _ in range(replicas)]
    hit_total, ttft_us = 0, 0
    for i, r in enumerate(reqs):
        now = float(r["timestamp"])
        for rep in reps:
            rep.advance(now)
        if policy == "round-robin":
            k = i % replicas
        elif policy == "least-work":
            k = min(range(replicas), key=lambda x: (reps[x].outstanding_prompt_ms(now), reps[x].routed, x))
        else:
            k = min(range(replicas),
                    key=lambda x: (reps[x].expected_wait(now) +
                                   reps[x].ms(r["input_length"] - reps[x].expected_hit(r)),
                                   reps[x].routed, x))
        hit, ttft_ms = reps[k].enqueue(r, now)
        hit_total += hit
        ttft_us += int(math.floor(ttft_ms * 1000.0 + 0.5))
    return {"hit_tokens": hit_total, "ttft_us_sum": ttft_us}


def main():
    path, limit, replicas, capacity = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    rate = float(sys.argv[5]) if len(sys.argv) > 5 else 6000.0
    with open(path) as f:
        reqs = [json.loads(line) for i, line in enumerate(f) if limit == 0 or i < limit]
    seen = set()
    bound = 0
    for r in reqs:
        bound += leading(r, lambda b: b in seen)
        seen.update(r["hash_ids"])
    out = {p: simulate(reqs, p, replicas, capacity, rate)
           for p in ("round-robin", "least-work", "full-knowledge")}
    out["upper_bound_hit_tokens"] = bound
    out["prompt_tokens"] = sum(r["input_length"] for r in reqs)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
