/**
 * Checks a layer while it streams: fails as soon as more bytes than the descriptor's size
 * arrive, and at the end when the digest or size differ, always with dockerd's message.
 *
 * It also regroups the socket's 64 KiB reads into chunks of about 1 MiB: every later stage
 * (gunzip in the thread pool, the diffID hash, the tar parser, file writes) costs per chunk, so
 * sixteen times fewer chunks is a large part of a pull's CPU. Nothing is held beyond that.
 */
import type { TransformCallback } from 'node:stream';
import { BerthError } from '../lib/errors.js';
import { DigestVerifier } from '../lib/digest.js';
import type { Descriptor } from '../lib/oci.js';

const OUT_CHUNK = 1024 * 1024;

export class BlobVerifier extends DigestVerifier {
  readonly #desc: Descriptor;
  #held: Buffer[] = [];
  #heldBytes = 0;

  constructor(desc: Descriptor) {
    super({ expected: desc.digest, size: desc.size, what: 'filesystem layer' });
    this.#desc = desc;
  }

  override _transform(chunk: Buffer, enc: BufferEncoding, cb: TransformCallback): void {
    if (this.bytes + chunk.length > this.#desc.size) {
      cb(this.#failure(new Error(`more than the expected ${this.#desc.size} bytes`)));
      return;
    }
    super._transform(chunk, enc, (err) => {
      if (err) return cb(err);
      this.#held.push(chunk);
      this.#heldBytes += chunk.length;
      if (this.#heldBytes < OUT_CHUNK) return cb();
      cb(null, this.#take());
    });
  }

  override _flush(cb: TransformCallback): void {
    super._flush((err) => {
      if (err) return cb(this.#failure(err));
      // Only verified bytes end the stream: the rest is passed on once the digest checks out.
      if (this.#heldBytes > 0) this.push(this.#take());
      cb(null);
    });
  }

  #take(): Buffer {
    const out = this.#held.length === 1 ? this.#held[0]! : Buffer.concat(this.#held, this.#heldBytes);
    this.#held = [];
    this.#heldBytes = 0;
    return out;
  }

  #failure(cause: Error): BerthError {
    return verificationFailed(this.#desc, cause);
  }
}

export function verificationFailed(desc: Descriptor, cause?: unknown): BerthError {
  return new BerthError('internal', `filesystem layer verification failed for digest ${desc.digest}`, { cause });
}
