/**
 * For the mirror tests of the swarm routes files: a one-node swarm on the test daemon with one service
 * whose single task is running and has written its output (a line on stdout, one on stderr), set up in
 * `before` and left (with --force, which removes every task container) in `after`.
 */
import assert from 'node:assert/strict';
import { after, before } from 'node:test';
import type { TestDaemon } from '../harness/index.js';
import { eventually, runningTasks, type WireTask } from '../swarm/support.js';

export interface SwarmService {
  nodeId: string;
  serviceId: string;
  task: WireTask;
}

export const SERVICE_NAME = 'mirror';

export function useSwarmService(daemon: () => TestDaemon, image: () => string): () => SwarmService {
  let value: SwarmService | undefined;
  before(async () => {
    const d = daemon();
    const init = await d.request('POST', '/swarm/init', { body: { ListenAddr: '127.0.0.1:0', AdvertiseAddr: '127.0.0.1' } });
    assert.equal(init.status, 200, init.text());
    const args = ['sh', '-c', 'echo out-line; echo err-line >&2; trap "exit 0" TERM; while :; do sleep 0.2; done'];
    const created = await d.request('POST', '/services/create', {
      body: { Name: SERVICE_NAME, Labels: { mirror: 'yes' }, TaskTemplate: { ContainerSpec: { Image: image(), Args: args } } },
    });
    assert.equal(created.status, 201, created.text());
    const serviceId = created.json<{ ID: string }>().ID;
    const [task] = await runningTasks(d, SERVICE_NAME, 1, 60_000);
    // Running is not yet written: wait for both lines in the task container's log.
    await eventually('the task wrote its lines', async () => {
      const r = await d.request('GET', `/containers/${task!.Status.ContainerStatus!.ContainerID}/logs?stdout=1&stderr=1`);
      return r.body.includes('out-line') && r.body.includes('err-line');
    });
    value = { nodeId: init.json<string>(), serviceId, task: task! };
  });
  after(async () => {
    await daemon().request('POST', '/swarm/leave?force=1').catch(() => undefined);
  });
  return () => {
    if (!value) throw new Error('useSwarmService(): the swarm is not set up');
    return value;
  };
}
