import { createServer, request as httpRequestRaw, type IncomingMessage, type ServerResponse } from 'node:http';
import { Transform, type TransformCallback } from 'node:stream';
import type { TestRegistry } from './registry.js';
import { readAll } from './http-client.js';

/**
 * An HTTP proxy in front of a test registry that damages what it relays: one flipped byte in each blob
 * body and, when asked, one changed hex digit inside each manifest. Sizes stay the same, so only a
 * client that checks digests notices. Everything else (auth challenges, uploads) passes unchanged.
 */

export interface CorruptingProxyOptions {
  /** Corrupt blob bodies (GET /v2/<name>/blobs/<digest>). Default true. */
  blobs?: boolean;
  /** Corrupt manifest bodies (GET /v2/<name>/manifests/<ref>). Default false. */
  manifests?: boolean;
  /** Only corrupt requests whose path matches. */
  match?: RegExp;
}

export interface CorruptingProxy extends Omit<TestRegistry, 'stop' | 'pid' | 'dir' | 'logs'> {
  /** The registry behind the proxy. */
  readonly upstream: TestRegistry;
  /** How many response bodies were damaged so far. */
  readonly corrupted: number;
  /** "METHOD path -> status" for every request relayed. */
  readonly requests: string[];
  /** Changes what gets corrupted from now on. */
  configure(opts: CorruptingProxyOptions): void;
  stop(): Promise<void>;
}

const BLOB_RE = /^\/v2\/.+\/blobs\/sha256:[a-f0-9]{64}$/;
const MANIFEST_RE = /^\/v2\/.+\/manifests\/[^/]+$/;

/**
 * Flips one bit of one byte. In a gzip stream it is byte 4 (the header's mtime, which decompressors
 * ignore), so the data still decompresses and the failure can only come from the digest check.
 * Otherwise it is the byte in the middle of the body.
 */
class ByteFlipper extends Transform {
  #offset = 0;
  #target: number | undefined;
  readonly #length: number | undefined;

  constructor(length: number | undefined) {
    super();
    this.#length = length;
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    if (this.#target === undefined) {
      const gzip = this.#offset === 0 && chunk.length > 4 && chunk[0] === 0x1f && chunk[1] === 0x8b;
      this.#target = gzip ? 4 : Math.floor((this.#length ?? chunk.length) / 2);
    }
    const at = this.#target - this.#offset;
    if (at >= 0 && at < chunk.length) {
      chunk = Buffer.from(chunk);
      chunk[at] = chunk[at]! ^ 0x01;
    }
    this.#offset += chunk.length;
    cb(null, chunk);
  }
}

/** Changes one hex digit of the first digest in a manifest, keeping it valid JSON of the same size. */
function corruptManifest(body: Buffer): Buffer {
  const text = body.toString('utf8');
  const i = text.indexOf('sha256:');
  if (i < 0 || i + 7 >= text.length) {
    const copy = Buffer.from(body);
    if (copy.length) copy[copy.length >> 1] = copy[copy.length >> 1]! ^ 0x01;
    return copy;
  }
  const c = text[i + 7]!;
  const swapped = c === '0' ? '1' : '0';
  return Buffer.from(text.slice(0, i + 7) + swapped + text.slice(i + 8), 'utf8');
}

export async function startCorruptingProxy(upstream: TestRegistry, opts: CorruptingProxyOptions = {}): Promise<CorruptingProxy> {
  let settings: Required<Omit<CorruptingProxyOptions, 'match'>> & { match?: RegExp } = {
    blobs: opts.blobs ?? true,
    manifests: opts.manifests ?? false,
    match: opts.match,
  };
  let corrupted = 0;
  const requests: string[] = [];
  const upstreamUrl = new URL(upstream.url);

  function relay(req: IncomingMessage, res: ServerResponse): void {
    const path = req.url ?? '/';
    const pathname = path.split('?')[0]!;
    const out = httpRequestRaw(
      {
        hostname: upstreamUrl.hostname,
        port: upstreamUrl.port,
        method: req.method,
        path,
        // Host stays the proxy's, so the registry writes upload Locations that point back at us.
        headers: req.headers,
      },
      (up) => {
        const status = up.statusCode ?? 502;
        requests.push(`${req.method} ${path} -> ${status}`);
        const ok = req.method === 'GET' && (status === 200 || status === 206);
        const matches = !settings.match || settings.match.test(pathname);
        const blob = ok && matches && settings.blobs && BLOB_RE.test(pathname);
        const manifest = ok && matches && settings.manifests && MANIFEST_RE.test(pathname);
        if (manifest) {
          readAll(up).then(
            (body) => {
              corrupted++;
              const bad = corruptManifest(body);
              res.writeHead(status, { ...up.headers, 'content-length': String(bad.length) });
              res.end(bad);
            },
            () => res.destroy(),
          );
          return;
        }
        res.writeHead(status, up.headers);
        if (blob) {
          corrupted++;
          const len = up.headers['content-length'] ? Number(up.headers['content-length']) : undefined;
          up.pipe(new ByteFlipper(len)).pipe(res);
        } else {
          up.pipe(res);
        }
      },
    );
    out.on('error', () => {
      if (!res.headersSent) {
        res.writeHead(502);
        res.end();
      } else res.destroy();
    });
    req.pipe(out);
  }

  const server = createServer(relay);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const addr = server.address();
  if (addr === null || typeof addr === 'string') throw new Error('proxy has no TCP address');
  const host = `127.0.0.1:${addr.port}`;
  return {
    kind: upstream.kind,
    host,
    url: `http://${host}`,
    username: upstream.username,
    password: upstream.password,
    tokenServerUrl: upstream.tokenServerUrl,
    tokenServer: upstream.tokenServer,
    upstream,
    get corrupted() {
      return corrupted;
    },
    requests,
    configure(next) {
      settings = { blobs: next.blobs ?? settings.blobs, manifests: next.manifests ?? settings.manifests, match: next.match ?? settings.match };
    },
    stop: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
