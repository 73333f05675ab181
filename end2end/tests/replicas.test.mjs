// Three server replicas on one PostgreSQL behind a load balancer, real
// agents connecting through it, tenants' clients spread over the replicas:
// a storm of concurrent requests, the timer's leader killed (SIGKILL, a lost
// machine) in the middle of it. No slice is given twice, no quota exceeded,
// one surviving replica takes over the timer and runs it (a host that goes
// silent has its slices marked lost), the queue keeps moving, and every
// agent converges. PostgreSQL only (SQLite serves one process).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startStack, waitFor } from './harness.mjs';

const POSTGRES = process.env.TESSERA_E2E_POSTGRES_URL;
const dir = mkdtempSync(path.join(tmpdir(), 'tessera-e2e-replicas-'));
const HOSTS = ['gpu-rep-a', 'gpu-rep-b', 'gpu-rep-c'];
const hostFile = (name) => {
  const file = path.join(dir, `${name}.toml`);
  writeFileSync(file, `hostname = "${name}"\ncpu_cores = 32\nmemory_gib = 256\n\n[[gpus]]\nmodel = "H100-80GB"\ncount = 1\nmig_enabled = true\n`);
  return file;
};
// A 2g.20gb slice: three fit on an H100. vision's quota (2 GPUs, 160 GiB)
// holds 7 of them, nlp's (1.5 GPUs, 120 GiB) 5; the three GPUs hold 9, and
// in this production pool two tenants never share a GPU.
const SLICE = { pool: 'h100-mig', shape: { kind: 'mig', profile: '2g.20gb' }, lease_hours: 4 };
const QUOTA = { vision: 7, nlp: 5 };
const OPEN = ['placed', 'provisioning', 'active', 'releasing'];
// What counts against a quota: open slices and waiting requests.
const HELD = ['requested', 'queued', 'placed', 'provisioning', 'active'];

