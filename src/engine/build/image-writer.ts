/** Writes the image one build step makes: the parent's config with the step's, one history entry, and the step's layer if any. */
import { sha256Of, type Digest } from '../../lib/digest.js';
import { MediaType, type ContainerConfig, type Descriptor, type HistoryEntry, type ImageConfig } from '../../lib/oci.js';
import type { ImageRecord } from '../../state/image-records.js';
import type { CommittedLayer } from '../images/container-commit.js';
import type { ImageService } from '../images/image-service.js';

export interface StepImage {
  record: ImageRecord | undefined;
  config: ImageConfig;
}

export interface WriteStep {
  parent: StepImage;
  config: ContainerConfig;
  createdBy: string;
  layer?: CommittedLayer;
  author?: string;
  /** Taken from a cache-from image: its history entry (with its time) and the layer's blob. */
  history?: HistoryEntry;
  layerBlob?: Descriptor;
}

export async function writeStepImage(images: ImageService, step: WriteStep): Promise<StepImage> {
  const { parent, layer } = step;
  const history: HistoryEntry = step.history ? { ...step.history } : { created: new Date().toISOString(), created_by: step.createdBy };
  const created = history.created ?? new Date().toISOString();
  if (!layer && !step.history) history.empty_layer = true;
  const base = parent.config;
  const author = step.author ?? base.author;
  const config: ImageConfig = {
    architecture: base.architecture,
    ...(base.variant ? { variant: base.variant } : {}),
    os: base.os,
    ...(author ? { author } : {}),
    config: imageFields(step.config),
    created,
    history: [...(base.history ?? []), history],
    rootfs: { type: 'layers', diff_ids: [...(base.rootfs?.diff_ids ?? []), ...(layer ? [layer.diffId] : [])] },
  };
  const bytes = Buffer.from(JSON.stringify(config));
  const id = sha256Of(bytes);
  await images.content.writeBuffer(bytes);
  const p = parent.record;
  const chainIds = [...(p?.chainIds ?? []), ...(layer ? [layer.chainId] : [])];
  const record: ImageRecord = {
    id,
    config: bytes.toString('utf8'),
    chainIds,
    layerBlobs: [...(p ? images.layerBlobsOf(p) : []), ...(layer ? [step.layerBlob ?? { mediaType: MediaType.ociLayer, digest: layer.diffId, size: layer.tarSize }] : [])],
    parent: p?.id ?? '',
    size: (p?.size ?? 0) + (layer?.size ?? 0),
    created,
    addedAt: Date.now(),
  };
  const top = p?.chainIds[p.chainIds.length - 1] ?? null;
  images.records.saveImage(record, layer ? [{ chainId: layer.chainId, diffId: layer.diffId, parent: top, size: layer.size }] : [], []);
  return { record, config };
}

const FIELDS = ['User', 'ExposedPorts', 'Env', 'Entrypoint', 'Cmd', 'Volumes', 'WorkingDir', 'Labels', 'OnBuild', 'StopSignal', 'Healthcheck', 'Shell', 'ArgsEscaped'] as const;

function imageFields(cfg: ContainerConfig): ContainerConfig {
  const out: ContainerConfig = {};
  for (const k of FIELDS) {
    const v = cfg[k];
    if (v === undefined || v === null || v === '') continue;
    if (Array.isArray(v) && v.length === 0 && k !== 'Cmd' && k !== 'Entrypoint') continue;
    (out as Record<string, unknown>)[k] = v;
  }
  return out;
}

export function scratchImage(arch: string, os = 'linux'): StepImage {
  return { record: undefined, config: { architecture: arch, os, rootfs: { type: 'layers', diff_ids: [] as Digest[] }, config: {} } };
}
