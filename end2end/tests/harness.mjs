// Starts the real stack for end-to-end tests: the OIDC provider (in this
// process), the release server binary, and simulated hosts as real agent
// processes; and a headless Debian Chromium through playwright-core.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, createWriteStream } from 'node:fs';
import { tmpdir, homedir } from 'node:os';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { startIdp } from '../idp/provider.mjs';
import { users, tesseraClient, PASSWORD } from '../idp/users.mjs';

export { PASSWORD };
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const ARTIFACTS = path.join(ROOT, 'end2end', 'artifacts');
const TARGET = process.env.CARGO_TARGET_DIR || path.join(homedir(), '.cache', 'tessera', 'target');
const SERVER_BIN = path.join(TARGET, 'release', 'tessera-server');
export const AGENT_BIN = path.join(TARGET, 'release', 'tessera-agent');
// The fake NVML library and MPS control program an NVML-backend agent runs on.
const FAKE_NVML = path.join(TARGET, 'release', 'libtessera_fake_nvml.so');
const FAKE_MPS_CONTROL = path.join(TARGET, 'release', 'tessera-fake-mps-control');
const SECRET = 'e2e-client-secret';

export async function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

export async function waitFor(check, { timeoutMs = 30_000, intervalMs = 200, what = 'condition' } = {}) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    try {
      const v = await check();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${last.message}` : ''}`);
}

let stacks = 0;
/**
 * A fresh database for one stack: a SQLite file in its directory, or, when
 * TESSERA_E2E_POSTGRES_URL names a PostgreSQL server (any database on it), a
 * new database there, so stacks never see each other's hosts.
 */
function databaseUrl(dir) {
  const admin = process.env.TESSERA_E2E_POSTGRES_URL;
  if (!admin) return `sqlite://${dir}/tessera.db?mode=rwc`;
  stacks += 1;
  const name = `tessera_t_e2e_${process.pid}_${stacks}`;
  execFileSync('psql', [admin, '-qc', `create database ${name}`], { stdio: 'ignore' });
  return `${admin.replace(/\/[^/]*$/, '')}/${name}`;
}

/**
 * A TCP load balancer on `port` in front of `backends` ({ port, alive }):
 * each new connection goes to the next live backend, round robin, the way a
 * load balancer with health checks spreads clients over server replicas.
 */
