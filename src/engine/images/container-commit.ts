/**
 * `docker commit`: a new image made of the container's image plus one layer holding exactly the
 * container's changes (its overlay upper dir as a layer tar, deletions as whiteouts).
 *
 * The upper dir is copied straight into a new layer dir while the layer tar it stands for is
 * hashed on the way (the diffID, which names the layer): one pass, no tar written or parsed. The
 * container is paused meanwhile unless the caller says otherwise, so the layer is one consistent
 * moment. A running container left unpaused, or a tree only a tar round trip renders faithfully,
 * takes the older path: the layer tar streams into the layer store, which hashes and unpacks it.
 *
 * No compressed blob is stored: like pulled layers, a committed layer is kept unpacked only, and
 * its descriptor in the image record is the uncompressed tar (digest = diffID).
 */
import { copyUpperToLayer, NotCopyable } from '../../images/layer-copy.js';
import { diffTar, isOpaqueIn, readUpperXattrs } from '../../images/layer-diff.js';
import { conflict, internal, invalidArgument } from '../../lib/errors.js';
import { sha256Of, type Digest } from '../../lib/digest.js';
import { log } from '../../lib/log.js';
import { MediaType, type ContainerConfig, type Descriptor, type HistoryEntry, type ImageConfig } from '../../lib/oci.js';
import { parseReference } from '../../registry/reference.js';
import type { ContainerRecord } from '../containers/container-model.js';
import { containerLayerView, isDirectory, runtimeArtifacts } from '../containers/container-inspect-fs.js';
import type { ContainerService } from '../containers/container-service.js';
import { applyChanges } from './dockerfile-changes.js';

export interface CommitRequest {
  container: string;
  repo?: string;
  tag?: string;
  comment?: string;
  author?: string;
  /** Freeze the container while its changes are read (dockerd's default). */
  pause: boolean;
  /** Dockerfile instructions applied to the config. */
  changes: string[];
  /** Replaces the container's config as the base of the new image's config. */
  config?: ContainerConfig;
}

/** The fields of a container config that belong in an image config. */
const IMAGE_CONFIG_FIELDS = ['User', 'ExposedPorts', 'Env', 'Entrypoint', 'Cmd', 'Volumes', 'WorkingDir', 'Labels', 'OnBuild', 'StopSignal', 'Healthcheck', 'Shell', 'ArgsEscaped'] as const;
const EMPTY_TAR_SIZE = 1024;

export async function commitContainer(containers: ContainerService, req: CommitRequest): Promise<{ imageId: string }> {
  const c = containers.get(req.container);
  if (c.state.status === 'dead') throw conflict(`You cannot commit container ${c.id} which is Dead`);
  if (c.state.status === 'removing') throw conflict(`cannot commit container ${c.id} which is being removed`);
  // Everything the request can get wrong is checked before any work.
  const ref = req.repo ? parseTarget(req.repo, req.tag) : undefined;
  const userConfig = applyChanges(req.config ?? {}, req.changes);
  const images = containers.images;
  const parent = images.records.getImage(c.imageId);
  if (!parent) throw internal(`image ${c.imageId} of container ${c.name} is gone`);
  const parentConfig = images.config(parent);

  // Alongside an exit's release: a container that just exited is committed without waiting for
  // its rootfs unmount and the flush of the upper file system that comes with it.
  const layer = await containers.withLock(
    c.id,
    async () => {
      const pause = req.pause && c.state.status === 'running';
      // On record before the pause: a daemon killed mid-commit unpauses the container on restart.
      const endIntent = pause ? containers.intents.begin(c.id, 'commit-pause') : undefined;
      if (pause) await containers.pauseHeld(c).catch((err) => { endIntent?.(); throw err; });
      try {
        // A running container left unpaused may write meanwhile: only a tar, hashed as it is
        // unpacked, then describes the stored layer exactly.
        return await commitLayer(containers, c, c.state.status !== 'running');
      } finally {
        if (pause && c.state.status === 'paused') await containers.unpauseHeld(c).catch((err) => log.warn('commit: unpause failed', { id: c.id, err }));
        endIntent?.();
      }
    },
    { alongsideRelease: true },
  );

  const config = mergeConfig(userConfig, c.config);
  const created = new Date().toISOString();
  const history: HistoryEntry = { created, created_by: (c.config.Cmd ?? []).join(' ') };
  if (req.author) history.author = req.author;
  if (req.comment) history.comment = req.comment;
  if (!layer) history.empty_layer = true;
  const image: ImageConfig = {
    architecture: parentConfig.architecture,
    ...(parentConfig.variant ? { variant: parentConfig.variant } : {}),
    os: parentConfig.os,
    ...(parentConfig['os.version'] ? { 'os.version': parentConfig['os.version'] } : {}),
    ...(req.author ? { author: req.author } : {}),
    ...(req.comment ? { comment: req.comment } : {}),
    config: pickImageFields(config),
    container: c.id,
    container_config: c.config,
    created,
    history: [...(parentConfig.history ?? []), history],
    rootfs: { type: 'layers', diff_ids: [...(parentConfig.rootfs?.diff_ids ?? []), ...(layer ? [layer.diffId] : [])] },
  };
  const configBytes = Buffer.from(JSON.stringify(image));
  const imageId = sha256Of(configBytes);
  await images.content.writeBuffer(configBytes);
  const chain = layer ? [...parent.chainIds, layer.chainId] : [...parent.chainIds];
  const layerBlobs: Descriptor[] = [...images.layerBlobsOf(parent), ...(layer ? [{ mediaType: MediaType.ociLayer, digest: layer.diffId, size: layer.tarSize }] : [])];
  images.records.saveImage(
    {
      id: imageId,
      config: configBytes.toString('utf8'),
      chainIds: chain,
      layerBlobs,
      parent: parent.id,
      size: parent.size + (layer?.size ?? 0),
      created,
      addedAt: Date.now(),
    },
    layer ? [{ chainId: layer.chainId, diffId: layer.diffId, parent: parent.chainIds[parent.chainIds.length - 1] ?? null, size: layer.size }] : [],
    [],
  );
  let imageRef = '';
  if (ref) imageRef = images.tag(imageId, ref.repo, ref.tag);
  containers.events.publish('container', 'commit', c.id, containers.attrs(c, { comment: req.comment ?? '', imageID: imageId, imageRef }));
  return { imageId };
}

