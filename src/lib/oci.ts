/** OCI / Docker distribution shapes shared by registry/, images/ and engine/. */
import type { Digest } from './digest.js';

export const MediaType = {
  dockerManifest: 'application/vnd.docker.distribution.manifest.v2+json',
  dockerManifestList: 'application/vnd.docker.distribution.manifest.list.v2+json',
  dockerConfig: 'application/vnd.docker.container.image.v1+json',
  dockerLayerGzip: 'application/vnd.docker.image.rootfs.diff.tar.gzip',
  dockerForeignLayerGzip: 'application/vnd.docker.image.rootfs.foreign.diff.tar.gzip',
  ociManifest: 'application/vnd.oci.image.manifest.v1+json',
  ociIndex: 'application/vnd.oci.image.index.v1+json',
  ociConfig: 'application/vnd.oci.image.config.v1+json',
  ociLayer: 'application/vnd.oci.image.layer.v1.tar',
  ociLayerGzip: 'application/vnd.oci.image.layer.v1.tar+gzip',
  ociLayerZstd: 'application/vnd.oci.image.layer.v1.tar+zstd',
  schema1Signed: 'application/vnd.docker.distribution.manifest.v1+prettyjws',
  schema1: 'application/vnd.docker.distribution.manifest.v1+json',
} as const;

export interface Platform {
  os: string;
  architecture: string;
  variant?: string;
  'os.version'?: string;
}

export interface Descriptor {
  mediaType: string;
  digest: Digest;
  size: number;
  urls?: string[];
  annotations?: Record<string, string>;
  platform?: Platform;
}

/** A single-platform image manifest (Docker schema2 or OCI). */
export interface ImageManifest {
  schemaVersion: 2;
  mediaType?: string;
  config: Descriptor;
  layers: Descriptor[];
  annotations?: Record<string, string>;
}

/** A manifest list or OCI index. */
export interface ImageIndex {
  schemaVersion: 2;
  mediaType?: string;
  manifests: Descriptor[];
  annotations?: Record<string, string>;
}

/** The image config blob (OCI image config / Docker image JSON). Only the fields Berth reads are typed. */
export interface ImageConfig {
  created?: string;
  author?: string;
  architecture: string;
  os: string;
  variant?: string;
  config?: ContainerConfig;
  rootfs: { type: 'layers'; diff_ids: Digest[] };
  history?: HistoryEntry[];
  [extra: string]: unknown;
}

export interface ContainerConfig {
  User?: string;
  ExposedPorts?: Record<string, object>;
  Env?: string[];
  Entrypoint?: string[] | null;
  Cmd?: string[] | null;
  Volumes?: Record<string, object>;
  WorkingDir?: string;
  Labels?: Record<string, string>;
  StopSignal?: string;
  Healthcheck?: { Test?: string[]; Interval?: number; Timeout?: number; StartPeriod?: number; StartInterval?: number; Retries?: number };
  OnBuild?: string[] | null;
  Shell?: string[];
  [extra: string]: unknown;
}

export interface HistoryEntry {
  created?: string;
  created_by?: string;
  author?: string;
  comment?: string;
  empty_layer?: boolean;
}
