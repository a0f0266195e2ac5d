// @grpc/grpc-js (npm, a client nobody here wrote) against the real server's
// streams (docs/streams.md): StreamCacheEvents subscribers see exactly the
// events of a scripted ingest sequence through their filters, StreamMetrics
// sends /metrics samples, Health/Watch sends the current status first.
//
// Run by meson through `with-server` (--threads 2, --metrics-stream-interval
// 200ms), which sets IC_GRPC_TARGET (client.mjs; exit 77 without node_modules).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cache, health, deadline } from './client.mjs';

// Wall clock in µs, rounded down (lower) or up (upper) to Date's milliseconds.
const nowUs = () => BigInt(Date.now()) * 1000n;
const nowUsUpper = () => nowUs() + 999n;

const publish = (event) =>
  new Promise((resolve, reject) => {
    cache.PublishEvent(event, { deadline: deadline(10000) }, (err, ack) =>
      err ? reject(err) : resolve(ack),
    );
  });

const report = (tenant, model, hashes, ts, stats) =>
  new Promise((resolve, reject) => {
    const call = cache.ReportCacheState({ deadline: deadline(10000) }, (err, ack) =>
      err ? reject(err) : resolve(ack),
    );
    call.write({
      replica_id: 'r1',
      model_id: model,
      tenant_id: tenant,
      hash_scheme: 'vllm-sha256',
      timestamp_us: String(ts),
      prefixes: hashes.map((h) => ({ prefix_hash: Buffer.from(h), token_count: 16 })),
      stats,
    });
    call.end();
  });

// Opens a StreamCacheEvents call; resolves once the server's initial metadata
// says the subscription is registered. collect(n) resolves with the events,
// grouped by tenant, once the "end" sentinel of `n` tenants arrived.
const subscribe = (request) =>
  new Promise((resolve) => {
    const call = cache.StreamCacheEvents(request, { deadline: deadline(60000) });
    const byTenant = {};
    let ends = 0;
    let waiting = null;
    let from = 0n;
    call.on('data', (e) => {
      if (Buffer.from(e.prefix_hash).toString() === 'end') {
        ends += 1;
      } else {
        const ts = BigInt(e.timestamp_us);
        const when = ts >= from && ts <= nowUsUpper() ? 'now' : e.timestamp_us;
        const hash = Buffer.from(e.prefix_hash).toString();
        (byTenant[e.tenant_id] ??= []).push(`${e.type} ${e.model_id} ${hash} ${when}`);
      }
      if (waiting && ends >= waiting.n) waiting.resolve(byTenant);
    });
    call.on('error', () => {});
    call.on('metadata', () =>
      resolve({
        call,
        start: () => {
          from = nowUs();
        },
        collect: (n) =>
          new Promise((res) => {
            waiting = { n, resolve: res };
            if (ends >= n) res(byTenant);
          }),
      }),
    );
  });

const event = (type, tenant, hash = '', ts = 0) => ({
  type,
  replica_id: 'r1',
  model_id: 'm',
  tenant_id: tenant,
  prefix_hash: Buffer.from(hash),
  timestamp_us: String(ts),
});

test('StreamCacheEvents: exactly the events of a scripted sequence, through filters', async () => {
  const a = 'js-team-a';
  const b = 'js-team-b';
  const all = await subscribe({});
  const onlyB = await subscribe({ tenant_id: b });
  const removals = await subscribe({ types: ['PREFIX_EVICTED', 'ALL_CLEARED'] });
  const otherModel = await subscribe({ model_id: 'other' });
  for (const s of [all, onlyB, removals, otherModel]) s.start();

  await report(a, 'm', ['h1', 'h2'], 100);
  await report(b, 'm', ['h3'], 200, { replica_id: 'r1', hit_rate: 0.5 });
  await report(b, 'other', ['h4'], 300);
  await publish(event('PREFIX_EVICTED', a, 'h1'));
  await publish(event('PREFIX_EVICTED', a, 'unknown')); // nothing to remove: no event
  await publish(event('REPLICA_UPDATED', b, '', 400));
  await publish(event('ALL_CLEARED', b));
  await publish(event('PREFIX_ADDED', a, 'h9')); // a no-op: no event
  for (const t of [a, b]) {
    await report(t, 'm', ['end'], 500);
    await publish(event('PREFIX_EVICTED', t, 'end'));
  }
  await report(b, 'other', ['end'], 600);

  const wantB = [
    'PREFIX_ADDED m h3 200',
    'REPLICA_UPDATED m  200',
    'PREFIX_ADDED other h4 300',
    'REPLICA_UPDATED m  400',
    'ALL_CLEARED m  now',
  ];
  assert.deepEqual(await all.collect(4), {
    [a]: ['PREFIX_ADDED m h1 100', 'PREFIX_ADDED m h2 100', 'PREFIX_EVICTED m h1 now'],
    [b]: wantB,
  });
  assert.deepEqual(await onlyB.collect(2), { [b]: wantB });
  assert.deepEqual(await removals.collect(2), {
    [a]: ['PREFIX_EVICTED m h1 now'],
    [b]: ['ALL_CLEARED m  now'],
  });
  assert.deepEqual(await otherModel.collect(1), { [b]: ['PREFIX_ADDED other h4 300'] });
  for (const s of [all, onlyB, removals, otherModel]) s.call.cancel();
});

test('StreamMetrics: samples of /metrics as Metric messages, filtered by names', async () => {
  const names = ['inferencecache_build_info', 'inferencecache_index_entries'];
  const call = cache.StreamMetrics({ names }, { deadline: deadline(30000) });
  const samples = new Map(); // timestamp_us → metrics of that sample
  await new Promise((resolve) => {
    call.on('data', (m) => {
      assert.ok(names.includes(m.name), m.name);
      if (!samples.has(m.timestamp_us)) samples.set(m.timestamp_us, []);
      samples.get(m.timestamp_us).push(m);
      if (samples.size >= 3) resolve();
    });
    call.on('error', () => {});
  });
  call.cancel();
  const first = [...samples.values()][0];
  const info = first.find((m) => m.name === 'inferencecache_build_info');
  assert.equal(info.type, 'gauge');
  assert.equal(info.value, 1);
  assert.ok(info.labels.version.length > 0);
  const entries = first.filter((m) => m.name === 'inferencecache_index_entries');
  assert.ok(entries.every((m) => m.type === 'gauge' && m.labels.model !== undefined));
});

test('Health/Watch: the current status first, then only changes', async () => {
  const call = health.Watch({ service: '' }, { deadline: deadline(10000) });
  const first = await new Promise((resolve) => call.once('data', resolve));
  assert.equal(first.status, 'SERVING');
  let more = 0;
  call.on('data', () => {
    more += 1;
  });
  await new Promise((resolve) => setTimeout(resolve, 500)); // several polls, no change
  assert.equal(more, 0);
  call.on('error', () => {});
  call.cancel();
});

test.after(() => {
  cache.close();
  health.close();
});
