/**
 * Worker thread of the layer pull pool (layer-pull-pool.ts): fetches a layer blob with the
 * request the main thread planned, verifies it, decompresses it and unpacks it into the layer
 * store, all here, so a layer's bytes never cross threads and the main thread only hears about
 * progress and the outcome. Several jobs may run at once; each is one message in, a few out.
 */
import { parentPort } from 'node:worker_threads';
import { BerthError } from '../../lib/errors.js';
import type { Digest } from '../../lib/digest.js';
import type { Descriptor } from '../../lib/oci.js';
import { ContentStore } from '../content-store.js';
import { LayerStore, type LayerStoreOptions } from '../layer-store.js';
import { HttpTransport } from '../../registry/http-transport.js';
import { verifiedBlob, type PlannedRequest } from '../../registry/registry-client.js';
import { transferLayer } from './layer-transfer.js';

/** Main thread → worker. */
export type ToWorker =
  | { type: 'pull'; job: number; request: PlannedRequest; desc: Descriptor; chainId: Digest; diffId: Digest; store: { root: string; opts: LayerStoreOptions }; content?: string }
  | { type: 'abort'; job: number; reason: string };

/** Worker → main thread. `fallback`: the registry did not answer 200; the main thread retries. */
export type FromWorker =
  | { type: 'bytes'; job: number; received: number }
  | { type: 'downloaded'; job: number }
  | { type: 'done'; job: number; size: number }
  | { type: 'fallback'; job: number }
  | { type: 'error'; job: number; error: WireError };

export interface WireError {
  message: string;
  name: string;
  kind?: BerthError['kind'];
}

const port = parentPort!;
const transport = new HttpTransport();
const stores = new Map<string, LayerStore>();
const running = new Map<number, AbortController>();

port.on('message', (m: ToWorker) => {
  if (m.type === 'abort') running.get(m.job)?.abort(new Error(m.reason));
  else void pull(m);
});

async function pull(m: Extract<ToWorker, { type: 'pull' }>): Promise<void> {
  const { job, request, desc } = m;
  const post = (msg: FromWorker) => port.postMessage(msg);
  const abort = new AbortController();
  running.set(job, abort);
  try {
    const res = await transport.request({ ...request, url: new URL(request.url), signal: abort.signal });
    if (res.statusCode !== 200) {
      res.destroy();
      post({ type: 'fallback', job });
      return;
    }
    const blob = verifiedBlob(res, desc, abort.signal);
    const store = storeFor(m.store.root, m.store.opts);
    const size = await transferLayer(blob, {
      mediaType: desc.mediaType,
      unpack: (tar) => store.unpack(m.chainId, m.diffId, tar),
      onBytes: (received) => post({ type: 'bytes', job, received }),
      onDownloaded: () => post({ type: 'downloaded', job }),
      signal: abort.signal,
      keep: m.content !== undefined ? contentFor(m.content).writer(desc.digest, desc.size, { verifiedUpstream: true }) : undefined,
    });
    post({ type: 'done', job, size });
  } catch (err) {
    post({ type: 'error', job, error: toWire(err) });
  } finally {
    running.delete(job);
  }
}

const contents = new Map<string, ContentStore>();
function contentFor(root: string): ContentStore {
  let c = contents.get(root);
  if (!c) contents.set(root, (c = new ContentStore(root)));
  return c;
}

function storeFor(root: string, opts: LayerStoreOptions): LayerStore {
  const key = `${root}\0${opts.sync ?? true}`;
  let store = stores.get(key);
  if (!store) stores.set(key, (store = new LayerStore(root, opts)));
  return store;
}

function toWire(err: unknown): WireError {
  if (err instanceof BerthError) return { message: err.message, name: err.name, kind: err.kind };
  if (err instanceof Error) return { message: err.message, name: err.name };
  return { message: String(err), name: 'Error' };
}
