// What the browser downloads for the first page of each role, and for the
// heaviest page (the request form, a lazy island), from its own network log
// (Chrome DevTools Protocol): bytes as transferred (compressed, with headers)
// and decoded, per kind. Prints the figures (and writes them to
// artifacts/bundle-sizes.json); asserts that compression and long-lived
// caching are in use (lazy islands and their chunks included) and that a
// lazy island's WASM loads only on its page, not a size threshold.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { startStack, newPage, signIn, hydrated, ARTIFACTS } from './harness.mjs';

const header = (headers, name) => {
  const key = Object.keys(headers).find((k) => k.toLowerCase() === name);
  return key === undefined ? undefined : headers[key];
};

function kindOf(entry) {
  const p = new URL(entry.url).pathname;
  if (entry.type === 'Document') return 'html';
  if (p.endsWith('.wasm')) return 'wasm';
  if (p.endsWith('.js')) return 'js';
  if (p.endsWith('.css')) return 'css';
  return 'other';
}

/** Records every response of `page` until `stop()`. */
async function recordNetwork(page) {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Network.enable');
  const byId = new Map();
  cdp.on('Network.responseReceived', ({ requestId, type, response }) => {
    byId.set(requestId, {
      url: response.url,
      type,
      status: response.status,
      encoding: header(response.headers, 'content-encoding'),
      cacheControl: header(response.headers, 'cache-control'),
      transferred: 0,
      decoded: 0,
      finished: false,
    });
  });
  cdp.on('Network.dataReceived', ({ requestId, dataLength }) => {
    const e = byId.get(requestId);
    if (e) e.decoded += dataLength;
  });
  cdp.on('Network.loadingFinished', ({ requestId, encodedDataLength }) => {
    const e = byId.get(requestId);
    if (e) {
      e.transferred = encodedDataLength;
      e.finished = true;
    }
  });
  return {
    async stop() {
      await cdp.detach();
      return [...byId.values()].filter((e) => e.finished);
    },
  };
}

/** Totals per kind for the responses from `origin`. */
function summarize(entries, origin) {
  const mine = entries.filter((e) => new URL(e.url).origin === origin);
  const kinds = {};
  for (const e of mine) {
    const k = (kinds[kindOf(e)] ??= { transferred: 0, decoded: 0, files: 0 });
    k.transferred += e.transferred;
    k.decoded += e.decoded;
    k.files += 1;
  }
  const total = (f) => mine.reduce((n, e) => n + e[f], 0);
  return { kinds, transferred: total('transferred'), decoded: total('decoded'), requests: mine.length };
}

const kib = (n) => `${(n / 1024).toFixed(1)} KiB`;

