#!/usr/bin/env python3
"""Generates the tool-agent workload (toolagent.jsonl), deterministically, in Mooncake format.

A tool-calling agent service: a few agents, each with a long system prompt and tool definitions
that every one of its sessions starts with (the shared prefixes), and sessions that grow turn by
turn as tool results are appended (the follow-ups: each turn's prompt extends the previous one).
A quarter of the sessions are one-shot requests over a document of their own (no reuse at all:
pure misses). Prompts run from about 1k to 100k tokens. Traffic ramps up from a quiet start
(one session every 10 s) to full rate over the first two minutes, as a service does after a
deploy: the first requests finish before the next arrive, so an index that learns replicas only
from their KV events knows one or two replicas when the burst comes.

Blocks are 512 tokens (hash_ids as in the Mooncake trace: one id per block, naming the whole
prefix up to and including it). Agent prefixes are whole blocks; a session's blocks after the
prefix are its own; a prompt's last, partial block gets a fresh id each turn (it is a different
block once the next turn fills it).

usage: make_toolagent.py [--requests N] [--seed S] > toolagent.jsonl
       make_toolagent.py --check toolagent.jsonl   (exit 1 unless the file is what it generates)
Only random.Random(seed).random() is used, so the output is the same on every Python 3.
"""
import argparse
import heapq
import json
import math
import random
import sys

BLOCK = 512
# (prefix tokens, share of sessions) per agent: long system prompts with tool schemas.
AGENTS = [(48 * BLOCK, 0.30), (32 * BLOCK, 0.22), (24 * BLOCK, 0.16), (16 * BLOCK, 0.12),
          (8 * BLOCK, 0.08)]
ONE_SHOT_SHARE = 0.12           # rest of the sessions: a private document, one request
FULL_RATE_PER_S = 0.75          # sessions started per second at full rate
RAMP_S = 120.0                  # from 0.1 sessions/s to full rate
MAX_PROMPT = 100_000


class Rng:
    def __init__(self, seed):
        self.r = random.Random(seed)

    def uniform(self, a, b):
        return a + (b - a) * self.r.random()

    def log_uniform(self, a, b):
        return math.exp(self.uniform(math.log(a), math.log(b)))

    def integer(self, a, b):  # a..b inclusive
        return a + min(int(self.r.random() * (b - a + 1)), b - a)

    def exponential(self, mean):
        return -mean * math.log(1.0 - self.r.random())

    def pick(self, weights):
        x, acc = self.r.random() * sum(weights), 0.0
        for i, w in enumerate(weights):
            acc += w
            if x < acc:
                return i
        return len(weights) - 1


class Ids:
    def __init__(self):
        self.next = 0

    def take(self, n):
        out = list(range(self.next, self.next + n))
        self.next += n
        return out


def session_requests(rng, ids, agent_blocks, start_ms):
    """Yields (timestamp_ms, input_length, output_length, hash_ids) for one session."""
    agent = rng.pick([share for _, share in AGENTS] + [ONE_SHOT_SHARE])
    if agent == len(AGENTS):  # one-shot document: no reuse
        tokens = int(rng.log_uniform(1000, MAX_PROMPT))
        n = math.ceil(tokens / BLOCK)
        yield start_ms, tokens, rng.integer(50, 400), ids.take(n)
        return
    full = list(agent_blocks[agent])          # ids of the session's full blocks so far
    tokens = len(full) * BLOCK + rng.integer(200, 2000)   # + the user's request
    t = start_ms
    for _ in range(rng.integer(2, 10)):
        if tokens > MAX_PROMPT:
            break
        n_full = tokens // BLOCK
        full += ids.take(n_full - len(full))
        tail = ids.take(1) if tokens % BLOCK else []
        yield t, tokens, rng.integer(30, 300), full[:n_full] + tail
        # Next turn: the model's tool call and the tool's result are appended.
        tokens += rng.integer(100, 300) + int(rng.log_uniform(300, 12000))
        t += int(rng.uniform(1500, 12000))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--check", metavar="FILE")
    args = parser.parse_args()
    rng = Rng(args.seed)
    ids = Ids()
    agent_blocks = [ids.take(tokens // BLOCK) for tokens, _ in AGENTS]
    heap = []
    t = 0.0
    produced = 0
    while produced < args.requests * 2:   # enough sessions; cut to the first N by time
        rate = 0.1 + (FULL_RATE_PER_S - 0.1) * min(1.0, t / RAMP_S)
        for r in session_requests(rng, ids, agent_blocks, int(t * 1000)):
            heapq.heappush(heap, (r[0], produced, r))
            produced += 1
        t += rng.exponential(1.0 / rate)
    out = [heapq.heappop(heap)[2] for _ in range(args.requests)]
    text = "".join(json.dumps({"timestamp": ts, "input_length": tokens, "output_length": output,
                               "hash_ids": hash_ids}, separators=(", ", ": ")) + "\n"
                   for ts, tokens, output, hash_ids in out)
    if args.check:
        with open(args.check) as f:
            same = f.read() == text
        print("%s: %s" % (args.check, "as generated" if same else "DIFFERS from the generator"))
        sys.exit(0 if same else 1)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
