/**
 * Unpacked layers on disk, one directory per chainID, ready to be an overlayfs lowerdir:
 *
 *   <root>/layers/<chainid-hex>/diff/        the layer's tree
 *   <root>/layers/<chainid-hex>/layer.json   {"diffId", "size"}
 *   <root>/layers/.tmp-<random>/             an unpack in progress (or a removal)
 *
 * A layer becomes visible only by renaming a finished temp dir into place, so `has()` never
 * sees half a layer. Unpacking the same chainID twice, in parallel or after the fact, is safe:
 * the loser of the rename throws its copy away. Which layers an image uses is recorded elsewhere.
 */
import { createHash } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import fs from 'node:fs/promises';
import { join } from 'node:path';
import { pipeline, Transform, type Readable } from 'node:stream';
import { randomHex } from '../lib/random-hex.js';
import { DigestVerifier, hexOf, isDigest, parseDigest, sha256Of, type Digest } from '../lib/digest.js';
import { fsyncDir, syncFilesystem } from './fs-durable.js';
import { unpackLayer } from './unpack-layer.js';

// Computed in lib/ (state/ derives a damaged row's chain from its config too); importers keep this path.
export { chainIds } from '../lib/digest.js';

export interface LayerStoreOptions {
  /**
   * Flush the file system (syncfs) before a layer becomes visible, so a crash cannot leave a
   * recorded layer with empty files. Default true; tests may turn it off.
   */
  sync?: boolean;
}

interface LayerRecord {
  diffId: Digest;
  size: number;
}

/** A layer unpacked by unpackPending(), not yet named. */
export interface PendingLayer {
  readonly tmp: string;
  readonly diffId: Digest;
  /** Bytes of the unpacked files. */
  readonly size: number;
  /** Bytes of the layer tar. */
  readonly tarSize: number;
}

export class LayerStore {
  readonly #root: string;
  readonly #dir: string;
  readonly #sync: boolean;

