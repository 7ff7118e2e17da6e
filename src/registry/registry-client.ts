/**
 * The distribution-API client the engine uses for pulls and logins: resolve a reference to one
 * platform's manifest and config, stream verified blobs, and check credentials.
 */
import { STATUS_CODES, type IncomingMessage } from 'node:http';
import { addAbortSignal, pipeline, type Readable } from 'node:stream';
import { BerthError, notFound, unauthorized } from '../lib/errors.js';
import { isDigest, sha256Of, type Digest } from '../lib/digest.js';
import { log } from '../lib/log.js';
import { MediaType, type Descriptor, type ImageManifest, type Platform } from '../lib/oci.js';
import type { AuthConfig } from './auth-config.js';
import { BlobVerifier, verificationFailed } from './blob-verifier.js';
import { HttpTransport } from './http-transport.js';
import { MANIFEST_ACCEPT, parseManifestDocument } from './manifest-format.js';
import { hostPlatform, selectManifest } from '../lib/platform.js';
import { familiarName, familiarString, type Reference } from './reference.js';
import { describeRequest, errorFromResponse, readLimited, RegistryStatusError } from './registry-errors.js';
import { isDockerHub, RegistryHosts, type RegistryOptions } from './registry-hosts.js';
import { RegistrySession, type PlannedRequest, type SessionContext } from './registry-session.js';
import { TokenCache, TokenError } from './token-auth.js';
import { PushSession } from './registry-push.js';
import { searchRegistry, type SearchResult } from './registry-search.js';

export type { RegistryOptions } from './registry-hosts.js';
export type { PlannedRequest } from './registry-session.js';

export interface ResolveOptions {
  auth?: AuthConfig | undefined;
  /** Platform to pick from an index (default: the host's, e.g. linux/amd64). */
  platform?: Platform | undefined;
  signal?: AbortSignal | undefined;
  /** Extra headers sent to the registry, e.g. the client's `X-Meta-*` headers. */
  headers?: Record<string, string> | undefined;
}

export interface ResolvedImage {
  ref: Reference;
  /** Digest of the top-level document (index or manifest): what `Digest:` and RepoDigests show. */
  rootDigest: Digest;
  /** Digest of the chosen single-platform manifest (equals rootDigest without an index). */
  manifestDigest: Digest;
  manifest: ImageManifest;
  manifestBytes: Buffer;
  manifestMediaType: string;
  /** Present when the reference named an index / manifest list. */
  index?: { bytes: Buffer; mediaType: string };
  /** The config blob, verified against manifest.config. */
  config: Buffer;
  /** Base URL the image came from (a mirror or the registry). */
  endpoint: string;
  /** Connection and auth state reused by openBlob. */
  session: RegistrySession;
}

const MAX_MANIFEST_BYTES = 4 * 1024 * 1024;
const MAX_CONFIG_BYTES = 32 * 1024 * 1024;

export class RegistryClient {
  readonly #transport = new HttpTransport();
  readonly #hosts: RegistryHosts;
  readonly #tokens = new TokenCache();

  constructor(opts: RegistryOptions = {}) {
    this.#hosts = new RegistryHosts(opts);
  }

  get #ctx(): SessionContext {
    return { transport: this.#transport, hosts: this.#hosts, tokens: this.#tokens };
  }

