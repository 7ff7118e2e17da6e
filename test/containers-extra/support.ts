/** Helpers shared by the commit/top/diff/export/stats/healthcheck tests: containers through raw HTTP. */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after } from 'node:test';
import type { TestDaemon } from '../harness/daemon.js';
import { useDaemonWithBusybox } from '../harness/busybox-daemon.js';

export function uniqueName(prefix: string): string {
  return `${prefix}-${randomBytes(4).toString('hex')}`;
}

export async function createContainer(d: TestDaemon, body: Record<string, unknown>, name = uniqueName('cx')): Promise<string> {
  const r = await d.request('POST', `/containers/create?name=${name}`, { body });
  assert.equal(r.status, 201, r.text());
  return r.json().Id as string;
}

export async function startContainer(d: TestDaemon, id: string): Promise<void> {
  const r = await d.request('POST', `/containers/${id}/start`);
  assert.equal(r.status, 204, r.text());
}

/** Creates and starts a container running `sh -c script`. */
export async function runShell(d: TestDaemon, image: string, script: string, extra: Record<string, unknown> = {}): Promise<string> {
  const id = await createContainer(d, { Image: image, Cmd: ['sh', '-c', script], ...extra });
  await startContainer(d, id);
  return id;
}

export async function waitExit(d: TestDaemon, id: string): Promise<number> {
  const r = await d.request('POST', `/containers/${id}/wait`, { timeoutMs: 60_000 });
  assert.equal(r.status, 200, r.text());
  return r.json().StatusCode as number;
}

export async function inspect(d: TestDaemon, kind: 'containers' | 'images', id: string): Promise<any> {
  const r = await d.request('GET', `/${kind}/${encodeURIComponent(id)}/json`);
  assert.equal(r.status, 200, r.text());
  return r.json();
}

/** The container's output through `docker logs` (stdout then stderr). */
export async function logsOf(d: TestDaemon, id: string): Promise<string> {
  const r = await d.docker(['logs', id]);
  assert.equal(r.code, 0, r.stderr);
  return r.stdout + r.stderr;
}

/** Polls until `fn` returns a truthy value (or throws the last failure after `timeoutMs`). */
export async function eventually<T>(fn: () => Promise<T | undefined | false>, timeoutMs = 15_000, what = 'condition'): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Waits until a file the container's script creates as its "ready" marker shows in `docker diff`. */
export async function waitForPath(d: TestDaemon, id: string, path: string): Promise<void> {
  await eventually(async () => {
    const r = await d.request('GET', `/containers/${id}/changes`);
    return r.status === 200 && (r.json() as { Path: string }[] | null)?.some((c) => c.Path === path);
  }, 15_000, `${path} in ${id}`);
}

export async function removeQuietly(d: TestDaemon, ids: string[]): Promise<void> {
  for (const id of ids) await d.request('DELETE', `/containers/${id}?force=1`).catch(() => undefined);
}

/**
 * For a describe block: a daemon with the seeded busybox pulled (`image()`), and `containers`, the
 * ids or names its tests push, removed after.
 */
export function useBusyboxDaemon(): { daemon: () => TestDaemon; image: () => string; containers: string[] } {
  const { daemon, image } = useDaemonWithBusybox();
  const containers: string[] = [];
  after(async () => {
    await removeQuietly(daemon(), containers);
  });
  return { daemon, image, containers };
}