  constructor(root: string, opts: LayerStoreOptions = {}) {
    this.#root = root;
    this.#dir = join(root, 'layers');
    this.#sync = opts.sync ?? true;
    mkdirSync(this.#dir, { recursive: true }); // once, at startup
  }

  /** What it takes to open this store again, e.g. in a worker thread: `new LayerStore(root, opts)`. */
  get location(): { root: string; opts: LayerStoreOptions } {
    return { root: this.#root, opts: { sync: this.#sync } };
  }

  #layerDir(chainId: Digest): string {
    return join(this.#dir, hexOf(parseDigest(chainId)));
  }

  /** The directory to give overlayfs as a lowerdir. */
  diffDir(chainId: Digest): string {
    return join(this.#layerDir(chainId), 'diff');
  }

  async has(chainId: Digest): Promise<boolean> {
    return (await this.#record(chainId)) !== undefined;
  }

  /** Unpacked size of a stored layer, or undefined when it is not stored. */
  async size(chainId: Digest): Promise<number | undefined> {
    return (await this.#record(chainId))?.size;
  }

  async #record(chainId: Digest): Promise<LayerRecord | undefined> {
    try {
      return JSON.parse(await fs.readFile(join(this.#layerDir(chainId), 'layer.json'), 'utf8')) as LayerRecord;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  }

  /** ChainIDs of every stored layer. */
  async list(): Promise<Digest[]> {
    const names = await fs.readdir(this.#dir);
    return names.map((n) => `sha256:${n}`).filter(isDigest);
  }

  /**
   * Unpack an uncompressed layer tar, checking while streaming that its sha256 is `diffId`.
   * The stream is read to its end. If the layer is already stored, the stream is drained and
   * ignored. On any error (digest mismatch, hostile entry, I/O) nothing of it stays on disk.
   * `onProgress` gets the number of tar bytes read so far.
   */
  async unpack(chainId: Digest, diffId: Digest, tar: Readable, onProgress?: (bytes: number) => void): Promise<{ size: number }> {
    const final = this.#layerDir(chainId);
    parseDigest(diffId);
    const existing = await this.#record(chainId);
    if (existing) {
      tar.on('error', () => {});
      tar.resume();
      return { size: existing.size };
    }
    const tmp = join(this.#dir, `.tmp-${randomHex(8)}`);
    await fs.mkdir(tmp);
    try {
      const diff = join(tmp, 'diff');
      await fs.mkdir(diff);
      await fs.chmod(diff, 0o755);
      const verifier = new DigestVerifier({ expected: diffId, what: 'layer' });
      const { size } = await unpackLayer(pipeline(tar, verifier, () => {}), diff, { onProgress });
      return { size: await this.#install(tmp, final, chainId, { diffId, size }) };
    } catch (err) {
      await fs.rm(tmp, { recursive: true, force: true });
      throw err;
    }
  }

  /**
   * Unpack a layer tar whose diffID is not known in advance (`docker commit`): its sha256 is
   * computed while it streams and, put on top of `parentChainId`, names the layer. One pass over
   * the tar; same atomicity as unpack().
   */
  async unpackComputed(parentChainId: Digest | undefined, tar: Readable): Promise<{ chainId: Digest; diffId: Digest; size: number; tarSize: number }> {
    const p = await this.unpackPending(tar);
    const chainId = parentChainId === undefined ? p.diffId : sha256Of(`${parentChainId} ${p.diffId}`);
    try {
      return { chainId, diffId: p.diffId, size: await this.installPending(p, chainId), tarSize: p.tarSize };
    } catch (err) {
      await this.discardPending(p);
      throw err;
    }
  }

  /**
   * Unpack a layer tar before knowing where it goes (`docker load` reads an archive's layers before
   * the manifest that orders them): the tree lands in a temp dir and its diff id is computed on the
   * way. installPending() then names it by its chainID; discardPending() drops it. Nothing is
   * visible before the install. `hashedBy`: the caller hashes these very bytes itself (all of
   * them, in order, e.g. while it stages them) and resolves with their sha256 once the tar has
   * ended; they are then not hashed a second time here.
   */
  async unpackPending(tar: Readable, opts: { hashedBy?: Promise<Digest> } = {}): Promise<PendingLayer> {
    const tmp = join(this.#dir, `.tmp-${randomHex(8)}`);
    await fs.mkdir(tmp);
    try {
      const diff = join(tmp, 'diff');
      await fs.mkdir(diff);
      await fs.chmod(diff, 0o755);
      if (opts.hashedBy) {
        let tarSize = 0;
        const { size } = await unpackLayer(tar, diff, { onProgress: (n) => (tarSize = n) });
        return { tmp, diffId: parseDigest(await opts.hashedBy), size, tarSize };
      }
      const hash = createHash('sha256');
      let tarSize = 0;
      const hasher = new Transform({
        transform(chunk: Buffer, _enc, cb) {
          hash.update(chunk);
          tarSize += chunk.length;
          cb(null, chunk);
        },
      });
      const { size } = await unpackLayer(pipeline(tar, hasher, () => {}), diff);
      return { tmp, diffId: `sha256:${hash.digest('hex')}`, size, tarSize };
    } catch (err) {
      await fs.rm(tmp, { recursive: true, force: true });
      throw err;
    }
  }

  /** Makes a pending layer the layer `chainId` (or drops it when that is stored already); returns its size. */
  async installPending(p: PendingLayer, chainId: Digest): Promise<number> {
    const existing = await this.#record(chainId);
    if (existing) {
      await this.discardPending(p);
      return existing.size;
    }
    return this.#install(p.tmp, this.#layerDir(chainId), chainId, { diffId: p.diffId, size: p.size });
  }

  async discardPending(p: PendingLayer): Promise<void> {
    await fs.rm(p.tmp, { recursive: true, force: true });
  }

  /**
   * Make a layer whose tree `build` writes into an empty directory, returning the diffID of the
   * layer tar that tree stands for (`docker commit` copying an upper dir instead of unpacking a
   * tar). Named and installed like unpackComputed(); on error nothing stays on disk. Returns what
   * `build` did with the chainID added (and the size of the stored layer, when it already was).
   */
  async buildComputed<T extends { diffId: Digest; size: number }>(parentChainId: Digest | undefined, build: (diffDir: string) => Promise<T>): Promise<T & { chainId: Digest }> {
    const tmp = join(this.#dir, `.tmp-${randomHex(8)}`);
    await fs.mkdir(tmp);
    try {
      const diff = join(tmp, 'diff');
      await fs.mkdir(diff);
      await fs.chmod(diff, 0o755);
      const built = await build(diff);
      const { diffId, size } = built;
      const chainId = parentChainId === undefined ? diffId : sha256Of(`${parentChainId} ${diffId}`);
      const existing = await this.#record(chainId);
      if (existing) {
        await fs.rm(tmp, { recursive: true, force: true });
        return { ...built, chainId, size: existing.size };
      }
      return { ...built, chainId, size: await this.#install(tmp, this.#layerDir(chainId), chainId, { diffId, size }) };
    } catch (err) {
      await fs.rm(tmp, { recursive: true, force: true });
      throw err;
    }
  }

  /** Makes a finished temp dir the layer; returns the stored layer's size. */
  async #install(tmp: string, final: string, chainId: Digest, record: LayerRecord): Promise<number> {
    await fs.writeFile(join(tmp, 'layer.json'), JSON.stringify(record));
    if (this.#sync) await syncFilesystem(tmp);
    try {
      await fs.rename(tmp, final);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw err;
      await fs.rm(tmp, { recursive: true, force: true }); // another unpack got there first
      return (await this.#record(chainId))?.size ?? record.size;
    }
    await fsyncDir(this.#dir);
    return record.size;
  }

  /** Delete a layer. Missing is fine. The caller makes sure no container or image uses it. */
  async remove(chainId: Digest): Promise<void> {
    const doomed = join(this.#dir, `.tmp-rm-${randomHex(8)}`);
    try {
      // Renaming first makes the layer vanish at once, even if the deletion is interrupted.
      await fs.rename(this.#layerDir(chainId), doomed);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw err;
    }
    await fs.rm(doomed, { recursive: true, force: true });
  }

  /** Remove leftovers of interrupted unpacks and removals. Call at startup, before any unpack. */
  async cleanTemp(): Promise<void> {
    for (const name of await fs.readdir(this.#dir)) {
      if (name.startsWith('.tmp-')) await fs.rm(join(this.#dir, name), { recursive: true, force: true });
    }
  }
}
