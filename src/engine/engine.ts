/**
 * The engine: domain operations with typed inputs, no HTTP. The api/ layer holds one Engine and
 * calls into its services; main.ts builds it from the stores and drivers.
 */
import type { DaemonConfig } from '../config.js';
import type { RegistryClient } from '../registry/registry-client.js';
import type { AuthConfig } from '../registry/auth-config.js';
import type { Reference } from '../registry/reference.js';
import type { Platform } from '../lib/oci.js';
import type { EventBus } from './events.js';
import type { ImageService } from './images/image-service.js';
import { pullImage, type PullResult } from './images/pull-image.js';
import type { ProgressSink } from './images/progress.js';
import { hostFacts, type HostFacts } from './system.js';
import type { SwarmService } from './swarm/swarm.js';

export interface ContainerCounts {
  total: number;
  running: number;
  paused: number;
  stopped: number;
}

export class Engine {
  readonly host: HostFacts = hostFacts();
  readonly startedAt = new Date();
  /** Replaced by the container service when it is wired in. */
  cgroupVersion: '1' | '2' = '2';
  containerCounts: () => ContainerCounts = () => ({ total: 0, running: 0, paused: 0, stopped: 0 });
  /** Swarm mode, when main.ts wires it in (/_ping and /info report its state). */
  swarm?: SwarmService;

  constructor(
    readonly config: DaemonConfig,
    readonly events: EventBus,
    readonly images: ImageService,
    readonly registry: RegistryClient,
  ) {}

  pull(ref: Reference, opts: { auth?: AuthConfig; platform?: Platform; signal?: AbortSignal; headers?: Record<string, string> }, progress: ProgressSink): Promise<PullResult> {
    return pullImage(this.registry, this.images, { ref, ...opts }, progress);
  }

  login(auth: AuthConfig): Promise<{ Status: string; IdentityToken: string }> {
    return this.registry.login(auth);
  }
}
