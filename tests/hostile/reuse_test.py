#!/usr/bin/python3
"""What a call leaves behind must not reach the next one (docs/hostile-peers.md
"Reused state"), one case per run:

    reuse_test.py SERVER_BINARY CASE

The server keeps per-core state across calls: request messages parse into a
per-core pool (src/rpc/message_pool.hh), a local LookupRoute is answered into
the core's reusable response message (src/service/index_methods.cc), and each
shard remembers the names and policy of its last lookup (docs/index.md). Each
case sends one connection a sequence of lookups that differ in every field a
previous call could leave set, and asserts every answer field by field against
the answer docs/lookup.md gives for that request alone. The server runs the
reference ranking: the load-aware one (docs/ranking.md) remembers its past
answers by design, so only under the reference ranking is an answer a
function of the request, the index and the policy alone.
"""

import hashlib
import json
import struct
import urllib.request

import hostile_lib as hl

RANKING = ["--ranking", "reference"]

# ---- the index every case starts from -----------------------------------------
# (tenant, model, replica, keys, adapter), 128 tokens per key, reported now.
INDEX = [("ta", "m1", "r1", [1, 2], ""), ("ta", "m1", "r2", [2, 3], ""),
         ("ta", "m1", "r1", [5], "lora-a"), ("tb", "m2", "r3", [1], "")]


def seed(srv):
    for tenant, model, replica, keys, adapter in INDEX:
        prefixes = b"".join(hl.pb_bytes(6, hl.pb_bytes(1, hl.key_hash(k)) + hl.pb_int(2, 128) +
                                        (hl.pb_bytes(6, adapter) if adapter else b""))
                            for k in keys)
        update = (hl.pb_bytes(1, replica) + hl.pb_bytes(2, model) + hl.pb_bytes(3, tenant) +
                  hl.pb_bytes(4, "vllm") + prefixes)
        assert hl.call_once(srv.grpc_port, "ReportCacheState", update)[0] == 0


# ---- requests -------------------------------------------------------------------


def lookup(tenant, model="m1", key=None, chain=None, adapter="", scheme="vllm", slo_ms=0,
           token_ids=(), pad_blocks=0):
    """A LookupRouteRequest. chain: [(key, tokens)] as block_hashes and
    block_token_counts; pad_blocks appends that many blocks no replica holds
    (a >4 KiB message that is not pooled)."""
    m = hl.pb_bytes(1, model) + hl.pb_bytes(2, tenant) + hl.pb_bytes(5, scheme)
    if key is not None:
        m += hl.pb_bytes(3, hl.key_hash(key)) + hl.pb_int(4, 128)
    if slo_ms:
        m += hl.pb_bytes(6, hl.pb_int(1, slo_ms) + hl.pb_int(2, slo_ms))
    blocks = [(hl.key_hash(k), n) for k, n in chain or []]
    blocks += [(b"pad-%06d" % i, 16) for i in range(pad_blocks)]
    m += b"".join(hl.pb_bytes(7, h) for h, _ in blocks)
    m += b"".join(hl.pb_int(8, n) for _, n in blocks)
    if token_ids:
        m += hl.pb_bytes(9, b"".join(hl._varint(t) for t in token_ids))
    if adapter:
        m += hl.pb_bytes(11, adapter)
    return m


def affinity_pick(seed_bytes, replicas):
    """docs/lookup.md "Scoring", AFFINITY_HINT: sorted replicas, index
    SHA-256(seed)[:8] big-endian mod count."""
    digest = hashlib.sha256(seed_bytes).digest()
    return sorted(replicas)[int.from_bytes(digest[:8], "big") % len(replicas)]


def chain_seed(chain):
    return b"".join(struct.pack(">I", 8) + hl.key_hash(k) for k, _ in chain)


def answer(resp):
    """A LookupRouteResponse as (reason, [(replica, matched, tier, scored)],
    adapter echo, token_ids echo); `scored` is score > 0 (scores themselves
    decay with the entries' age)."""
    reason, adapter, tokens, replicas = "", "", b"", []
    for field, value in hl.pb_fields(resp):
        if field == 1:
            rs = dict(hl.pb_fields(value))
            score = struct.unpack("<f", rs[2])[0] if 2 in rs else 0.0
            replicas.append((rs.get(1, b"").decode(), rs.get(3, 0), rs.get(5, 0), score > 0))
        elif field == 2:
            reason = value.decode()
        elif field == 4:
            tokens += value
        elif field == 5:
            adapter = value.decode()
    return reason, replicas, adapter, tokens


def match(*replicas, adapter=""):
    return ("PREFIX_MATCH", [(r, 128, 1, True) for r in replicas], adapter, b"")


def hint(replica, adapter=""):
    return ("AFFINITY_HINT", [(replica, 0, 0, False)], adapter, b"")


def bare(reason, adapter=""):
    return (reason, [], adapter, b"")


