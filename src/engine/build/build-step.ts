/**
 * What the classic builder's modules share: the request's settings, a stage and its running
 * state, the step context each instruction handler works through, and the step error.
 */
import type { ContainerConfig, Platform } from '../../lib/oci.js';
import type { BuildCacheRecords } from '../../state/build-cache-records.js';
import type { ContainerService } from '../containers/container-service.js';
import type { ImageService } from '../images/image-service.js';
import type { ProgressMessage } from '../images/progress.js';
import type { CacheSources } from './cache-from.js';
import type { ContextDigests } from './context-digests.js';
import type { DockerfileNode } from './dockerfile/parser.js';
import type { StepImage } from './image-writer.js';

/** What a build request sets that the builder reads as given. */
export interface BuildSettings {
  buildArgs: Record<string, string>;
  target?: string;
  labels: Record<string, string>;
  noCache: boolean;
  pull: boolean;
  rm: boolean;
  forceRm: boolean;
  quiet: boolean;
  platform?: Platform;
  /** RUN containers' limits and network: HostConfig fields */
  hostConfig: Record<string, unknown>;
  /** Images whose build chain alone may serve cache hits (dockerd's cache-from); empty: any. */
  cacheFrom: string[];
  signal: AbortSignal;
}

export interface BuildOptions extends BuildSettings {
  dockerfile: string;
  contextDir: string;
  /** Digests of the context's files, taken as it was received. */
  contextDigests?: ContextDigests;
  /** Pulls an image FROM names; resolves to its id. */
  pull_: (name: string, platform: Platform | undefined, out: (m: ProgressMessage) => void) => Promise<string>;
}

export type Emit = (m: Record<string, unknown>) => void;

export const DEFAULT_SHELL = ['/bin/sh', '-c'];
export const PROXY_ARGS = new Set(['HTTP_PROXY', 'http_proxy', 'HTTPS_PROXY', 'https_proxy', 'FTP_PROXY', 'ftp_proxy', 'NO_PROXY', 'no_proxy', 'ALL_PROXY', 'all_proxy']);

/** A step that failed: its message goes to the client as the build's error. */
export class BuildError extends Error {
  constructor(message: string, readonly code?: number) {
    super(message);
  }
}

export interface Stage {
  name?: string;
  from: DockerfileNode;
  nodes: DockerfileNode[];
  result?: StepImage;
}

export interface State {
  image: StepImage;
  config: ContainerConfig;
  args: Map<string, string | undefined>;
  cmdSet: boolean;
  author?: string;
}

/** The running build as the instruction handlers see it (the Builder is one). */
export interface StepContext {
  readonly containers: ContainerService;
  readonly images: ImageService;
  readonly cache: BuildCacheRecords;
  readonly opts: BuildOptions;
  /** this build's scratch directory */
  readonly work: string;
  /** the current step's number */
  readonly step: number;
  /** the Dockerfile's escape character */
  readonly escape: string;
  /** With cacheFrom: the named images, which give hits by history and limit local hits to their chains. */
  readonly cacheFrom: CacheSources | undefined;
  /** Writes a stream record (nothing when quiet). */
  out(text: string): void;
  /** Expands a word with the given values; a bad substitution is a BuildError. */
  expand(word: string, env: ReadonlyMap<string, string>): string;
  /** ARG name[=default]...: declares the args into `into`; returns them as the history shows them. */
  declareArgs(node: DockerfileNode, into: Map<string, string | undefined>, env: ReadonlyMap<string, string>): string[];
}

export const short = (id: string): string => id.replace(/^sha256:/, '').slice(0, 12);
