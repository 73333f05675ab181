// Demo identities and the Tessera client, shared by the demo and the tests.
// Groups map to Tessera roles through the server's [directory] configuration.
export const PASSWORD = 'tessera-demo';

export const users = [
  { username: 'alice', name: 'Alice Admin', email: 'alice@example.com', groups: ['gpu-platform-admins'] },
  { username: 'bob', name: 'Bob Builder', email: 'bob@example.com', groups: ['vision-researchers'] },
  { username: 'carol', name: 'Carol Chen', email: 'carol@example.com', groups: ['vision-researchers', 'vision-leads'] },
  { username: 'dave', name: 'Dave Diaz', email: 'dave@example.com', groups: ['nlp-team'] },
  { username: 'erin', name: 'Erin Evans', email: 'erin@example.com', groups: ['nlp-team', 'nlp-leads'] },
].map((u) => ({ ...u, password: PASSWORD }));

export function tesseraClient(baseUrl, secret) {
  return {
    client_id: 'tessera',
    client_secret: secret,
    redirect_uris: [`${baseUrl}/auth/callback`],
    post_logout_redirect_uris: [`${baseUrl}/signed-out`],
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_basic',
  };
}
