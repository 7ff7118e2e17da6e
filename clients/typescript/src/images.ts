/** Image operations: list, pull (a stream of progress messages), inspect, remove, tag. */
import type { ApiCaller } from './api-caller.js';
import { StreamError } from './errors.js';
import { parseReference, registryHost } from './image-reference.js';
import { readJsonLines } from './json-lines.js';
import type { AuthConfig, ImageDeleteResponseItem, ImageInspect, ImageSummary, ProgressMessage } from './models.js';
import { encodeRegistryAuth, resolveCredentials } from './registry-credentials.js';
import { pathPart } from './url-path.js';

export interface ImageListOptions {
  /** Include intermediate images. */
  all?: boolean;
  /** e.g. `{ reference: ['busybox'], dangling: ['false'] }` */
  filters?: Record<string, string[]>;
  digests?: boolean;
  signal?: AbortSignal;
}

export interface PullOptions {
  /** os[/arch[/variant]] to pull from a multi-platform image. */
  platform?: string;
  /** Credentials: explicit, `false` for none, or (undefined) those stored in config.json. */
  auth?: AuthConfig | false;
  signal?: AbortSignal;
}

export interface ImageRemoveOptions {
  force?: boolean;
  noprune?: boolean;
}

export class Images {
  readonly #api: ApiCaller;
  readonly #configDir: string;

  constructor(api: ApiCaller, configDir: string) {
    this.#api = api;
    this.#configDir = configDir;
  }

  list(opts: ImageListOptions = {}): Promise<ImageSummary[]> {
    return this.#api.json('GET', '/images/json', {
      query: { all: opts.all, digests: opts.digests, filters: opts.filters && JSON.stringify(opts.filters) },
      ...(opts.signal && { signal: opts.signal }),
    });
  }

  /**
   * Pulls an image and yields the daemon's progress messages as they arrive. An error record in
   * the stream (`{"error":..., "errorDetail":...}`) is thrown as StreamError. The pull is only
   * complete once the iteration has finished.
   */
  async *pull(ref: string, opts: PullOptions = {}): AsyncGenerator<ProgressMessage, void, undefined> {
    const { repository, tag, digest } = parseReference(ref);
    const auth = await this.#authFor(repository, opts.auth);
    const res = await this.#api.call('POST', '/images/create', {
      query: { fromImage: repository, tag: digest ?? tag ?? 'latest', platform: opts.platform },
      headers: auth ? { 'X-Registry-Auth': encodeRegistryAuth(auth) } : {},
      ...(opts.signal && { signal: opts.signal }),
    });
    for await (const message of readJsonLines<ProgressMessage>(res)) {
      if (message.error !== undefined || message.errorDetail !== undefined) {
        throw new StreamError(message.errorDetail?.message || message.error || 'unknown error', message.errorDetail?.code);
      }
      yield message;
    }
  }

  /** Pulls an image to the end, discarding progress. */
  async pullAndWait(ref: string, opts: PullOptions = {}): Promise<void> {
    for await (const _ of this.pull(ref, opts)); // eslint-disable-line no-empty
  }

  inspect(name: string): Promise<ImageInspect> {
    return this.#api.json('GET', `/images/${pathPart(name)}/json`);
  }

  remove(name: string, opts: ImageRemoveOptions = {}): Promise<ImageDeleteResponseItem[]> {
    return this.#api.json('DELETE', `/images/${pathPart(name)}`, { query: { force: opts.force, noprune: opts.noprune } });
  }

  /** Gives `source` (a name or ID) the name `target` ("repo" or "repo:tag"). */
  async tag(source: string, target: string): Promise<void> {
    const { repository, tag } = parseReference(target);
    await this.#api.empty('POST', `/images/${pathPart(source)}/tag`, { query: { repo: repository, tag: tag ?? 'latest' } });
  }

  async #authFor(repository: string, explicit: AuthConfig | false | undefined): Promise<AuthConfig | undefined> {
    if (explicit === false) return undefined;
    if (explicit) return explicit;
    return resolveCredentials(this.#configDir, registryHost(repository));
  }
}