  /**
   * Resolves `ref` to one platform's manifest and its config. Docker Hub references try the
   * configured mirrors first, in order, then Docker Hub itself.
   */
  async resolve(ref: Reference, opts: ResolveOptions = {}): Promise<ResolvedImage> {
    const hosts = await this.#hosts.pullHosts(ref.domain);
    for (const host of hosts) {
      let session: RegistrySession | undefined;
      try {
        session = await RegistrySession.open(this.#ctx, host, { repository: ref.path, auth: opts.auth, headers: opts.headers, signal: opts.signal });
        return await this.#resolveOn(session, ref, opts);
      } catch (err) {
        if (opts.signal?.aborted || !host.mirror) throw translatePullError(err, ref, session);
        log.warn('registry mirror failed, trying the next source', { mirror: host.name, ref: familiarString(ref), error: err });
      }
    }
    throw new BerthError('internal', `no registry endpoint for ${ref.domain}`);
  }

  async #resolveOn(session: RegistrySession, ref: Reference, opts: ResolveOptions): Promise<ResolvedImage> {
    const name = familiarString(ref);
    const top = await this.#fetchManifest(session, ref.digest ?? ref.tag ?? 'latest', opts.signal);
    const rootDigest = sha256Of(top.bytes);
    if (ref.digest !== undefined && rootDigest !== ref.digest) throw manifestMismatch(ref.digest, rootDigest);
    if (ref.digest === undefined && top.digestHeader !== undefined && isDigest(top.digestHeader) && top.digestHeader !== rootDigest) {
      throw manifestMismatch(top.digestHeader, rootDigest);
    }
    const doc = parseManifestDocument(top.bytes, top.contentType, name);
    if (doc.kind === 'manifest') {
      const config = await this.#fetchConfig(session, doc.manifest!.config, opts.signal);
      return {
        ref, rootDigest, manifestDigest: rootDigest, manifest: doc.manifest!, manifestBytes: top.bytes, manifestMediaType: doc.mediaType,
        config, endpoint: session.endpoint.base.href, session,
      };
    }

    const entry = selectManifest(doc.index!.manifests, opts.platform ?? hostPlatform());
    const child = await this.#fetchManifest(session, entry.digest, opts.signal);
    const childDigest = sha256Of(child.bytes);
    if (childDigest !== entry.digest || child.bytes.length !== entry.size) throw manifestMismatch(entry.digest, childDigest);
    const childDoc = parseManifestDocument(child.bytes, child.contentType || entry.mediaType, `${name}@${entry.digest}`);
    if (childDoc.kind !== 'manifest') throw new BerthError('invalid-argument', `${name}: nested manifest lists are not supported`);
    const config = await this.#fetchConfig(session, childDoc.manifest!.config, opts.signal);
    return {
      ref, rootDigest, manifestDigest: entry.digest, manifest: childDoc.manifest!, manifestBytes: child.bytes, manifestMediaType: childDoc.mediaType,
      index: { bytes: top.bytes, mediaType: doc.mediaType }, config, endpoint: session.endpoint.base.href, session,
    };
  }

