/** Helpers for the swarm tests: polling for a condition and reading tasks back. */
import assert from 'node:assert/strict';
import type { TestDaemon } from '../harness/index.js';

/** Polls `fn` until it returns a value other than undefined/false; fails with the last value seen. */
export async function eventually<T>(what: string, fn: () => Promise<T | undefined | false>, timeoutMs = 20_000, intervalMs = 150): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined && v !== false) return v;
      last = v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}; last: ${last instanceof Error ? last.message : JSON.stringify(last)}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

export interface WireTask {
  ID: string;
  Slot?: number;
  NodeID?: string;
  ServiceID: string;
  DesiredState: string;
  CreatedAt: string;
  Spec: { ContainerSpec: { Image: string; Env?: string[]; Args?: string[] } };
  Status: { State: string; Message: string; Err?: string; Timestamp: string; ContainerStatus?: { ContainerID: string; PID: number; ExitCode: number } };
}

export async function tasksOf(d: TestDaemon, service: string, extra: Record<string, string[]> = {}): Promise<WireTask[]> {
  const filters = encodeURIComponent(JSON.stringify({ service: [service], ...extra }));
  const r = await d.request('GET', `/tasks?filters=${filters}`);
  assert.equal(r.status, 200, r.text());
  return r.json<WireTask[]>();
}

/** The running tasks of a service once there are exactly `n` of them, one per slot. */
export async function runningTasks(d: TestDaemon, service: string, n: number, timeoutMs = 20_000): Promise<WireTask[]> {
  return eventually(`${n} running tasks of ${service}`, async () => {
    const tasks = (await tasksOf(d, service)).filter((t) => t.Status.State === 'running' && t.DesiredState === 'running');
    return tasks.length === n && new Set(tasks.map((t) => t.Slot ?? t.NodeID)).size === n ? tasks : undefined;
  }, timeoutMs);
}

export async function inspectService(d: TestDaemon, service: string): Promise<any> {
  const r = await d.request('GET', `/services/${service}`);
  assert.equal(r.status, 200, r.text());
  return r.json();
}

/** Container names (without '/') of the containers berthd has, all states. */
export async function containerNames(d: TestDaemon): Promise<string[]> {
  const r = await d.request('GET', '/containers/json?all=1');
  return r.json<{ Names: string[] }[]>().map((c) => c.Names[0]!.slice(1));
}
