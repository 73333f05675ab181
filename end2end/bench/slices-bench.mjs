// Slice benchmark: a real server, N simulated hosts in one agent process, and
// clients on the REST API.
//   request → active latency (p50, p99), sequential requests
//   admissions per second with C concurrent clients
// Usage: node bench/slices-bench.mjs [--hosts 100] [--latency 200] [--requests 1000] [--clients 16,64]
// (each client count creates --requests slices on an emptied fleet).
// Set TESSERA_BENCH_DATABASE_URL to run on PostgreSQL.
import { startFleet, arg, pct, sleep, SLICE } from './fleet.mjs';

const HOSTS = arg('hosts', 100);
const LATENCY_N = arg('latency', 200);
const REQUESTS = arg('requests', 1000);
const CLIENTS = String(process.argv.includes('--clients') ? process.argv[process.argv.indexOf('--clients') + 1] : '16')
  .split(',').map(Number);

const fleet = await startFleet({ hosts: HOSTS });
try {
  const { api } = fleet;
  // 1. Request → active, one at a time.
  const latencies = [];
  const ids = [];
  for (let i = 0; i < LATENCY_N; i++) {
    const t0 = performance.now();
    const { status, body } = await api('POST', '/allocations', SLICE);
    if (status !== 201) throw new Error(`create: ${status} ${JSON.stringify(body)}`);
    for (;;) {
      const a = (await api('GET', `/allocations/${body.id}`)).body;
      if (a.state === 'active') break;
      if (['failed', 'queued'].includes(a.state)) throw new Error(`allocation ${body.id} ${a.state}: ${a.reason}`);
      await sleep(5);
    }
    latencies.push(performance.now() - t0);
    ids.push(body.id);
  }
  for (const id of ids) await api('POST', `/allocations/${id}/release`);

  // 2. Admissions per second: C clients creating REQUESTS slices together,
  // for each client count C (then everything is released again).
  const admissions = [];
  for (const clients of CLIENTS) {
    let next = 0;
    let placed = 0;
    const made = [];
    const t1 = performance.now();
    await Promise.all(Array.from({ length: clients }, async () => {
      while (next < REQUESTS) {
        next++;
        const { status, body } = await api('POST', '/allocations', SLICE);
        if (status !== 201) throw new Error(`create: ${status} ${JSON.stringify(body)}`);
        if (body.state === 'placed') placed++;
        made.push(body.id);
      }
    }));
    const seconds = (performance.now() - t1) / 1000;
    admissions.push({ requests: REQUESTS, clients, placed, seconds: +seconds.toFixed(2), per_second: +(REQUESTS / seconds).toFixed(1) });
    for (const id of made) await api('POST', `/allocations/${id}/release`);
  }
  const metrics = await (await fetch(`${fleet.url}/metrics`)).text();
  const index = Object.fromEntries([...metrics
    .matchAll(/^tessera_fleet_index_plans_total\{outcome="(\w+)"\} (\d+)/gm)].map((m) => [m[1], Number(m[2])]));
  // Admission turns (one transaction each) and the requests they admitted.
  const turnOf = (what) => Number((metrics.match(new RegExp(`^tessera_admission_turn_requests_${what} (\\S+)`, 'm')) || [])[1] || 0);
  console.log(JSON.stringify({
    hosts: HOSTS,
    gpus: HOSTS * 8,
    database: fleet.database,
    request_to_active_ms: { n: LATENCY_N, p50: +pct(latencies, 50).toFixed(1), p99: +pct(latencies, 99).toFixed(1), max: +Math.max(...latencies).toFixed(1) },
    admissions,
    fleet_index_plans: index,
    admission_turns: { turns: turnOf('count'), requests: turnOf('sum') },
  }, null, 2));
} finally {
  fleet.stop();
}
