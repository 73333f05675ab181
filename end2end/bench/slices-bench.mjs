// Slice benchmark: a real server, N simulated hosts in ONE agent process (each
// host with its own credential and connection), and clients on the REST API.
//   request → active latency (p50, p99), sequential requests
//   admissions per second with C concurrent clients
// Usage: node bench/slices-bench.mjs [--hosts 100] [--latency 200] [--requests 1000] [--clients 16]
// Set TESSERA_BENCH_DATABASE_URL to run on PostgreSQL.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, writeFileSync, createWriteStream } from 'node:fs';
import { tmpdir, homedir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const TARGET = process.env.CARGO_TARGET_DIR || path.join(homedir(), '.cache', 'tessera', 'target');
const SERVER = path.join(TARGET, 'release', 'tessera-server');
const AGENT = path.join(TARGET, 'release', 'tessera-agent');
const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
};
const HOSTS = arg('hosts', 100);
const LATENCY_N = arg('latency', 200);
const REQUESTS = arg('requests', 1000);
const CLIENTS = arg('clients', 16);
const URL_ = 'http://127.0.0.1:3950';

const dir = mkdtempSync(path.join(tmpdir(), 'tessera-bench-'));
const env = {
  ...process.env,
  TESSERA_DATABASE__URL: process.env.TESSERA_BENCH_DATABASE_URL || `sqlite://${dir}/tessera.db?mode=rwc`,
  TESSERA_LOG: process.env.TESSERA_LOG || 'warn',
};
const config = path.join(ROOT, 'end2end', 'bench', 'tessera-bench.toml');
const cli = (...a) => execFileSync(SERVER, ['--config', config, ...a], { env, stdio: ['ignore', 'pipe', 'ignore'] }).toString().trim();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const children = [];
const start = (name, bin, args) => {
  const c = spawn(bin, args, { env, stdio: ['ignore', 'ignore', 'pipe'] });
  c.stderr.pipe(createWriteStream(path.join(dir, `${name}.log`)));
  children.push(c);
  return c;
};
async function until(check, what, ms = 60_000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    try { if (await check()) return; } catch { /* not yet */ }
    await sleep(100);
  }
  throw new Error(`timed out: ${what}`);
}
const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

try {
  cli('migrate');
  start('server', SERVER, ['--config', config]);
  await until(async () => (await fetch(`${URL_}/readyz`)).ok, 'server');

  // N host files, each enrolled with its own join token; one agent process runs them all.
  const hostsDir = path.join(dir, 'hosts');
  const stateDir = path.join(dir, 'state');
  mkdirSync(hostsDir);
  mkdirSync(stateDir);
  const tokens = cli('create-join-token', '--count', String(HOSTS)).split('\n');
  for (let i = 0; i < HOSTS; i++) {
    const name = `bench-h100-${String(i).padStart(3, '0')}`;
    writeFileSync(path.join(hostsDir, `${name}.toml`),
      `hostname = "${name}"\ncpu_cores = 96\nmemory_gib = 1024\n[[gpus]]\nmodel = "H100-80GB"\ncount = 8\nmig_enabled = true\n`);
    const res = await fetch(`${URL_}/api/agent/v1/enroll`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ join_token: tokens[i], hostname: name }),
    });
    const { credential } = await res.json();
    writeFileSync(path.join(stateDir, `${name}.credential`), credential, { mode: 0o600 });
  }
  start('agent', AGENT, ['--server', URL_, '--backend', 'sim', '--sim-hosts-dir', hostsDir, '--state-dir', stateDir]);
  await until(async () => (await (await fetch(`${URL_}/metrics`)).text()).includes(`tessera_hosts{status="online"} ${HOSTS}`), `${HOSTS} hosts online`);

  const token = cli('create-api-token', '--tenant', 'bench');
  const api = async (method, route, body) => {
    const res = await fetch(`${URL_}/api/v1${route}`, {
      method, headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    return { status: res.status, body: await res.json() };
  };
  const slice = { pool: 'h100-mig', shape: { kind: 'mig', profile: '1g.10gb' }, lease_hours: 1 };

  // 1. Request → active, one at a time.
  const latencies = [];
  const ids = [];
  for (let i = 0; i < LATENCY_N; i++) {
    const t0 = performance.now();
    const { status, body } = await api('POST', '/allocations', slice);
    if (status !== 201) throw new Error(`create: ${status} ${JSON.stringify(body)}`);
    for (;;) {
      const a = (await api('GET', `/allocations/${body.id}`)).body;
      if (a.state === 'active') break;
      if (['failed', 'queued'].includes(a.state)) throw new Error(`allocation ${body.id} ${a.state}: ${a.reason}`);
      await sleep(5);
    }
    latencies.push(performance.now() - t0);
    ids.push(body.id);
  }
  for (const id of ids) await api('POST', `/allocations/${id}/release`);

  // 2. Admissions per second: CLIENTS clients creating REQUESTS slices together.
  let next = 0;
  let placed = 0;
  const t1 = performance.now();
  await Promise.all(Array.from({ length: CLIENTS }, async () => {
    while (next < REQUESTS) {
      next++;
      const { status, body } = await api('POST', '/allocations', slice);
      if (status !== 201) throw new Error(`create: ${status} ${JSON.stringify(body)}`);
      if (body.state === 'placed') placed++;
    }
  }));
  const seconds = (performance.now() - t1) / 1000;
  const result = {
    hosts: HOSTS,
    gpus: HOSTS * 8,
    database: env.TESSERA_DATABASE__URL.split(':')[0],
    request_to_active_ms: { n: LATENCY_N, p50: +pct(latencies, 50).toFixed(1), p99: +pct(latencies, 99).toFixed(1), max: +Math.max(...latencies).toFixed(1) },
    admissions: { requests: REQUESTS, clients: CLIENTS, placed, seconds: +seconds.toFixed(2), per_second: +(REQUESTS / seconds).toFixed(1) },
  };
  console.log(JSON.stringify(result, null, 2));
} finally {
  for (const c of children) c.kill('SIGTERM');
}