# Each request with its answer under each policy state (POLICIES below). The
# names say what a previous call must not leak into the next: replicas,
# matched tokens, adapter echo, chain, SLO, token ids, scope.
CHAIN = [(1, 64), (2, 64)]
HUGE = lookup("ta", chain=CHAIN, pad_blocks=400, slo_ms=100)
assert len(HUGE) > 4096
R12 = ["r1", "r2"]
REQUESTS = [
    ("exact r1", lookup("ta", key=1), {"none": match("r1"), "chain": bare("POLICY_REQUIRES_CHAIN"),
                                       "no_affinity": match("r1")}),
    ("exact both hold it", lookup("ta", key=2),
     {"none": hint(affinity_pick(hl.key_hash(2), R12)), "chain": bare("POLICY_REQUIRES_CHAIN"),
      "no_affinity": bare("NO_HINT")}),
    ("exact r2", lookup("ta", key=3), {"none": match("r2"), "chain": bare("POLICY_REQUIRES_CHAIN"),
                                       "no_affinity": match("r2")}),
    ("exact nobody", lookup("ta", key=9),
     {"none": hint(affinity_pick(hl.key_hash(9), R12)), "chain": bare("POLICY_REQUIRES_CHAIN"),
      "no_affinity": bare("NO_HINT")}),
    ("adapter partition", lookup("ta", key=5, adapter="lora-a"),
     {"none": match("r1", adapter="lora-a"), "chain": bare("POLICY_REQUIRES_CHAIN"),
      "no_affinity": match("r1", adapter="lora-a")}),
    ("adapter key, default partition", lookup("ta", key=5),
     {"none": hint(affinity_pick(hl.key_hash(5), R12)), "chain": bare("POLICY_REQUIRES_CHAIN"),
      "no_affinity": bare("NO_HINT")}),
    ("chain, SLO, adapter, token ids", lookup("ta", chain=[(5, 128)], adapter="lora-a", slo_ms=100,
                                             token_ids=range(40)),
     dict.fromkeys(["none", "chain", "no_affinity"], match("r1", adapter="lora-a"))),
    ("chain", lookup("ta", chain=CHAIN), dict.fromkeys(["none", "chain", "no_affinity"],
                                                       match("r1"))),
    ("huge chain (not pooled)", HUGE, dict.fromkeys(["none", "chain", "no_affinity"],
                                                    match("r1"))),
    ("other tenant and model", lookup("tb", model="m2", key=1),
     dict.fromkeys(["none", "chain", "no_affinity"], ("PREFIX_MATCH", [("r3", 128, 1, True)],
                                                      "", b""))),
    ("unknown model", lookup("tb", model="m1", key=1),
     dict.fromkeys(["none", "chain", "no_affinity"], bare("UNKNOWN_MODEL"))),
    ("unknown scheme", lookup("ta", key=1, scheme="sglang"),
     {"none": bare("UNKNOWN_HASH_SCHEME"), "chain": bare("POLICY_REQUIRES_CHAIN"),
      "no_affinity": bare("UNKNOWN_HASH_SCHEME")}),
    ("unknown tenant", lookup("tc", key=1),
     dict.fromkeys(["none", "chain", "no_affinity"], bare("UNKNOWN_TENANT"))),
    ("tenant only", hl.pb_bytes(2, "ta"),
     {"none": bare("NO_HINT"), "chain": bare("POLICY_REQUIRES_CHAIN"), "no_affinity":
      bare("NO_HINT")}),
]

# Policy snapshots pushed between lookups (docs/policy.md): each replaces the
# last, so "none" restores the defaults.
POLICIES = {
    "none": {"version": 7, "policies": []},
    "chain": {"version": 7, "policies": [{"namespace": "ta",
                                          "strategy": {"requireChain": True}}]},
    "no_affinity": {"version": 7, "policies": [{"namespace": "ta", "affinityRouting": False}]},
}


def push_policy(srv, name):
    req = urllib.request.Request("http://127.0.0.1:%d/policy" % srv.control_port,
                                 data=json.dumps(POLICIES[name]).encode(), method="POST")
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 204, r.status


def check_sequence(client, order, policy, previous=None):
    """Sends REQUESTS[i] for i in `order` on `client`; every answer must be
    the one that request gets alone under `policy`. Returns the name of the
    last request sent (`previous` is the one before the first)."""
    for i in order:
        name, message, expected = REQUESTS[i]
        status, resp = client.call("LookupRoute", message)
        assert status == 0, (name, status)
        got = answer(resp)
        assert got == expected[policy], "%r after %r, policy %s: %r, expected %r" % (
            name, previous, policy, got, expected[policy])
        previous = name
    return previous


def orders(seed_value, rounds):
    """Every request after every other one (all ordered pairs), then random
    sequences: deterministic for a seed."""
    import random
    n = len(REQUESTS)
    out = [i for a in range(n) for b in range(n) if a != b for i in (a, b)]
    rnd = random.Random(seed_value)
    for _ in range(rounds):
        out += [rnd.randrange(n) for _ in range(n)]
    return out


def case_request_pool(binary):
    """Pooled request messages (rpc/message_pool.hh), on one and on two cores
    (the tenants' owners differ, so some lookups are answered on the other
    core): every request follows every other, huge and pooled ones alike."""
    for threads in (1, 2):
        with hl.Server(binary, *RANKING, threads=threads) as srv:
            seed(srv)
            client = hl.GrpcClient(srv.grpc_port)
            check_sequence(client, orders(threads, 20), "none")
            client.close()


def case_policy_push(binary):
    """The shard's remembered names and policy (docs/index.md) across policy
    pushes between lookups on one connection: each answer is the new
    policy's, for the tenant it names and no other."""
    with hl.Server(binary, *RANKING) as srv:
        seed(srv)
        client = hl.GrpcClient(srv.grpc_port)
        previous = None
        for i, policy in enumerate(["none", "chain", "none", "no_affinity", "chain", "no_affinity",
                                    "none"]):
            push_policy(srv, policy)
            # The first lookup after a push repeats the last one before it:
            # the names the shard remembers are this request's.
            previous = check_sequence(client, [0] + orders(i, 2)[:200] + [0], policy,
                                      previous)
        client.close()


if __name__ == "__main__":
    hl.run_cases(globals())
