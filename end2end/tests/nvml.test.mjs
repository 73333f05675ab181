// The agent's NVML backend end to end: a real `tessera-agent --backend nvml`
// process on the fake NVML library (NVML's C ABI, answering as NVIDIA
// documents the driver answers) serves a MIG slice from request to release:
// the instance made through the driver, activity per instance through GPM
// (Hopper), the slice's real process stopped at release and said so.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startStack, newPage, screenshot, signIn, waitFor } from './harness.mjs';

describe('the NVML backend on the fake library', () => {
  let stack;
  let processes;
  const children = [];
  before(async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'tessera-e2e-nvml-'));
    const host = path.join(dir, 'host.toml');
    writeFileSync(host, [
      'hostname = "gpu-nvml-h100"', 'cpu_cores = 32', 'memory_gib = 256', 'workload = "training"',
      '[[gpus]]', 'model = "H100-80GB"', 'count = 1', 'mig_enabled = true', 'instances = []', '',
    ].join('\n'));
    processes = path.join(dir, 'processes.toml');
    writeFileSync(processes, '');
    stack = await startStack({ hosts: [{ name: 'gpu-nvml-h100', nvml: host, processes }] });
  });
  after(async () => {
    for (const c of children) c.kill('SIGKILL');
    await stack?.stop();
  });

  it('a MIG slice: made through the driver, measured per instance, its process stopped at release', async () => {
    const token = stack.apiToken('vision');
    const made = await stack.api(token, 'POST', '/allocations', { pool: 'h100-mig', shape: { kind: 'mig', profile: '1g.10gb' }, lease_hours: 1 });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    const id = made.body.id;
    let view;
    await waitFor(async () => {
      view = (await stack.api(token, 'GET', `/allocations/${id}`)).body;
      return view.state === 'active';
    }, { timeoutMs: 60_000, what: 'the slice active on the NVML host' });
    const env = Object.fromEntries(view.connection.env);
    assert.match(env.CUDA_VISIBLE_DEVICES, /^MIG-[0-9a-f-]{36}$/, 'the MIG device the driver made');
    assert.equal(env.TESSERA_ALLOCATION, String(id));

    // A process of the slice runs in its GPU instance.
    const work = spawn('sleep', ['300'], { env: { ...process.env, TESSERA_ALLOCATION: String(id) }, stdio: 'ignore' });
    children.push(work);
    writeFileSync(processes, `[[process]]\npid = ${work.pid}\ngpu = 0\nused_mib = 2048\ngi_start = ${view.mig_start}\n`);

    // Activity per MIG instance comes from GPM on Hopper: the slice's page charts it.
    const { context, page } = await newPage(stack);
    await signIn(stack, page, 'bob', `/t/vision/a/${id}`);
    await waitFor(async () => {
      await page.reload();
      return (await page.locator('[data-test=activity-chart] polyline.chart-line').count()) === 2;
    }, { timeoutMs: 60_000, what: 'the activity charts from the NVML agent' });
    const mean = Number((await page.textContent('[data-test=activity-mean]')).match(/^(\d+) % mean$/)[1]);
    assert.ok(mean > 0 && mean <= 100, `mean ${mean}`);
    await screenshot(page, '80-nvml-allocation-activity');

    // Release: the agent stops the process (SIGTERM) before it destroys the instance.
    const released = await stack.api(token, 'POST', `/allocations/${id}/release`);
    assert.ok(released.status < 300, JSON.stringify(released.body));
    await waitFor(async () => {
      view = (await stack.api(token, 'GET', `/allocations/${id}`)).body;
      return view.state === 'released';
    }, { timeoutMs: 60_000, what: 'the slice released' });
    assert.deepEqual(view.processes_stopped, { terminated: 1, killed: 0 });
    await waitFor(async () => work.exitCode !== null || work.signalCode !== null, { what: 'the slice\'s process gone' });
    await page.reload();
    assert.equal((await page.textContent('[data-test=processes-stopped]')).trim(), '1 process stopped');
    assert.match((await page.textContent('[data-test=lease]')).trim(), /^ended /, 'a released slice has no lease left');
    await screenshot(page, '81-nvml-allocation-released');
    await context.close();
  });
});
