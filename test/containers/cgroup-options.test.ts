/**
 * HostConfig's cgroup and kernel options through the docker CLI and the API: block I/O throttles,
 * the OOM killer, kernel memory, CPU real-time, CgroupParent and CgroupnsMode reach the container's
 * cgroup files; what this host cannot do is discarded with dockerd's warning, what Linux refuses
 * gets dockerd's error, and what dockerd stores without effect reads back.
 */
import { describe, it, before } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { startDaemon } from '../harness/index.js';
import { useDaemonWithBusybox } from '../harness/busybox-daemon.js';
import { cgroupSupport, hostCgroupSupport } from '../../src/engine/containers/cgroup-options.js';
import { detectCgroupLayout } from '../../src/runtime/cgroups.js';

const tag = randomBytes(3).toString('hex');

/** A whole block device of this host (its /dev path and major:minor), for throttles. */
function blockDevice(): { path: string; numbers: string } | undefined {
  for (const name of readdirSync('/sys/block')) {
    if (/^(loop|ram|zram|dm-|nbd)/.test(name) || !existsSync(`/dev/${name}`)) continue;
    return { path: `/dev/${name}`, numbers: readFileSync(`/sys/block/${name}/dev`, 'utf8').trim() };
  }
  return undefined;
}

/** Removes a cgroup parent a test made, in every v1 hierarchy (and the unified one). */
function removeParent(parent: string): void {
  const layout = detectCgroupLayout();
  for (const mount of [...layout.v1.keys(), ...(layout.unified ? [layout.unified] : [])]) {
    try {
      rmdirSync(join(mount, parent));
    } catch {
      // Not made in this hierarchy.
    }
  }
}

