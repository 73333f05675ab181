// Fleet operations end to end, with real agents whose simulated GPUs fail
// the way hardware does: a GPU reports uncorrectable ECC errors, the fleet
// page shows it unhealthy with the reason, the owner of the slice on it sees
// that it lost its GPU and asks for it again in one click; a platform admin
// drains a host from the fleet page, the owner is told the deadline, the
// slice ends, and the empty host goes into maintenance and back.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startStack, newPage, screenshot, signIn, hydrated, waitFor, looks } from './harness.mjs';

const dir = mkdtempSync(path.join(tmpdir(), 'tessera-e2e-hosts-'));
const hostFile = (name) => {
  const file = path.join(dir, `${name}.toml`);
  writeFileSync(file, `hostname = "${name}"\ncpu_cores = 32\nmemory_gib = 256\nhealth_file = "${name}-faults.toml"\n\n`
    + '[[gpus]]\nmodel = "H100-80GB"\ncount = 1\nmig_enabled = true\n');
  return file;
};
const faults = (name) => path.join(dir, `${name}-faults.toml`);
const mpsHost = () => {
  const file = path.join(dir, 'gpu-ops-mps.toml');
  writeFileSync(file, 'hostname = "gpu-ops-mps"\ncpu_cores = 16\nmemory_gib = 128\n\n[[gpus]]\nmodel = "A30-24GB"\ncount = 1\n');
  return file;
};

