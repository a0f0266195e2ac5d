#!/usr/bin/env python3
"""Independent reference for the replay's golden numbers (tests/tools, tests/integration/tools).

Round-robin over N LRU engines, written from the issue's definition and nothing of the C++:
request i goes to replica i mod N; its prefix hit is the longest leading run of its blocks in
that replica's cache (512 tokens per block, the last input_length - 512*(n-1)); then its blocks
are stored in order (a cached block becomes most recent, a new one evicts the least recent past
capacity). The upper bound is one cache that never evicts.

usage: replay_golden.py TRACE LIMIT REPLICAS CAPACITY   (LIMIT 0 = whole trace)
"""
import json
import sys
from collections import OrderedDict


def tokens(r):
    n = len(r["hash_ids"])
    return [512] * (n - 1) + [r["input_length"] - 512 * (n - 1)]


def leading(blocks, toks, cache):
    hit = 0
    for b, t in zip(blocks, toks):
        if b not in cache:
            break
        hit += t
    return hit


def main():
    path, limit, replicas, capacity = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    with open(path) as f:
        reqs = [json.loads(line) for i, line in enumerate(f) if limit == 0 or i < limit]
    caches = [OrderedDict() for _ in range(replicas)]
    seen = set()
    rr_hit = bound_hit = prompt = 0
    for i, r in enumerate(reqs):
        cache = caches[i % replicas]
        rr_hit += leading(r["hash_ids"], tokens(r), cache)
        bound_hit += leading(r["hash_ids"], tokens(r), seen)
        prompt += r["input_length"]
        for b in r["hash_ids"]:
            if b in cache:
                cache.move_to_end(b)
            else:
                cache[b] = True
                if len(cache) > capacity:
                    cache.popitem(last=False)
        seen.update(r["hash_ids"])
    print(json.dumps({"round_robin_hit_tokens": rr_hit, "upper_bound_hit_tokens": bound_hit,
                      "prompt_tokens": prompt}))


if __name__ == "__main__":
    main()