describe('cgroup and kernel options', () => {
  const { daemon, image: pulled } = useDaemonWithBusybox();
  const support = hostCgroupSupport();
  let image = '';
  before(() => {
    image = pulled();
  });

  it('reads support from the cgroup files as dockerd does', () => {
    const v1 = { kind: 'v1' as const, v1: new Map([['/c/blkio', ['blkio']], ['/c/cpu', ['cpu']], ['/c/memory', ['memory']]]) };
    const only = new Set(['/c/blkio/blkio.throttle.read_bps_device', '/c/cpu/cpu.rt_period_us', '/c/memory/memory.oom_control']);
    const s = cgroupSupport(v1, (p) => only.has(p));
    assert.deepEqual([s.blkioWeight, s.readBps, s.writeBps, s.cpuRealtime, s.oomKillDisable, s.kernelMemory], [false, true, false, true, true, false]);
  });

  it('block I/O throttles, OomKillDisable and CgroupnsMode reach the container (docker CLI)', { skip: !support.readBps || support.version !== 1 ? 'needs cgroup v1 blkio throttles' : false }, async () => {
    const d = daemon();
    const dev = blockDevice();
    assert.ok(dev, 'a block device');
    const name = `blk-${tag}`;
    const r = await d.docker(['run', '--name', name, '--device-read-bps', `${dev.path}:1mb`, '--device-write-iops', `${dev.path}:50`, '--oom-kill-disable', '-m', '64m', '--cgroupns', 'private', image,
      'sh', '-c', 'cat /sys/fs/cgroup/blkio/blkio.throttle.read_bps_device /sys/fs/cgroup/blkio/blkio.throttle.write_iops_device; grep oom_kill_disable /sys/fs/cgroup/memory/memory.oom_control; grep -c ":/$" /proc/self/cgroup; grep -vc ":/$" /proc/self/cgroup; true']);
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout.trim().split('\n');
    assert.deepEqual(lines.slice(0, 3), [`${dev.numbers} 1048576`, `${dev.numbers} 50`, 'oom_kill_disable 1']);
    assert.ok(Number(lines[3]) > 3, 'every hierarchy shows / in a private cgroup namespace');
    assert.equal(lines[4], '0');
    const hc = JSON.parse((await d.docker(['inspect', '--format', '{{json .HostConfig}}', name])).stdout);
    assert.deepEqual(hc.BlkioDeviceReadBps, [{ Path: dev.path, Rate: 1048576 }]);
    assert.deepEqual(hc.BlkioDeviceWriteIOps, [{ Path: dev.path, Rate: 50 }]);
    assert.equal(hc.OomKillDisable, true);
    assert.equal(hc.CgroupnsMode, 'private');
    const host = await d.docker(['run', '--rm', image, 'cat', '/proc/self/cgroup']);
    assert.match(host.stdout, /:\/berth\/[0-9a-f]{64}$/m, 'the default on cgroup v1 is the host cgroup namespace');
    assert.equal((await d.docker(['rm', name])).code, 0);
  });

  it('CgroupParent places the cgroup; with --cpu-rt-runtime the parents get a real-time budget and the container its runtime', { skip: !support.cpuRealtime ? 'no CPU real-time group scheduling' : false }, async () => {
    const parent = `berth-test-${tag}/inner`;
    // A daemon of its own: its flag gives every parent of its containers (/berth too) the budget.
    const berthBudget = '/sys/fs/cgroup/cpu/berth/cpu.rt_runtime_us';
    const before = existsSync(berthBudget) ? readFileSync(berthBudget, 'utf8').trim() : undefined;
    const rt = await startDaemon({ args: ['--cpu-rt-runtime', '50000'] });
    try {
      assert.equal((await rt.docker(['pull', '-q', image])).code, 0);
      const r = await rt.docker(['run', '--rm', '--cgroup-parent', parent, '--cpu-rt-runtime', '10000', image, 'sh', '-c', 'cat /sys/fs/cgroup/cpu/cpu.rt_runtime_us; grep -E ":cpu(,cpuacct)?:" /proc/self/cgroup']);
      assert.equal(r.code, 0, r.stderr);
      const [runtime, line] = r.stdout.trim().split('\n');
      assert.equal(runtime, '10000');
      assert.match(line!, new RegExp(`:/${parent}/[0-9a-f]{64}$`));
      for (const dir of [`berth-test-${tag}`, parent]) assert.equal(readFileSync(join('/sys/fs/cgroup/cpu', dir, 'cpu.rt_runtime_us'), 'utf8').trim(), '50000');
      const bad = await rt.request('POST', '/containers/create', { body: { Image: image, HostConfig: { CpuRealtimePeriod: 1000, CpuRealtimeRuntime: 2000 } } });
      assert.equal(bad.status, 400);
      assert.equal(bad.json().message, 'cpu real-time runtime cannot be higher than cpu real-time period');
    } finally {
      await rt.teardown();
      removeParent(parent);
      removeParent(`berth-test-${tag}`);
      try {
        if (before !== undefined) writeFileSync(berthBudget, before);
      } catch {
        // A container of another daemon holds real-time runtime there now.
      }
    }
  });

  it("discards what the kernel lacks with dockerd's warnings, and refuses what Linux cannot do", async () => {
    const d = daemon();
    const create = (hc: Record<string, unknown>, version = '') => d.request('POST', `${version}/containers/create`, { body: { Image: image, Cmd: ['true'], HostConfig: hc } });
    const w = await create({ BlkioWeight: 300, CpuPercent: 50, CpuCount: 2 });
    assert.equal(w.status, 201, w.text());
    const warnings: string[] = w.json().Warnings;
    assert.ok(warnings.includes('linux does not support CPU percent. Percent discarded.'), warnings.join('|'));
    const hc = (await d.request('GET', `/containers/${w.json().Id}/json`)).json().HostConfig;
    assert.equal(hc.CpuPercent, 0);
    assert.equal(hc.CpuCount, 2, 'stored, without effect on Linux (as dockerd)');
    if (support.blkioWeight) assert.equal(hc.BlkioWeight, 300);
    else {
      assert.ok(warnings.includes('Your kernel does not support Block I/O weight or the cgroup is not mounted. Weight discarded.'));
      assert.equal(hc.BlkioWeight, 0);
      // docker update takes the weight as dockerd does: discarded with the same warning.
      const u = await d.request('POST', `/containers/${w.json().Id}/update`, { body: { BlkioWeight: 500 } });
      assert.equal(u.status, 200, u.text());
      assert.deepEqual(u.json().Warnings, ['Your kernel does not support Block I/O weight or the cgroup is not mounted. Weight discarded.']);
    }
    const info = (await d.request('GET', '/info')).json();
    assert.equal(info.OomKillDisable, support.oomKillDisable);
    assert.equal(info.Warnings.includes('WARNING: No oom kill disable support'), support.version === 1 && !support.oomKillDisable);
    assert.equal(info.Warnings.some((w: string) => /throttle\.read_bps_device|io\.max \(rbps\)/.test(w)), !support.readBps);
    const range = await create({ BlkioWeight: 5 });
    assert.equal(range.status, support.blkioWeight ? 400 : 201);
    const io = await create({ IOMaximumBandwidth: 1000 });
    assert.equal(io.status, 400);
    assert.equal(io.json().message, 'invalid option: QoS maximum bandwidth configuration is not supported on linux');
    const iops = await create({ IOMaximumIOps: 10 });
    assert.equal(iops.json().message, 'invalid option: QoS maximum IOPs configuration is not supported on linux');
    const ns = await create({ CgroupnsMode: 'shared' });
    assert.equal(ns.status, 400);
    assert.equal(ns.json().message, 'invalid cgroup namespace mode: shared');
    const storage = await create({ StorageOpt: { size: '1G' } });
    assert.equal(storage.status, 500);
    assert.equal(storage.json().message, "--storage-opt is supported only for overlay over xfs with 'pquota' mount option");
    // Stored as given and without effect, as dockerd does without a userns remap; Cgroup is never read by dockerd.
    const kept = await create({ UsernsMode: 'host', Cgroup: 'container:other' });
    assert.equal(kept.status, 201, kept.text());
    const keptHc = (await d.request('GET', `/containers/${kept.json().Id}/json`)).json().HostConfig;
    assert.equal(keptHc.UsernsMode, 'host');
    assert.equal(keptHc.Cgroup, 'container:other');
    assert.equal((await d.request('POST', `/containers/${kept.json().Id}/start`)).status, 204);
    // KernelMemory: honoured (where the kernel has kmem) for API < 1.42, ignored from 1.42 on.
    const kmemOld = await create({ KernelMemory: 64 << 20, Memory: 128 << 20 }, '/v1.41');
    assert.equal(kmemOld.status, 201, kmemOld.text());
    const oldHc = (await d.request('GET', `/v1.41/containers/${kmemOld.json().Id}/json`)).json().HostConfig;
    assert.equal(oldHc.KernelMemory, support.kernelMemory ? 64 << 20 : undefined);
    const kmemNew = await create({ KernelMemory: 64 << 20 });
    assert.equal(kmemNew.status, 201);
    assert.equal((await d.request('GET', `/containers/${kmemNew.json().Id}/json`)).json().HostConfig.KernelMemory, undefined);
    for (const id of [w.json().Id, range.json().Id, kept.json().Id, kmemOld.json().Id, kmemNew.json().Id]) if (id) await d.request('DELETE', `/containers/${id}?force=1`);
  });

  it('KernelMemoryTCP reaches the memory cgroup; DeviceRequests with no driver fail the start as in dockerd', async () => {
    const d = daemon();
    if (support.kernelMemoryTCP) {
      const c = await d.request('POST', '/containers/create', { body: { Image: image, Cmd: ['cat', '/sys/fs/cgroup/memory/memory.kmem.tcp.limit_in_bytes'], HostConfig: { KernelMemoryTCP: 32 << 20 } } });
      assert.equal(c.status, 201, c.text());
      assert.equal((await d.request('POST', `/containers/${c.json().Id}/start`)).status, 204);
      await d.request('POST', `/containers/${c.json().Id}/wait`);
      assert.equal((await d.docker(['logs', c.json().Id])).stdout.trim(), String(32 << 20));
      await d.request('DELETE', `/containers/${c.json().Id}`);
    }
    const gpu = await d.docker(['run', '--rm', '--gpus', 'all', image, 'true']);
    assert.notEqual(gpu.code, 0);
    assert.match(gpu.stderr, /could not select device driver "" with capabilities: \[\[gpu\]\]/);
  });
});
