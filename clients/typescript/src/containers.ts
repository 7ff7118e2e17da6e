/** Container operations: create, start, wait, logs, list, inspect, stop, kill, remove, commit, run. */
import type { ApiCaller } from './api-caller.js';
import { BerthApiError, ContainerError, NotFoundError } from './errors.js';
import type { Images } from './images.js';
import type {
  AuthConfig,
  ContainerConfig,
  ContainerCreateRequest,
  ContainerCreateResponse,
  ContainerInspect,
  ContainerSummary,
  ContainerWaitResponse,
  IdResponse,
  WaitCondition,
} from './models.js';
import { demultiplex, type OutputChunk, type OutputStream } from './multiplexed-stream.js';
import { readBody } from './transport.js';
import { pathPart } from './url-path.js';

export interface CreateOptions {
  name?: string;
  /** os[/arch[/variant]] of the image to use. */
  platform?: string;
  signal?: AbortSignal;
}

export interface ListOptions {
  /** Include stopped containers. */
  all?: boolean;
  limit?: number;
  size?: boolean;
  /** e.g. `{ label: ['app=web'], status: ['running'] }` */
  filters?: Record<string, string[]>;
  signal?: AbortSignal;
}

export interface LogsOptions {
  stdout?: boolean;
  stderr?: boolean;
  /** Keep the stream open and yield new output until the container stops. */
  follow?: boolean;
  /** Unix seconds. */
  since?: number;
  until?: number;
  timestamps?: boolean;
  tail?: number | 'all';
  /** Whether the container has a TTY; asked from the daemon when not given. */
  tty?: boolean;
  signal?: AbortSignal;
}

export interface WaitOptions {
  condition?: WaitCondition;
  signal?: AbortSignal;
}

export interface StopOptions {
  /** Seconds to wait before killing; the container's own StopTimeout when undefined. */
  timeout?: number;
  signal?: string;
}

export interface RemoveOptions {
  force?: boolean;
  /** Remove anonymous volumes too. */
  volumes?: boolean;
}

export interface CommitOptions {
  repo?: string;
  tag?: string;
  comment?: string;
  author?: string;
  /** Pause the container during the commit (the daemon's default is true). */
  pause?: boolean;
  /** Dockerfile instructions applied to the new image, e.g. `CMD ["sh"]`. */
  changes?: string[];
  /** A config that replaces the container's own as the base of the image config. */
  config?: ContainerConfig;
}

export interface RunOptions {
  /** Everything else for create: Env, Tty, HostConfig, Labels... */
  config?: Omit<ContainerCreateRequest, 'Image' | 'Cmd'>;
  name?: string;
  platform?: string;
  /** Remove the container once it has exited and its output has been read. */
  remove?: boolean;
  /** Pull the image when the daemon does not have it (default true). */
  pull?: boolean;
  /** Credentials for that pull; stored credentials are used when undefined, none when false. */
  auth?: AuthConfig | false;
  /** What a foreground run returns: stdout by default, stderr when asked (interleaved in order). */
  stdout?: boolean;
  stderr?: boolean;
  signal?: AbortSignal;
}

/** A handle on one container; creating it sends nothing. */
export class Container {
  readonly id: string;
  readonly #containers: Containers;

  constructor(containers: Containers, id: string) {
    this.#containers = containers;
    this.id = id;
  }

  inspect(): Promise<ContainerInspect> {
    return this.#containers.inspect(this.id);
  }
  start(): Promise<void> {
    return this.#containers.start(this.id);
  }
  wait(opts?: WaitOptions): Promise<ContainerWaitResponse> {
    return this.#containers.wait(this.id, opts);
  }
  logs(opts?: LogsOptions): AsyncGenerator<OutputChunk, void, undefined> {
    return this.#containers.logs(this.id, opts);
  }
  stop(opts?: StopOptions): Promise<void> {
    return this.#containers.stop(this.id, opts);
  }
  kill(signal?: string): Promise<void> {
    return this.#containers.kill(this.id, signal);
  }
  remove(opts?: RemoveOptions): Promise<void> {
    return this.#containers.remove(this.id, opts);
  }
  commit(opts?: CommitOptions): Promise<IdResponse> {
    return this.#containers.commit(this.id, opts);
  }
}