describe('fleet operations', () => {
  let stack;
  let token;
  before(async () => {
    stack = await startStack({ hosts: [hostFile('gpu-ops-a'), hostFile('gpu-ops-b'), mpsHost()] });
    token = stack.apiToken('vision');
  });
  after(async () => {
    await stack?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const activeSlice = async () => {
    const made = await stack.api(token, 'POST', '/allocations', { pool: 'h100-mig', shape: { kind: 'mig', profile: '1g.10gb' }, lease_hours: 4 });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    let view;
    await waitFor(async () => {
      view = (await stack.api(token, 'GET', `/allocations/${made.body.id}`)).body;
      return view.state === 'active';
    }, { what: `allocation ${made.body.id} active` });
    return view;
  };

  it('a GPU with ECC errors turns unhealthy, and the owner asks for the slice again elsewhere', async () => {
    const first = await activeSlice();
    const sick = first.host;
    const healthy = sick === 'gpu-ops-a' ? 'gpu-ops-b' : 'gpu-ops-a';
    writeFileSync(faults(sick), '[[gpu]]\nindex = 0\necc_uncorrected = 2\nthrottle = ["hw_thermal_slowdown"]\n');

    // The platform admin sees the verdict and why.
    const admin = await newPage(stack);
    await signIn(stack, admin.page, 'alice', '/fleet');
    await hydrated(admin.page);
    const sickHost = admin.page.locator(`[data-test=host][data-hostname=${sick}]`);
    await waitFor(async () => (await sickHost.locator('[data-test=gpu-health-verdict]').textContent()).trim() === 'unhealthy',
      { what: 'unhealthy GPU on the fleet page' });
    const findings = await sickHost.locator('[data-test=gpu-health-findings]').textContent();
    assert.match(findings, /2 uncorrectable ECC errors since the last reset/);
    assert.match(findings, /thermal slowdown/);
    assert.match(await admin.page.textContent('[data-test=pool][data-pool=h100-mig] [data-test=pool-schedulable]'), /^1 take new slices/);
    // The MIG map draws the tenant's instance to scale and says what still fits.
    const cells = sickHost.locator('[data-test=mig-map-instance]');
    assert.equal(await cells.count(), 1);
    assert.match(await cells.first().textContent(), /1g\.10gb.*vision/);
    assert.equal(await sickHost.locator('[data-test=mig-map-free]').count(), 7);
    // The host's mig-parted config, downloaded from its card, has the instance.
    const parted = await admin.page.request.get(`${stack.appUrl}${await sickHost.locator('[data-test=mig-parted-link]').getAttribute('href')}`);
    assert.equal(parted.status(), 200);
    const partedText = await parted.text();
    for (const part of ['version: v1', 'mig-configs:', `tessera-${sick}:`, 'mig-enabled: true', '1g.10gb: 1']) {
      assert.ok(partedText.includes(part), `${part} in ${partedText}`);
    }
    // An unhealthy GPU takes nothing new, whatever room it has.
    assert.match(await sickHost.locator('[data-test=mig-map-fits]').textContent(), /^Takes no new slices now/);
    const healthyMap = admin.page.locator(`[data-test=host][data-hostname=${healthy}] [data-test=mig-map-fits]`);
    assert.match(await healthyMap.textContent(), /Could start: 1g\.10gb at 0, 1, 2, 3, 4, 5, 6 .*7g\.80gb at 0\./);

    // The owner's slice page says it lost its GPU; one click asks again.
    const { context, page } = await newPage(stack);
    await signIn(stack, page, 'bob', `/t/vision/a/${first.id}`);
    await hydrated(page);
    await waitFor(async () => (await page.locator('[data-test=capacity-lost]').count()) === 1, { what: 'capacity-lost banner' });
    assert.match(await page.textContent('[data-test=capacity-lost]'), /GPU 0 on gpu-ops-\w is unhealthy: 2 uncorrectable ECC errors/);
    await screenshot(page, '40-allocation-capacity-lost');
    await page.click('[data-test=requeue]');
    await page.waitForURL((u) => u.pathname.startsWith('/t/vision/a/') && !u.pathname.endsWith(`/${first.id}`));
    // The page shows the new slice (not the old one while the new loads), active.
    const newId = page.url().split('/').pop();
    await waitFor(async () => (await page.textContent('[data-test=allocation-title]'))?.includes(`#${newId}`)
      && (await page.textContent('.page-head [data-test=state]'))?.trim() === 'active'
      && (await page.locator('[data-test=conn-host]').count()) === 1, { what: 'the new slice active' });
    assert.equal((await page.textContent('[data-test=conn-host]')).trim(), healthy);
    // The old one is released in the same step.
    await waitFor(async () => (await stack.api(token, 'GET', `/allocations/${first.id}`)).body.state === 'released',
      { what: 'the lost slice released' });
    await context.close();
    await admin.context.close();

    await looks(stack, '/fleet', '41-fleet-gpu-unhealthy', async (p) => {
      await p.waitForSelector(`[data-test=host][data-hostname=${sick}] [data-test=gpu-health-findings]`);
    });
    // Repaired: the file is gone, the GPU is healthy again.
    rmSync(faults(sick));
  });

  it('a platform admin drains a host from the fleet page; the owner is told and the slice ends', async () => {
    const slice = (await stack.api(token, 'GET', '/allocations')).body.find((a) => a.state === 'active');
    assert.ok(slice, 'an active slice from the first test');
    const { context, page } = await newPage(stack);
    await signIn(stack, page, 'alice', '/fleet');
    await hydrated(page);
    const host = page.locator(`[data-test=host][data-hostname=${slice.host}]`);
    const operate = async (action, reason, minutes) => {
      await host.locator('[data-test=ops-panel] summary').click();
      await host.locator('[data-test=ops-action]').selectOption(action);
      if (minutes !== undefined) await host.locator('[data-test=ops-deadline]').fill(String(minutes));
      await host.locator('[data-test=ops-reason]').fill(reason);
      await host.locator('[data-test=ops-submit]').click();
    };
    // Maintenance needs the host empty: the form says what to do.
    await operate('maintenance', 'swap the PSU');
    await waitFor(async () => /1 slice still runs there: drain it first/.test(await page.textContent('[data-test=ops-error]') ?? ''),
      { what: 'refusal on the fleet page' });
    await page.reload();
    await hydrated(page);
    await operate('drain', 'rack 4 power work', 90);
    await waitFor(async () => (await host.locator('[data-test=host-ops]').count()) === 1
      && (await host.locator('[data-test=host-ops]').textContent()).trim() === 'draining', { what: 'draining badge' });
    assert.match(await host.locator('[data-test=host-ops-text]').textContent(), /draining, 1 slice ends in 1 h.*by Alice Admin.*rack 4 power work/);
    await screenshot(page, '42-fleet-draining');

    // The owner sees the deadline on the slice.
    const owner = await newPage(stack);
    await signIn(stack, owner.page, 'bob', `/t/vision/a/${slice.id}`);
    await hydrated(owner.page);
    assert.match(await owner.page.textContent('[data-test=drain-notice]'), new RegExp(`Host ${slice.host} is being drained: this slice ends in 1 h.*rack 4 power work`));
    await screenshot(owner.page, '43-allocation-drain-notice');
    await owner.context.close();

    // Drained now: a new deadline of 0 minutes ends the slice at the next tick.
    await page.reload();
    await hydrated(page);
    await operate('drain', 'rack 4 power work, now', 0);
    await waitFor(async () => (await stack.api(token, 'GET', `/allocations/${slice.id}`)).body.state === 'failed',
      { what: 'the drained slice ended' });
    const ended = (await stack.api(token, 'GET', `/allocations/${slice.id}`)).body;
    assert.match(ended.reason, new RegExp(`ended by the drain of host ${slice.host}: rack 4 power work, now`));
    await page.reload();
    await hydrated(page);
    await waitFor(async () => /drained \(empty\)/.test(await host.locator('[data-test=host-ops-text]').textContent()), { what: 'drained host' });
    await operate('maintenance', 'swap the PSU');
    await waitFor(async () => (await host.locator('[data-test=host-ops]').textContent()).trim() === 'maintenance', { what: 'maintenance badge' });
    await screenshot(page, '44-fleet-maintenance');
    // Nothing is placed on it while in maintenance; resumed, it takes slices again.
    await page.reload();
    await hydrated(page);
    await operate('resume', 'PSU replaced');
    await waitFor(async () => (await host.locator('[data-test=host-ops]').count()) === 0, { what: 'back in service' });
    await context.close();
  });

  it('an MPS slice sets its GPU daemon\'s limits, and the device plugin config advertises what its pod asks for', async () => {
    const made = await stack.api(token, 'POST', '/allocations', { pool: 'a30-mps', shape: { kind: 'mps', compute_percent: 25, memory_mib: 6144 }, lease_hours: 2 });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    let view;
    await waitFor(async () => {
      view = (await stack.api(token, 'GET', `/allocations/${made.body.id}`)).body;
      return view.state === 'active';
    }, { what: 'the MPS slice active' });
    const env = Object.fromEntries(view.connection.env);
    assert.equal(env.CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, '25');
    assert.equal(env.CUDA_MPS_PINNED_DEVICE_MEM_LIMIT, '0=6144M');
    assert.equal(view.connection.k8s_resource, 'nvidia.com/gpu.shared');
    // Its processes carry the slice's id: the agent stops them, and only them, at release.
    assert.equal(env.TESSERA_ALLOCATION, String(made.body.id));
    assert.match(view.connection.pod_snippet, new RegExp(`name: TESSERA_ALLOCATION\\n\\s+value: "${made.body.id}"`));
    const { context, page } = await newPage(stack);
    await signIn(stack, page, 'alice', '/fleet');
    await hydrated(page);
    const host = page.locator('[data-test=host][data-hostname=gpu-ops-mps]');
    // The agent applied the daemon defaults the server derived from the grant.
    await waitFor(async () => /MPS default 25 % · 6\.0 GiB/.test((await host.locator('[data-test=gpu-mps]').textContent()) ?? ''),
      { what: 'MPS daemon defaults on the fleet page' });
    const plugin = await page.request.get(`${stack.appUrl}${await host.locator('[data-test=device-plugin-link]').getAttribute('href')}`);
    const text = await plugin.text();
    // renameByDefault: replicas are advertised as nvidia.com/gpu.shared, which the pod snippet requests;
    // as time-slicing replicas, never the plugin's own `mps:` section (its daemon would split the GPU equally).
    for (const part of ['timeSlicing:', 'replicas: 48', 'renameByDefault: true', 'name: nvidia.com/gpu', `- ${view.gpus[0].uuid}`]) {
      assert.ok(text.includes(part), `${part} in ${text}`);
    }
    assert.ok(!text.includes('mps:'), `no mps section in ${text}`);
    assert.match(view.connection.pod_snippet, /nvidia\.com\/gpu\.shared: 1/);
    await context.close();
  });

  it('the fleet page searches its hosts by name and filters them by pool and status, in the URL', async () => {
    const { context, page } = await newPage(stack);
    await signIn(stack, page, 'alice', '/fleet');
    await hydrated(page);
    const shown = async () => page.locator('[data-test=host]').evaluateAll((hosts) => hosts.map((h) => h.dataset.hostname));
    assert.deepEqual(await shown(), ['gpu-ops-a', 'gpu-ops-b', 'gpu-ops-mps']);
    // The page swaps in a fresh fleet every 5 s, but not while a filter is
    // being typed into: what is typed stays.
    await page.fill('[data-test=filter-host]', 'OPS-M');
    await page.waitForTimeout(6_000);
    assert.equal(await page.inputValue('[data-test=filter-host]'), 'OPS-M');
    await Promise.all([page.waitForURL(/q=OPS-M/), page.click('[data-test=filter-apply]')]);
    await waitFor(async () => (await shown()).join() === 'gpu-ops-mps', { what: 'the search applied' });
    assert.match(await page.textContent('[data-test=fleet-total]'), /1–1 of 1 host matching · page 1 of 1/);
    // The fleet's numbers stay the fleet's.
    assert.equal(await page.textContent('[data-test=stat-hosts]'), '3/3');
    await page.goto(`${stack.appUrl}/fleet?pool=h100-mig`);
    await hydrated(page);
    assert.deepEqual(await shown(), ['gpu-ops-a', 'gpu-ops-b']);
    assert.equal(await page.inputValue('[data-test=filter-pool]'), 'h100-mig');
    await page.goto(`${stack.appUrl}/fleet?q=nothing-like-this`);
    await page.waitForSelector('[data-test=fleet-none-match]');
    await Promise.all([page.waitForURL((u) => u.search === ''), page.click('[data-test=filter-clear]')]);
    await waitFor(async () => (await shown()).length === 3, { what: 'the filters cleared' });
    // A bad filter is a clear error, not a broken page.
    await page.goto(`${stack.appUrl}/fleet?status=sick`);
    assert.match(await page.textContent('main'), /status: 'sick' is not one of online, offline, attention/i);
    await context.close();
    await looks(stack, '/fleet?pool=h100-mig', '51-fleet-filtered', async (p) => {
      await p.waitForSelector('[data-test=fleet-filters]');
    });
  });

  it('the REST API drains and resumes for a platform admin only; a tenant token gets a 403', async () => {
    const hosts = (await stack.api(token, 'GET', '/fleet'));
    assert.equal(hosts.status, 403);
    const denied = await stack.api(token, 'POST', '/hosts/1/operations', { action: 'cordon', reason: 'x' });
    assert.equal(denied.status, 403);
  });
});
