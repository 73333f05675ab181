// Quota requests end to end, with the real IdP and a real agent: the platform
// admin lowers a tenant's quota; a member's slice beyond it is refused with an
// offer pre-filled with what is missing; the member proposes; the tenant admin
// submits; the platform admin approves; the member's slice is requested by
// itself and becomes active; everyone was notified; every step is in the
// audit log.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import http from 'node:http';
import { createHmac } from 'node:crypto';
import { startStack, newPage, screenshot, signIn, hydrated, waitFor, ROOT } from './harness.mjs';

const host = (name) => path.join(ROOT, 'end2end', 'hosts', `${name}.toml`);

describe('quota requests', () => {
  let stack;
  let requestId;
  before(async () => {
    stack = await startStack({ hosts: [host('gpu-h100-e2e')] });
  });
  after(async () => {
    await stack?.stop();
  });

  it('the platform admin sets a tenant quota on the Quotas page', async () => {
    const { context, page } = await newPage(stack);
    await signIn(stack, page, 'alice', '/admin/quotas');
    await hydrated(page);
    const row = page.locator('[data-test=quota-row][data-tenant=vision][data-pool=h100-mig]');
    await row.locator('summary').first().click();
    await row.locator('[data-test=set-gpus]').fill('0.2');
    await row.locator('[data-test=set-memory]').fill('20');
    await row.locator('[data-test=set-slices]').fill('2');
    await row.locator('[data-test=set-save]').click();
    await waitFor(async () => /0\.200 GPU/.test(await row.textContent()), { what: 'the new quota on the row' });
    await screenshot(page, '40-admin-quotas');
    // An amount the server refuses (the browser already stops negative ones)
    // gets a message naming the field, and changes nothing.
    await row.locator('[data-test=set-gpus]').fill('1000000');
    await row.locator('[data-test=set-save]').click();
    await waitFor(async () => /gpus/.test((await page.locator('[data-test=form-error]').allTextContents()).join(' ')), { what: 'the refusal' });
    await page.reload();
    assert.match(await page.locator('[data-test=quota-row][data-tenant=vision][data-pool=h100-mig]').textContent(), /0\.200 GPU/);
    await context.close();
  });

  it('a member beyond quota is refused with a pre-filled offer and proposes an increase', async () => {
    // The tenant admin has signed in before (Tessera knows its users from
    // their first sign-in), so she can be notified.
    const lead = await newPage(stack);
    await signIn(stack, lead.page, 'carol', '/t/vision');
    await lead.context.close();

    const { context, page } = await newPage(stack);
    await signIn(stack, page, 'bob', '/t/vision/request');
    await hydrated(page);
    await page.click('[data-test=pool-choice][data-pool=h100-mig]');
    await page.selectOption('[data-test=profile]', '3g.40gb');
    await page.fill('[data-test=purpose]', 'e2e: fine-tune the detector');
    await page.fill('[data-test=lease-hours]', '4');
    // 3g.40gb costs 0.428 GPU and 40 GiB; 0.2 GPU and 20 GiB are left.
    const offer = page.locator('[data-test=quota-offer]');
    await offer.waitFor();
    assert.equal(await page.isDisabled('[data-test=submit-request]'), true);
    const text = await offer.textContent();
    assert.match(text, /0\.228 GPU/);
    assert.match(text, /20 GiB/);
    await offer.locator('[data-test=offer-justification]').fill('The detector needs a 3g slice to fine-tune this week.');
    await screenshot(page, '41-over-quota-offer');
    await offer.locator('[data-test=offer-submit]').click();
    const done = page.locator('[data-test=offer-done]');
    await done.waitFor();
    const href = await done.locator('a').first().getAttribute('href');
    requestId = Number(/request-(\d+)/.exec(href)[1]);
    assert.ok(requestId > 0, href);
    await screenshot(page, '42-offer-proposed');

    // The tenant's quota page shows the proposal.
    await page.goto(`${stack.appUrl}/t/vision/quota`);
    const req = page.locator(`#request-${requestId}`);
    assert.equal(await req.getAttribute('data-state'), 'proposed');
    assert.equal(await page.locator('[data-test=submit-quota-request]').count(), 0, 'members do not submit');
    await context.close();
  });

  it('the tenant admin is notified and submits it', async () => {
    const { context, page } = await newPage(stack);
    await signIn(stack, page, 'carol', '/');
    await hydrated(page);
    await waitFor(async () => ((await page.locator('[data-test=unread-count]').textContent().catch(() => '')) || '').trim() === '1', { what: 'one unread notification' });
    await screenshot(page, '43-bell');
    await page.click('[data-test=notifications-bell]');
    await page.waitForURL(`${stack.appUrl}/notifications`);
    const n = page.locator('[data-test=notification]').first();
    assert.equal(await n.getAttribute('data-kind'), 'quota_request.created');
    assert.match(await n.textContent(), /Bob Builder/);
    await screenshot(page, '44-notifications');
    // Reading it here clears the bell at once (the page tells the bell; no
    // waiting for its next poll).
    await hydrated(page);
    const listLoads = [];
    page.on('request', (r) => { if (r.url().includes('/api/ui/get_notifications')) listLoads.push(r.url()); });
    await page.click('[data-test=mark-all-read]');
    await waitFor(async () => (await n.getAttribute('data-read')) === 'true', { what: 'the notification read' });
    await waitFor(async () => (await page.locator('[data-test=unread-count]').count()) === 0, { what: 'the bell cleared', timeoutMs: 5000 });
    // The list reloaded once for that read (after the bell counted again),
    // not once for the action and again for the bell's news.
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(listLoads.length, 1, `list loads after marking read: ${listLoads.length}`);

    await page.goto(`${stack.appUrl}/t/vision/quota`);
    await hydrated(page);
    const req = page.locator(`#request-${requestId}`);
    await screenshot(page, '45-tenant-quota-page');
    await req.locator('[data-test=submit-quota-request]').click();
    await waitFor(async () => (await req.getAttribute('data-state')) === 'pending', { what: 'the request pending' });
    await context.close();
  });

  it('the platform admin approves it and the member\'s slice becomes active by itself', async () => {
    const admin = await newPage(stack);
    await signIn(stack, admin.page, 'alice', '/admin/approvals');
    await hydrated(admin.page);
    const item = admin.page.locator(`[data-test=approval-item][data-request-id="${requestId}"]`);
    await item.waitFor();
    const text = await item.textContent();
    assert.match(text, /Vision Research/);
    assert.match(text, /The detector needs a 3g slice/);
    await screenshot(admin.page, '46-approval-queue');
    await item.locator('[data-test=approve]').click();
    await admin.page.locator('[data-test=approvals-empty]').waitFor();
    await screenshot(admin.page, '47-approved');

    // Bob: told, and his waiting slice was requested and became active.
    const { context, page } = await newPage(stack);
    await signIn(stack, page, 'bob', '/t/vision/quota');
    await hydrated(page);
    const req = page.locator(`#request-${requestId}`);
    assert.equal(await req.getAttribute('data-state'), 'approved');
    const link = req.locator('a[href*="/a/"]');
    const href = await link.getAttribute('href');
    await page.goto(`${stack.appUrl}${href}`);
    await waitFor(async () => (await page.textContent('.page-head [data-test=state]'))?.trim() === 'active', { what: 'the waiting slice active' });
    assert.match(await page.textContent('[data-test=conn-k8s]'), /nvidia\.com\/mig-3g\.40gb: 1/);
    await screenshot(page, '48-waiting-slice-active');
    await page.goto(`${stack.appUrl}/notifications`);
    const kinds = await page.locator('[data-test=notification]').evaluateAll((els) => els.map((e) => e.dataset.kind));
    assert.ok(kinds.includes('quota_request.approved'), kinds.join());
    assert.ok(kinds.includes('allocation.active'), kinds.join());
    await context.close();

    // Every step is in the audit log, in order.
    await admin.page.goto(`${stack.appUrl}/audit?tenant=vision`);
    const actions = (await admin.page.locator('[data-test=audit-action]').allTextContents()).map((a) => a.trim()).reverse();
    const wanted = ['quota.set', 'quota_request.create', 'quota_request.submit', 'quota_request.approve', 'allocation.create', 'allocation.activate'];
    let at = -1;
    for (const w of wanted) {
      const next = actions.indexOf(w, at + 1);
      assert.ok(next > at, `${w} after position ${at} in ${actions.join(', ')}`);
      at = next;
    }
    await screenshot(admin.page, '49-audit-quota-flow');
    await admin.context.close();
  });

  it('a tenant admin sets up a webhook; a test event arrives signed', async () => {
    // A receiver for the webhook, in this process.
    const received = [];
    const receiver = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        received.push({ headers: req.headers, body });
        res.writeHead(204).end();
      });
    });
    await new Promise((r) => receiver.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${receiver.address().port}/hook`;
    try {
      const { context, page } = await newPage(stack);
      await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: stack.appUrl });
      await signIn(stack, page, 'carol', '/t/vision/webhook');
      await hydrated(page);
      await page.fill('[data-test=webhook-url]', url);
      await page.click('[data-test=webhook-save]');
      const first = (await page.locator('[data-test=webhook-secret]').textContent()).trim();
      assert.match(first, /^whsec_[0-9a-f]{64}$/);
      // The island drew the secret and the form again after hydrating: their
      // buttons work. Saving again rotates the secret in place (a form that
      // lost its handler would post without JS, and the new secret, shown
      // only here, would be lost), and the copy button copies the new one.
      await waitFor(async () => /Save and rotate/.test(await page.textContent('[data-test=webhook-save]')), { what: 'the form drawn again for an existing webhook' });
      await page.evaluate(() => { window.__samePage = true; });
      await page.click('[data-test=webhook-save]');
      await waitFor(async () => {
        const now = (await page.locator('[data-test=webhook-secret]').textContent()).trim();
        return now !== first && /^whsec_[0-9a-f]{64}$/.test(now);
      }, { what: 'the rotated secret on the page' });
      const secret = (await page.locator('[data-test=webhook-secret]').textContent()).trim();
      assert.equal(await page.evaluate(() => window.__samePage), true, 'rotating did not load the page again');
      await page.click('[data-test=copy-webhook-secret]');
      await waitFor(async () => /Copied/.test(await page.textContent('[data-test=copy-webhook-secret]')), { what: 'the copy button saying Copied' });
      assert.equal(await page.evaluate(() => navigator.clipboard.readText()), secret);
      await page.click('[data-test=webhook-test]');
      await waitFor(async () => received.some((r) => r.headers['x-tessera-event'] === 'webhook.test'), { what: 'the test event at the receiver' });
      const r = received.find((x) => x.headers['x-tessera-event'] === 'webhook.test');
      const expected = 'sha256=' + createHmac('sha256', secret).update(`${r.headers['x-tessera-timestamp']}.${r.body}`).digest('hex');
      assert.equal(r.headers['x-tessera-signature'], expected);
      assert.equal(JSON.parse(r.body).tenant, 'vision');
      await waitFor(async () => (await page.locator('[data-test=webhook-delivery][data-status=delivered]').count()) > 0, { what: 'the delivery listed as delivered' });
      await screenshot(page, '50-webhook');
      await context.close();
    } finally {
      receiver.close();
    }
  });
});