describe('server replicas', { skip: POSTGRES ? false : 'needs PostgreSQL (TESSERA_E2E_POSTGRES_URL)' }, () => {
  let stack;
  const tokens = {};
  before(async () => {
    stack = await startStack({
      hosts: HOSTS.map(hostFile),
      replicas: 3,
      env: { TESSERA_AGENTS__LOST_AFTER_SECONDS: '6', TESSERA_LOG: 'info,tower_http=warn,sqlx=warn' },
    });
    tokens.vision = stack.apiToken('vision');
    tokens.nlp = stack.apiToken('nlp');
  });
  after(async () => {
    await stack?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const metrics = async (b) => (await fetch(`${b.url}/metrics`)).text();
  const leaders = async () => {
    const live = stack.replicas.filter((b) => b.alive);
    const texts = await Promise.all(live.map(metrics));
    return live.filter((_, i) => texts[i].split('\n').includes('tessera_scheduler_leader 1'));
  };
  const list = async (tenant) => {
    const live = stack.replicas.find((b) => b.alive);
    const r = await stack.api(tokens[tenant], 'GET', '/allocations', undefined, live.url);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body;
  };
  const mine = async (tenant) => (await list(tenant)).filter((a) => a.pool === SLICE.pool);
  const psql = (sql) => {
    return execFileSync('psql', [stack.databaseUrl, '-tAc', sql]).toString().trim();
  };

  /** What must hold whatever happened, checked in the database itself. */
  const invariants = async () => {
    for (const [tenant, quota] of Object.entries(QUOTA)) {
      const held = (await mine(tenant)).filter((a) => HELD.includes(a.state) && !a.capacity_lost);
      assert.ok(held.length <= quota, `${tenant} holds ${held.length} slices, quota ${quota}`);
    }
    // Per GPU: at most three 2g.20gb instances, at distinct start slices,
    // and one tenant's only.
    const rows = psql(`select host_id, placement::text, tenant_id from allocations where state in (${OPEN.map((s) => `'${s}'`).join(',')})`)
      .split('\n').filter(Boolean).map((l) => l.split('|'));
    const perHost = new Map();
    for (const [host, placement, tenant] of rows) {
      const e = perHost.get(host) ?? { starts: [], tenants: new Set() };
      e.starts.push(JSON.stringify(JSON.parse(placement)));
      e.tenants.add(tenant);
      perHost.set(host, e);
    }
    for (const [host, e] of perHost) {
      assert.ok(e.starts.length <= 3, `host ${host} holds ${e.starts.length} 2g.20gb instances`);
      assert.equal(new Set(e.starts).size, e.starts.length, `two slices share a place on host ${host}: ${e.starts}`);
      assert.equal(e.tenants.size, 1, `host ${host} holds slices of ${e.tenants.size} tenants`);
    }
  };

  it('one replica leads; a storm with the leader killed gives no slice twice and the survivors carry on', async () => {
    await waitFor(async () => (await metrics(stack.replicas[0])).includes(`tessera_hosts{status="online"} ${HOSTS.length}`),
      { what: 'all hosts online', timeoutMs: 60_000 });
    const [leader] = await waitFor(async () => {
      const l = await leaders();
      return l.length === 1 && l;
    }, { what: 'exactly one leader' });

    // The storm: 36 requests at once, 18 per tenant, spread over the three
    // replicas; the leader is killed while they are in flight.
    const send = async (i) => {
      const tenant = i % 2 ? 'nlp' : 'vision';
      let target = stack.replicas[i % 3];
      if (!target.alive) target = stack.replicas.find((b) => b.alive);
      try {
        const r = await stack.api(tokens[tenant], 'POST', '/allocations', SLICE, target.url);
        return { tenant, status: r.status, body: r.body };
      } catch (e) {
        return { tenant, status: 'lost', error: e.message };
      }
    };
    const first = Array.from({ length: 18 }, (_, i) => send(i));
    await new Promise((r) => setTimeout(r, 30));
    const killed = stack.replicas.indexOf(leader);
    await stack.killReplica(killed);
    const second = Array.from({ length: 18 }, (_, i) => send(18 + i));
    const results = await Promise.all([...first, ...second]);
    const by = (s) => results.filter((r) => r.status === s).length;
    console.log(`storm: ${by(201)} accepted, ${by(403)} refused (quota), ${by('lost')} lost with the killed replica; other: `
      + JSON.stringify(results.filter((r) => ![201, 403, 'lost'].includes(r.status))));
    assert.ok(by(201) >= 9, `at least the capacity was accepted: ${by(201)}`);
    for (const r of results) assert.ok([201, 403, 'lost'].includes(r.status), JSON.stringify(r));
    for (const r of results.filter((x) => x.status === 403)) assert.equal(r.body.code, 'quota_exceeded', JSON.stringify(r.body));

    // A survivor takes the lead (the killed one's session lock is gone).
    const [next] = await waitFor(async () => {
      const l = await leaders();
      return l.length === 1 && l;
    }, { what: 'a new leader among the survivors', timeoutMs: 30_000 });
    assert.notEqual(next, leader);

    // Every agent converges: what is not waiting becomes active; nothing fails.
    const settled = async () => {
      const all = [...(await mine('vision')), ...(await mine('nlp'))];
      assert.deepEqual(all.filter((a) => a.state === 'failed').map((a) => a.id), [], 'no slice failed');
      return all.every((a) => ['active', 'queued'].includes(a.state)) && all;
    };
    const after = await waitFor(settled, { what: 'every placed slice active', timeoutMs: 60_000 });
    await invariants();
    // Each tenant sent more than its quota (queued requests count): both
    // quotas are used exactly, so at least 12 - 9 requests wait.
    for (const [tenant, quota] of Object.entries(QUOTA)) {
      assert.equal(after.filter((a) => a.tenant === tenant).length, quota, `${tenant} uses its whole quota`);
    }
    const active = after.filter((a) => a.state === 'active');
    const queued = new Set(after.filter((a) => a.state === 'queued').map((a) => a.id));
    assert.ok(queued.size >= 3, `requests wait for capacity: ${queued.size}`);

    // The queue keeps moving: emptying a GPU on a surviving replica places
    // a waiting request there.
    const perHost = {};
    for (const a of active) (perHost[a.host] ??= []).push(a);
    const [emptied, going] = Object.entries(perHost).sort((x, y) => x[1].length - y[1].length)[0];
    for (const a of going) {
      const r = await stack.api(tokens[a.tenant], 'POST', `/allocations/${a.id}/release`, {}, next.url);
      assert.equal(r.status, 200, JSON.stringify(r.body));
    }
    await waitFor(async () => {
      const all = [...(await mine('vision')), ...(await mine('nlp'))];
      return all.some((a) => queued.has(a.id) && a.state === 'active' && a.host === emptied);
    }, { what: `a waiting request placed on ${emptied} and active`, timeoutMs: 60_000 });
    await invariants();

    // The new leader runs the timer: a host that goes silent has its slices
    // marked lost (after 6 s here).
    const silent = Object.keys(perHost).find((h) => h !== emptied);
    await stack.killAgent(silent);
    await waitFor(async () => {
      const all = [...(await list('vision')), ...(await list('nlp'))];
      const there = all.filter((a) => a.host === silent && OPEN.includes(a.state));
      return there.length > 0 && there.every((a) => a.capacity_lost);
    }, { what: `the slices on ${silent} marked lost by the new leader`, timeoutMs: 60_000 });
    await invariants();
  });
});