/** A wait registered with the daemon; `result` settles when the condition is met. */
export interface PendingWait {
  result: Promise<ContainerWaitResponse>;
}

export class Containers {
  readonly #api: ApiCaller;
  readonly #images: Images;

  constructor(api: ApiCaller, images: Images) {
    this.#api = api;
    this.#images = images;
  }

  /** A handle for an existing container, by ID or name (no request is made). */
  get(id: string): Container {
    return new Container(this, id);
  }

  create(spec: ContainerCreateRequest, opts: CreateOptions = {}): Promise<ContainerCreateResponse> {
    return this.#api.json('POST', '/containers/create', {
      query: { name: opts.name, platform: opts.platform },
      body: spec,
      ...(opts.signal && { signal: opts.signal }),
    });
  }

  async start(id: string): Promise<void> {
    // 304 (already running) is success, as for the official clients.
    await this.#api.empty('POST', `/containers/${pathPart(id)}/start`);
  }

  /**
   * Registers a wait and resolves once the daemon has accepted it (its headers are in), so a start
   * issued afterwards cannot be missed; `result` then gives the exit status.
   */
  async beginWait(id: string, opts: WaitOptions = {}): Promise<PendingWait> {
    const res = await this.#api.call('POST', `/containers/${pathPart(id)}/wait`, {
      query: { condition: opts.condition },
      ...(opts.signal && { signal: opts.signal }),
    });
    const result = readBody(res, 1024 * 1024).then((body) => {
      const text = body.toString('utf8');
      try {
        return JSON.parse(text) as ContainerWaitResponse;
      } catch {
        throw new BerthApiError(`unexpected wait reply: ${text.slice(0, 2048)}`, res.statusCode ?? 0);
      }
    });
    result.catch(() => undefined); // the caller may look at it late; avoid an unhandled rejection meanwhile
    return { result };
  }

  /** Waits for a container to meet the condition (default not-running) and returns its exit status. */
  async wait(id: string, opts: WaitOptions = {}): Promise<ContainerWaitResponse> {
    return (await this.beginWait(id, opts)).result;
  }

  /**
   * The container's output, chunk by chunk as it arrives. Without a TTY the daemon multiplexes
   * stdout and stderr and each chunk says which; with a TTY everything arrives as stdout.
   */
  async *logs(id: string, opts: LogsOptions = {}): AsyncGenerator<OutputChunk, void, undefined> {
    const tty = opts.tty ?? (await this.inspect(id)).Config.Tty === true;
    const res = await this.#api.call('GET', `/containers/${pathPart(id)}/logs`, {
      query: {
        stdout: opts.stdout ?? true,
        stderr: opts.stderr ?? true,
        follow: opts.follow,
        since: opts.since,
        until: opts.until,
        timestamps: opts.timestamps,
        tail: opts.tail,
      },
      ...(opts.signal && { signal: opts.signal }),
    });
    if (tty) {
      for await (const data of res as AsyncIterable<Buffer>) yield { stream: 'stdout', data };
    } else {
      yield* demultiplex(res);
    }
  }

  list(opts: ListOptions = {}): Promise<ContainerSummary[]> {
    return this.#api.json('GET', '/containers/json', {
      query: { all: opts.all, limit: opts.limit, size: opts.size, filters: opts.filters && JSON.stringify(opts.filters) },
      ...(opts.signal && { signal: opts.signal }),
    });
  }

  inspect(id: string): Promise<ContainerInspect> {
    return this.#api.json('GET', `/containers/${pathPart(id)}/json`);
  }

  async stop(id: string, opts: StopOptions = {}): Promise<void> {
    await this.#api.empty('POST', `/containers/${pathPart(id)}/stop`, { query: { t: opts.timeout, signal: opts.signal } });
  }

  async kill(id: string, signal?: string): Promise<void> {
    await this.#api.empty('POST', `/containers/${pathPart(id)}/kill`, { query: { signal } });
  }

  async remove(id: string, opts: RemoveOptions = {}): Promise<void> {
    await this.#api.empty('DELETE', `/containers/${pathPart(id)}`, { query: { force: opts.force, v: opts.volumes } });
  }

  commit(id: string, opts: CommitOptions = {}): Promise<IdResponse> {
    return this.#api.json('POST', '/commit', {
      query: {
        container: id,
        repo: opts.repo,
        tag: opts.tag,
        comment: opts.comment,
        author: opts.author,
        pause: opts.pause,
        changes: opts.changes,
      },
      ...(opts.config && { body: opts.config }),
    });
  }

  /**
   * Runs a container in the foreground: create (pulling the image when missing), start, wait, then
   * return its output. A non-zero exit raises ContainerError with the exit code and stderr.
   */
  run(image: string, cmd?: string[], opts?: RunOptions & { detach?: false }): Promise<Buffer>;
  /** Runs a container in the background: create, start, and return the container. */
  run(image: string, cmd: string[] | undefined, opts: RunOptions & { detach: true }): Promise<Container>;
  async run(image: string, cmd?: string[], opts: RunOptions & { detach?: boolean } = {}): Promise<Buffer | Container> {
    const id = await this.#createPulling(image, cmd, opts);
    const container = this.get(id);
    if (opts.detach) {
      await container.start();
      return container;
    }
    // A wait left open (start failed) would hold a connection: abort it on the way out.
    const done = new AbortController();
    const signal = opts.signal ? AbortSignal.any([opts.signal, done.signal]) : done.signal;
    try {
      const pending = await this.beginWait(id, { condition: 'next-exit', signal });
      await container.start();
      const status = await pending.result;
      if (status.Error?.Message) throw new BerthApiError(status.Error.Message, 500);
      const wanted: OutputStream[] = [];
      if (opts.stdout ?? true) wanted.push('stdout');
      if (opts.stderr) wanted.push('stderr');
      const output = await collect(this.logs(id, { stdout: wanted.includes('stdout'), stderr: wanted.includes('stderr'), signal }), wanted);
      if (status.StatusCode !== 0) {
        const stderr = await collect(this.logs(id, { stdout: false, stderr: true, signal }), ['stderr']);
        throw new ContainerError(id, status.StatusCode, image, cmd, stderr);
      }
      return output;
    } finally {
      done.abort();
      if (opts.remove) await container.remove({ force: true }).catch(() => undefined);
    }
  }

  async #createPulling(image: string, cmd: string[] | undefined, opts: RunOptions): Promise<string> {
    const spec: ContainerCreateRequest = { ...opts.config, Image: image, ...(cmd && { Cmd: cmd }) };
    const createOpts: CreateOptions = {
      ...(opts.name && { name: opts.name }),
      ...(opts.platform && { platform: opts.platform }),
      ...(opts.signal && { signal: opts.signal }),
    };
    try {
      return (await this.create(spec, createOpts)).Id;
    } catch (err) {
      if (!(err instanceof NotFoundError) || opts.pull === false) throw err;
    }
    await this.#images.pullAndWait(image, {
      ...(opts.platform && { platform: opts.platform }),
      ...(opts.auth !== undefined && { auth: opts.auth }),
      ...(opts.signal && { signal: opts.signal }),
    });
    return (await this.create(spec, createOpts)).Id;
  }
}

/** Joins the chunks of the wanted streams. Only for output the caller asked to have whole. */
async function collect(chunks: AsyncIterable<OutputChunk>, wanted: OutputStream[]): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of chunks) if (wanted.includes(c.stream)) parts.push(c.data);
  return Buffer.concat(parts);
}
