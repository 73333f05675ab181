// QoS and preemption end to end: a platform admin sets the pool's
// preemption notice in the browser; an nlp member takes the whole H100 as a
// best-effort slice from the request form; a vision request at
// `production-inference` priority, within vision's quota, preempts it; the
// victim's owner sees why on the slice's page and in their notifications,
// and vision's slice becomes active on the freed GPU.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { startStack, newPage, screenshot, signIn, hydrated, waitFor, looks, ROOT } from './harness.mjs';

describe('QoS classes and preemption', () => {
  let stack;
  before(async () => {
    stack = await startStack({ hosts: [path.join(ROOT, 'end2end', 'hosts', 'gpu-h100-e2e.toml')] });
  });
  after(async () => {
    await stack?.stop();
  });

  it('a high-priority guaranteed request preempts a best-effort slice, and its owner sees why', async () => {
    // The pool gives no notice (the default is 5 minutes).
    const admin = await newPage(stack);
    await signIn(stack, admin.page, 'alice', '/admin/pools');
    await hydrated(admin.page);
    const card = admin.page.locator('[data-test=pool][data-pool=h100-mig]');
    assert.equal((await card.locator('[data-test=pool-preemption]').textContent()).trim(), '5 min');
    await card.locator('[data-test=edit-pool] summary').click();
    await card.locator('[data-test=pool-preemption-grace]').fill('0');
    await card.locator('[data-test=pool-reason]').fill('e2e: preempt at once');
    await card.locator('[data-test=review-pool]').click();
    const review = admin.page.locator('[data-test=pool-review]');
    await review.waitFor();
    assert.match(await review.locator('[data-test=review-changes]').textContent(), /preemption_grace_minutes\s*5\s*0/);
    await review.locator('[data-test=apply-pool]').click();
    await waitFor(async () => (await card.locator('[data-test=pool-preemption]').textContent()).trim() === '0 min',
      { what: 'the new notice on the pool card' });
    await admin.context.close();

    // dave (nlp) asks for the whole GPU as best-effort: no quota needed.
    const { context, page } = await newPage(stack);
    await signIn(stack, page, 'dave', '/t/nlp/request');
    await hydrated(page);
    await page.click('[data-test=pool-choice][data-pool=h100-mig]');
    await page.selectOption('[data-test=profile]', '7g.80gb');
    await page.fill('[data-test=lease-hours]', '4');
    await page.check('[data-test=qos-best-effort]');
    await waitFor(async () => /Uses none of your quota/.test(await page.textContent('[data-test=cost]')), { what: 'best-effort cost' });
    await screenshot(page, '26-request-best-effort');
    await page.click('[data-test=submit-request]');
    await page.waitForURL(/\/t\/nlp\/a\/\d+$/);
    const victim = page.url();
    assert.equal((await page.textContent('[data-test=qos-class]')).trim(), 'Best effort');
    await waitFor(async () => (await page.textContent('.page-head [data-test=state]'))?.trim() === 'active', { what: 'best-effort slice active' });

    // Vision needs the GPU for serving: guaranteed, top priority. It waits,
    // the best-effort slice is preempted, and vision's starts.
    const vision = stack.apiToken('vision');
    const made = await stack.api(vision, 'POST', '/allocations', {
      pool: 'h100-mig', shape: { kind: 'mig', profile: '1g.10gb' }, lease_hours: 1, priority_class: 'production-inference', qos: 'guaranteed',
    });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    assert.equal(made.body.qos, 'guaranteed');
    await waitFor(async () => (await stack.api(vision, 'GET', `/allocations/${made.body.id}`)).body.state === 'active',
      { timeoutMs: 45_000, what: "vision's slice active on the freed GPU" });

    // dave's slice page says it was preempted, and for which request.
    await waitFor(async () => {
      await page.goto(victim);
      return (await page.locator('[data-test=preempted]').count()) === 1;
    }, { what: 'the preempted notice' });
    const said = await page.textContent('[data-test=preempted]');
    assert.match(said, new RegExp(`request #${made.body.id} \\(guaranteed, priority 'production-inference'\\)`));
    assert.match(said, /best effort/);
    assert.match((await page.textContent('.page-head [data-test=state]')).trim(), /^(releasing|released)$/);
    await screenshot(page, '27-allocation-preempted');
    // And so do its notifications: the notice, then the preemption.
    await page.goto(`${stack.appUrl}/notifications`);
    await waitFor(async () => /was preempted/.test(await page.locator('main').textContent()), { what: 'the preemption notification' });
    assert.match(await page.locator('main').textContent(), /will be preempted/);
    await context.close();
    await looks(stack, new URL(victim).pathname, '27b-allocation-preempted', (p) => p.waitForSelector('[data-test=preempted]'), 'dave');

    // The API refuses a class that does not exist, naming the field.
    const bad = await stack.api(vision, 'POST', '/allocations', {
      pool: 'h100-mig', shape: { kind: 'mig', profile: '1g.10gb' }, lease_hours: 1, qos: 'platinum',
    });
    assert.equal(bad.status, 400, JSON.stringify(bad.body));
    assert.match(JSON.stringify(bad.body), /qos|platinum/);
    await stack.api(vision, 'POST', `/allocations/${made.body.id}/release`);
  });
});
