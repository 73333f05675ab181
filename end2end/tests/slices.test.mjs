// Self-service slices end to end: a tenant member requests a MIG slice in the
// browser, watches it become active, copies its MIG UUID; another tenant
// cannot see it; a request beyond capacity queues and starts when the first
// is released. Then the control loop survives a killed agent and a restarted
// server.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { readFile } from 'node:fs/promises';
import { parseAllDocuments } from 'yaml';
import { startStack, newPage, screenshot, signIn, hydrated, waitFor, looks, ROOT } from './harness.mjs';

const host = (name) => path.join(ROOT, 'end2end', 'hosts', `${name}.toml`);

async function waitForState(page, wanted, timeoutMs = 30_000) {
  await waitFor(async () => (await page.textContent('.page-head [data-test=state]'))?.trim() === wanted, {
    timeoutMs,
    what: `allocation state ${wanted}`,
  });
}

describe('self-service slices', () => {
  let stack;
  let first; // the 1g.10gb allocation's page URL
  before(async () => {
    stack = await startStack({ hosts: [host('gpu-h100-e2e')] });
  });
  after(async () => {
    await stack?.stop();
  });

  it('a member requests a 1g.10gb MIG slice, watches it become active and copies its UUID', async () => {
    const { context, page } = await newPage(stack);
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: stack.appUrl });
    await signIn(stack, page, 'bob', '/t/vision');
    await hydrated(page);
    await screenshot(page, '20-tenant-before-request');
    await page.click('[data-test=request-slice]');
    await page.waitForURL(`${stack.appUrl}/t/vision/request`);
    await hydrated(page);
    await page.click('[data-test=pool-choice][data-pool=h100-mig]');
    await page.selectOption('[data-test=profile]', '1g.10gb');
    await page.fill('[data-test=purpose]', 'e2e: notebook for label review');
    // The form checks with tessera-core as you type: a lease beyond the pool's 72 h is refused.
    await page.fill('[data-test=lease-hours]', '100');
    await waitFor(async () => /between 1 and 72 hours/.test(await page.textContent('[data-test=validation]')), { what: 'lease validation' });
    assert.equal(await page.isDisabled('[data-test=submit-request]'), true);
    await page.fill('[data-test=lease-hours]', '4');
    await waitFor(async () => /costs 0\.142 GPU/.test(await page.textContent('[data-test=cost]')), { what: 'quota preview' });
    // Vision may use every priority class in this pool, highest first; the default is preselected.
    const classes = await page.locator('[data-test=priority-class] option').evaluateAll((os) => os.map((o) => o.value));
    assert.deepEqual(classes, ['production-inference', 'interactive', 'standard', 'batch']);
    assert.equal(await page.inputValue('[data-test=priority-class]'), 'standard');
    await page.selectOption('[data-test=priority-class]', 'interactive');
    await screenshot(page, '21-request-form');
    await page.click('[data-test=submit-request]');
    await page.waitForURL(/\/t\/vision\/a\/\d+$/);
    first = page.url();
    assert.equal((await page.textContent('[data-test=priority-class]')).trim(), 'interactive');
    // Live progress, without reloading: placed/provisioning → active.
    await waitForState(page, 'active');
    const device = (await page.textContent('[data-test=conn-device]')).trim();
    assert.match(device, /^MIG-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    assert.match(await page.textContent('[data-test=conn-env]'), new RegExp(`CUDA_VISIBLE_DEVICES=${device}`));
    assert.match(await page.textContent('[data-test=conn-k8s]'), /nvidia\.com\/mig-1g\.10gb: 1/);
    assert.equal((await page.textContent('[data-test=conn-host]')).trim(), 'gpu-h100-e2e');
    // Settled: the page loads itself again on news, not every second.
    let loads = 0;
    const counted = () => { loads += 1; };
    page.on('load', counted);
    await page.waitForTimeout(3_000);
    page.off('load', counted);
    assert.ok(loads <= 1, `the active allocation's page loaded ${loads} times in 3 s`);
    // The button says so once the (asynchronous) copy is done. The page
    // loads itself again when the allocation changes (the last details may
    // arrive just after it became active), which resets the button: click
    // again then.
    await waitFor(async () => {
      if (/Copied/.test(await page.textContent('[data-test=copy-device]'))) return true;
      await page.click('[data-test=copy-device]');
      return false;
    }, { what: 'copied' });
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), device);
    await screenshot(page, '22-allocation-active');

    // Kubernetes: the DRA claim on exactly this slice, copied and parsed.
    const id = first.split('/').pop();
    await waitFor(async () => {
      if (/Copied/.test(await page.textContent('[data-test=copy-claim]'))) return true;
      await page.click('[data-test=copy-claim]');
      return false;
    }, { what: 'claim copied' });
    const copied = await page.evaluate(() => navigator.clipboard.readText());
    const [claim, pod] = parseAllDocuments(copied).map((d) => d.toJS());
    assert.equal(claim.apiVersion, 'resource.k8s.io/v1');
    assert.equal(claim.kind, 'ResourceClaim');
    assert.equal(claim.metadata.name, `tessera-alloc-${id}`);
    assert.equal(claim.metadata.namespace, 'vision');
    const exactly = claim.spec.devices.requests[0].exactly;
    assert.equal(exactly.deviceClassName, 'mig.nvidia.com');
    assert.equal(exactly.selectors[0].cel.expression, `device.attributes['gpu.nvidia.com'].uuid == '${device}'`);
    assert.equal(pod.kind, 'Pod');
    assert.equal(pod.spec.resourceClaims[0].resourceClaimName, claim.metadata.name);
    const term = pod.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0];
    assert.deepEqual(term.matchExpressions[0].values, ['gpu-h100-e2e']);
    assert.equal((await page.textContent('[data-test=claim-apply]')).trim(), `kubectl apply -f tessera-alloc-${id}.yaml`);
    // The download is the same claim.
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('[data-test=claim-download]')]);
    assert.equal(download.suggestedFilename(), `tessera-alloc-${id}.yaml`);
    assert.equal(await readFile(await download.path(), 'utf8'), copied);
    await page.locator('[data-test=claim-yaml]').scrollIntoViewIfNeeded();
    await screenshot(page, '22a-allocation-kubernetes-claim');

    // The agent samples the simulated MIG device and sends it; /metrics has
    // it under the DCGM exporter's name, labelled with the tenant and slice.
    const series = new RegExp(`DCGM_FI_PROF_GR_ENGINE_ACTIVE\\{[^}]*UUID="GPU-[^"]+"[^}]*allocation="${id}"[^}]*tenant="vision"\\} [0-9.]+`);
    await waitFor(async () => series.test(await (await fetch(`${stack.appUrl}/metrics`)).text()), {
      timeoutMs: 30_000,
      what: 'the slice\'s telemetry in /metrics',
    });
    // Its page charts the same telemetry (drawn on the server: no script needed).
    await waitFor(async () => {
      await page.reload();
      return (await page.locator('[data-test=activity-chart] polyline.chart-line').count()) === 2;
    }, { timeoutMs: 30_000, what: 'the activity charts' });
    // The host runs the training profile: busy, 86-96 %.
    const mean = Number((await page.textContent('[data-test=activity-mean]')).match(/^(\d+) % mean$/)[1]);
    assert.ok(mean >= 80 && mean <= 100, `mean ${mean}`);
    await page.locator('[data-test=activity]').scrollIntoViewIfNeeded();
    await screenshot(page, '22b-allocation-activity');
    await looks(stack, new URL(first).pathname, '22c-allocation', (p) => p.waitForSelector('[data-test=activity-chart]'), 'bob');

    // The tenant page lists it with its quota use.
    await page.goto(`${stack.appUrl}/t/vision`);
    const row = page.locator('[data-test=allocation-row]').first();
    assert.match(await row.textContent(), /MIG 1g\.10gb/);
    assert.equal((await row.locator('[data-test=state]').textContent()).trim(), 'active');
    assert.match(await page.textContent('[data-test=quota][data-pool=h100-mig]'), /0\.142 GPU of 2\.000 GPU/);
    await screenshot(page, '23-tenant-with-allocation');
    // The tenant's Kubernetes bundle downloads: its namespace's quota from
    // its quota in force (2 GPUs, 8 slices in the MIG pool).
    const [bundle] = await Promise.all([page.waitForEvent('download'), page.click('[data-test=kubernetes-bundle-link]')]);
    assert.equal(bundle.suggestedFilename(), 'vision-kubernetes.yaml');
    const objects = parseAllDocuments(await readFile(await bundle.path(), 'utf8')).map((d) => d.toJS());
    const quota = objects.find((o) => o.kind === 'ResourceQuota');
    assert.equal(quota.metadata.namespace, 'vision');
    assert.ok(Number(quota.spec.hard['mig.nvidia.com.deviceclass.resource.k8s.io/devices']) > 0, JSON.stringify(quota.spec.hard));
    assert.ok(objects.some((o) => o.kind === 'PriorityClass' && o.metadata.name === 'tessera-interactive'));
    await context.close();

    // The platform admin's fleet page shows which tenant holds the instance.
    const admin = await newPage(stack);
    await signIn(stack, admin.page, 'alice', '/fleet');
    await waitFor(async () => (await admin.page.locator('[data-test=mig-tenant]').allTextContents()).join() === 'vision', { what: 'tenant on the fleet page' });
    assert.match(await admin.page.textContent('[data-test=mig-instance]'), /^1g\.10gb@\d/);
    await screenshot(admin.page, '23b-fleet-shows-the-tenant');
    await admin.context.close();
  });

  it("another tenant's member cannot see it, in the UI or the API", async () => {
    const { context, page } = await newPage(stack);
    await signIn(stack, page, 'dave', '/t/nlp');
    const resp = await page.goto(first);
    assert.equal(resp.status(), 404);
    assert.equal(await page.getAttribute('[data-test=error-panel]', 'data-status'), '404');
    await screenshot(page, '24-other-tenant-404');
    const id = first.split('/').pop();
    const nlp = stack.apiToken('nlp');
    assert.equal((await stack.api(nlp, 'GET', `/allocations/${id}`)).status, 404);
    assert.deepEqual((await stack.api(nlp, 'GET', '/allocations')).body, []);
    await context.close();
  });

  it('a request beyond capacity is queued and becomes active when the first is released', async () => {
    const { context, page } = await newPage(stack);
    await signIn(stack, page, 'bob', '/t/vision/request');
    await hydrated(page);
    await page.click('[data-test=pool-choice][data-pool=h100-mig]');
    await page.selectOption('[data-test=profile]', '7g.80gb');
    await page.fill('[data-test=lease-hours]', '2');
    await page.click('[data-test=submit-request]');
    await page.waitForURL(/\/t\/vision\/a\/\d+$/);
    const second = page.url();
    await waitForState(page, 'queued');
    const status = await page.textContent('[data-test=status-line]');
    assert.match(status, /number 1 in the queue/);
    // When it should start: the first slice's lease end, from the same plan the timer follows.
    assert.match(status, /Expected to start in \d+ (min|h) \(\d{4}-\d\d-\d\d \d\d:\d\d UTC\)/);
    await screenshot(page, '25-allocation-queued');
    // The queued page and the request form in the other three looks.
    for (const [colorScheme, device, viewport] of [
      ['dark', 'desktop', { width: 1280, height: 860 }],
      ['light', 'mobile', { width: 390, height: 844 }],
      ['dark', 'mobile', { width: 390, height: 844 }],
    ]) {
      const look = await newPage(stack, { colorScheme });
      await look.page.setViewportSize(viewport);
      await signIn(stack, look.page, 'bob', new URL(second).pathname);
      await hydrated(look.page);
      assert.match(await look.page.textContent('[data-test=status-line]'), /Expected to start/);
      await screenshot(look.page, `25-allocation-queued-${device}-${colorScheme}`);
      await look.page.goto(`${stack.appUrl}/t/vision/request`);
      await hydrated(look.page);
      await screenshot(look.page, `21-request-form-${device}-${colorScheme}`);
      await look.context.close();
    }

    // Release the first slice from its page.
    const other = await context.newPage();
    await other.goto(first);
    await hydrated(other);
    await other.click('[data-test=release]');
    await waitFor(async () => ['releasing', 'released'].includes((await other.textContent('.page-head [data-test=state]')).trim()), { what: 'release started' });
    await waitForState(other, 'released');
    await screenshot(other, '26-allocation-released');

    // The queued one is placed and provisioned without anyone touching it.
    await waitForState(page, 'active');
    assert.match(await page.textContent('[data-test=conn-device]'), /^MIG-/);
    await screenshot(page, '27-queued-now-active');
    await page.click('[data-test=release]');
    await waitForState(page, 'released');
    await context.close();
  });

  it('the fleet insights show the GPU heat map, the pool filling up and the queue of the day', async () => {
    const { context, page } = await newPage(stack);
    await signIn(stack, page, 'alice', '/fleet');
    await page.click('[data-test=fleet-insights]');
    await page.waitForURL(`${stack.appUrl}/fleet/insights`);
    // The one H100 of the host, with the latest telemetry (drawn on the server).
    await page.locator('[data-test=heatmap]').waitFor();
    const cell = page.locator('[data-test=heat-host][data-host=gpu-h100-e2e] [data-test=heat-cell]');
    assert.equal(await cell.count(), 1);
    const util = await cell.getAttribute('data-util');
    assert.ok(util === '' || (Number(util) >= 0 && Number(util) <= 100), `util ${util}`);
    // Today the pool held the 1g.10gb and then the 7g.80gb for a while.
    const pool = page.locator('[data-test=capacity-pool][data-pool=h100-mig]');
    assert.match(await pool.textContent(), /of 1 GPUs allocated today/);
    // Two requests today, one of which waited for the first to be released.
    assert.match(await page.textContent('[data-test=queue-summary]'), /^2 requests admitted, 1 of them waited for capacity; 0 refused/);
    const day = page.locator('[data-test=queue-day]').first();
    assert.equal((await day.locator('[data-test=queue-requests]').textContent()).trim(), '2');
    assert.equal((await day.locator('[data-test=queue-queued]').textContent()).trim(), '1');
    assert.match((await day.locator('[data-test=queue-p95]').textContent()).trim(), /^(\d+ (s|min)|at once)$/);
    // Another period, and the same figures from the REST API.
    await page.click('[data-test=insights-period] a:has-text("7 days")');
    await page.waitForURL(`${stack.appUrl}/fleet/insights?days=7`);
    await waitFor(async () => (await page.locator('[data-test=insights-period] a[aria-current=page]').textContent()) === '7 days'
      && (await page.locator('[data-test=capacity-pool][data-pool=h100-mig]').count()) === 1, { what: '7-day insights' });
    const api = await page.request.get(`${stack.appUrl}/api/v1/fleet/insights?days=7`);
    assert.equal(api.status(), 200);
    const body = await api.json();
    assert.equal(body.days, 7);
    assert.equal(body.queue.at(-1).requests, 2);
    // Today's share of the GPU is small (minutes of a day) but not nothing.
    const mig = body.pools.find((p) => p.pool === 'h100-mig');
    assert.equal(mig.capacity_gpus, 1);
    assert.ok(mig.days.at(-1).allocated_gpus > 0, JSON.stringify(mig.days.at(-1)));
    assert.equal((await page.request.get(`${stack.appUrl}/api/v1/fleet/insights?days=12`)).status(), 400);
    // The heat map lists hosts as the fleet page does (50 a page, the same
    // filters), in the page and in the API.
    assert.equal(body.heat_matching, 1);
    const none = await (await page.request.get(`${stack.appUrl}/api/v1/fleet/insights?days=7&q=zzz`)).json();
    assert.deepEqual([none.heat.length, none.heat_matching, none.heat_page, none.heat_pages], [0, 0, 1, 1]);
    assert.equal(none.pools.find((p) => p.pool === 'h100-mig').capacity_gpus, 1, 'capacity is the fleet\'s');
    assert.equal((await page.request.get(`${stack.appUrl}/api/v1/fleet/insights?status=bogus`)).status(), 400);
    assert.equal(await page.textContent('[data-test=heat-total]'), '1–1 of 1 host · page 1 of 1');
    await page.fill('[data-test=heat-filters] [data-test=filter-host]', 'no-such-host');
    await page.click('[data-test=heat-filters] [data-test=filter-apply]');
    await page.waitForURL(/\/fleet\/insights\?days=7&q=no-such-host/);
    await page.locator('[data-test=heat-none]').waitFor();
    assert.match(await page.textContent('[data-test=heat-total]'), /of 0 hosts matching/);
    await page.click('[data-test=heat-filters] [data-test=filter-clear]');
    await page.waitForURL(`${stack.appUrl}/fleet/insights?days=7`);
    await page.locator('[data-test=heat-host][data-host=gpu-h100-e2e]').waitFor();
    await screenshot(page, '27b-fleet-insights');
    await context.close();
    // A member is not shown the fleet's insights.
    const member = await newPage(stack);
    await signIn(stack, member.page, 'bob', '/fleet/insights');
    assert.equal(await member.page.getAttribute('[data-test=error-panel]', 'data-status'), '403');
    await member.context.close();
    await looks(stack, '/fleet/insights', '27c-fleet-insights', (p) => p.waitForSelector('[data-test=queue]'));
  });

  it('every step is in the audit log, for admins, filtered and as CSV', async () => {
    const { context, page } = await newPage(stack);
    await signIn(stack, page, 'alice', '/audit?action=allocation.');
    const actions = await page.locator('[data-test=audit-action]').allTextContents();
    for (const a of ['allocation.create', 'allocation.provision', 'allocation.activate', 'allocation.release', 'allocation.end', 'allocation.place']) {
      assert.ok(actions.includes(a), `${a} in ${actions}`);
    }
    assert.ok(actions.every((a) => a.startsWith('allocation.')), String(actions));
    // The action filter suggests every target prefix and every action.
    const names = await page.locator('[data-test=action-names] option').evaluateAll((os) => os.map((o) => o.value));
    for (const n of ['allocation.', 'quota_request.', 'allocation.create', 'quota_request.approve', 'host.enroll']) {
      assert.ok(names.includes(n), `${n} in ${names}`);
    }
    await screenshot(page, '28-audit-log');
    const csv = await page.request.get(`${stack.appUrl}/audit.csv?action=allocation.create`);
    assert.equal(csv.status(), 200);
    const lines = (await csv.text()).trim().split('\n');
    assert.equal(lines[0], 'id,at,actor,tenant,action,target_type,target_id,before,after');
    assert.equal(lines.length, 1 + 2, 'two slices were requested');
    assert.match(lines[1], /Bob Builder <bob@example\.com>,vision,allocation\.create,allocation,/);
    await context.close();

    // A member has no audit log.
    const member = await newPage(stack);
    await signIn(stack, member.page, 'bob', '/audit');
    assert.equal(await member.page.getAttribute('[data-test=error-panel]', 'data-status'), '403');
    await member.context.close();
  });

  it('in a production pool another tenant waits for a GPU of its own, and gets it once the GPU is free', async () => {
    const vision = stack.apiToken('vision');
    const nlp = stack.apiToken('nlp');
    const ask = (token) => stack.api(token, 'POST', '/allocations', { pool: 'h100-mig', shape: { kind: 'mig', profile: '1g.10gb' }, lease_hours: 1 });
    const state = async (token, id) => (await stack.api(token, 'GET', `/allocations/${id}`)).body?.state;
    const v = await ask(vision);
    assert.equal(v.status, 201, JSON.stringify(v.body));
    assert.equal(v.body.state, 'placed');
    // The one H100 has room for six more 1g slices, but it holds vision's.
    const n = await ask(nlp);
    assert.equal(n.status, 201, JSON.stringify(n.body));
    assert.equal(n.body.state, 'queued', JSON.stringify(n.body));
    assert.match(n.body.waiting_for, /other tenants/);
    await waitFor(async () => (await state(vision, v.body.id)) === 'active', { timeoutMs: 30_000, what: 'vision slice active' });
    assert.equal(await state(nlp, n.body.id), 'queued');
    assert.equal((await stack.api(vision, 'POST', `/allocations/${v.body.id}/release`)).status, 200);
    await waitFor(async () => (await state(nlp, n.body.id)) === 'active', { timeoutMs: 30_000, what: 'nlp slice active on the freed GPU' });
    const placed = (await stack.api(nlp, 'GET', `/allocations/${n.body.id}`)).body;
    assert.equal(placed.gpus[0].uuid, v.body.gpus[0].uuid);
    assert.equal((await stack.api(nlp, 'POST', `/allocations/${n.body.id}/release`)).status, 200);
    await waitFor(async () => (await state(nlp, n.body.id)) === 'released', { timeoutMs: 30_000, what: 'nlp slice released' });
  });

  it('a class open to the tenant is kept with the slice; another tenant is told which it may use', async () => {
    const body = { pool: 'h100-mig', shape: { kind: 'mig', profile: '1g.10gb' }, lease_hours: 1, priority_class: 'production-inference' };
    const nlp = stack.apiToken('nlp');
    const held = (await stack.api(nlp, 'GET', '/allocations')).body.length;
    const refused = await stack.api(nlp, 'POST', '/allocations', body);
    assert.equal(refused.status, 400, JSON.stringify(refused.body));
    assert.match(JSON.stringify(refused.body), /not open to your tenant in pool 'h100-mig'; choose one of: interactive, standard, batch/);
    assert.equal((await stack.api(nlp, 'GET', '/allocations')).body.length, held, 'nothing stored');
    const vision = stack.apiToken('vision');
    const made = await stack.api(vision, 'POST', '/allocations', body);
    assert.equal(made.status, 201, JSON.stringify(made.body));
    assert.equal(made.body.priority_class, 'production-inference');
    // Without a class: the default.
    const plain = await stack.api(vision, 'POST', '/allocations', { ...body, priority_class: undefined });
    assert.equal(plain.body.priority_class, 'standard');
    for (const { id } of [made.body, plain.body]) {
      assert.equal((await stack.api(vision, 'POST', `/allocations/${id}/release`)).status, 200);
    }
  });
});