  async #fetchManifest(session: RegistrySession, target: string, signal: AbortSignal | undefined) {
    const url = session.url(`/v2/${session.repository}/manifests/${target}`);
    const res = await session.request('GET', url, { headers: { accept: MANIFEST_ACCEPT }, signal });
    if (res.statusCode !== 200) {
      const err = await errorFromResponse(res, 'GET', url);
      if (err.status === 404 && err.errors.length === 0) {
        throw new RegistryStatusError('not-found', err.request, 404, [{ code: 'MANIFEST_UNKNOWN', message: 'manifest unknown' }], 'manifest unknown: manifest unknown');
      }
      throw err;
    }
    const bytes = await readLimited(res, MAX_MANIFEST_BYTES);
    const header = res.headers['docker-content-digest'];
    return { bytes, contentType: res.headers['content-type'] ?? '', digestHeader: typeof header === 'string' ? header.trim() : undefined };
  }

  async #fetchConfig(session: RegistrySession, desc: Descriptor, signal: AbortSignal | undefined): Promise<Buffer> {
    if (desc.size > MAX_CONFIG_BYTES) throw new BerthError('invalid-argument', `image config ${desc.digest} is too large (${desc.size} bytes)`);
    const res = await this.#blobResponse(session, desc, signal);
    const bytes = await readLimited(res, desc.size);
    if (bytes.length !== desc.size || sha256Of(bytes) !== desc.digest) {
      throw new BerthError('internal', `image config verification failed for digest ${desc.digest}`);
    }
    return bytes;
  }

  /** GET a blob from the registry (redirects followed without credentials); non-200 throws. */
  async #blobResponse(session: RegistrySession, desc: Descriptor, signal: AbortSignal | undefined): Promise<IncomingMessage> {
    const url = session.url(`/v2/${session.repository}/blobs/${desc.digest}`);
    // Blob bodies may idle while the consumer applies backpressure, so only the headers are timed.
    const res = await session.request('GET', url, { signal });
    if (res.statusCode !== 200) throw await errorFromResponse(res, 'GET', url);
    return res;
  }

  /**
   * Streams a blob. The stream is verified as it flows (size and digest) and errors with
   * `filesystem layer verification failed for digest <d>` on a mismatch. Aborting `signal` or
   * destroying the stream closes the connection.
   */
  async openBlob(img: ResolvedImage, desc: Descriptor, signal?: AbortSignal): Promise<Readable> {
    const res = (await this.#foreignLayer(desc, signal)) ?? (await this.#blobResponse(img.session, desc, signal));
    return verifiedBlob(res, desc, signal);
  }

  /**
   * The GET openBlob would send for a blob, as data, so another thread can fetch and verify it
   * (with verifiedBlob) while this one stays free. Undefined for foreign layers, which only
   * openBlob fetches. Any answer but 200 should be retried through openBlob, which handles a
   * token that expired meanwhile and reports errors.
   */
  async planBlob(img: ResolvedImage, desc: Descriptor, signal?: AbortSignal): Promise<PlannedRequest | undefined> {
    if (desc.mediaType === MediaType.dockerForeignLayerGzip && desc.urls?.length) return undefined;
    return img.session.plan('GET', img.session.url(`/v2/${img.session.repository}/blobs/${desc.digest}`), { signal });
  }

  /** Foreign (non-distributable) layers come from their own URLs, unauthenticated, when they can. */
  async #foreignLayer(desc: Descriptor, signal: AbortSignal | undefined): Promise<IncomingMessage | undefined> {
    if (desc.mediaType !== MediaType.dockerForeignLayerGzip || !desc.urls?.length) return undefined;
    for (const u of desc.urls) {
      try {
        const url = new URL(u);
        if (url.protocol !== 'https:' && url.protocol !== 'http:') continue;
        const res = await this.#transport.request({ method: 'GET', url, signal, maxRedirects: 5, headersTimeoutMs: 60_000 });
        if (res.statusCode === 200) return res;
        res.resume();
      } catch (err) {
        if (signal?.aborted) throw err;
        log.debug('foreign layer URL failed', { url: u, error: err });
      }
    }
    return undefined;
  }

  /** The v1 search of the index `term` names (Docker Hub's unless it starts with a registry). */
  search(term: string, limit: number, auth: AuthConfig | undefined, headers: Record<string, string>): Promise<SearchResult[]> {
    return searchRegistry(this.#transport, this.#hosts, term, limit, auth, headers);
  }

  /**
   * A push conversation with `ref`'s repository on its own registry (never a mirror), with a token
   * scope of `pull,push` and `pull` on each repository in `mountFrom` (blobs mounted from there).
   */
  async openPush(ref: Reference, opts: { auth?: AuthConfig | undefined; mountFrom?: string[]; signal?: AbortSignal | undefined; headers?: Record<string, string> | undefined }): Promise<PushSession> {
    const host = await this.#hosts.host(ref.domain);
    const extraScopes = (opts.mountFrom ?? []).filter((r) => r !== ref.path).map((r) => `repository:${r}:pull`);
    const session = await RegistrySession.open(this.#ctx, host, { repository: ref.path, actions: 'pull,push', extraScopes, auth: opts.auth, headers: opts.headers, signal: opts.signal });
    return new PushSession(session);
  }

  /**
   * Checks credentials the way `docker login` needs: ping `/v2/`, then the Basic or token
   * flow. The IdentityToken is the token service's refresh token when it returns one.
   */
  async login(auth: AuthConfig, signal?: AbortSignal): Promise<{ Status: 'Login Succeeded'; IdentityToken: string }> {
    const host = await this.#hosts.host(loginDomain(auth.serveraddress));
    const session = await RegistrySession.open(this.#ctx, host, { auth, offline: true, signal });
    const url = session.url('/v2/');
    let res: IncomingMessage;
    try {
      res = await session.request('GET', url, { signal });
    } catch (err) {
      if (err instanceof TokenError && err.status === 401) throw unauthorized(`${describeRequest('GET', url)}: ${err.detail}`);
      throw err;
    }
    res.resume();
    if (res.statusCode === 200) return { Status: 'Login Succeeded', IdentityToken: session.refreshToken ?? '' };
    const status = res.statusCode ?? 0;
    const msg = `login attempt to ${url.href} failed with status: ${status} ${STATUS_CODES[status] ?? ''}`.trimEnd();
    if (status === 401 || status === 403) throw unauthorized(msg);
    throw new BerthError('internal', msg);
  }

  /** Closes idle connections. */
  close(): void {
    this.#transport.close();
  }
}

/** The registry a login is for: `serveraddress` may be a URL, `host[:port]`, or empty for Docker Hub. */
function loginDomain(serveraddress: string | undefined): string {
  const s = (serveraddress ?? '').trim().replace(/^[a-z]+:\/\//i, '').split('/')[0] ?? '';
  return s === '' || isDockerHub(s) ? 'docker.io' : s;
}

function manifestMismatch(expected: string, actual: string): BerthError {
  return new BerthError('invalid-argument', `manifest verification failed for digest ${expected}: got ${actual}`);
}

/** Registry errors → dockerd's pull messages (404 for denied / unknown, 401 for bad credentials). */
function translatePullError(err: unknown, ref: Reference, session: RegistrySession | undefined): unknown {
  if (!(err instanceof RegistryStatusError)) return err;
  const name = familiarName(ref);
  const denied = (detail: string) =>
    notFound(`pull access denied for ${name}, repository does not exist or may require 'docker login': ${detail}`);
  if (err.hasCode('MANIFEST_UNKNOWN')) return notFound(`manifest for ${familiarString(ref)} not found: ${err.detail}`);
  if (err.hasCode('NAME_UNKNOWN')) return notFound(`repository ${name} not found: ${err.detail}`);
  if (err.hasCode('DENIED') || err.status === 403) return denied(err.detail);
  if (err.status === 401) {
    const withCredentials = session?.hasCredentials ?? false;
    // Wrong credentials: the token service refused them, or a Basic registry did.
    if (withCredentials && (err instanceof TokenError || session?.authScheme !== 'bearer')) return err;
    // Anonymous, or a token was issued that grants nothing: the repository is missing or private.
    return denied(session?.authScheme === 'bearer' ? 'denied: requested access to the resource is denied' : err.detail);
  }
  return err;
}

/**
 * A 200 blob response as the blob's verified bytes: the Content-Length must match the descriptor,
 * and the stream fails unless its size and digest do. Aborting `signal` closes the connection.
 */
export function verifiedBlob(res: IncomingMessage, desc: Descriptor, signal?: AbortSignal): Readable {
  const length = res.headers['content-length'];
  if (length !== undefined && Number(length) !== desc.size) {
    res.destroy();
    throw verificationFailed(desc, new Error(`Content-Length ${length}, expected ${desc.size}`));
  }
  const verifier = new BlobVerifier(desc);
  pipeline(res, verifier, () => {
    // Errors reach the consumer through `verifier`; pipeline already destroyed both ends.
  });
  if (signal) addAbortSignal(signal, verifier);
  return verifier;
}
