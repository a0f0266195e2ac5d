// The @grpc/grpc-js clients of the node tests: the InferenceCache and Health
// stubs for the server `with-server` started (IC_GRPC_TARGET), from the
// protos the build compiles. Exits 77 (meson: skipped) when node_modules is
// missing: tools/install-deps.sh installs it with `npm ci`.
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export let grpc;
let protoLoader;
try {
  grpc = await import('@grpc/grpc-js');
  protoLoader = await import('@grpc/proto-loader');
} catch (err) {
  console.error(`skipped: @grpc/grpc-js not installed (run tools/install-deps.sh): ${err.message}`);
  process.exit(77);
}

export const target = process.env.IC_GRPC_TARGET;
if (!target) {
  console.error('IC_GRPC_TARGET is not set (run through with-server)');
  process.exit(1);
}

// gRPC's health.proto is not in the repository: meson passes the grpc-proto
// folder the build compiled it from (proto/meson.build).
const grpcProtoDir = process.env.IC_GRPC_PROTO_DIR;
if (!grpcProtoDir) {
  console.error('IC_GRPC_PROTO_DIR is not set (run through meson test)');
  process.exit(1);
}
const here = path.dirname(fileURLToPath(import.meta.url));
const protoRoot = path.resolve(here, '../../../proto');
const definition = protoLoader.loadSync(
  ['inferencecache/v1alpha1/inferencecache.proto', 'grpc/health/v1/health.proto'],
  { includeDirs: [protoRoot, grpcProtoDir], keepCase: true, longs: String, enums: String, defaults: true },
);
const loaded = grpc.loadPackageDefinition(definition);
export const credentials = grpc.credentials.createInsecure();
export const cache = new loaded.inferencecache.v1alpha1.InferenceCache(target, credentials);
export const health = new loaded.grpc.health.v1.Health(target, credentials);

// A deadline `ms` milliseconds from now.
export const deadline = (ms) => new Date(Date.now() + ms);