describe('control loop resilience', () => {
  let stack;
  let token;
  before(async () => {
    stack = await startStack({ hosts: [host('gpu-h100-slow')] });
    token = stack.apiToken('vision');
  });
  after(async () => {
    await stack?.stop();
  });

  const request = (profile) => stack.api(token, 'POST', '/allocations', { pool: 'h100-mig', shape: { kind: 'mig', profile }, lease_hours: 1 });
  const get = async (id) => (await stack.api(token, 'GET', `/allocations/${id}`)).body;
  const waitApiState = (id, wanted, timeoutMs = 30_000) => waitFor(async () => (await get(id))?.state === wanted, { timeoutMs, what: `allocation ${id} ${wanted}` });

  it('an agent killed in the middle of provisioning converges after a restart, and nothing leaks', async () => {
    const created = await request('3g.40gb');
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const { id } = created.body;
    // The simulated driver hangs 4 s on the instance; kill the agent meanwhile.
    await waitApiState(id, 'provisioning');
    await stack.killAgent('gpu-h100-slow');
    assert.equal((await get(id)).state, 'provisioning');
    stack.restartAgent('gpu-h100-slow');
    await waitApiState(id, 'active');
    const a = await get(id);
    assert.match(a.connection.env[0][1], /^MIG-/);
    // Released, the instance is gone from the host (the server waits for the agent to say so).
    assert.equal((await stack.api(token, 'POST', `/allocations/${id}/release`)).status, 200);
    await waitApiState(id, 'released');
    // The whole GPU is free again: a 7g.80gb fits at once.
    const whole = await request('7g.80gb');
    assert.equal(whole.body.state, 'placed', JSON.stringify(whole.body));
    await waitApiState(whole.body.id, 'active');
    await stack.api(token, 'POST', `/allocations/${whole.body.id}/release`);
    await waitApiState(whole.body.id, 'released');
  });

  it('a server restart in the middle of a flow loses nothing', async () => {
    const created = await request('1g.10gb');
    assert.equal(created.status, 201);
    const { id } = created.body;
    await stack.restartServer();
    await waitApiState(id, 'active');
    const queuedBehind = await request('7g.80gb');
    assert.equal(queuedBehind.body.state, 'queued');
    // It should start when the 1g.10gb's lease ends (or sooner, if another
    // GPU of the pool frees first), not before now.
    const lease = Date.parse((await get(id)).lease_ends_at);
    const estimate = Date.parse(queuedBehind.body.estimated_start);
    assert.ok(estimate <= lease && estimate > Date.now() - 60_000, JSON.stringify(queuedBehind.body));
    await stack.restartServer();
    assert.equal((await get(queuedBehind.body.id)).state, 'queued');
    assert.equal((await stack.api(token, 'POST', `/allocations/${id}/release`)).status, 200);
    await waitApiState(queuedBehind.body.id, 'active');
    await stack.api(token, 'POST', `/allocations/${queuedBehind.body.id}/release`);
    await waitApiState(queuedBehind.body.id, 'released');
  });
});
