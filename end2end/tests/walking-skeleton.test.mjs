// The walking skeleton end to end: SSO through the IdP's real login form,
// agents enrolling and reporting, the fleet page for admins only, join tokens,
// logout at the IdP.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, newPage, screenshot, signIn, signInAtIdp, hydrated, waitFor } from './harness.mjs';

describe('walking skeleton', () => {
  let stack;
  before(async () => {
    stack = await startStack({ hosts: ['gpu-h100-01', 'gpu-l4-01'] });
  });
  after(async () => {
    await stack?.stop();
  });

  it('rejects a wrong password at the IdP', async () => {
    const { context, page } = await newPage(stack);
    await page.goto(`${stack.appUrl}/`);
    await signInAtIdp(page, 'alice', 'not-the-password');
    assert.match(await page.textContent('#login-error'), /Wrong username or password/);
    assert.notEqual(new URL(page.url()).origin, stack.appUrl);
    await screenshot(page, '00-idp-wrong-password');
    await context.close();
  });

  it('platform admin sees both hosts and their GPUs, manages join tokens, and logs out', async () => {
    const { context, page } = await newPage(stack);
    const callbacks = [];
    page.on('request', (r) => {
      if (r.url().startsWith(`${stack.appUrl}/auth/callback`)) callbacks.push(r.url());
    });
    await page.goto(`${stack.appUrl}/fleet`);
    await page.waitForSelector('#username');
    await screenshot(page, '01-idp-login-form');
    await signInAtIdp(page, 'alice');
    await page.waitForURL(`${stack.appUrl}/fleet`);

    // Agents report every second; wait until both hosts are there with their
    // GPUs (a host is listed from enrolment, its GPUs from its first report).
    await waitFor(async () => {
      const n = await page.locator('[data-test=host]').count();
      const gpus = (host) => page.locator(`[data-test=host][data-hostname=${host}] [data-test=gpu]`).count();
      const ready = n === 2 && (await gpus('gpu-h100-01')) === 8 && (await gpus('gpu-l4-01')) === 4;
      if (!ready) await page.reload();
      return ready;
    }, { what: 'both hosts and their GPUs on the fleet page' });
    const names = await page.locator('[data-test=host-name]').allTextContents();
    assert.deepEqual(names.sort(), ['gpu-h100-01', 'gpu-l4-01']);
    const h100 = page.locator('[data-test=host][data-hostname=gpu-h100-01]');
    assert.equal(await h100.locator('[data-test=gpu]').count(), 8);
    assert.deepEqual([...new Set(await h100.locator('[data-test=gpu-model]').allTextContents())], ['H100-80GB']);
    assert.deepEqual([...new Set(await h100.locator('[data-test=gpu-mig]').allTextContents())], ['enabled']);
    // The first NVLink island reports the MIG layout its simulated driver holds.
    const gpus = h100.locator('[data-test=gpu]');
    assert.deepEqual(await gpus.nth(0).locator('[data-test=mig-instance]').allTextContents(), ['3g.40gb@0', '2g.20gb@4', '1g.10gb@6']);
    assert.equal(await gpus.nth(4).locator('[data-test=mig-instance]').count(), 0);
    const l4 = page.locator('[data-test=host][data-hostname=gpu-l4-01]');
    assert.equal(await l4.locator('[data-test=gpu]').count(), 4);
    assert.deepEqual([...new Set(await l4.locator('[data-test=gpu-mig]').allTextContents())], ['n/a']);
    assert.deepEqual(await page.locator('[data-test=host-status]').allTextContents(), ['online', 'online']);
    assert.equal(await page.textContent('[data-test=stat-gpus]'), '12');
    // Pools from the configuration, with the GPUs that joined them by model.
    assert.deepEqual(await page.locator('[data-test=pool]').evaluateAll((els) => els.map((e) => e.dataset.pool)),
      ['h100-mig', 'a100-training', 'a30-mps', 'l4-notebooks']);
    assert.equal(await page.textContent('[data-pool=h100-mig] [data-test=pool-gpus]'), '8 of 8 GPUs online');
    assert.equal(await page.textContent('[data-pool=a100-training] [data-test=pool-gpus]'), '0 of 0 GPUs online');
    assert.equal(await page.textContent('[data-pool=l4-notebooks] [data-test=pool-sharing]'), 'time-slicing');
    assert.deepEqual([...new Set(await l4.locator('[data-test=gpu-pool]').allTextContents())], ['l4-notebooks']);
    assert.equal(await page.textContent('[data-test=user-name]'), 'Alice Admin');
    await screenshot(page, '02-fleet-admin');

    // The callback cannot be replayed.
    assert.equal(callbacks.length, 1);
    const replay = await (await context.newPage()).goto(callbacks[0]);
    assert.equal(replay.status(), 400);

    // Home.
    await page.goto(`${stack.appUrl}/`);
    assert.match(await page.textContent('[data-test=welcome]'), /Welcome, Alice/);
    await screenshot(page, '03-home-admin');

    // Join tokens: create (the secret is shown once), then revoke.
    await page.goto(`${stack.appUrl}/admin/join-tokens`);
    await hydrated(page);
    await page.fill('[data-test=token-description]', 'rack C node 7');
    await page.click('[data-test=create-token]');
    const secret = (await page.locator('[data-test=token-secret]').textContent()).trim();
    assert.match(secret, /^tsj_[0-9a-f]{64}$/);
    const row = page.locator('[data-test=token-row]', { hasText: 'rack C node 7' });
    await row.waitFor();
    assert.equal(await row.locator('[data-test=token-status]').textContent(), 'active');
    await screenshot(page, '04-join-token-created');
    await row.locator('[data-test=revoke-token]').click();
    await waitFor(async () => (await row.locator('[data-test=token-status]').textContent()) === 'revoked', { what: 'revoked status' });
    // The agents' tokens were used by their hosts.
    const used = await page.locator('[data-test=token-row]', { hasText: 'e2e gpu-h100-01' }).locator('[data-test=token-status]').textContent();
    assert.equal(used, 'used');
    await screenshot(page, '05-join-token-revoked');

    // Log out: local session and the IdP session (RP-initiated logout).
    await page.click('[data-test=sign-out]');
    await page.waitForSelector('button[value=yes]');
    await screenshot(page, '06-idp-logout-confirm');
    await Promise.all([page.waitForURL(`${stack.appUrl}/signed-out`), page.click('button[value=yes]')]);
    await page.waitForSelector('[data-test=signed-out]');
    await screenshot(page, '07-signed-out');
    // The session is gone here and at the IdP: a page asks for the password again.
    await page.goto(`${stack.appUrl}/fleet`);
    await page.waitForSelector('#username');
    await context.close();
  });

  it('a tenant member gets 403 on the fleet page and sees only their tenant', async () => {
    const { context, page } = await newPage(stack);
    await signIn(stack, page, 'bob', '/');
    assert.match(await page.textContent('[data-test=welcome]'), /Welcome, Bob/);
    assert.deepEqual(await page.locator('[data-test=tenant-tile] .tile-title').allTextContents(), ['Vision Research']);
    assert.equal(await page.locator('[data-test=nav-fleet]').count(), 0, 'no Fleet link for members');
    await screenshot(page, '08-home-member');

    const fleet = await page.goto(`${stack.appUrl}/fleet`);
    assert.equal(fleet.status(), 403);
    assert.match(await page.textContent('[data-test=error-panel]'), /platform admins/);
    assert.equal(await page.locator('[data-test=host]').count(), 0);
    await screenshot(page, '09-fleet-forbidden');

    const tokens = await page.goto(`${stack.appUrl}/admin/join-tokens`);
    assert.equal(tokens.status(), 403);

    const own = await page.goto(`${stack.appUrl}/t/vision`);
    assert.equal(own.status(), 200);
    assert.equal(await page.textContent('[data-test=tenant-name]'), 'Vision Research');
    assert.ok(await page.locator('[data-test=allocations-empty]').isVisible());
    const roles = await page.locator('[data-test=member]').allTextContents();
    assert.ok(roles.some((r) => r.includes('Bob Builder') && r.includes('member')), roles.join('|'));
    await screenshot(page, '10-tenant-home');

    const other = await page.goto(`${stack.appUrl}/t/nlp`);
    assert.equal(other.status(), 404, 'other tenants are invisible');
    await context.close();
  });

  it('refuses a callback with another nonce or a forged code, and starts no session', async () => {
    const { context, page } = await newPage(stack);
    const viewer = async () =>
      (await context.request.post(`${stack.appUrl}/api/ui/get_viewer`, {
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        data: '',
      })).text();
    const startLogin = async () => {
      const r = await context.request.get(`${stack.appUrl}/auth/login?next=/fleet`, { maxRedirects: 0 });
      assert.equal(r.status(), 303);
      return new URL(r.headers().location);
    };

    // The IdP is asked for a different nonce than the one this session expects:
    // state and PKCE match, the id_token's nonce does not.
    const authorize = await startLogin();
    assert.equal(authorize.searchParams.get('code_challenge_method'), 'S256');
    authorize.searchParams.set('nonce', 'nonce-chosen-by-an-attacker');
    const callback = page.waitForResponse((r) => r.url().startsWith(`${stack.appUrl}/auth/callback`));
    await page.goto(authorize.toString());
    await signInAtIdp(page, 'alice');
    assert.equal((await callback).status(), 400);
    assert.match(await page.textContent('[data-test=error-message]'), /could not be verified/);
    assert.equal(await viewer(), 'null');

    // The right state with a forged code.
    const second = await startLogin();
    const forged = await page.goto(`${stack.appUrl}/auth/callback?code=forged&state=${second.searchParams.get('state')}`);
    assert.equal(forged.status(), 400);
    assert.equal(await viewer(), 'null');
    await context.close();
  });

  it('pages render before the WASM loads (server-side rendering)', async () => {
    const { context, page } = await newPage(stack);
    await signIn(stack, page, 'carol', '/');
    await context.route('**/pkg/*.wasm', (route) => route.abort());
    await page.goto(`${stack.appUrl}/t/vision`);
    assert.equal(await page.textContent('[data-test=tenant-name]'), 'Vision Research');
    const role = await page.locator('[data-test=member]', { hasText: 'Carol Chen' }).locator('[data-test=member-role]').textContent();
    assert.equal(role, 'tenant-admin');
    await context.close();
  });

  it('shows a host offline, without a reload, when its agent stops reporting', async () => {
    const { context, page } = await newPage(stack);
    await signIn(stack, page, 'alice', '/fleet');
    await hydrated(page);
    const status = page.locator('[data-test=host][data-hostname=gpu-l4-01] [data-test=host-status]');
    await waitFor(async () => (await status.textContent()) === 'online', { what: 'gpu-l4-01 online' });
    const agent = stack.agents.get('gpu-l4-01');
    agent.kill('SIGKILL');
    await waitFor(async () => (await status.textContent()) === 'offline', { timeoutMs: 20_000, what: 'gpu-l4-01 offline' });
    assert.equal(await page.textContent('[data-test=stat-hosts]'), '1/2');
    assert.equal(
      await page.locator('[data-test=host][data-hostname=gpu-h100-01] [data-test=host-status]').textContent(),
      'online',
    );
    await screenshot(page, '13-fleet-host-offline');
    await context.close();
  });

  it('looks right in dark mode', async () => {
    const { context, page } = await newPage(stack, { colorScheme: 'dark' });
    await signIn(stack, page, 'alice', '/fleet');
    await page.waitForSelector('[data-test=host]');
    await screenshot(page, '11-fleet-dark');
    await page.setViewportSize({ width: 390, height: 844 });
    await screenshot(page, '12-fleet-mobile-dark');
    await context.close();
  });
});
