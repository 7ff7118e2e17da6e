/**
 * Checks a layer while it streams: fails as soon as more bytes than the descriptor's size
 * arrive, and at the end when the digest or size differ, always with dockerd's message.
 */
import type { TransformCallback } from 'node:stream';
import { BerthError } from '../lib/errors.js';
import { DigestVerifier } from '../lib/digest.js';
import type { Descriptor } from '../lib/oci.js';

export class BlobVerifier extends DigestVerifier {
  readonly #desc: Descriptor;

  constructor(desc: Descriptor) {
    super({ expected: desc.digest, size: desc.size, what: 'filesystem layer' });
    this.#desc = desc;
  }

  override _transform(chunk: Buffer, enc: BufferEncoding, cb: TransformCallback): void {
    if (this.bytes + chunk.length > this.#desc.size) {
      cb(this.#failure(new Error(`more than the expected ${this.#desc.size} bytes`)));
      return;
    }
    super._transform(chunk, enc, cb);
  }

  override _flush(cb: TransformCallback): void {
    super._flush((err) => cb(err ? this.#failure(err) : null));
  }

  #failure(cause: Error): BerthError {
    return verificationFailed(this.#desc, cause);
  }
}

export function verificationFailed(desc: Descriptor, cause?: unknown): BerthError {
  return new BerthError('internal', `filesystem layer verification failed for digest ${desc.digest}`, { cause });
}
