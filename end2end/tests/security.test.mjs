// Browser-level security: a same-site page on another origin cannot use a
// signed-in person's session (CSRF), the post-login redirect stays on
// Tessera whatever `next` says, sign-in starts write no session, and the
// Content-Security-Policy lets the pages hydrate without a violation.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { startStack, newPage, screenshot, signIn, signInAtIdp, hydrated, waitFor } from './harness.mjs';

describe('security in the browser', () => {
  let stack;
  let attacker;
  let attackerUrl;
  before(async () => {
    stack = await startStack({ hosts: [] });
    // Another port on the same host: a different origin but the *same site*,
    // so SameSite=Lax still sends Tessera's cookie with its form posts (as a
    // sibling host of the company domain would).
    attacker = http.createServer((req, res) => {
      const target = `${stack.appUrl}/api/ui/create_api_token`;
      const page = req.url.startsWith('/fetch')
        ? `<script>fetch(${JSON.stringify(target)}, {method: 'POST', mode: 'no-cors', credentials: 'include',
             headers: {'content-type': 'application/x-www-form-urlencoded'}, body: 'slug=vision&name=stolen-by-fetch'})
             .finally(() => { document.title = 'sent'; });</script>`
        : `<form id="f" method="post" action="${target}">
             <input name="slug" value="vision"><input name="name" value="stolen-by-form"></form>
           <script>document.getElementById('f').submit();</script>`;
      res.writeHead(200, { 'content-type': 'text/html' }).end(`<!doctype html><title>prize</title>${page}`);
    });
    await new Promise((r) => attacker.listen(0, '127.0.0.1', r));
    attackerUrl = `http://127.0.0.1:${attacker.address().port}`;
  });
  after(async () => {
    attacker?.close();
    await stack?.stop();
  });

  it('a same-site page cannot create an API token with the session cookie', async () => {
    const { context, page } = await newPage(stack);
    const cspViolations = [];
    page.on('console', (m) => {
      if (/Content Security Policy/i.test(m.text())) cspViolations.push(m.text());
    });
    await signIn(stack, page, 'carol', '/t/vision/api-tokens');
    await hydrated(page);
    const tokens = () => page.locator('[data-test=api-token-row]').count();
    const before = await tokens();

    const refused = [];
    page.on('response', (r) => {
      if (r.url().includes('/api/ui/create_api_token')) refused.push(r.status());
    });
    await page.goto(`${attackerUrl}/form`);
    await waitFor(async () => refused.length >= 1, { what: 'the forged form post to reach Tessera' });
    assert.equal(refused[0], 403, 'the forged form post is refused');
    assert.match(await page.content(), /cross-site request refused/);
    await page.goto(`${attackerUrl}/fetch`);
    await page.waitForFunction(() => document.title === 'sent');

    await page.goto(`${stack.appUrl}/t/vision/api-tokens`);
    await hydrated(page);
    assert.equal(await tokens(), before, 'no token was created');
    assert.equal(await page.locator('text=stolen-by').count(), 0);

    // Tessera's own form still works, without a custom header: the browser's
    // fetch metadata says it is same-origin.
    // A read-only one: it lists the tenant's slices and is refused a request.
    await page.fill('[data-test=api-token-name]', 'made-here');
    await page.selectOption('select[data-test=api-token-scope]', 'read');
    await page.click('[data-test=create-api-token]');
    await page.waitForSelector('[data-test=api-token-created]');
    const secret = (await page.textContent('[data-test=api-token-secret]')).trim();
    await page.locator('td[data-test=api-token-scope]', { hasText: 'read' }).first().waitFor();
    const listed = await stack.api(secret, 'GET', '/allocations');
    assert.equal(listed.status, 200, JSON.stringify(listed.body));
    const refusedRequest = await stack.api(secret, 'POST', '/allocations', { pool: 'l4-notebooks', shape: { kind: 'time_slice' }, lease_hours: 1, purpose: 'x' });
    assert.equal(refusedRequest.status, 403, JSON.stringify(refusedRequest.body));
    assert.match(refusedRequest.body.message, /read-only/);
    assert.deepEqual(cspViolations, [], 'the pages hydrate and work under the CSP');
    await screenshot(page, '60-api-tokens-after-csrf');
    await context.close();
  });

  it('after sign-in only a path on Tessera is followed, whatever `next` says', async () => {
    // Raw query strings: the server decodes them once, as an attacker intends.
    for (const next of ['/%09/evil.example', '/%0A/evil.example', '//evil.example', '/%5Cevil.example',
      '%2F%2Fevil.example', 'https://evil.example/', '/%2F/evil.example']) {
      const { context, page } = await newPage(stack);
      await page.goto(`${stack.appUrl}/auth/login?next=${next}`);
      await signInAtIdp(page, 'bob');
      await page.waitForLoadState('load');
      const landed = new URL(page.url());
      assert.equal(landed.origin, stack.appUrl, `next=${next} must not leave Tessera (landed on ${page.url()})`);
      await context.close();
    }
    // A real local path is honoured.
    const { context, page } = await newPage(stack);
    await page.goto(`${stack.appUrl}/auth/login?next=/t/vision`);
    await signInAtIdp(page, 'bob');
    await page.waitForURL((u) => u.origin === stack.appUrl && u.pathname === '/t/vision');
    await context.close();
  });

  it('starting sign-in writes no session, only a sealed sign-in cookie', async () => {
    for (let i = 0; i < 3; i++) {
      const r = await fetch(`${stack.appUrl}/auth/login?next=/fleet`, { redirect: 'manual' });
      assert.equal(r.status, 303);
      const cookies = r.headers.getSetCookie();
      assert.ok(cookies.some((c) => c.startsWith('tessera_login=') && /HttpOnly/i.test(c)), cookies.join(' | '));
      assert.ok(!cookies.some((c) => c.startsWith('tessera_session=')), cookies.join(' | '));
      assert.ok(!cookies.join(' ').includes(new URL(r.headers.get('location')).searchParams.get('state')),
        'the state is sealed, not readable in the cookie');
    }
  });

  it('the pages the hardening touched, light and dark, desktop and mobile', async () => {
    const views = [
      ['carol', '/t/vision/api-tokens', 'api-tokens'],
      ['alice', '/admin/join-tokens', 'join-tokens'],
      ['carol', '/t/vision/webhook', 'webhook'],
    ];
    for (const [user, route, name] of views) {
      for (const colorScheme of ['light', 'dark']) {
        for (const [device, viewport] of [['desktop', { width: 1280, height: 860 }], ['mobile', { width: 390, height: 844 }]]) {
          const { context, page } = await newPage(stack, { colorScheme });
          const violations = [];
          page.on('console', (m) => {
            if (/Content Security Policy/i.test(m.text())) violations.push(m.text());
          });
          await page.setViewportSize(viewport);
          await signIn(stack, page, user, route);
          await hydrated(page);
          assert.deepEqual(violations, [], `${route}: no CSP violation`);
          await screenshot(page, `61-${name}-${device}-${colorScheme}`);
          await context.close();
        }
      }
    }
  });
});
