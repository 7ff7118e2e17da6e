/**
 * The distribution push protocol for one repository: HEAD to find blobs the registry already
 * has, cross-repository mounts, blob uploads streamed from disk (a PATCH of what remains, resumed
 * from the offset the registry reports after a broken connection, or sent again in a new upload
 * when the registry will not go on, then the closing PUT), and
 * manifest PUTs. Built by RegistryClient.openPush with a `pull,push` token scope.
 */
import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import { isDigest, sha256Of, type Digest } from '../lib/digest.js';
import type { Descriptor } from '../lib/oci.js';
import { errorFromResponse, RegistryStatusError } from './registry-errors.js';
import type { RegistrySession } from './registry-session.js';

/** Opens a blob's bytes from `offset` on (a file read stream). */
export type BlobSource = (offset: number) => Readable;

const UPLOAD_ATTEMPTS = 4;

export class PushSession {
  constructor(readonly session: RegistrySession) {}

  get repository(): string {
    return this.session.repository!;
  }

  #blobUrl(d: Digest): URL {
    return this.session.url(`/v2/${this.repository}/blobs/${d}`);
  }

  /** Whether the registry holds the blob in this repository. */
  async exists(desc: Descriptor, signal?: AbortSignal): Promise<boolean> {
    const url = this.#blobUrl(desc.digest);
    const res = await this.session.request('HEAD', url, { signal });
    res.resume();
    if (res.statusCode === 200) return true;
    if (res.statusCode === 404) return false;
    throw await errorFromResponse(res, 'HEAD', url);
  }

  /**
   * Asks the registry to link the blob from repository `from` (same registry). True when it did;
   * otherwise the upload the registry opened instead is cancelled.
   */
  async mount(desc: Descriptor, from: string, signal?: AbortSignal): Promise<boolean> {
    const url = this.session.url(`/v2/${this.repository}/blobs/uploads/`);
    url.searchParams.set('mount', desc.digest);
    url.searchParams.set('from', from);
    const res = await this.session.request('POST', url, { signal, headers: { 'content-length': 0 }, maxRedirects: 0 });
    res.resume();
    if (res.statusCode === 201) return true;
    if (res.statusCode === 202) {
      const location = this.#location(res, url);
      const del = await this.session.request('DELETE', location, { signal }).catch(() => undefined);
      del?.resume();
      return false;
    }
    throw await errorFromResponse(res, 'POST', url);
  }

  /**
   * Uploads a blob: open an upload, PATCH the bytes from disk, PUT with the digest. After a
   * broken transfer the registry's offset (GET on the upload) says where to go on from.
   */
  async upload(desc: Descriptor, open: BlobSource, onBytes: (sent: number) => void, signal?: AbortSignal): Promise<void> {
    let location = await this.#startUpload(signal);
    let offset = 0;
    let resumed = false;
    for (let attempt = 1; ; attempt++) {
      try {
        location = await this.#patch(location, desc, offset, open, onBytes, signal);
        break;
      } catch (err) {
        // A registry error ends the push, unless it refused a resumed upload (distribution may
        // judge the upload state stale after a cut-off PATCH): then the blob goes again, anew.
        if (signal?.aborted || attempt >= UPLOAD_ATTEMPTS || (err instanceof RegistryStatusError && !resumed)) throw err;
        const status = err instanceof RegistryStatusError ? undefined : await this.#uploadOffset(location, signal).catch(() => undefined);
        resumed = status !== undefined;
        if (status) ({ location, offset } = status);
        else [location, offset] = [await this.#startUpload(signal), 0];
      }
    }
    const put = new URL(location);
    put.searchParams.set('digest', desc.digest);
    const done = await this.session.request('PUT', put, { signal, headers: { 'content-length': 0 }, maxRedirects: 0 });
    done.resume();
    if (done.statusCode !== 201 && done.statusCode !== 204) throw await errorFromResponse(done, 'PUT', put);
  }

  async #startUpload(signal?: AbortSignal): Promise<URL> {
    const start = this.session.url(`/v2/${this.repository}/blobs/uploads/`);
    const res = await this.session.request('POST', start, { signal, headers: { 'content-length': 0 }, maxRedirects: 0 });
    res.resume();
    if (res.statusCode !== 202) throw await errorFromResponse(res, 'POST', start);
    return this.#location(res, start);
  }

  async #patch(location: URL, desc: Descriptor, offset: number, open: BlobSource, onBytes: (sent: number) => void, signal?: AbortSignal): Promise<URL> {
    const length = desc.size - offset;
    if (length <= 0) return location;
    let sent = offset;
    const headers: Record<string, string | number> = { 'content-type': 'application/octet-stream', 'content-length': length };
    if (offset > 0) headers['content-range'] = `${offset}-${desc.size - 1}`;
    const res = await this.session.request('PATCH', location, {
      signal,
      headers,
      maxRedirects: 0,
      body: () => {
        sent = offset;
        const src = open(offset);
        src.on('data', (chunk: Buffer) => {
          sent += chunk.length;
          onBytes(sent);
        });
        return src;
      },
    });
    res.resume();
    if (res.statusCode !== 202 && res.statusCode !== 204) throw await errorFromResponse(res, 'PATCH', location);
    return this.#location(res, location);
  }

  /** Where an interrupted upload stands: its location and the bytes the registry has. */
  async #uploadOffset(location: URL, signal?: AbortSignal): Promise<{ location: URL; offset: number }> {
    const res = await this.session.request('GET', location, { signal, maxRedirects: 0 });
    res.resume();
    if (res.statusCode !== 204) throw await errorFromResponse(res, 'GET', location);
    const range = /^0-(\d+)$/.exec(String(res.headers.range ?? ''));
    return { location: this.#location(res, location), offset: range ? Number(range[1]) + 1 : 0 };
  }

  #location(res: IncomingMessage, base: URL): URL {
    const loc = res.headers.location;
    if (!loc) return base;
    return new URL(loc, base);
  }

  /** PUTs a manifest under `reference` (a tag); returns the digest the registry names it by. */
  async putManifest(reference: string, bytes: Buffer, mediaType: string, signal?: AbortSignal): Promise<Digest> {
    const url = this.session.url(`/v2/${this.repository}/manifests/${reference}`);
    const res = await this.session.request('PUT', url, { signal, headers: { 'content-type': mediaType, 'content-length': bytes.length }, body: () => bytes, maxRedirects: 0 });
    res.resume();
    if (res.statusCode !== 201 && res.statusCode !== 200 && res.statusCode !== 202) throw await errorFromResponse(res, 'PUT', url);
    const header = String(res.headers['docker-content-digest'] ?? '').trim();
    return isDigest(header) ? header : sha256Of(bytes);
  }
}
