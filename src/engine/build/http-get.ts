/** GET of a URL a build names (ADD <url>, remote=), its body as a stream; failures are the request's fault. */
import { Readable } from 'node:stream';
import type { ReadableStream } from 'node:stream/web';
import { invalidArgument } from '../../lib/errors.js';

export async function httpGet(url: string, signal: AbortSignal): Promise<{ body: Readable; headers: Headers }> {
  let res: Response;
  try {
    res = await fetch(url, { signal, redirect: 'follow' });
  } catch (err) {
    throw invalidArgument(`failed to GET ${url}: ${(err as Error).message}`);
  }
  if (!res.ok || !res.body) throw invalidArgument(`failed to GET ${url} with status ${res.status} ${res.statusText}`);
  return { body: Readable.fromWeb(res.body as ReadableStream), headers: res.headers };
}
