// @grpc/grpc-js (npm, a client nobody here wrote) against the real
// inferencecache-server: LookupRoute, a 1,000-message ReportCacheState client
// stream and the health check (docs/contract.md "RPCs", "Identity").
//
// Run by meson through `with-server`, which starts the server on free loopback
// ports and sets IC_GRPC_TARGET (client.mjs; exit 77 without node_modules).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { grpc, target, credentials, cache, health, deadline } from './client.mjs';

// Promise wrapper for a unary call; rejects with the grpc-js ServiceError.
const unary = (client, method, request) =>
  new Promise((resolve, reject) => {
    client[method](request, { deadline: deadline(5000) }, (err, response) =>
      err ? reject(err) : resolve(response),
    );
  });

test('LookupRoute on a cold index: NO_HINT, no replica scores, adapter echoed', async () => {
  const response = await unary(cache, 'LookupRoute', {
    model_id: 'llama-3-8b',
    tenant_id: 'team-a',
    hash_scheme: 'vllm-sha256',
    prefix_hash: Buffer.from([1, 2, 3, 4, 5, 6, 7, 8]),
    prefix_token_count: 64,
    adapter_id: 'lora-7',
  });
  assert.equal(response.reason_code, 'NO_HINT');
  assert.deepEqual(response.replica_scores, []);
  assert.deepEqual(response.token_ids, []);
  assert.equal(response.adapter_id, 'lora-7');
  assert.ok(Number(response.lookup_latency_us) >= 0);
});

test('LookupRoute for the reserved tenant: NO_HINT with latency 0', async () => {
  const response = await unary(cache, 'LookupRoute', {
    model_id: 'llama-3-8b',
    tenant_id: 'inferencecache.io/probe',
    hash_scheme: 'vllm-sha256',
    prefix_hash: Buffer.from('abc'),
  });
  assert.equal(response.reason_code, 'NO_HINT');
  assert.deepEqual(response.replica_scores, []);
  assert.equal(response.lookup_latency_us, '0');
});

test('ReportCacheState: a client stream of 1,000 updates is acked', async () => {
  const ack = await new Promise((resolve, reject) => {
    const call = cache.ReportCacheState({ deadline: deadline(20000) }, (err, response) =>
      err ? reject(err) : resolve(response),
    );
    for (let i = 0; i < 1000; i++) {
      call.write({
        replica_id: `replica-${i % 8}`,
        model_id: 'llama-3-8b',
        tenant_id: 'inferencecache.io/probe', // the reserved tenant: dropped, still acked
        hash_scheme: 'vllm-sha256',
        timestamp_us: String(1_700_000_000_000_000 + i),
        prefixes: [
          {
            prefix_hash: Buffer.from(`prefix-${i}`),
            token_count: 16,
            block_hashes: [Buffer.from(`block-${i}`)],
            block_token_counts: [16],
            tier: 'CACHE_TIER_T1',
          },
        ],
        stats: { replica_id: `replica-${i % 8}`, hit_rate: 0.5, pressure: 0.1 },
      });
    }
    call.end();
  });
  assert.equal(ack.accepted, true);
});

test('grpc.health.v1.Health/Check: SERVING for "" and the InferenceCache service', async () => {
  for (const service of ['', 'inferencecache.v1alpha1.InferenceCache']) {
    const response = await unary(health, 'Check', { service });
    assert.equal(response.status, 'SERVING', `service "${service}"`);
  }
});

test('an unknown method is UNIMPLEMENTED', async () => {
  const client = new grpc.Client(target, credentials);
  const err = await new Promise((resolve) => {
    client.makeUnaryRequest(
      '/inferencecache.v1alpha1.InferenceCache/NoSuchMethod',
      (arg) => arg,
      (buf) => buf,
      Buffer.alloc(0),
      { deadline: deadline(5000) },
      (e) => resolve(e),
    );
  });
  client.close();
  assert.ok(err, 'expected an error');
  assert.equal(err.code, grpc.status.UNIMPLEMENTED);
});

test.after(() => {
  cache.close();
  health.close();
});
