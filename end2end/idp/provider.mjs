// A real, standards-compliant OpenID Provider (npm `oidc-provider`) for the demo
// and the end-to-end tests, with a login form that checks passwords and users
// whose `groups` claim drives Tessera's roles.
import http from 'node:http';
import https from 'node:https';
import { generateKeyPairSync, timingSafeEqual } from 'node:crypto';
import Provider from 'oidc-provider';

const escape = (s) =>
  String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);

function page(title, body) {
  return `<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escape(title)}</title><style>
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;background:#eef1f6;margin:0;color:#1c2230}
.box{max-width:380px;margin:12vh auto;background:#fff;border-radius:14px;padding:2rem;box-shadow:0 10px 30px rgba(20,30,60,.12)}
h1{font-size:1.3rem;margin:0 0 .3rem}p{color:#5b6477;margin:.2rem 0 1.2rem;font-size:.9rem}
label{display:block;font-size:.85rem;font-weight:600;margin:.8rem 0 .3rem}
input{width:100%;box-sizing:border-box;padding:.6rem .7rem;border:1px solid #d5dae5;border-radius:8px;font-size:1rem}
button{margin-top:1.2rem;width:100%;padding:.7rem;border:0;border-radius:8px;background:#0b5cff;color:#fff;font-weight:600;font-size:1rem;cursor:pointer}
.err{background:#fdecee;color:#b4232f;padding:.6rem .8rem;border-radius:8px;font-size:.9rem}
.brand{font-weight:800;color:#0b5cff;letter-spacing:.02em;margin-bottom:1rem}
</style></head><body><div class="box"><div class="brand">Example Corp SSO</div>${body}</div></body></html>`;
}

function loginForm(uid, clientId, error) {
  return page(
    'Sign in',
    `<h1>Sign in</h1><p>to continue to <b>${escape(clientId)}</b></p>
${error ? `<div class="err" id="login-error">${escape(error)}</div>` : ''}
<form method="post" action="/interaction/${escape(uid)}/login" autocomplete="off">
<label for="username">Username</label><input id="username" name="username" required autofocus>
<label for="password">Password</label><input id="password" name="password" type="password" required>
<button type="submit" id="sign-in">Sign in</button></form>`,
  );
}

async function readForm(req) {
  let body = '';
  for await (const chunk of req) {
    body += chunk;
    if (body.length > 10_000) throw new Error('form too large');
  }
  return Object.fromEntries(new URLSearchParams(body));
}

function sameSecret(a, b) {
  const x = Buffer.from(String(a));
  const y = Buffer.from(String(b));
  return x.length === y.length && timingSafeEqual(x, y);
}

/**
 * Starts the provider.
 * With `tls` ({ key, cert } in PEM), it serves HTTPS, as a company's IdP
 * behind an internal CA does.
 * @param {{port:number, host?:string, clients:object[], users:{username:string,password:string,name:string,email:string,groups:string[]}[], tls?:{key:string,cert:string}}} opts
 * @returns {Promise<{issuer:string, close:()=>Promise<void>}>}
 */
export async function startIdp({ port, host = '127.0.0.1', clients, users, tls }) {
  const issuer = `${tls ? 'https' : 'http'}://${host}:${port}`;
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = { ...privateKey.export({ format: 'jwk' }), use: 'sig', alg: 'RS256', kid: 'tessera-demo' };
  const byId = new Map(users.map((u) => [u.username, u]));

  const provider = new Provider(issuer, {
    clients,
    jwks: { keys: [jwk] },
    cookies: { keys: [Buffer.from(generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ format: 'der', type: 'spki' })).toString('base64')] },
    claims: {
      openid: ['sub'],
      email: ['email', 'email_verified'],
      profile: ['name', 'preferred_username'],
      groups: ['groups'],
    },
    scopes: ['openid', 'email', 'profile', 'groups'],
    // Put the claims of granted scopes (groups!) into the id_token itself.
    conformIdTokenClaims: false,
    pkce: { required: () => true },
    features: {
      devInteractions: { enabled: false },
      rpInitiatedLogout: { enabled: true },
    },
    interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
    async findAccount(ctx, sub) {
      const u = byId.get(sub);
      if (!u) return undefined;
      return {
        accountId: sub,
        async claims() {
          return {
            sub,
            email: u.email,
            email_verified: true,
            name: u.name,
            preferred_username: u.username,
            groups: u.groups,
          };
        },
      };
    },
    ttl: { Session: 8 * 3600, Interaction: 3600, Grant: 8 * 3600, IdToken: 3600, AccessToken: 3600, AuthorizationCode: 60 },
  });
  provider.on('server_error', (ctx, err) => console.error('idp error', err));

  const callback = provider.callback();
  const handler = async (req, res) => {
    const url = new URL(req.url, issuer);
    const m = url.pathname.match(/^\/interaction\/([A-Za-z0-9_-]+)(\/login)?$/);
    if (!m) return callback(req, res);
    try {
      const details = await provider.interactionDetails(req, res);
      const clientId = details.params.client_id;
      if (details.prompt.name === 'login') {
        if (req.method === 'POST' && m[2]) {
          const form = await readForm(req);
          const u = byId.get(form.username);
          if (!u || !sameSecret(form.password, u.password)) {
            res.writeHead(401, { 'content-type': 'text/html; charset=utf-8' });
            return res.end(loginForm(details.uid, clientId, 'Wrong username or password.'));
          }
          return await provider.interactionFinished(req, res, { login: { accountId: u.username } }, { mergeWithLastSubmission: false });
        }
        res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
        return res.end(loginForm(details.uid, clientId));
      }
      // First-party app: grant what it asked for without a consent screen.
      const { prompt, session, params } = details;
      const grant = details.grantId
        ? await provider.Grant.find(details.grantId)
        : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
      if (prompt.details.missingOIDCScope) grant.addOIDCScope(prompt.details.missingOIDCScope.join(' '));
      if (prompt.details.missingOIDCClaims) grant.addOIDCClaims(prompt.details.missingOIDCClaims);
      if (prompt.details.missingResourceScopes) {
        for (const [indicator, scopes] of Object.entries(prompt.details.missingResourceScopes)) {
          grant.addResourceScope(indicator, scopes.join(' '));
        }
      }
      const grantId = await grant.save();
      const consent = details.grantId ? {} : { grantId };
      return await provider.interactionFinished(req, res, { consent }, { mergeWithLastSubmission: true });
    } catch (err) {
      res.writeHead(400, { 'content-type': 'text/html; charset=utf-8' });
      res.end(page('Sign-in error', `<h1>Sign-in error</h1><p>${escape(err.message)}</p>`));
    }
  };
  const server = tls ? https.createServer({ key: tls.key, cert: tls.cert }, handler) : http.createServer(handler);
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  return {
    issuer,
    close: () => new Promise((resolve) => { server.closeAllConnections?.(); server.close(() => resolve()); }),
  };
}
