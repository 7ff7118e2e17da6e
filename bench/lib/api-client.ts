import { Readable } from 'node:stream';
import { Agent, request as httpRequest, type IncomingHttpHeaders, type IncomingMessage } from 'node:http';

/**
 * A Docker Engine API client over a unix socket with keep-alive connections, so a benchmark
 * counts the engine's work rather than connection set-up. Paths are unversioned: every engine
 * serves them at its own default API version.
 */

export interface ApiResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
  text(): string;
  json<T = any>(): T;
}

export interface ApiRequestOptions {
  /** Objects are sent as JSON. */
  body?: unknown;
  headers?: Record<string, string>;
  timeoutMs?: number;
}

export class ApiClient {
  readonly #agent = new Agent({ keepAlive: true, maxSockets: 16 });

  constructor(readonly socketPath: string) {}

  /** The response, unread; the caller consumes it (logs, pull progress). */
  stream(method: string, path: string, opts: ApiRequestOptions = {}): Promise<IncomingMessage> {
    // A stream body (an archive to load) goes out chunked, as the docker CLI sends it.
    const piped = opts.body instanceof Readable ? opts.body : undefined;
    const payload = opts.body === undefined || piped ? undefined : Buffer.isBuffer(opts.body) ? opts.body : Buffer.from(JSON.stringify(opts.body));
    const headers: Record<string, string | number> = { Host: 'docker', ...(opts.headers ?? {}) };
    if (payload) {
      headers['Content-Length'] = payload.length;
      if (!Buffer.isBuffer(opts.body)) headers['Content-Type'] = 'application/json';
    }
    return new Promise((resolve, reject) => {
      const req = httpRequest({ socketPath: this.socketPath, path, method, headers, agent: this.#agent }, resolve);
      req.once('error', reject);
      if (opts.timeoutMs) {
        req.setTimeout(opts.timeoutMs, () => req.destroy(new Error(`${method} ${path} timed out after ${opts.timeoutMs} ms`)));
      }
      if (piped) piped.pipe(req);
      else req.end(payload);
    });
  }

  async request(method: string, path: string, opts: ApiRequestOptions = {}): Promise<ApiResponse> {
    const res = await this.stream(method, path, opts);
    const chunks: Buffer[] = [];
    for await (const c of res) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks);
    return {
      status: res.statusCode ?? 0,
      headers: res.headers,
      body,
      text: () => body.toString('utf8'),
      json: () => JSON.parse(body.toString('utf8')),
    };
  }

  /** A request that must answer one of `ok`; otherwise throws with the engine's message. */
  async expect(method: string, path: string, ok: number[], opts: ApiRequestOptions = {}): Promise<ApiResponse> {
    const res = await this.request(method, path, opts);
    if (!ok.includes(res.status)) throw new Error(`${method} ${path}: ${res.status} ${res.text().trim().slice(0, 300)}`);
    return res;
  }

  close(): void {
    this.#agent.destroy();
  }
}

/**
 * Reads a JSON-lines progress stream (pull, push) to its end and throws on the first error message,
 * as the docker CLI does.
 */
export async function drainProgress(res: IncomingMessage, onRecord?: (m: Record<string, unknown>) => void): Promise<void> {
  let rest = '';
  let failure: string | undefined;
  for await (const chunk of res) {
    rest += (chunk as Buffer).toString('utf8');
    let nl: number;
    while ((nl = rest.indexOf('\n')) >= 0) {
      const line = rest.slice(0, nl).trim();
      rest = rest.slice(nl + 1);
      if (!line || failure) continue;
      try {
        const msg = JSON.parse(line) as { error?: string; errorDetail?: { message?: string } };
        onRecord?.(msg);
        if (msg.error || msg.errorDetail) failure = msg.errorDetail?.message ?? msg.error;
      } catch {
        // not JSON: ignore, as the CLI does
      }
    }
  }
  if ((res.statusCode ?? 0) >= 400) throw new Error(`status ${res.statusCode}: ${(failure ?? rest).trim().slice(0, 300)}`);
  if (failure) throw new Error(failure);
}

/**
 * Counts the payload bytes of a multiplexed (non-TTY) stdout/stderr stream without keeping it:
 * each frame is an 8-byte header (stream, 0, 0, 0, big-endian length) and its payload.
 */
export async function countMultiplexed(res: IncomingMessage): Promise<{ stdout: number; stderr: number; raw: number }> {
  const counts = { stdout: 0, stderr: 0, raw: 0 };
  let header = Buffer.alloc(0);
  let left = 0;
  let stream = 1;
  for await (const c of res) {
    let chunk = c as Buffer;
    counts.raw += chunk.length;
    while (chunk.length) {
      if (left === 0) {
        const need = 8 - header.length;
        header = Buffer.concat([header, chunk.subarray(0, need)]);
        chunk = chunk.subarray(need);
        if (header.length < 8) break;
        stream = header[0]!;
        left = header.readUInt32BE(4);
        header = Buffer.alloc(0);
        continue;
      }
      const n = Math.min(left, chunk.length);
      if (stream === 2) counts.stderr += n;
      else counts.stdout += n;
      left -= n;
      chunk = chunk.subarray(n);
    }
  }
  return counts;
}
