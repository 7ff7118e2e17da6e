import type { Engine } from '../engines/engine.js';

/** The Engine API calls the workloads share: create, start, wait, remove. */

export interface CreateBody {
  Image: string;
  Cmd: string[];
  HostConfig?: Record<string, unknown>;
  [k: string]: unknown;
}

export async function createContainer(e: Engine, body: CreateBody): Promise<string> {
  const r = await e.api.expect('POST', '/containers/create', [201], { body, timeoutMs: 60_000 });
  return r.json<{ Id: string }>().Id;
}

export async function startContainer(e: Engine, id: string): Promise<void> {
  await e.api.expect('POST', `/containers/${id}/start`, [204], { timeoutMs: 60_000 });
}

/** Waits for the exit and returns the exit code. */
export async function waitContainer(e: Engine, id: string, timeoutMs = 600_000): Promise<number> {
  const r = await e.api.expect('POST', `/containers/${id}/wait`, [200], { timeoutMs });
  const body = r.json<{ StatusCode: number; Error?: { Message?: string } | null }>();
  if (body.Error?.Message) throw new Error(`wait ${id}: ${body.Error.Message}`);
  return body.StatusCode;
}

export async function removeContainer(e: Engine, id: string): Promise<void> {
  await e.api.expect('DELETE', `/containers/${id}?force=1&v=1`, [200, 204, 404], { timeoutMs: 60_000 });
}

/** Create, start and wait; throws unless the command exits 0. Returns the id (the container is kept). */
export async function runToCompletion(e: Engine, body: CreateBody, timeoutMs = 600_000): Promise<string> {
  const id = await createContainer(e, body);
  await startContainer(e, id);
  const code = await waitContainer(e, id, timeoutMs);
  if (code !== 0) {
    await removeContainer(e, id).catch(() => undefined);
    throw new Error(`${body.Cmd.join(' ').slice(0, 80)} exited with ${code}`);
  }
  return id;
}

export async function removeImage(e: Engine, ref: string): Promise<void> {
  await e.api.expect('DELETE', `/images/${encodeURIComponent(ref)}?force=1`, [200, 404], { timeoutMs: 120_000 });
}
