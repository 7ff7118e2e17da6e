/**
 * What the runtime driver keeps per container in `containers/<id>/meta.json`: which runtime created
 * it, its bundle, cgroup and log. Written at create, cached in memory, read back from the file by a
 * driver started later (daemon restart), so containers are adopted by id alone.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { invalidArgument, notFound } from '../lib/errors.js';
import type { RuntimeName } from './runtime-cli.js';
import { writeJsonAtomic } from './state-files.js';

export interface ContainerMeta {
  runtime: RuntimeName;
  bundleDir: string;
  cgroupsPath: string;
  logPath: string;
}

/** Container and exec ids become path names: nothing else gets that far. */
export const SAFE_ID = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$/;

export function checkId(id: string, what = 'container id'): void {
  if (!SAFE_ID.test(id)) throw invalidArgument(`invalid ${what}: ${JSON.stringify(id)}`);
}

export class ContainerMetas {
  #cache = new Map<string, ContainerMeta>();

  /** `dirOf(id)`: the container's state dir, where meta.json lives. */
  constructor(private readonly dirOf: (id: string) => string) {}

  async read(id: string): Promise<ContainerMeta | undefined> {
    const cached = this.#cache.get(id);
    if (cached) return cached;
    try {
      const meta = JSON.parse(await readFile(join(this.dirOf(id), 'meta.json'), 'utf8')) as ContainerMeta;
      this.#cache.set(id, meta);
      return meta;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  }

  /** The meta of a container the driver knows; not-found otherwise. */
  async must(id: string): Promise<ContainerMeta> {
    checkId(id);
    const meta = await this.read(id);
    if (!meta) throw notFound(`No such container: ${id}`);
    return meta;
  }

  /** Writes meta.json (the container's dir exists); `remember` caches it once create has its files. */
  async write(id: string, meta: ContainerMeta): Promise<void> {
    await writeJsonAtomic(join(this.dirOf(id), 'meta.json'), meta);
  }

  remember(id: string, meta: ContainerMeta): void {
    this.#cache.set(id, meta);
  }

  forget(id: string): void {
    this.#cache.delete(id);
  }

  /** Whether the meta is known in memory (a container this driver created or read). */
  cached(id: string): boolean {
    return this.#cache.has(id);
  }
}
