/** POST /containers/{id}/update through the docker CLI and docker-py: limits land in the running container's cgroup files at once and stay for later starts. */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { useDaemon, useSeededRegistry, usePulledBusybox } from '../harness/index.js';
import { haveDockerPy, runDockerPy } from '../harness/python.js';
import type { TestDaemon } from '../harness/daemon.js';

/** A cgroup file of a process, on cgroup v1 (per controller) or v2 (unified). */
function cgroupFile(pid: number, controller: string, v1: string, v2: string): string {
  const lines = readFileSync(`/proc/${pid}/cgroup`, 'utf8').trim().split('\n').map((l) => l.split(':'));
  const own = lines.find((l) => l[1]!.split(',').includes(controller));
  if (own) return readFileSync(`/sys/fs/cgroup/${own[1]}${own[2]}/${v1}`, 'utf8').trim();
  const unified = lines.find((l) => l[0] === '0')!;
  return readFileSync(`/sys/fs/cgroup${unified[2]}/${v2}`, 'utf8').trim();
}

const pidOf = async (d: TestDaemon, id: string) => (await d.request('GET', `/containers/${id}/json`)).json().State.Pid as number;

describe('container update', () => {
  const daemon = useDaemon();
  const busybox = usePulledBusybox(daemon, useSeededRegistry('open'));

  it('docker update changes a running container\'s cgroups at once and the limits survive a restart', async () => {
    const d = daemon();
    const run = await d.docker(['run', '-d', '--memory', '32m', busybox(), 'sleep', '1000']);
    assert.equal(run.code, 0, run.stderr);
    const id = run.stdout.trim();
    try {
      assert.equal(cgroupFile(await pidOf(d, id), 'memory', 'memory.limit_in_bytes', 'memory.max'), String(32 * 1024 * 1024));
      const up = await d.docker(['update', '--memory', '64m', '--memory-swap', '128m', '--cpus', '0.5', '--cpu-shares', '512', '--pids-limit', '50', '--restart', 'on-failure:3', id]);
      assert.equal(up.code, 0, up.stderr);
      const check = async () => {
        const pid = await pidOf(d, id);
        assert.equal(cgroupFile(pid, 'memory', 'memory.limit_in_bytes', 'memory.max'), String(64 * 1024 * 1024));
        assert.equal(cgroupFile(pid, 'pids', 'pids.max', 'pids.max'), '50');
        const quota = cgroupFile(pid, 'cpu', 'cpu.cfs_quota_us', 'cpu.max');
        assert.ok(quota === '50000' || quota === '50000 100000', quota);
      };
      await check();
      const hc = (await d.request('GET', `/containers/${id}/json`)).json().HostConfig;
      assert.equal(hc.Memory, 64 * 1024 * 1024);
      assert.equal(hc.MemorySwap, 128 * 1024 * 1024);
      assert.equal(hc.NanoCpus, 500_000_000);
      assert.equal(hc.CpuShares, 512);
      assert.equal(hc.PidsLimit, 50);
      assert.deepEqual(hc.RestartPolicy, { Name: 'on-failure', MaximumRetryCount: 3 });
      assert.equal((await d.docker(['restart', '-t', '0', id])).code, 0);
      await check();

      const small = await d.request('POST', `/containers/${id}/update`, { body: { Memory: 1024 } });
      assert.equal(small.status, 400);
      assert.equal(small.json().message, 'Minimum memory limit allowed is 6MB');
      const conflicting = await d.request('POST', `/containers/${id}/update`, { body: { CpuQuota: 20000 } });
      assert.equal(conflicting.status, 409);
      assert.equal(conflicting.json().message, `Cannot update container ${id}: Conflicting options: CPU Quota cannot be updated as NanoCPUs has already been set`);
      assert.equal((await d.request('POST', '/containers/nosuch/update', { body: {} })).status, 404);
    } finally {
      await d.docker(['rm', '-f', id]);
    }
  });

  it('a stopped container keeps the update for its next start; AutoRemove refuses a restart policy', async () => {
    const d = daemon();
    const c = await d.docker(['create', busybox(), 'sleep', '1000']);
    const id = c.stdout.trim();
    try {
      const up = await d.request('POST', `/v1.44/containers/${id}/update`, { body: { Memory: 48 * 1024 * 1024, MemorySwap: -1, Unknown: 1 } });
      assert.equal(up.status, 200, up.text());
      assert.deepEqual(up.json(), { Warnings: [] });
      assert.equal((await d.docker(['start', id])).code, 0);
      assert.equal(cgroupFile(await pidOf(d, id), 'memory', 'memory.limit_in_bytes', 'memory.max'), String(48 * 1024 * 1024));
      const rm = await d.docker(['run', '-d', '--rm', busybox(), 'sleep', '1000']);
      const rmId = rm.stdout.trim();
      const bad = await d.docker(['update', '--restart', 'always', rmId]);
      assert.notEqual(bad.code, 0);
      assert.match(bad.stderr, /Restart policy cannot be updated because AutoRemove is enabled for the container/);
      await d.docker(['rm', '-f', rmId]);
    } finally {
      await d.docker(['rm', '-f', id]);
    }
  });

  it('docker-py: Container.update()', { skip: !haveDockerPy() && 'no .venv with docker-py' }, async () => {
    const d = daemon();
    const r = await runDockerPy(
      d.socket,
      `
import docker, json
c = docker.from_env()
ctr = c.containers.run(${JSON.stringify(busybox())}, ['sleep', '1000'], detach=True)
res = ctr.update(mem_limit='40m', memswap_limit='80m', cpu_shares=256)
ctr.reload()
print(json.dumps({'id': ctr.id, 'res': res, 'mem': ctr.attrs['HostConfig']['Memory'], 'shares': ctr.attrs['HostConfig']['CpuShares'], 'pid': ctr.attrs['State']['Pid']}))
`,
    );
    assert.equal(r.code, 0, r.stderr);
    const got = JSON.parse(r.stdout);
    try {
      assert.deepEqual(got.res, { Warnings: [] });
      assert.equal(got.mem, 40 * 1024 * 1024);
      assert.equal(got.shares, 256);
      assert.equal(cgroupFile(got.pid, 'memory', 'memory.limit_in_bytes', 'memory.max'), String(40 * 1024 * 1024));
    } finally {
      await d.docker(['rm', '-f', got.id]);
    }
  });
});
