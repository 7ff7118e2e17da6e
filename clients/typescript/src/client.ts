/**
 * The client: connection settings (explicit or from the environment), API version negotiation,
 * and the container, image and system operations.
 */
import { ApiCaller, type PingResult } from './api-caller.js';
import { Containers } from './containers.js';
import { connectionFromEnv, dockerConfigDir, type TlsSettings } from './environment.js';
import { DEFAULT_HOST } from './docker-host.js';
import { DOCKER_HUB, hostOfAuthKey } from './image-reference.js';
import { Images } from './images.js';
import type { AuthConfig, AuthResponse, VersionResponse } from './models.js';
import { storeCredentials } from './registry-credentials.js';
import { Transport } from './transport.js';

export interface ClientOptions {
  /** unix:///path or tcp://host:port; Berth's socket by default. */
  host?: string;
  tls?: TlsSettings;
  /** Pins the API version (no negotiation). */
  apiVersion?: string;
  /** Negotiate the version through /_ping on first use (default true; ignored when pinned). */
  negotiate?: boolean;
  /** Where config.json (registry credentials) lives; $DOCKER_CONFIG or ~/.docker by default. */
  configDir?: string;
}

export interface LoginOptions {
  /** Keep the credentials in config.json (or its credential helper) after a successful login. */
  store?: boolean;
  signal?: AbortSignal;
}

export class BerthClient {
  readonly containers: Containers;
  readonly images: Images;
  readonly #api: ApiCaller;
  readonly #configDir: string;

  constructor(opts: ClientOptions = {}) {
    const transport = new Transport(opts.host ?? DEFAULT_HOST, opts.tls);
    this.#api = new ApiCaller(transport, { ...(opts.apiVersion && { pinned: opts.apiVersion }), negotiate: opts.negotiate ?? true });
    this.#configDir = opts.configDir ?? dockerConfigDir();
    this.images = new Images(this.#api, this.#configDir);
    this.containers = new Containers(this.#api, this.images);
  }

  /** A client configured from DOCKER_HOST, DOCKER_TLS_VERIFY, DOCKER_CERT_PATH, DOCKER_API_VERSION, DOCKER_CONFIG. */
  static fromEnv(env: Record<string, string | undefined> = process.env, overrides: ClientOptions = {}): BerthClient {
    const s = connectionFromEnv(env);
    return new BerthClient({
      host: s.host,
      ...(s.tls && { tls: s.tls }),
      ...(s.apiVersion && { apiVersion: s.apiVersion }),
      configDir: s.configDir,
      ...overrides,
    });
  }

  /** The API version requests use (negotiated on first call when negotiation is on). */
  apiVersion(): Promise<string> {
    return this.#api.apiVersion();
  }

  ping(signal?: AbortSignal): Promise<PingResult> {
    return this.#api.ping(signal);
  }

  version(): Promise<VersionResponse> {
    return this.#api.json('GET', '/version');
  }

  /** Checks credentials against a registry through the daemon (POST /auth); stores them only if asked. */
  async login(auth: AuthConfig, opts: LoginOptions = {}): Promise<AuthResponse> {
    const reply = await this.#api.json<AuthResponse>('POST', '/auth', { body: auth, ...(opts.signal && { signal: opts.signal }) });
    if (opts.store) {
      const host = auth.serveraddress ? hostOfAuthKey(auth.serveraddress) : DOCKER_HUB;
      const kept: AuthConfig = reply.IdentityToken
        ? { username: auth.username ?? '', identitytoken: reply.IdentityToken }
        : auth;
      await storeCredentials(this.#configDir, host, kept);
    }
    return reply;
  }

  /** Closes the client's connections. */
  close(): void {
    this.#api.transport.close();
  }
}
