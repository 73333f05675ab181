// An idle fleet: what N simulated hosts (8 H100s each, one agent process,
// each host with its own credential, observing every 5 s and polling every
// 15 s (an unchanged report rides on the poll), sampling telemetry every
// 10 s and sending it every minute) cost the release server, and PostgreSQL
// when it is
// the database, while nothing else happens. Measures, after the fleet has
// settled, the CPU the server (and every postgres process) used over a
// window, the server's resident memory, and the report round trip seen from
// outside (a report of one more host, sent like an agent's). Prints JSON.
// Usage: node bench/idle-bench.mjs [--hosts 1000] [--seconds 60] [--settle hosts/40, at least 20]
import { readFileSync, readdirSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { startFleet, arg, sleep, pct } from './fleet.mjs';

const HOSTS = arg('hosts', 1000);
const SECONDS = arg('seconds', 60);
// Settling: the hosts' first reports, and the reports after their agents
// first apply the desired state, are processed in full, a few thousand a
// minute at 5,000 hosts; the window must see only the idle fleet.
const SETTLE = arg('settle', Math.max(20, Math.round(HOSTS / 40)));
const TICK = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim());

/** CPU seconds a process has used (user + system). */
const cpuOf = (pid) => {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / TICK;
};
/** CPU seconds of every postgres process now (0 without any). */
const postgresCpu = () => readdirSync('/proc').filter((d) => /^\d+$/.test(d)).reduce((sum, pid) => {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'postgres' ? sum + cpuOf(pid) : sum;
  } catch {
    return sum; // gone meanwhile
  }
}, 0);
const rssMiB = (pid) => Number(readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+)/)[1]) / 1024;

const fleet = await startFleet({ hosts: HOSTS });
try {
  await sleep(SETTLE * 1000);
  const pid = fleet.server.pid;
  const [server0, pg0, agent0, t0] = [cpuOf(pid), postgresCpu(), cpuOf(fleet.agent.pid), Date.now()];
  await sleep(SECONDS * 1000);
  const wall = (Date.now() - t0) / 1000;
  const server = (cpuOf(pid) - server0) / wall;
  // The one process simulating every host (not part of the target).
  const agent = (cpuOf(fleet.agent.pid) - agent0) / wall;
  const postgres = fleet.database === 'postgres' ? (postgresCpu() - pg0) / wall : 0;
  // Resident memory while idling, before the probe and the one scrape of
  // /metrics below (which renders every GPU's series) add theirs.
  const idleRss = rssMiB(pid);
  // Report round trips of one host, like an agent's, while the fleet idles.
  const token = fleet.cli('create-join-token');
  // Enrolled like an agent: a busy server (503) is asked again.
  let enrolled;
  for (let tries = 0; !enrolled; tries++) {
    const res = await fetch(`${fleet.url}/api/agent/v1/enroll`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ join_token: token, hostname: 'probe-host' }),
    });
    const body = await res.json();
    if (res.ok) enrolled = body;
    else if (res.status !== 503 || tries >= 60) throw new Error(`enrol: ${res.status} ${JSON.stringify(body)}`);
    else await sleep(1000);
  }
  const report = {
    hostname: 'probe-host', agent_version: 'bench', cpu_milli: 96000, memory_mib: 1048576, backend: 'simulated',
    driver_version: '550', applied_generation: null, errors: [],
    gpus: Array.from({ length: 8 }, (_, i) => ({ index: i, uuid: `GPU-feedbeef000${i}`, name: 'NVIDIA H100 80GB HBM3',
      memory_mib: 81559, mig_capable: true, mig_enabled: true })),
  };
  const times = [];
  // Answers other than 200 (an overloaded server's 503 "busy") are counted,
  // and their round trips too.
  const refused = {};
  for (let i = 0; i < 50; i++) {
    const start = performance.now();
    const res = await fetch(`${fleet.url}/api/agent/v1/report`, {
      method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${enrolled.credential}` },
      body: JSON.stringify(report),
    });
    await res.text();
    if (res.status >= 400 && res.status < 500) throw new Error(`report: ${res.status}`);
    if (!res.ok) refused[res.status] = (refused[res.status] || 0) + 1;
    times.push(performance.now() - start);
    await sleep(100);
  }
  // What became of the reports (this process's counters since it started).
  const scrapeStart = performance.now();
  const scrape = await fetch(`${fleet.url}/metrics`);
  const metrics = await scrape.text();
  const scrapeMs = performance.now() - scrapeStart;
  const reports = Object.fromEntries([...metrics
    .matchAll(/^tessera_agent_reports_total\{outcome="(\w+)"\} (\d+)/gm)].map((m) => [m[1], Number(m[2])]));
  console.log(JSON.stringify({
    database: fleet.database, hosts: HOSTS, gpus: HOSTS * 8, window_s: Math.round(wall),
    server_cores: +server.toFixed(3), postgres_cores: +postgres.toFixed(3),
    together_cores: +(server + postgres).toFixed(3), server_rss_mib: Math.round(idleRss),
    server_rss_after_scrape_mib: Math.round(rssMiB(pid)),
    agents_cores: +agent.toFixed(3),
    report_p50_ms: +pct(times, 50).toFixed(2), report_p99_ms: +pct(times, 99).toFixed(2),
    report_refused: refused, reports,
    scrape_status: scrape.status, scrape_ms: Math.round(scrapeMs),
  }));
} finally {
  fleet.stop();
}