describe('browser bundle delivery', () => {
  let stack;
  const figures = {};
  before(async () => {
    stack = await startStack({ hosts: ['gpu-l4-01'] });
  });
  after(async () => {
    if (Object.keys(figures).length) {
      writeFileSync(path.join(ARTIFACTS, 'bundle-sizes.json'), `${JSON.stringify(figures, null, 2)}\n`);
      console.log('first page per role, and the request page (Tessera origin; transferred = compressed, with headers):');
      for (const [role, f] of Object.entries(figures)) {
        const parts = Object.entries(f.tessera.kinds)
          .map(([k, v]) => `${k} ${kib(v.transferred)} (of ${kib(v.decoded)})`)
          .join(', ');
        console.log(`  ${role}: ${kib(f.tessera.transferred)} transferred, ${kib(f.tessera.decoded)} decoded, ${f.tessera.requests} requests: ${parts}` +
          (f.other.requests ? `; IdP ${kib(f.other.transferred)} in ${f.other.requests} requests` : ''));
      }
    }
    await stack?.stop();
  });

  // Every Tessera response of these kinds is compressed; the hashed bundle
  // files are cacheable for a year.
  function assertDelivery(entries, role) {
    const mine = entries.filter((e) => new URL(e.url).origin === stack.appUrl && e.status === 200);
    for (const kind of ['html', 'js', 'wasm']) {
      const files = mine.filter((e) => kindOf(e) === kind);
      assert.ok(files.length > 0, `${role}: no ${kind} response from Tessera`);
      for (const e of files) {
        assert.match(e.encoding ?? '', /^(br|gzip)$/, `${role}: ${e.url} without Content-Encoding`);
      }
    }
    const bundle = mine.filter((e) => /\/pkg\/tessera\.[^.]+\.(js|wasm|css)$/.test(new URL(e.url).pathname));
    const kinds = [...new Set(bundle.map((e) => new URL(e.url).pathname.split('.').pop()))].sort();
    assert.deepEqual(kinds, ['css', 'js', 'wasm'], `${role}: hashed bundle files: ${mine.map((e) => e.url).join(' ')}`);
    for (const e of bundle) {
      assert.equal(e.cacheControl, 'public, max-age=31536000, immutable', e.url);
    }
  }

  async function measure(role, visit) {
    const { context, page } = await newPage(stack);
    const recording = await recordNetwork(page);
    await visit(page);
    await hydrated(page);
    await page.waitForLoadState('networkidle');
    const entries = await recording.stop();
    await context.close();
    const tessera = summarize(entries, stack.appUrl);
    const others = entries.filter((e) => new URL(e.url).origin !== stack.appUrl);
    figures[role] = {
      tessera,
      other: {
        transferred: others.reduce((n, e) => n + e.transferred, 0),
        requests: others.length,
      },
    };
    return entries;
  }

  it('anonymous visitor: the signed-out page (Tessera\'s public page) is compressed and hashed', async () => {
    const entries = await measure('anonymous (/signed-out)', (page) => page.goto(`${stack.appUrl}/signed-out`));
    assertDelivery(entries, 'anonymous');
  });

  it('tenant member: the first page after sign-in is compressed and hashed', async () => {
    const entries = await measure('tenant member (bob, /)', (page) => signIn(stack, page, 'bob'));
    assertDelivery(entries, 'member');
  });

  it('platform admin: the first page after sign-in is compressed and hashed', async () => {
    const entries = await measure('platform admin (alice, /fleet)', (page) => signIn(stack, page, 'alice', '/fleet'));
    assertDelivery(entries, 'admin');
  });

  // A lazy island's own WASM file (`split_<island>_loader_*.wasm`).
  const lazyIslands = (entries) => entries
    .map((e) => new URL(e.url).pathname.split('/').pop())
    .filter((name) => /^split_.*\.wasm$/.test(name));

  it('first pages load no lazy island; the request page loads the request form\'s, and the form works', async () => {
    const first = await measure('tenant member, first page (bob, /t/vision)', (page) => signIn(stack, page, 'bob', '/t/vision'));
    assert.deepEqual(lazyIslands(first), [], 'the tenant page has no lazy island');
    const { context, page } = await newPage(stack);
    const recording = await recordNetwork(page);
    await signIn(stack, page, 'bob', '/t/vision/request');
    await hydrated(page);
    await page.waitForLoadState('networkidle');
    const entries = await recording.stop();
    const tessera = summarize(entries, stack.appUrl);
    figures['the request page (bob, /t/vision/request)'] = { tessera, other: { transferred: 0, requests: 0 } };
    assertDelivery(entries, 'request page');
    const loaded = lazyIslands(entries);
    assert.equal(loaded.length, 1, `one lazy island: ${loaded.join(' ')}`);
    assert.match(loaded[0], /^split_request_form_loader_/);
    // The lazy island's file and the chunks it shares are hashed too, so the
    // next visit takes them from the cache without asking.
    const wasm = entries.filter((e) => new URL(e.url).origin === stack.appUrl && kindOf(e) === 'wasm');
    assert.ok(wasm.length > 1, `the request page's WASM files: ${wasm.map((e) => e.url).join(' ')}`);
    for (const e of wasm) {
      assert.equal(e.cacheControl, 'public, max-age=31536000, immutable', e.url);
    }
    // Hydrated: the form checks what is typed in the browser.
    await page.fill('[data-test=lease-hours]', '0');
    await page.waitForSelector('[data-test=validation]', { timeout: 10_000 });
    assert.ok(await page.isDisabled('[data-test=submit-request]'));
    await context.close();
  });

  it('a file without a hash in its name is not cached for long; a hashed one comes from the cache on the next page', async () => {
    const res = await fetch(`${stack.appUrl}/favicon.svg`, { headers: { 'accept-encoding': 'br' } });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('cache-control'), 'public, max-age=300');
    const { context, page } = await newPage(stack);
    await page.goto(`${stack.appUrl}/signed-out`);
    await hydrated(page);
    const recording = await recordNetwork(page);
    await page.goto(`${stack.appUrl}/signed-out?again`);
    await hydrated(page);
    const entries = await recording.stop();
    await context.close();
    const wasm = entries.filter((e) => new URL(e.url).pathname.endsWith('.wasm'));
    // Served from the browser's cache: nothing over the wire.
    assert.ok(wasm.every((e) => e.transferred === 0 || e.status === 304), JSON.stringify(wasm));
  });
});