async function balancer(port, backends) {
  let next = 0;
  const server = net.createServer((client) => {
    const live = backends.filter((b) => b.alive);
    if (live.length === 0) return client.destroy();
    const upstream = net.connect(live[next++ % live.length].port, '127.0.0.1');
    const close = () => { client.destroy(); upstream.destroy(); };
    for (const end of [client, upstream]) { end.on('error', close); end.on('close', close); }
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise((resolve) => server.listen(port, '127.0.0.1', resolve));
  return server;
}

/**
 * Starts IdP, server and agents (one per simulated host file name in
 * demo/hosts; a host given as `{ name, nvml, processes }` runs the agent's
 * NVML backend on the fake NVML library, with the simulated host file
 * `nvml` and the process list `processes`). With `replicas` > 1, that many servers on one database (it
 * must be PostgreSQL) start together behind a load balancer at `appUrl`;
 * agents connect through it. `idpTls` ({ key, cert }) serves the IdP over
 * HTTPS; `clientSecret` is the client secret registered at the IdP and
 * given to the server. An `env` value of `null` unsets that variable.
 */
export async function startStack({ hosts, env: extraEnv = {}, replicas = 1, idpTls, clientSecret = SECRET }) {
  const dir = mkdtempSync(path.join(tmpdir(), 'tessera-e2e-'));
  mkdirSync(ARTIFACTS, { recursive: true });
  const [appPort, idpPort] = [await freePort(), await freePort()];
  const appUrl = `http://127.0.0.1:${appPort}`;
  const idp = await startIdp({ port: idpPort, clients: [tesseraClient(appUrl, clientSecret)], users, tls: idpTls });
  const env = {
    ...process.env,
    TESSERA_SERVER__LISTEN: `127.0.0.1:${appPort}`,
    TESSERA_SERVER__PUBLIC_URL: appUrl,
    TESSERA_SERVER__SITE_ROOT: path.join(ROOT, 'target', 'site'),
    TESSERA_DATABASE__URL: databaseUrl(dir),
    TESSERA_OIDC__ISSUER_URL: idp.issuer,
    TESSERA_OIDC__CLIENT_SECRET: clientSecret,
    TESSERA_AGENTS__REPORT_INTERVAL_SECONDS: '1',
    TESSERA_AGENTS__OFFLINE_AFTER_SECONDS: '3',
    // The tests' webhook receivers listen on loopback, which webhooks may
    // not reach unless the operator allows it.
    TESSERA_WEBHOOKS__ALLOWED_NETWORKS: '["127.0.0.0/8"]',
    // Every browser of the suite signs in from 127.0.0.1.
    TESSERA_LIMITS__SIGN_IN_PER_CLIENT: '600',
    ...extraEnv,
  };
  const config = path.join(ROOT, 'demo', 'tessera.toml');
  const children = [];
  const withoutUnset = (vars) => Object.fromEntries(Object.entries(vars).filter(([, v]) => v !== null && v !== undefined));
  const spawnLogged = (name, cmd, args, extraEnv = {}) => {
    const log = createWriteStream(path.join(ARTIFACTS, `${name}.log`));
    const child = spawn(cmd, args, { env: withoutUnset({ ...env, ...extraEnv }), cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.pipe(log, { end: false });
    child.stderr.pipe(log, { end: false });
    children.push(child);
    return child;
  };
  let server;
  const backends = [];
  let lb;
  if (replicas > 1) {
    for (let i = 0; i < replicas; i++) {
      const port = await freePort();
      const child = spawnLogged(`server-${i}`, SERVER_BIN, ['--config', config], { TESSERA_SERVER__LISTEN: `127.0.0.1:${port}` });
      backends.push({ port, url: `http://127.0.0.1:${port}`, child, alive: true });
    }
    for (const b of backends) await waitFor(async () => (await fetch(`${b.url}/readyz`)).ok, { what: `replica ${b.url} readiness` });
    lb = await balancer(appPort, backends);
  } else {
    server = spawnLogged('server', SERVER_BIN, ['--config', config]);
  }
  await waitFor(async () => (await fetch(`${appUrl}/readyz`)).ok, { what: 'server readiness' });

  // Hosts are names of demo/hosts files, paths to other host files, or
  // NVML hosts on the fake library.
  const hostFile = (host) => (host.includes('/') ? host : path.join(ROOT, 'demo', 'hosts', `${host}.toml`));
  const hostName = (host) => (typeof host === 'object' ? host.name : path.basename(host, '.toml'));
  const common = ['--server', appUrl, '--state-dir', path.join(dir, 'agents'), '--telemetry-interval-seconds', '2', '--telemetry-send-seconds', '2'];
  const agentArgs = (host) => (typeof host === 'object'
    ? [...common, '--backend', 'nvml', '--hostname', host.name, '--nvml-library', FAKE_NVML, '--mps-control', FAKE_MPS_CONTROL,
      '--mps-pipe-root', path.join(dir, 'mps', host.name), '--stop-grace-seconds', '2']
    : [...common, '--backend', 'sim', '--sim-host', hostFile(host)]);
  const agentEnv = (host) => (typeof host === 'object'
    ? { TESSERA_FAKE_NVML_HOST: host.nvml, TESSERA_FAKE_NVML_STATE: path.join(dir, `${host.name}-nvml-state.json`), TESSERA_FAKE_NVML_PROCESSES: host.processes }
    : {});
  const cli = (...args) => execFileSync(SERVER_BIN, ['--config', config, ...args], { env: withoutUnset(env), cwd: ROOT, stdio: ['ignore', 'pipe', 'ignore'] })
    .toString()
    .trim();
  const agents = new Map();
  for (const host of hosts) {
    const token = cli('create-join-token', '--description', `e2e ${hostName(host)}`);
    // The token goes in the environment, not on the command line (visible in ps).
    agents.set(hostName(host), spawnLogged(`agent-${hostName(host)}`, AGENT_BIN, agentArgs(host), { ...agentEnv(host), TESSERA_JOIN_TOKEN: token }));
  }
  const exited = (c) => new Promise((r) => (c.exitCode !== null || c.signalCode !== null ? r() : c.once('exit', r)));

  let browser;
  try {
    browser = await chromium.launch({
      executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
        '--disable-component-update', '--disable-sync'],
    });
  } catch (e) {
    // Leave nothing running behind a stack that did not start.
    for (const c of children) c.kill('SIGKILL');
    lb?.close();
    await idp.close();
    throw e;
  }

  return {
    appUrl,
    databaseUrl: env.TESSERA_DATABASE__URL,
    idp,
    browser,
    agents,
    /** A tenant API token, created with the server's command line. */
    apiToken: (tenant) => cli('create-api-token', '--tenant', tenant, '--name', 'e2e'),
    /** The server's command line (`create-join-token`, ...), its output. */
    cli,
    /** Starts an agent process (logged to artifacts/`name`.log) with the stack's environment and `extraEnv`. */
    spawnAgent: (name, args, agentEnv = {}) => spawnLogged(name, AGENT_BIN, args, agentEnv),
    /** The stack's scratch folder. */
    dir,
    /** Kills a host's agent process (SIGKILL: no chance to clean up). */
    async killAgent(host) {
      const c = agents.get(host);
      c.kill('SIGKILL');
      await exited(c);
    },
    /** Starts a host's agent again; it reuses its saved credential. */
    restartAgent(host) {
      const file = hosts.find((h) => hostName(h) === host);
      agents.set(host, spawnLogged(`agent-${host}-restarted`, AGENT_BIN, agentArgs(file), agentEnv(file)));
    },
    /** Stops the server (SIGTERM) and starts it again on the same database,
     * with `changedEnv` on top of its environment (`null` unsets). */
    async restartServer(changedEnv = {}) {
      server.kill('SIGTERM');
      await exited(server);
      server = spawnLogged('server-restarted', SERVER_BIN, ['--config', config], changedEnv);
      await waitFor(async () => (await fetch(`${appUrl}/readyz`)).ok, { what: 'server readiness after restart' });
    },
    /** The server replicas ({ url, alive, child }), with `replicas` > 1. */
    replicas: backends,
    /** Kills replica `i` (SIGKILL: a lost machine) and takes it out of the balancer. */
    async killReplica(i) {
      backends[i].alive = false;
      backends[i].child.kill('SIGKILL');
      await exited(backends[i].child);
    },
    /** Calls the REST API with a token (at `base`: a replica's URL; the balancer by default). */
    async api(token, method, route, body, base = appUrl) {
      const res = await fetch(`${base}/api/v1${route}`, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
        body: body ? JSON.stringify(body) : undefined,
      });
      return { status: res.status, body: await res.json().catch(() => null) };
    },
    async stop() {
      await browser.close().catch(() => {});
      for (const c of children) c.kill('SIGTERM');
      await Promise.all(children.map(exited));
      lb?.close();
      await idp.close();
    },
  };
}

/** A fresh browser context (no cookies) with a page. */
export async function newPage(stack, { colorScheme = 'light' } = {}) {
  const context = await stack.browser.newContext({ viewport: { width: 1280, height: 860 }, colorScheme });
  const page = await context.newPage();
  // Browser-side errors (a failed hydration, say) go to the artifacts.
  const log = createWriteStream(path.join(ARTIFACTS, 'browser-console.log'), { flags: 'a' });
  page.on('pageerror', (e) => log.write(`[pageerror] ${page.url()} ${e.stack || e.message}\n`));
  page.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warning') log.write(`[${m.type()}] ${page.url()} ${m.text()}\n`);
  });
  return { context, page };
}

