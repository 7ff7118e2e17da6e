import { createHash, type Hash } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';
import { BerthError, invalidArgument } from './errors.js';

/** `sha256:<64 hex>`; the only algorithm Berth stores. */
export type Digest = `sha256:${string}`;

const DIGEST_RE = /^sha256:[a-f0-9]{64}$/;

export function isDigest(s: string): s is Digest {
  return DIGEST_RE.test(s);
}

export function parseDigest(s: string): Digest {
  if (!isDigest(s)) throw invalidArgument(`invalid digest: ${JSON.stringify(s)}`);
  return s;
}

export function sha256Of(data: string | Uint8Array): Digest {
  return `sha256:${createHash('sha256').update(data).digest('hex')}`;
}

/** OCI chainIDs: chainID(1) = diffID(1); chainID(n) = sha256(chainID(n-1) + " " + diffID(n)). */
export function chainIds(diffIds: Digest[]): Digest[] {
  const out: Digest[] = [];
  for (const d of diffIds) {
    parseDigest(d);
    const prev = out[out.length - 1];
    out.push(prev === undefined ? d : sha256Of(`${prev} ${d}`));
  }
  return out;
}

export function hexOf(d: Digest): string {
  return d.slice(7);
}

/**
 * A pass-through stream that hashes what flows through it and, at the end, fails the
 * stream when the digest (and the size, if given) differs from what was expected.
 */
export class DigestVerifier extends Transform {
  readonly #hash: Hash = createHash('sha256');
  readonly #expected: Digest | undefined;
  readonly #expectedSize: number | undefined;
  readonly #what: string;
  bytes = 0;
  digest: Digest | undefined;

  constructor(opts: { expected?: Digest; size?: number; what?: string } = {}) {
    super();
    this.#expected = opts.expected;
    this.#expectedSize = opts.size;
    this.#what = opts.what ?? 'content';
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.#hash.update(chunk);
    this.bytes += chunk.length;
    cb(null, chunk);
  }

  override _flush(cb: TransformCallback): void {
    this.digest = `sha256:${this.#hash.digest('hex')}`;
    if (this.#expected && this.digest !== this.#expected) {
      cb(new BerthError('invalid-argument', `${this.#what} verification failed for digest ${this.#expected}: got ${this.digest}`));
      return;
    }
    if (this.#expectedSize !== undefined && this.#expectedSize >= 0 && this.bytes !== this.#expectedSize) {
      cb(new BerthError('invalid-argument', `${this.#what} ${this.#expected ?? ''} has size ${this.bytes}, expected ${this.#expectedSize}`));
      return;
    }
    cb();
  }
}
