// Right-sizing: a 3g.40gb slice on a host whose slices sit idle is told,
// once a minute of telemetry is in, that a 1g.10gb would do; one click asks
// for it, and the old slice is released once the new one is active. The
// same advice is in the API for the tenant's token.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { startStack, newPage, signIn, hydrated, waitFor, looks, ROOT } from './harness.mjs';

const host = (name) => path.join(ROOT, 'end2end', 'hosts', `${name}.toml`);

describe('right-sizing', () => {
  let stack;
  before(async () => {
    stack = await startStack({
      hosts: [host('gpu-h100-idle')],
      env: { TESSERA_RIGHTSIZING__MIN_MEASURED_MINUTES: '1' },
    });
  });
  after(async () => {
    await stack?.stop();
  });

  it('advises a smaller shape from measured use and replaces the slice in one click', async () => {
    const token = stack.apiToken('vision');
    const made = await stack.api(token, 'POST', '/allocations', {
      pool: 'h100-mig', shape: { kind: 'mig', profile: '3g.40gb' }, lease_hours: 8, purpose: 'e2e: oversized notebook',
    });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    const id = made.body.id;
    // A minute of telemetry (sent every 2 s) after it became active.
    await waitFor(async () => (await stack.api(token, 'GET', `/allocations/${id}`)).body.state === 'active', { what: 'active' });
    let advice;
    await waitFor(async () => {
      advice = (await stack.api(token, 'GET', `/allocations/${id}/recommendation`)).body;
      return advice?.advice?.verdict === 'smaller';
    }, { timeoutMs: 150_000, intervalMs: 2_000, what: 'advice with a minute of telemetry' });
    assert.equal(advice.advice.resize.label, 'MIG 1g.10gb');
    assert.equal(advice.advice.confidence, 'low');
    assert.match(advice.sentence, /^Used at most 0\.0 GiB and 0 % of its compute over \d+ min: a MIG 1g\.10gb in h100-mig would do — saves \d+ GPU-hours a month\.$/);
    const list = (await stack.api(token, 'GET', '/recommendations')).body;
    assert.equal(list.smaller, 1);
    assert.equal(list.slices[0].allocation, id);

    const { page } = await newPage(stack);
    await signIn(stack, page, 'bob', `/t/vision/a/${id}`);
    await hydrated(page);
    assert.match(await page.textContent('[data-test=right-size-sentence]'), /a MIG 1g\.10gb in h100-mig would do/);
    assert.match(await page.textContent('[data-test=right-size-confidence]'), /Confidence: low/);
    await looks(stack, `/t/vision/a/${id}`, 'right-size', async (p) => {
      await p.waitForSelector('[data-test=right-size]');
    }, 'bob');
    await page.click('[data-test=resize]');
    await page.waitForURL((u) => /\/t\/vision\/a\/\d+$/.test(u.pathname) && !u.pathname.endsWith(`/${id}`));
    const newId = Number(page.url().split('/').pop());
    assert.match(await page.textContent('[data-test=replaces]'), new RegExp(`#${id}`));
    assert.match(await page.textContent('[data-test=allocation-title]'), /1g\.10gb/);
    await waitFor(async () => (await stack.api(token, 'GET', `/allocations/${newId}`)).body.state === 'active', { what: 'the new slice active' });
    // The old one is released once the new one runs.
    await waitFor(async () => ['releasing', 'released'].includes((await stack.api(token, 'GET', `/allocations/${id}`)).body.state),
      { what: 'the replaced slice released' });
    await waitFor(async () => (await stack.api(token, 'GET', `/allocations/${id}`)).body.state === 'released', { what: 'released on the host' });
    // Nothing smaller is left to ask for: the API refuses a second resize of
    // the new, unmeasured slice with a reason.
    const again = await stack.api(token, 'POST', `/allocations/${newId}/resize`);
    assert.equal(again.status, 409, JSON.stringify(again.body));
    // A whole-GPU instance cannot start beside the new slice: its page
    // offers what would start now, and one click asks for it instead.
    const big = await stack.api(token, 'POST', '/allocations', {
      pool: 'h100-mig', shape: { kind: 'mig', profile: '7g.80gb' }, lease_hours: 8, purpose: 'e2e: waits',
    });
    assert.equal(big.status, 201, JSON.stringify(big.body));
    assert.equal(big.body.state, 'queued');
    assert.ok(big.body.starts_now.length >= 1, JSON.stringify(big.body));
    await page.goto(`${stack.appUrl}/t/vision/a/${big.body.id}`);
    await hydrated(page);
    const first = (await page.locator('[data-test=starts-now-option] strong').first().textContent()).trim();
    assert.equal(first, big.body.starts_now[0].label);
    await looks(stack, `/t/vision/a/${big.body.id}`, 'starts-now', async (p) => {
      await p.waitForSelector('[data-test=starts-now]');
    }, 'bob');
    await page.locator('[data-test=request-instead]').first().click();
    await page.waitForURL((u) => /\/t\/vision\/a\/\d+$/.test(u.pathname) && !u.pathname.endsWith(`/${big.body.id}`));
    assert.match(await page.textContent('[data-test=replaces]'), new RegExp(`#${big.body.id}`));
    await waitFor(async () => ['released', 'failed', 'expired'].includes((await stack.api(token, 'GET', `/allocations/${big.body.id}`)).body.state),
      { what: 'the waiting request withdrawn' });
    await looks(stack, '/fleet/insights', 'right-sizing-fleet', async (p) => {
      await p.waitForSelector('[data-test=right-sizing-summary]');
    });
  });

  it('the workload profile helper suggests a shape with its reasons and fills the form', async () => {
    const { page } = await newPage(stack);
    await signIn(stack, page, 'bob', '/t/vision/request');
    await hydrated(page);
    await page.click('[data-test=workload-helper] summary');
    await page.selectOption('[data-test=work-kind]', 'inference');
    await page.fill('[data-test=work-params]', '7');
    await waitFor(async () => /Suggested: MIG 2g\.20gb in h100-mig/.test(await page.textContent('[data-test=work-suggestion]')), { what: 'suggestion' });
    assert.match(await page.textContent('[data-test=work-reasons]'), /7000 M parameters at bf16 are 13\.0 GiB of weights/);
    await page.click('[data-test=work-apply]');
    assert.equal(await page.inputValue('[data-test=profile]'), '2g.20gb');
    await waitFor(async () => /costs 0\.285 GPU/.test(await page.textContent('[data-test=cost]')), { what: 'the applied shape costed' });
    // A model no single GPU holds: whole GPUs where a pool gives them, or the reason.
    await page.selectOption('[data-test=work-kind]', 'training');
    await page.fill('[data-test=work-params]', 'seven');
    await waitFor(async () => /billion parameters/.test(await page.textContent('[data-test=work-reasons]')), { what: 'the invalid size named' });
  });
});

