// Runs the demo identity provider: node idp/cli.mjs --port 4011 --app http://127.0.0.1:3000 --secret S
import { parseArgs } from 'node:util';
import { startIdp } from './provider.mjs';
import { users, tesseraClient } from './users.mjs';

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '4011' },
    app: { type: 'string', default: 'http://127.0.0.1:3000' },
    secret: { type: 'string', default: 'tessera-demo-client-secret' },
  },
});
const idp = await startIdp({ port: Number(values.port), clients: [tesseraClient(values.app, values.secret)], users });
console.log(`identity provider listening at ${idp.issuer}`);
const stop = async () => { await idp.close(); process.exit(0); };
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
