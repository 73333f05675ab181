// Load test: the release server with N simulated hosts reporting, while `oha`
// lists allocations and creates them at fixed rates for a few minutes, with a
// tenant API token. Prints oha's figures (p50/p99, errors) as JSON.
// Usage: node bench/load-bench.mjs [--hosts 100] [--seconds 120] [--list-rps 50] [--create-rps 5]
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { startFleet, arg, SLICE } from './fleet.mjs';

const HOSTS = arg('hosts', 100);
const SECONDS = arg('seconds', 120);
const LIST_RPS = arg('list-rps', 50);
const CREATE_RPS = arg('create-rps', 5);
const OHA = process.env.OHA || 'oha';

/** Runs oha for SECONDS at `rps`; resolves with its JSON summary. */
function oha(url, rps, extra) {
  return new Promise((resolve, reject) => {
    const args = ['--no-tui', '--output-format', 'json', '-z', `${SECONDS}s`, '-q', String(rps), '-c', '8', ...extra, url];
    const p = spawn(OHA, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    p.stdout.on('data', (d) => (out += d));
    p.on('error', reject);
    p.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`oha exited ${code}`))));
  });
}

// Requests still in flight when the run's time is up are cut off by oha
// ("aborted due to deadline"): not answers, so not errors of the server.
const cutOff = (kind) => /deadline/i.test(kind);

const summary = (name, r) => {
  const kinds = r.errorDistribution || {};
  const errors = Object.entries(kinds).filter(([k]) => !cutOff(k)).reduce((a, [, n]) => a + n, 0);
  const cut_off = Object.entries(kinds).filter(([k]) => cutOff(k)).reduce((a, [, n]) => a + n, 0);
  const statuses = r.statusCodeDistribution || {};
  const non2xx = Object.entries(statuses).filter(([s]) => !s.startsWith('2')).reduce((a, [, n]) => a + n, 0);
  const ms = (s) => +(s * 1000).toFixed(1);
  return {
    name,
    requests: Object.values(statuses).reduce((a, b) => a + b, 0),
    rps: +r.summary.requestsPerSec.toFixed(1),
    p50_ms: ms(r.latencyPercentiles.p50),
    p99_ms: ms(r.latencyPercentiles.p99),
    max_ms: ms(r.summary.slowest),
    errors,
    cut_off_at_end: cut_off,
    error_kinds: kinds,
    non_2xx: non2xx,
    statuses,
  };
};

const fleet = await startFleet({ hosts: HOSTS });
try {
  const body = path.join(fleet.dir, 'slice.json');
  writeFileSync(body, JSON.stringify(SLICE));
  const auth = ['-H', `authorization: Bearer ${fleet.token}`];
  const [list, create] = await Promise.all([
    oha(`${fleet.url}/api/v1/allocations`, LIST_RPS, auth),
    oha(`${fleet.url}/api/v1/allocations`, CREATE_RPS, [...auth, '-m', 'POST', '-T', 'application/json', '-D', body]),
  ]);
  const result = {
    hosts: HOSTS,
    gpus: HOSTS * 8,
    database: fleet.database,
    seconds: SECONDS,
    list: summary('GET /api/v1/allocations', list),
    create: summary('POST /api/v1/allocations', create),
  };
  console.log(JSON.stringify(result, null, 2));
  if (result.list.errors + result.list.non_2xx + result.create.errors + result.create.non_2xx > 0) {
    console.error('load test: some requests failed');
    process.exitCode = 1;
  }
} finally {
  fleet.stop();
}
