/**
 * The engine: domain operations with typed inputs, no HTTP. The api/ layer holds one Engine and
 * calls into its services; main.ts builds it from the stores and drivers.
 */
import type { DaemonConfig } from '../config.js';
import type { RegistryClient } from '../registry/registry-client.js';
import { normalizeAuthConfig, type AuthConfig } from '../registry/auth-config.js';
import type { Reference } from '../registry/reference.js';
import { invalidArgument } from '../lib/errors.js';
import type { EventBus } from './events.js';
import type { ImageService, PullOptions } from './images/image-service.js';
import type { PullResult } from './images/pull-image.js';
import type { ProgressSink } from './images/progress.js';
import type { HostFacts } from './system.js';
import type { SwarmService } from './swarm/swarm.js';
import { hostCgroupSupport, infoWarnings } from './containers/cgroup-options.js';

export interface ContainerCounts {
  total: number;
  running: number;
  paused: number;
  stopped: number;
}

export interface EngineDeps {
  config: DaemonConfig;
  events: EventBus;
  images: ImageService;
  registry: RegistryClient;
  host: HostFacts;
  cgroupVersion: '1' | '2';
  containerCounts: () => ContainerCounts;
  /** Swarm mode (/_ping and /info report its state). */
  swarm: SwarmService;
}

export class Engine {
  readonly startedAt = new Date();
  readonly config: DaemonConfig;
  readonly events: EventBus;
  readonly images: ImageService;
  readonly registry: RegistryClient;
  readonly host: HostFacts;
  readonly cgroupVersion: '1' | '2';
  readonly containerCounts: () => ContainerCounts;
  readonly swarm: SwarmService;

  constructor(deps: EngineDeps) {
    this.config = deps.config;
    this.events = deps.events;
    this.images = deps.images;
    this.registry = deps.registry;
    this.host = deps.host;
    this.cgroupVersion = deps.cgroupVersion;
    this.containerCounts = deps.containerCounts;
    this.swarm = deps.swarm;
  }

  pull(ref: Reference, opts: PullOptions, progress: ProgressSink): Promise<PullResult> {
    return this.images.pull(ref, opts, progress);
  }

  /** What this host's cgroups can do, as `docker info` reports it. */
  cgroupFacts(): { oomKillDisable: boolean; warnings: string[] } {
    return { oomKillDisable: hostCgroupSupport().oomKillDisable, warnings: infoWarnings() };
  }

  /** POST /auth with the body as sent. */
  login(body: Record<string, unknown>): Promise<{ Status: string; IdentityToken: string }> {
    const auth: AuthConfig | undefined = normalizeAuthConfig(body);
    if (!auth) throw invalidArgument('invalid auth configuration: no credentials given');
    return this.registry.login(auth);
  }
}
