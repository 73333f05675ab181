// A company's own PKI: the IdP and Tessera's server behind certificates from
// an internal CA that this test makes with openssl. Without the CA, sign-in
// answers 503 naming the refused certificate and the setting, and an agent
// says the same and does not enrol; with `tls.ca_bundle` (server) and
// `--server-ca` (agent) both work. The client secret is a number (which
// TOML would read as one) and reaches the server from the environment, then from a
// `_FILE`: the IdP accepts the token call only with the exact string.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import { startStack, signInAtIdp, hydrated, screenshot, waitFor, freePort, ARTIFACTS, ROOT } from './harness.mjs';

const CLIENT_SECRET = '20261207';

/** A CA and a server certificate for 127.0.0.1 signed by it, in `dir`. */
function internalPki(dir) {
  const file = (name) => path.join(dir, name);
  const openssl = (...args) => execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  openssl('req', '-x509', ...ec, '-keyout', file('ca.key'), '-out', file('ca.pem'), '-days', '2',
    '-subj', '/CN=Example Corp Internal CA', '-addext', 'basicConstraints=critical,CA:TRUE',
    '-addext', 'keyUsage=critical,keyCertSign,cRLSign');
  openssl('req', ...ec, '-keyout', file('server.key'), '-out', file('server.csr'), '-subj', '/CN=127.0.0.1');
  writeFileSync(file('server.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n'
    + 'keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n');
  openssl('x509', '-req', '-in', file('server.csr'), '-CA', file('ca.pem'), '-CAkey', file('ca.key'),
    '-CAcreateserial', '-out', file('server.pem'), '-days', '2', '-extfile', file('server.ext'));
  return { ca: file('ca.pem'), key: readFileSync(file('server.key'), 'utf8'), cert: readFileSync(file('server.pem'), 'utf8') };
}

/** An HTTPS reverse proxy (the company's ingress) in front of `target`. */
async function tlsProxy(pki, target) {
  const port = await freePort();
  const server = https.createServer({ key: pki.key, cert: pki.cert }, (req, res) => {
    const up = http.request(`${target}${req.url}`, { method: req.method, headers: req.headers }, (r) => {
      res.writeHead(r.statusCode, r.headers);
      r.pipe(res);
    });
    up.on('error', () => res.writeHead(502).end());
    req.pipe(up);
  });
  await new Promise((r) => server.listen(port, '127.0.0.1', r));
  return { url: `https://127.0.0.1:${port}`, close: () => new Promise((r) => { server.closeAllConnections(); server.close(r); }) };
}

const logOf = (name) => readFileSync(path.join(ARTIFACTS, `${name}.log`), 'utf8');

describe('internal CA', () => {
  let stack;
  let pki;
  let proxy;
  before(async () => {
    // The stack's folder is made inside startStack; the PKI needs one first.
    const dir = execFileSync('mktemp', ['-d']).toString().trim();
    pki = internalPki(dir);
    stack = await startStack({ hosts: [], idpTls: { key: pki.key, cert: pki.cert }, clientSecret: CLIENT_SECRET });
  });
  after(async () => {
    await proxy?.close();
    await stack?.stop();
  });

  it('refuses an IdP certificate from an unknown CA with a clear message', async () => {
    const res = await fetch(`${stack.appUrl}/auth/login`, { redirect: 'manual' });
    assert.equal(res.status, 503);
    const text = await res.text();
    assert.match(text, /does not trust/);
    assert.match(text, /UnknownIssuer/);
    assert.match(text, /tls\.ca_bundle/);
  });

  it('signs in through the HTTPS IdP once the CA is configured, with a numeric secret from a file', async () => {
    const secretFile = path.join(stack.dir, 'oidc-client-secret');
    writeFileSync(secretFile, `${CLIENT_SECRET}\n`);
    await stack.restartServer({
      TESSERA_TLS__CA_BUNDLE: pki.ca,
      TESSERA_OIDC__CLIENT_SECRET: null,
      TESSERA_OIDC__CLIENT_SECRET_FILE: secretFile,
    });
    // The browser is not the subject here (a company's browsers trust its
    // CA through their own management); Tessera's server is.
    const context = await stack.browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1280, height: 860 } });
    const page = await context.newPage();
    await page.goto(`${stack.appUrl}/`);
    assert.ok(page.url().startsWith(stack.idp.issuer), `at the IdP: ${page.url()}`);
    await signInAtIdp(page, 'bob');
    await page.waitForURL((u) => u.origin === stack.appUrl);
    await hydrated(page);
    assert.match(await page.textContent('body'), /Bob Builder/);
    await screenshot(page, 'tls-signed-in');
    await context.close();
  });

  it('enrols an agent over HTTPS only with the CA', async () => {
    proxy = await tlsProxy(pki, stack.appUrl);
    const args = (host) => ['--server', proxy.url, '--state-dir', path.join(stack.dir, 'tls-agents'),
      '--backend', 'sim', '--sim-host', path.join(ROOT, 'demo', 'hosts', `${host}.toml`), '--telemetry-interval-seconds', '0'];
    const untrusted = stack.spawnAgent('agent-tls-untrusted', args('gpu-l4-01'),
      { TESSERA_JOIN_TOKEN: stack.cli('create-join-token', '--description', 'untrusted') });
    await waitFor(async () => /TLS certificate is not trusted/.test(logOf('agent-tls-untrusted')),
      { what: 'the agent naming the refused certificate' });
    assert.match(logOf('agent-tls-untrusted'), /--server-ca/);
    assert.doesNotMatch(logOf('agent-tls-untrusted'), /enrolled/);
    untrusted.kill('SIGTERM');

    stack.spawnAgent('agent-tls-trusted', [...args('gpu-a30-01'), '--server-ca', pki.ca],
      { TESSERA_JOIN_TOKEN: stack.cli('create-join-token', '--description', 'trusted') });
    await waitFor(async () => /enrolled/.test(logOf('agent-tls-trusted')), { what: 'enrolment over HTTPS' });
    // The host reports through the proxy: it is on the fleet page.
    const context = await stack.browser.newContext({ ignoreHTTPSErrors: true });
    const page = await context.newPage();
    await page.goto(`${stack.appUrl}/fleet`);
    await signInAtIdp(page, 'alice');
    await page.waitForURL((u) => u.origin === stack.appUrl);
    await waitFor(async () => {
      await page.reload();
      return (await page.locator('[data-test=host][data-hostname=gpu-a30-01]').count()) === 1;
    }, { what: 'the HTTPS-enrolled host on the fleet page' });
    await context.close();
  });
});