export async function screenshot(page, name) {
  await page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });
}

/** Screenshots of a page in light and dark, desktop and mobile, signed in
 * as `user` (a platform admin by default), once `ready` says it is. */
export async function looks(stack, url, name, ready = async () => {}, user = 'alice') {
  for (const colorScheme of ['light', 'dark']) {
    const { context, page } = await newPage(stack, { colorScheme });
    await signIn(stack, page, user, url);
    await hydrated(page);
    await ready(page);
    await screenshot(page, `${name}-${colorScheme}-desktop`);
    await page.setViewportSize({ width: 390, height: 844 });
    await screenshot(page, `${name}-${colorScheme}-mobile`);
    await context.close();
  }
}

/** Fills the IdP's login form (the page must be on it). */
export async function signInAtIdp(page, username, password = PASSWORD) {
  await page.waitForSelector('#username');
  await page.fill('#username', username);
  await page.fill('#password', password);
  await Promise.all([page.waitForLoadState('load'), page.click('#sign-in')]);
}

/** Goes to `path`, signs in at the IdP as `username`, and waits to be back. */
export async function signIn(stack, page, username, targetPath = '/') {
  await page.goto(`${stack.appUrl}${targetPath}`);
  await signInAtIdp(page, username);
  await page.waitForURL((u) => u.origin === stack.appUrl);
}

/**
 * Waits until the WASM has hydrated the page. A page that does not hydrate in
 * 20 s is reloaded once (a stalled bundle fetch on a loaded machine); one that
 * fails twice is a real failure. Browser errors are in artifacts/browser-console.log.
 */
export async function hydrated(page) {
  const selector = 'body[data-hydrated="true"]';
  try {
    await page.waitForSelector(selector, { state: 'attached', timeout: 20_000 });
  } catch {
    console.warn(`not hydrated after 20 s, reloading once: ${page.url()}`);
    await page.reload();
    await page.waitForSelector(selector, { state: 'attached', timeout: 20_000 });
  }
}
