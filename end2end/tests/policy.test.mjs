// Pools and tenants edited in the browser by a platform admin: a tenant
// created from the form grants its group's members their role at their next
// sign-in; a pool change that would move a GPU with a slice on it is
// reviewed first (which slice must end), planned with a drain, and can be
// called off; a new pool is created from the form.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { startStack, newPage, screenshot, signIn, hydrated, waitFor, looks, ROOT } from './harness.mjs';

describe('pools and tenants in the browser', () => {
  let stack;
  let token;
  before(async () => {
    stack = await startStack({ hosts: [path.join(ROOT, 'end2end', 'hosts', 'gpu-h100-e2e.toml')] });
    token = stack.apiToken('vision');
  });
  after(async () => {
    await stack?.stop();
  });

  it('a tenant created in the browser gives its group members a role at their next sign-in', async () => {
    const { context, page } = await newPage(stack);
    await signIn(stack, page, 'alice', '/admin/tenants');
    await hydrated(page);
    await page.click('[data-test=new-tenant] summary');
    const form = page.locator('[data-test=new-tenant]');
    await form.locator('[data-test=tenant-slug]').fill('robotics');
    await form.locator('[data-test=tenant-name]').fill('Robotics');
    await form.locator('[data-test=tenant-cost-centre]').fill('CC-77');
    await form.locator('[data-test=tenant-member-groups]').fill('nlp-team');
    await form.locator('[data-test=save-tenant]').click();
    await page.waitForSelector('[data-test=tenant-saved]');
    const row = page.locator('[data-test=tenant-row][data-tenant=robotics]');
    await row.waitFor();
    assert.equal((await row.locator('[data-test=member-groups]').textContent()).trim(), 'nlp-team');
    // No namespace set: its pods run in one named like the slug.
    assert.equal((await row.locator('[data-test=namespaces]').textContent()).trim(), 'robotics');

    // A mistake is refused with the field named, and nothing changes (the
    // form is still open).
    await form.locator('[data-test=tenant-slug]').fill('robotics');
    await form.locator('[data-test=tenant-name]').fill('Again');
    await form.locator('[data-test=save-tenant]').click();
    const err = page.locator('[data-test=form-error]');
    await err.waitFor();
    assert.match(await err.textContent(), /already a tenant 'robotics'/i);

    // Dave (nlp-team) now sees the tenant after signing in.
    const dave = await newPage(stack);
    await signIn(stack, dave.page, 'dave', '/');
    await hydrated(dave.page);
    await dave.page.waitForSelector('[data-test=nav-tenant][href="/t/robotics"]');
    await dave.context.close();

    // Renaming it and mapping it to two Kubernetes namespaces is audited;
    // a namespace of another tenant is refused, naming whose it is.
    await row.locator('[data-test=edit-tenant] summary').click();
    await row.locator('[data-test=tenant-namespaces]').fill('vision, robotics-batch');
    await row.locator('[data-test=save-tenant]').click();
    const taken = page.locator('[data-test=form-error]');
    await waitFor(async () => /namespace 'vision' belongs to tenant 'vision'/i.test(await taken.textContent()), { what: 'namespace refused' });
    assert.equal((await row.locator('[data-test=namespaces]').textContent()).trim(), 'robotics', 'nothing changed');
    if (!(await row.locator('[data-test=edit-tenant]').evaluate((d) => d.open))) {
      await row.locator('[data-test=edit-tenant] summary').click();
    }
    await row.locator('[data-test=tenant-name]').fill('Robotics Lab');
    await row.locator('[data-test=tenant-namespaces]').fill('robotics, robotics-batch');
    await row.locator('[data-test=save-tenant]').click();
    await waitFor(async () => (await row.textContent()).includes('Robotics Lab'), { what: 'renamed tenant' });
    assert.equal((await row.locator('[data-test=namespaces]').textContent()).trim(), 'robotics, robotics-batch');
    // Its Kubernetes bundle has a quota and limits in each namespace.
    const res = await fetch(`${stack.appUrl}/api/v1/tenants/robotics/kubernetes`, {
      headers: { authorization: `Bearer ${stack.apiToken('robotics')}`, accept: 'application/json' },
    });
    assert.equal(res.status, 200);
    const list = await res.json();
    assert.equal(list.kind, 'List');
    const quotas = list.items.filter((o) => o.kind === 'ResourceQuota').map((o) => o.metadata.namespace);
    assert.deepEqual(quotas, ['robotics', 'robotics-batch']);
    await page.goto(`${stack.appUrl}/audit?action=tenant.`);
    await hydrated(page);
    const audit = await page.locator('main').textContent();
    assert.match(audit, /tenant\.update/);
    assert.match(audit, /tenant\.create/);
    await context.close();
    await looks(stack, '/admin/tenants', 'admin-tenants');
  });

  it('a pool change that moves a busy GPU is reviewed, planned with a drain, and called off', async () => {
    const made = await stack.api(token, 'POST', '/allocations', { pool: 'h100-mig', shape: { kind: 'mig', profile: '1g.10gb' }, lease_hours: 4 });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    await waitFor(async () => (await stack.api(token, 'GET', `/allocations/${made.body.id}`)).body.state === 'active',
      { what: 'active slice' });

    const { context, page } = await newPage(stack);
    await signIn(stack, page, 'alice', '/admin/pools');
    await hydrated(page);
    const card = page.locator('[data-test=pool][data-pool=h100-mig]');
    await card.locator('[data-test=edit-pool] summary').click();
    await card.locator('[data-test=pool-sharing-input]').selectOption('exclusive');
    await card.locator('[data-test=pool-reason]').fill('whole GPUs for the training push');
    await card.locator('[data-test=review-pool]').click();
    const review = page.locator('[data-test=pool-review]');
    await review.waitFor();
    assert.match(await review.locator('[data-test=review-changes]').textContent(), /sharing\s*mig\s*exclusive/);
    const drain = await review.locator('[data-test=review-drain]').textContent();
    assert.match(drain, /1 slice must end first/);
    assert.match(drain, new RegExp(`#${made.body.id} MIG 1g.10gb \\(vision\\)`));
    await screenshot(page, 'admin-pool-review');
    // Reviewing changed nothing.
    assert.equal((await stack.api(token, 'GET', `/allocations/${made.body.id}`)).body.state, 'active');

    await review.locator('[data-test=apply-pool]').click();
    const planned = card.locator('[data-test=planned-change]');
    await planned.waitFor();
    assert.match(await planned.textContent(), /whole GPUs for the training push/);
    assert.match(await planned.textContent(), /Waiting for 1 slice/);
    // The owner is told the slice is being drained.
    const slice = (await stack.api(token, 'GET', `/allocations/${made.body.id}`)).body;
    assert.ok(slice.drain, JSON.stringify(slice));
    await screenshot(page, 'admin-pool-planned');
    await looks(stack, '/admin/pools', 'admin-pools-planned');

    await planned.locator('[data-test=cancel-change]').click();
    await waitFor(async () => (await card.locator('[data-test=planned-change]').count()) === 0, { what: 'change cancelled' });
    await waitFor(async () => !(await stack.api(token, 'GET', `/allocations/${made.body.id}`)).body.drain,
      { what: 'the drain is lifted' });
    assert.equal((await card.locator('[data-test=pool-sharing]').textContent()).trim(), 'mig');
    await stack.api(token, 'POST', `/allocations/${made.body.id}/release`);
    await context.close();
  });

  it('a new pool is created from the form', async () => {
    const { context, page } = await newPage(stack);
    await signIn(stack, page, 'alice', '/admin/pools');
    await hydrated(page);
    await page.click('[data-test=new-pool] summary');
    const form = page.locator('[data-test=new-pool]');
    await form.locator('[data-test=pool-name]').fill('l40s-dev');
    await form.locator('[data-test=pool-sharing-input]').selectOption('time-slicing');
    await form.locator('[data-test=pool-models-input]').fill('L40S');
    await form.locator('[data-test=review-pool]').click();
    const review = page.locator('[data-test=pool-review]');
    await review.locator('[data-test=review-immediate]').waitFor();
    await review.locator('[data-test=apply-pool]').click();
    await page.locator('[data-test=pool][data-pool=l40s-dev]').waitFor();
    // An unknown model is refused, naming the field.
    await form.evaluate((d) => { d.open = true; });
    await form.locator('[data-test=pool-name]').fill('odd');
    await form.locator('[data-test=pool-models-input]').fill('Mystery9000');
    await form.locator('[data-test=review-pool]').click();
    const err = page.locator('[data-test=form-error]');
    await err.waitFor();
    assert.match(await err.textContent(), /models: 'Mystery9000' is not a known model/i);
    await context.close();
    await looks(stack, '/admin/pools', 'admin-pools');
  });

  it('a pool\'s placement policy is set in the browser, audited, and explains each placement to platform admins', async () => {
    const { context, page } = await newPage(stack);
    await signIn(stack, page, 'alice', '/admin/pools');
    await hydrated(page);
    const card = page.locator('[data-test=pool][data-pool=h100-mig]');
    assert.equal((await card.locator('[data-test=pool-placement]').textContent()).trim(), 'pack');
    await card.locator('[data-test=edit-pool] summary').click();
    await card.locator('[data-test=pool-placement-select]').selectOption('spread');
    await card.locator('[data-test=pool-reason]').fill('inference replicas on separate hosts');
    await card.locator('[data-test=review-pool]').click();
    const review = page.locator('[data-test=pool-review]');
    await review.locator('[data-test=review-immediate]').waitFor();
    assert.match(await review.locator('[data-test=review-changes]').textContent(), /placement\s*pack\s*spread/);
    await review.locator('[data-test=apply-pool]').click();
    await waitFor(async () => (await card.locator('[data-test=pool-placement]').textContent()).trim() === 'spread',
      { what: 'the pool shows spread' });
    await page.goto(`${stack.appUrl}/audit?action=pool.`);
    await hydrated(page);
    assert.match(await page.locator('main').textContent(), /pool\.update/);

    // The next placement uses it, and says why to a platform admin.
    const made = await stack.api(token, 'POST', '/allocations', { pool: 'h100-mig', shape: { kind: 'mig', profile: '1g.10gb' }, lease_hours: 1 });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    await waitFor(async () => (await stack.api(token, 'GET', `/allocations/${made.body.id}`)).body.state !== 'queued',
      { what: 'placed' });
    // A tenant's token never sees the explanation.
    assert.equal((await stack.api(token, 'GET', `/allocations/${made.body.id}`)).body.placement_why, undefined);
    await page.goto(`${stack.appUrl}/t/vision/a/${made.body.id}`);
    await hydrated(page);
    const why = page.locator('[data-test=placement-why]');
    await why.locator('summary').click();
    assert.match(await why.locator('[data-test=placement-why-summary]').textContent(), /Policy spread: \d+ places? on 1 host evaluated/);
    assert.match(await why.locator('[data-test=placement-why-ranking]').textContent(), /the tenant's slices already on the host/);
    const places = why.locator('[data-test=placement-why-place]');
    assert.ok(await places.count() >= 1);
    assert.match(await places.first().textContent(), /chosen/);
    await screenshot(page, 'allocation-placement-why');
    await looks(stack, `/t/vision/a/${made.body.id}`, 'allocation-placement-why',
      async (p) => { await p.locator('[data-test=placement-why] summary').click(); });
    await stack.api(token, 'POST', `/allocations/${made.body.id}/release`);
    await context.close();
  });

  it('a price set in the browser puts a cost on the usage page, with a FOCUS CSV that focus-validator passes, and the fleet ledger adds up', async () => {
    const { context, page } = await newPage(stack);
    await signIn(stack, page, 'alice', '/usage');
    await hydrated(page);
    const form = page.locator('[data-test=price-form]');
    await form.locator('[data-test=price-pool]').selectOption('h100-mig');
    await form.locator('[data-test=price-gpu-hour]').fill('2.10');
    await form.locator('[data-test=price-save]').click();
    await page.locator('[data-test=price-row][data-pool=h100-mig]').waitFor();
    // A mistake says what to fix.
    await form.locator('[data-test=price-pool]').selectOption('h100-mig');
    await form.locator('[data-test=price-gpu-hour]').fill('two euros');
    await form.locator('[data-test=price-save]').click();
    assert.match(await page.locator('[data-test=form-error]').textContent(), /gpu_hour: 'two euros' is not an amount/i);

    const made = await stack.api(token, 'POST', '/allocations', { pool: 'h100-mig', shape: { kind: 'mig', profile: '1g.10gb' }, lease_hours: 1 });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    await waitFor(async () => (await stack.api(token, 'GET', `/allocations/${made.body.id}`)).body.state === 'active',
      { what: 'active slice' });
    await new Promise((r) => setTimeout(r, 2000));
    await page.goto(`${stack.appUrl}/usage?group_by=allocation`);
    await hydrated(page);
    const row = page.locator(`[data-test=usage-row][data-tenant=vision][data-pool=h100-mig]`).last();
    await row.waitFor();
    assert.match(await row.locator('[data-test=usage-cost]').textContent(), /^0\.\d+ EUR$/);
    assert.ok(Number((await row.locator('[data-test=usage-gpu-hours]').textContent()).trim()) >= 0);
    // Idle GPU-hours: the allocated ones telemetry found unused (— before it measured any).
    assert.match((await row.locator('[data-test=usage-idle-hours]').textContent()).trim(), /^(\d+\.\d{3}|—)$/);
    const href = await page.locator('[data-test=usage-csv]').getAttribute('href');
    const csv = await (await page.request.get(`${stack.appUrl}${href}`)).text();
    assert.match(csv.split('\n')[0], /^AvailabilityZone,BilledCost,BillingAccountId,/);
    assert.match(csv, new RegExp(`allocation/${made.body.id}`));
    // The FinOps Foundation's own validator (FOCUS 1.0) passes it.
    const FOCUS = process.env.FOCUS_VALIDATOR;
    assert.ok(FOCUS, 'FOCUS_VALIDATOR is not set: run `make test`, which installs it (scripts/lib.sh ensure_focus_validator)');
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'focus-')), 'usage.csv');
    writeFileSync(file, csv);
    const checked = spawnSync(FOCUS, [file], { encoding: 'utf8' });
    assert.equal(checked.status, 0, `focus-validator: ${checked.stdout}${checked.stderr}`);
    assert.match(checked.stdout, /^Validation succeeded\.$/m);

    // The fleet ledger: every bucket shown adds up to the fleet's GPU-hours.
    const ledger = page.locator('[data-test=ledger]');
    await ledger.waitFor();
    assert.equal((await ledger.locator('[data-test=ledger-balanced]').textContent()).trim(), 'balanced');
    const physical = Number((await ledger.locator('[data-test=ledger-physical]').textContent()).trim());
    assert.ok(physical > 0, `fleet GPU-hours ${physical}`);
    const shown = (await ledger.locator('[data-test=ledger-bucket] [data-test=ledger-hours]').allTextContents()).map(Number);
    const sum = shown.reduce((a, b) => a + b, 0);
    assert.ok(Math.abs(sum - physical) <= 0.0005 * (shown.length + 1), `buckets ${shown.join(' + ')} = ${sum}, fleet ${physical}`);
    assert.equal(await ledger.locator('[data-test=ledger-bucket][data-bucket="tenant:vision"]').count(), 1);
    assert.ok(await ledger.locator('[data-test=ledger-chart] rect').count() >= 1);
    // Drill down per host.
    await ledger.locator('[data-test=ledger-by]').selectOption('host');
    await ledger.locator('[data-test=ledger-apply]').click();
    await page.waitForURL(/ledger_by=host/);
    await hydrated(page);
    await page.locator('[data-test=ledger-group][data-group=gpu-h100-e2e]').waitFor();
    // The chart: GPU-hours per day, stacked per pool, drawn on the server.
    assert.ok(await page.locator('[data-test=usage-timeline] rect[data-pool=h100-mig]').count() >= 1);
    assert.match(await page.textContent('[data-test=usage-timeline]'), /h100-mig/);
    await screenshot(page, 'usage-admin');
    await context.close();

    // A member sees their own tenant's usage only.
    const bob = await newPage(stack);
    await signIn(stack, bob.page, 'bob', '/usage');
    await hydrated(bob.page);
    await bob.page.locator('[data-test=usage-row]').first().waitFor();
    const tenants = await bob.page.locator('[data-test=usage-row]').evaluateAll((rows) => rows.map((r) => r.dataset.tenant));
    assert.ok(tenants.every((t) => t === 'vision'), tenants.join(','));
    assert.equal(await bob.page.locator('[data-test=price-form]').count(), 0);
    await bob.context.close();
    await looks(stack, '/usage', 'usage');
    await stack.api(token, 'POST', `/allocations/${made.body.id}/release`);
  });

  it('a budget at 80 % tells the tenant admin; the statement splits direct cost and overhead; a blocking budget turns away best-effort requests', async () => {
    // Carol leads Vision: signed in first, so she is one of its admins.
    const carol = await newPage(stack);
    await signIn(stack, carol.page, 'carol', '/t/vision/budget');
    await hydrated(carol.page);
    await carol.page.locator('[data-test=budget-none]').waitFor();
    // An expensive pool: a few seconds of a 1g.10gb cost something.
    const { context, page } = await newPage(stack);
    await signIn(stack, page, 'alice', '/usage');
    await hydrated(page);
    const form = page.locator('[data-test=price-form]');
    await form.locator('[data-test=price-pool]').selectOption('h100-mig');
    await form.locator('[data-test=price-gpu-hour]').fill('36000');
    await form.locator('[data-test=price-recovery-choice]').selectOption('full_recovery');
    await form.locator('[data-test=price-save]').click();
    await page.locator('[data-test=price-row][data-pool=h100-mig] [data-test=price-recovery]', { hasText: 'Full recovery' }).first().waitFor();
    const made = await stack.api(token, 'POST', '/allocations', { pool: 'h100-mig', shape: { kind: 'mig', profile: '1g.10gb' }, lease_hours: 1 });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    await waitFor(async () => (await stack.api(token, 'GET', `/allocations/${made.body.id}`)).body.state === 'active', { what: 'active slice' });
    await new Promise((r) => setTimeout(r, 3000));
    // Back to showback, then the slice ends: what Vision was charged stops growing.
    await form.locator('[data-test=price-gpu-hour]').fill('36000');
    await form.locator('[data-test=price-recovery-choice]').selectOption('showback');
    await form.locator('[data-test=price-save]').click();
    await page.locator('[data-test=price-row][data-pool=h100-mig] [data-test=price-recovery]', { hasText: 'Showback' }).first().waitFor();
    // Every Vision slice ends, this one and any an earlier test left.
    const live = ['queued', 'placed', 'provisioning', 'active'];
    for (const a of (await stack.api(token, 'GET', '/allocations')).body) {
      if (live.includes(a.state)) await stack.api(token, 'POST', `/allocations/${a.id}/release`);
    }
    await waitFor(async () => (await stack.api(token, 'GET', '/allocations')).body.every((a) => ![...live, 'releasing'].includes(a.state)),
      { what: 'every Vision slice ended' });
    const statement = async () => {
      const r = await carol.page.request.get(`${stack.appUrl}/api/v1/statements?tenant=vision`);
      assert.equal(r.status(), 200);
      return r.json();
    };
    const s = await statement();
    const line = s.lines.find((l) => l.pool === 'h100-mig');
    assert.ok(line, JSON.stringify(s));
    // Full recovery put the free part of the GPU on Vision for those seconds.
    assert.ok(Number(line.overhead) > 0, JSON.stringify(line));
    assert.equal((Number(line.direct) + Number(line.overhead)).toFixed(2), Number(line.total).toFixed(2));
    const spent = Number(s.totals[0].total);
    assert.ok(spent > 1, `spent ${spent}`);
    // Carol sets a budget of which 90 % is spent: she is told at 80 %.
    const amount = (spent / 0.9).toFixed(2);
    await carol.page.reload();
    await hydrated(carol.page);
    const bf = carol.page.locator('[data-test=budget-form]');
    await bf.locator('[data-test=budget-amount]').fill(amount);
    await bf.locator('[data-test=budget-currency]').fill('EUR');
    await bf.locator('[data-test=budget-save]').click();
    const card = carol.page.locator('[data-test=budget]').first();
    await card.waitFor();
    assert.match(await card.locator('[data-test=budget-spent]').textContent(), new RegExp(`of ${amount} EUR \\((89|90) %\\)`));
    await carol.page.locator('[data-test=statement-line][data-pool=h100-mig]').waitFor();
    await screenshot(carol.page, 'budget-tenant');
    await carol.page.goto(`${stack.appUrl}/notifications`);
    await waitFor(async () => /Vision Research has spent 80 % of its budget/.test(await carol.page.locator('main').textContent()), { what: 'the 80 % notification' });
    // Told once, however often the timer looks.
    await new Promise((r) => setTimeout(r, 1500));
    await carol.page.reload();
    const told = await carol.page.locator('main').textContent();
    assert.equal(told.match(/Vision Research has spent 80 % of its budget/g).length, 1, told);
    // The tenant page shows spend against the budget.
    await carol.page.goto(`${stack.appUrl}/t/vision`);
    await carol.page.locator('[data-test=tenant-budgets] [data-test=budget]').waitFor();

    // A platform admin makes it block at a lower amount: best-effort
    // requests are refused with what to do; guaranteed ones still go through.
    await page.goto(`${stack.appUrl}/usage`);
    await hydrated(page);
    const admin = page.locator('[data-test=budgets] [data-test=budget-form]');
    await admin.locator('[data-test=budget-tenant]').fill('vision');
    await admin.locator('[data-test=budget-amount]').fill((spent / 2).toFixed(2));
    await admin.locator('[data-test=budget-currency]').fill('EUR');
    await admin.locator('[data-test=budget-block]').check();
    await admin.locator('[data-test=budget-save]').click();
    await page.locator('[data-test=budgets] [data-test=budget]', { hasText: 'only guaranteed requests go through until' }).waitFor();
    const refused = await stack.api(token, 'POST', '/allocations', { pool: 'h100-mig', shape: { kind: 'mig', profile: '1g.10gb' }, lease_hours: 1, qos: 'best-effort' });
    assert.equal(refused.status, 403, JSON.stringify(refused.body));
    assert.equal(refused.body.code, 'budget_exceeded');
    assert.match(refused.body.message, /only guaranteed requests go through/);
    const guaranteed = await stack.api(token, 'POST', '/allocations', { pool: 'h100-mig', shape: { kind: 'mig', profile: '1g.10gb' }, lease_hours: 1 });
    assert.equal(guaranteed.status, 201, JSON.stringify(guaranteed.body));
    await stack.api(token, 'POST', `/allocations/${guaranteed.body.id}/release`);
    // Carol asks for more; the platform admin's Budgets card shows it.
    await carol.page.goto(`${stack.appUrl}/t/vision/budget`);
    await hydrated(carol.page);
    const ask = carol.page.locator('[data-test=budget-ask-form]');
    await ask.locator('[data-test=budget-ask-amount]').fill((spent * 3).toFixed(2));
    await ask.locator('[data-test=budget-ask-reason]').fill('the December training run');
    await ask.locator('[data-test=budget-ask-send]').click();
    await carol.page.locator('[data-test=budget-ask-waiting]').waitFor();
    await page.reload();
    await hydrated(page);
    await page.locator('[data-test=budgets] [data-test=budget-pending]', { hasText: 'the December training run' }).waitFor();
    await screenshot(page, 'budgets-admin');
    await context.close();
    await carol.context.close();
    await looks(stack, '/statement?tenant=vision', 'statement');
    await looks(stack, '/t/vision/budget', 'budget', async () => {}, 'carol');
  });
});
