// A benchmark fleet: the release server on its own database and N simulated
// hosts in ONE agent process (each host with its own credential and
// connection). Shared by the slice and load benchmarks.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, writeFileSync, createWriteStream } from 'node:fs';
import { tmpdir, homedir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const TARGET = process.env.CARGO_TARGET_DIR || path.join(homedir(), '.cache', 'tessera', 'target');
const SERVER = path.join(TARGET, 'release', 'tessera-server');
const AGENT = path.join(TARGET, 'release', 'tessera-agent');
export const URL_ = 'http://127.0.0.1:3950';

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
};
export const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
export async function until(check, what, ms = 60_000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    try { if (await check()) return; } catch { /* not yet */ }
    await sleep(100);
  }
  throw new Error(`timed out: ${what}`);
}

/** Starts the server and `hosts` simulated H100 hosts; resolves when all are online. */
export async function startFleet({ hosts }) {
  const dir = mkdtempSync(path.join(tmpdir(), 'tessera-bench-'));
  const env = {
    ...process.env,
    TESSERA_DATABASE__URL: process.env.TESSERA_BENCH_DATABASE_URL || `sqlite://${dir}/tessera.db?mode=rwc`,
    TESSERA_LOG: process.env.TESSERA_LOG || 'warn',
  };
  const config = path.join(ROOT, 'end2end', 'bench', 'tessera-bench.toml');
  const cli = (...a) => execFileSync(SERVER, ['--config', config, ...a], { env, stdio: ['ignore', 'pipe', 'ignore'] }).toString().trim();
  const children = [];
  const start = (name, bin, args) => {
    const c = spawn(bin, args, { env, stdio: ['ignore', 'ignore', 'pipe'] });
    c.stderr.pipe(createWriteStream(path.join(dir, `${name}.log`)));
    children.push(c);
    return c;
  };
  const stop = () => { for (const c of children) c.kill('SIGTERM'); };
  let server;
  let agent;
  try {
    cli('migrate');
    // TESSERA_BENCH_SERVER_PREFIX: a profiler to run the server under (e.g.
    // `heaptrack -o /tmp/server`); the CPU and memory figures are then the
    // profiler's process, not the server's.
    const prefix = (process.env.TESSERA_BENCH_SERVER_PREFIX || '').split(' ').filter(Boolean);
    server = prefix.length
      ? start('server', prefix[0], [...prefix.slice(1), SERVER, '--config', config])
      : start('server', SERVER, ['--config', config]);
    await until(async () => (await fetch(`${URL_}/readyz`)).ok, 'server');
    const hostsDir = path.join(dir, 'hosts');
    const stateDir = path.join(dir, 'state');
    mkdirSync(hostsDir);
    mkdirSync(stateDir);
    const tokens = cli('create-join-token', '--count', String(hosts)).split('\n');
    for (let i = 0; i < hosts; i++) {
      const name = `bench-h100-${String(i).padStart(3, '0')}`;
      writeFileSync(path.join(hostsDir, `${name}.toml`),
        `hostname = "${name}"\ncpu_cores = 96\nmemory_gib = 1024\n[[gpus]]\nmodel = "H100-80GB"\ncount = 8\nmig_enabled = true\n`);
      const res = await fetch(`${URL_}/api/agent/v1/enroll`, {
        method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ join_token: tokens[i], hostname: name }),
      });
      if (!res.ok) throw new Error(`enrol ${name}: ${res.status} ${await res.text()}`);
      const { credential } = await res.json();
      writeFileSync(path.join(stateDir, `${name}.credential`), credential, { mode: 0o600 });
    }
    agent = start('agent', AGENT, ['--server', URL_, '--backend', 'sim', '--sim-hosts-dir', hostsDir, '--state-dir', stateDir]);
    await until(async () => (await (await fetch(`${URL_}/metrics`)).text()).includes(`tessera_hosts{status="online"} ${hosts}`), `${hosts} hosts online`, Math.max(60_000, hosts * 40));
  } catch (e) {
    stop();
    throw e;
  }
  const token = cli('create-api-token', '--tenant', 'bench');
  const api = async (method, route, body) => {
    const res = await fetch(`${URL_}/api/v1${route}`, {
      method, headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    return { status: res.status, body: await res.json() };
  };
  return { url: URL_, dir, env, cli, token, api, stop, server, agent, database: env.TESSERA_DATABASE__URL.split(':')[0] };
}

/** One MIG slice of the bench pool. */
export const SLICE = { pool: 'h100-mig', shape: { kind: 'mig', profile: '1g.10gb' }, lease_hours: 1 };