export interface CommittedLayer {
  diffId: Digest;
  chainId: Digest;
  /** Bytes of the layer tar. */
  tarSize: number;
  /** Bytes of the unpacked files. */
  size: number;
}

/** Packs the upper dir into a new stored layer; undefined when the container changed nothing. */
export async function commitLayer(containers: ContainerService, c: ContainerRecord, still: boolean): Promise<CommittedLayer | undefined> {
  const view = containerLayerView(containers, c);
  if (!(await isDirectory(view.upper))) return undefined; // never started: nothing written
  // One read of the xattrs serves both the mount-point check and the diff.
  const xattrs = await readUpperXattrs(view.upper);
  const skip = await runtimeArtifacts(view, (abs) => isOpaqueIn(xattrs, abs));
  const opts = { skip: (rel: string) => skip.has(rel), xattrs };
  const parent = containers.images.records.getImage(c.imageId)!;
  const top = parent.chainIds[parent.chainIds.length - 1] as Digest | undefined;
  const layers = containers.images.layers;
  let layer: CommittedLayer | undefined;
  if (still) {
    try {
      layer = await layers.buildComputed(top, (dir) => copyUpperToLayer(view.upper, dir, opts));
    } catch (err) {
      if (!(err instanceof NotCopyable)) throw err;
      log.debug('commit: taking the tar path', { id: c.id, why: err.message });
    }
  }
  layer ??= await layers.unpackComputed(top, diffTar(view.upper, opts));
  if (layer.tarSize <= EMPTY_TAR_SIZE) {
    // Nothing changed: no layer (an empty one would be stored and then left unused).
    if (containers.images.records.layerUsers(layer.chainId) === 0) await layers.remove(layer.chainId);
    return undefined;
  }
  return layer;
}

function parseTarget(repo: string, tag: string | undefined): { repo: string; tag: string | undefined } {
  let ref;
  try {
    ref = parseReference(tag ? `${repo}:${tag}` : repo);
  } catch (err) {
    throw invalidArgument((err as Error).message);
  }
  if (ref.digest) throw invalidArgument('refusing to create a tag with a digest reference');
  return { repo, tag };
}

/**
 * Fills what the request's config leaves out from the container's own config, as dockerd does:
 * Env and ExposedPorts/Volumes are unions, Labels add missing keys, Cmd and Entrypoint come over
 * together only when neither is set, the rest when empty.
 */
export function mergeConfig(user: ContainerConfig, container: ContainerConfig): ContainerConfig {
  const out: ContainerConfig = structuredClone(user);
  if (!out.User) out.User = container.User ?? '';
  const keyOf = (e: string) => (e.includes('=') ? e.slice(0, e.indexOf('=')) : e);
  if (!out.Env?.length) out.Env = [...(container.Env ?? [])];
  else {
    const have = new Set(out.Env.map(keyOf));
    for (const e of container.Env ?? []) if (!have.has(keyOf(e))) out.Env.push(e);
  }
  if (container.ExposedPorts) out.ExposedPorts = { ...container.ExposedPorts, ...(out.ExposedPorts ?? {}) };
  if (container.Volumes) out.Volumes = { ...container.Volumes, ...(out.Volumes ?? {}) };
  if (container.Labels) out.Labels = { ...container.Labels, ...(out.Labels ?? {}) };
  if (!out.Cmd?.length && !out.Entrypoint?.length) {
    out.Cmd = container.Cmd ?? null;
    out.Entrypoint = container.Entrypoint ?? null;
  }
  if (!out.WorkingDir) out.WorkingDir = container.WorkingDir ?? '';
  if (!out.StopSignal && container.StopSignal) out.StopSignal = container.StopSignal;
  if (!out.Shell?.length && container.Shell?.length) out.Shell = container.Shell;
  if (!out.OnBuild?.length && container.OnBuild?.length) out.OnBuild = container.OnBuild;
  if (container.Healthcheck) {
    if (!out.Healthcheck) out.Healthcheck = structuredClone(container.Healthcheck);
    else {
      const h = out.Healthcheck;
      const ch = container.Healthcheck;
      if (!h.Test?.length) h.Test = ch.Test;
      if (!h.Interval) h.Interval = ch.Interval;
      if (!h.Timeout) h.Timeout = ch.Timeout;
      if (!h.StartPeriod) h.StartPeriod = ch.StartPeriod;
      if (!h.StartInterval) h.StartInterval = ch.StartInterval;
      if (!h.Retries) h.Retries = ch.Retries;
    }
  }
  return out;
}

function pickImageFields(cfg: ContainerConfig): ContainerConfig {
  const out: ContainerConfig = {};
  for (const k of IMAGE_CONFIG_FIELDS) {
    const v = cfg[k];
    if (v === undefined || v === null || v === '') continue;
    (out as Record<string, unknown>)[k] = v;
  }
  return out;
}
