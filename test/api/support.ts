/**
 * Helpers the API tests share: pulls through raw HTTP with the progress stream parsed, X-Registry-Auth
 * encodings, and a snapshot of what the daemon keeps on disk (to prove a failed pull left nothing).
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { MediaType } from '../../src/lib/oci.js';
import { sha256Of } from '../../src/lib/digest.js';
import {
  assembleManifest,
  buildLayer,
  descriptorOf,
  hostPlatform,
  layerMediaType,
  type BuiltLayer,
  type BuiltManifest,
  type TestDaemon,
} from '../harness/index.js';

export interface ProgressRecord {
  status?: string;
  id?: string;
  progressDetail?: { current?: number; total?: number };
  progress?: string;
  errorDetail?: { message: string; code?: number };
  error?: string;
}

export interface PullOutcome {
  /** HTTP status of the response. */
  status: number;
  /** Parsed records (2xx), one per `\r\n`-terminated line. */
  records: ProgressRecord[];
  /** `message` of an HTTP error, or the in-stream `error`. */
  error?: string;
  raw: string;
  contentType: string | undefined;
}

export interface PullOptions {
  tag?: string;
  platform?: string;
  /** An object is encoded as base64url JSON; a string is sent as it is. */
  auth?: object | string;
  headers?: Record<string, string>;
  version?: string;
  timeoutMs?: number;
}

/** Builds `?a=b&c=d` from defined values. */
export function query(params: Record<string, string | number | boolean | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
}

export function registryAuth(auth: object, alphabet: 'base64' | 'base64url' = 'base64url', pad = true): string {
  let s = Buffer.from(JSON.stringify(auth)).toString(alphabet);
  if (alphabet === 'base64url' && pad) while (s.length % 4) s += '=';
  if (!pad) s = s.replace(/=+$/, '');
  return s;
}

