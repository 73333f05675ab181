// Accessibility: axe-core (the engine behind Lighthouse's accessibility
// audit) over every page, signed in as each role, in light and dark mode.
// No serious or critical violation passes.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { startStack, newPage, signIn, hydrated, ROOT } from './harness.mjs';

const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/** Serious and critical violations on the page, as readable lines. */
async function violations(page) {
  // Evaluated through the DevTools protocol: the page's CSP (no inline
  // scripts) stays on, as users get it.
  await page.evaluate(axeSource);
  const result = await page.evaluate(async () => {
    // eslint-disable-next-line no-undef
    const r = await axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => n.target.join(' ')).slice(0, 5) }));
  });
  return result
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.impact} ${v.id} (${v.help}): ${v.nodes.join(', ')}`);
}

describe('accessibility', () => {
  let stack;
  let allocation;
  before(async () => {
    stack = await startStack({ hosts: [path.join(ROOT, 'end2end', 'hosts', 'gpu-h100-e2e.toml')] });
    const token = stack.apiToken('vision');
    const made = await stack.api(token, 'POST', '/allocations', { pool: 'h100-mig', shape: { kind: 'mig', profile: '1g.10gb' }, lease_hours: 2 });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    allocation = made.body.id;
  });
  after(async () => {
    await stack?.stop();
  });

  const pages = {
    bob: () => ['/', '/t/vision', '/t/vision/request', `/t/vision/a/${allocation}`, '/t/vision/quota', '/usage', '/notifications'],
    carol: () => ['/t/vision/api-tokens', '/t/vision/webhook', '/t/vision/budget', '/audit'],
    alice: () => ['/fleet', '/fleet/insights', '/admin/join-tokens', '/admin/people', '/admin/approvals', '/admin/quotas', '/admin/pools', '/admin/tenants', '/usage', '/statement?tenant=vision', '/audit', '/notifications'],
  };
  for (const [user, paths] of Object.entries(pages)) {
    for (const colorScheme of ['light', 'dark']) {
      it(`${user}'s pages have no serious or critical violations (${colorScheme})`, async () => {
        const { context, page } = await newPage(stack, { colorScheme });
        await signIn(stack, page, user, '/');
        const found = [];
        for (const p of paths()) {
          await page.goto(`${stack.appUrl}${p}`);
          await hydrated(page);
          for (const v of await violations(page)) found.push(`${p}: ${v}`);
        }
        await context.close();
        assert.deepEqual(found, [], found.join('\n'));
      });
    }
  }
});
