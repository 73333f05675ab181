// Read path: how many authenticated list calls the release server answers,
// against an axum hello-world and the server's own /healthz measured in the
// same run. A tenant with 8 slices; `oha` at full speed with 32 connections.
// Prints JSON; fails if any call is answered with an error.
// Usage: node bench/reads-bench.mjs [--seconds 10] [--connections 32] [--slices 8]
import { spawn } from 'node:child_process';
import path from 'node:path';
import { startFleet, arg, until, SLICE } from './fleet.mjs';

const SECONDS = arg('seconds', 10);
const CONNECTIONS = arg('connections', 32);
const SLICES = arg('slices', 8);
const OHA = process.env.OHA || 'oha';
const TARGET = process.env.CARGO_TARGET_DIR || path.join(process.env.HOME, '.cache', 'tessera', 'target');
const HELLO = path.join(TARGET, 'release', 'examples', 'hello');
const HELLO_URL = 'http://127.0.0.1:3951/';

/** oha at full speed for SECONDS; resolves with its JSON summary. */
function oha(url, extra = []) {
  return new Promise((resolve, reject) => {
    const args = ['--no-tui', '--output-format', 'json', '-z', `${SECONDS}s`, '-c', String(CONNECTIONS), ...extra, url];
    const p = spawn(OHA, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    p.stdout.on('data', (d) => (out += d));
    p.on('error', reject);
    p.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`oha exited ${code}`))));
  });
}

const summary = (r) => {
  const statuses = r.statusCodeDistribution || {};
  const kinds = Object.entries(r.errorDistribution || {}).filter(([k]) => !/deadline/i.test(k));
  const ms = (s) => +(s * 1000).toFixed(2);
  return {
    rps: Math.round(r.summary.requestsPerSec),
    p50_ms: ms(r.latencyPercentiles.p50),
    p99_ms: ms(r.latencyPercentiles.p99),
    non_2xx: Object.entries(statuses).filter(([s]) => !s.startsWith('2')).reduce((a, [, n]) => a + n, 0),
    errors: kinds.reduce((a, [, n]) => a + n, 0),
  };
};

const fleet = await startFleet({ hosts: 1 });
const hello = spawn(HELLO, [], { stdio: 'ignore' });
try {
  for (let i = 0; i < SLICES; i++) {
    const r = await fleet.api('POST', '/allocations', SLICE);
    if (r.status !== 201) throw new Error(`slice ${i}: ${r.status} ${JSON.stringify(r.body)}`);
  }
  await until(async () => (await fleet.api('GET', '/allocations')).body.every((a) => a.state === 'active'), 'slices active');
  await until(async () => (await fetch(HELLO_URL)).ok, 'hello-world');
  const auth = ['-H', `authorization: Bearer ${fleet.token}`];
  const result = {
    database: fleet.database,
    seconds: SECONDS,
    connections: CONNECTIONS,
    slices: SLICES,
    hello_world: summary(await oha(HELLO_URL)),
    healthz: summary(await oha(`${fleet.url}/healthz`)),
    list: summary(await oha(`${fleet.url}/api/v1/allocations`, auth)),
  };
  result.list_vs_hello_world = +(result.list.rps / result.hello_world.rps).toFixed(3);
  console.log(JSON.stringify(result, null, 2));
  const failed = ['hello_world', 'healthz', 'list'].some((k) => result[k].non_2xx + result[k].errors > 0);
  if (failed) {
    console.error('reads benchmark: some requests failed');
    process.exitCode = 1;
  }
} finally {
  hello.kill('SIGTERM');
  fleet.stop();
}