/** POST /images/create with `fromImage` (and `tag`), read to the end. */
export async function pull(d: TestDaemon, fromImage: string, opts: PullOptions = {}): Promise<PullOutcome> {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (opts.auth !== undefined) headers['X-Registry-Auth'] = typeof opts.auth === 'string' ? opts.auth : registryAuth(opts.auth);
  const prefix = opts.version ? `/v${opts.version}` : '';
  const res = await d.request('POST', `${prefix}/images/create${query({ fromImage, tag: opts.tag, platform: opts.platform })}`, {
    headers,
    timeoutMs: opts.timeoutMs ?? 120_000,
  });
  const raw = res.text();
  const contentType = res.headers['content-type'];
  if (res.status !== 200) {
    let message: string | undefined;
    try {
      message = (JSON.parse(raw) as { message?: string }).message;
    } catch {
      message = raw;
    }
    return { status: res.status, records: [], error: message, raw, contentType };
  }
  assert.ok(raw === '' || raw.endsWith('\r\n'), `every record ends in \\r\\n: ${JSON.stringify(raw.slice(-80))}`);
  const records = raw
    .split('\r\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as ProgressRecord);
  const failed = records.find((r) => r.error !== undefined || r.errorDetail !== undefined);
  return { status: res.status, records, error: failed?.errorDetail?.message ?? failed?.error, raw, contentType };
}

/** Pulls and asserts success; returns the records. */
export async function pullOk(d: TestDaemon, fromImage: string, opts: PullOptions = {}): Promise<ProgressRecord[]> {
  const out = await pull(d, fromImage, opts);
  assert.equal(out.status, 200, `pull ${fromImage}: ${out.status} ${out.error ?? ''}`);
  assert.equal(out.error, undefined, `pull ${fromImage} failed in-stream: ${out.error}`);
  return out.records;
}

export function statuses(records: ProgressRecord[]): string[] {
  return records.map((r) => r.status ?? `<error: ${r.error}>`);
}

/** What the daemon holds on disk: layer dirs, committed blobs, unfinished ingests. */
export interface StoreSnapshot {
  layers: string[];
  blobs: string[];
  ingest: string[];
}

function list(dir: string): string[] {
  return existsSync(dir) ? readdirSync(dir).sort() : [];
}

export function storeSnapshot(d: TestDaemon): StoreSnapshot {
  return {
    layers: list(join(d.dataRoot, 'layers')),
    blobs: list(join(d.dataRoot, 'blobs', 'sha256')),
    ingest: list(join(d.dataRoot, 'ingest')),
  };
}

/** A failed pull must leave the stores exactly as they were. */
export function assertStoreUnchanged(before: StoreSnapshot, after: StoreSnapshot, what: string): void {
  assert.deepEqual(after.layers, before.layers, `${what}: layer dirs changed`);
  assert.deepEqual(after.blobs, before.blobs, `${what}: blobs changed`);
  assert.deepEqual(after.ingest, [], `${what}: ingest files left behind`);
}

export interface ImageSummary {
  Id: string;
  ParentId: string;
  RepoTags: string[];
  RepoDigests: string[];
  Created: number;
  Size: number;
  Labels: Record<string, string> | null;
  Containers: number;
}

export async function listImages(d: TestDaemon, params: Record<string, string | undefined> = {}): Promise<ImageSummary[]> {
  const res = await d.request('GET', `/images/json${query(params)}`);
  assert.equal(res.status, 200, res.text());
  return res.json<ImageSummary[]>();
}

export async function imageIds(d: TestDaemon): Promise<string[]> {
  return (await listImages(d, { all: '1' })).map((i) => i.Id).sort();
}

export function filtersParam(f: Record<string, string[]>): string {
  return JSON.stringify(f);
}

/** Short (12 hex) form of a digest or id. */
export function short(id: string): string {
  return id.replace(/^sha256:/, '').slice(0, 12);
}

/**
 * A one-layer image with its own `created` time and label (for before/since/until filters): a small
 * file named after the image, so every dated image has distinct layers and ids.
 */
export async function datedImage(name: string, created: string): Promise<BuiltManifest> {
  const layer = await buildLayer([{ type: 'file', path: `${name}.txt`, content: `${name}\n` }]);
  return assembleManifest({
    format: 'oci',
    layers: [layer],
    config: { Cmd: ['/bin/sh'], Labels: { 'org.berth.fixture': `dated-${name}`, 'org.berth.dated': 'yes' } },
    history: [{ created, created_by: `COPY ${name}.txt / # dated` }],
    extra: { created },
  });
}

/**
 * An image whose config is given as is (e.g. diff_ids that do not match the layers), which
 * assembleManifest cannot make because it derives the config from the layers.
 */
export function manifestWithConfig(layers: BuiltLayer[], configJson: Record<string, unknown>): BuiltManifest {
  const data = Buffer.from(JSON.stringify(configJson));
  const config = { mediaType: MediaType.ociConfig, digest: sha256Of(data), size: data.length, data };
  const layerBlobs = layers.map((l) => ({ ...l, mediaType: layerMediaType('oci', l.compression) }));
  const manifest = {
    schemaVersion: 2,
    mediaType: MediaType.ociManifest,
    config: descriptorOf(config),
    layers: layerBlobs.map((l) => descriptorOf(l)),
  };
  const bytes = Buffer.from(JSON.stringify(manifest));
  return {
    kind: 'manifest',
    mediaType: MediaType.ociManifest,
    digest: sha256Of(bytes),
    bytes,
    manifest: manifest as BuiltManifest['manifest'],
    config,
    configJson: configJson as BuiltManifest['configJson'],
    layers: layerBlobs,
    platform: hostPlatform(),
  };
}

export interface SlowProxy {
  readonly host: string;
  stop(): Promise<void>;
}

/**
 * An HTTP proxy in front of a registry that relays blob bodies slowly (`bytesPerTick` every 10 ms),
 * so a pull stays in flight long enough to be cancelled or killed at a chosen moment.
 */
export async function startSlowProxy(upstreamUrl: string, bytesPerTick = 64 * 1024): Promise<SlowProxy> {
  const up = new URL(upstreamUrl);
  const server = createServer((req, res) => {
    const out = httpRequest({ hostname: up.hostname, port: up.port, method: req.method, path: req.url, headers: req.headers }, (upRes) => {
      res.writeHead(upRes.statusCode ?? 502, upRes.headers);
      if (!/\/blobs\/sha256:/.test(req.url ?? '')) return void upRes.pipe(res);
      upRes.on('data', (chunk: Buffer) => {
        upRes.pause();
        let offset = 0;
        const tick = () => {
          if (res.destroyed) return upRes.destroy();
          const part = chunk.subarray(offset, offset + bytesPerTick);
          offset += part.length;
          res.write(part);
          if (offset < chunk.length) setTimeout(tick, 10);
          else setTimeout(() => upRes.resume(), 10);
        };
        tick();
      });
      upRes.on('end', () => res.end());
      upRes.on('error', () => res.destroy());
    });
    out.on('error', () => res.destroy());
    req.pipe(out);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const addr = server.address() as AddressInfo;
  return {
    host: `127.0.0.1:${addr.port}`,
    stop: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
