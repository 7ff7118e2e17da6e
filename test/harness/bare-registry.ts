/**
 * A bare Debian `docker-registry` on any loopback address with a temp storage dir, optionally
 * behind htpasswd or an RS256 token service and TLS (self-signed, or given files with optional
 * client-certificate auth), plus raw pushes of opaque blobs, manifests and indexes. For the registry
 * client's unit tests and the TLS tests; `registry.ts` is the seeded registry the daemon tests use.
 */
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { connect } from 'node:net';
import { createServer, request as httpRequest, type IncomingHttpHeaders, type IncomingMessage, type Server } from 'node:http';
import { createServer as createHttpsServer, request as httpsRequest } from 'node:https';
import { createPrivateKey, randomBytes, sign, type KeyObject } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sha256Of, type Digest } from '../../src/lib/digest.js';
import { MediaType, type Descriptor, type Platform } from '../../src/lib/oci.js';
import { freePort } from './free-port.js';

export interface TestRegistry {
  /** `127.0.0.1:<port>` */
  host: string;
  url: string;
  pid: number;
  stop(): Promise<void>;
}

export interface Credentials {
  user: string;
  password: string;
}

export interface RegistryTlsFiles {
  /** PEM paths of the server certificate (chain) and key. */
  cert: string;
  key: string;
  /** PEM paths of CAs whose client certificates are required (`http.tls.clientcas`). */
  clientCas?: string[];
}

export interface StartRegistryOptions {
  htpasswd?: Credentials;
  token?: { realm: string; service: string; issuer: string; certPem: string };
  /** true: a self-signed certificate for 127.0.0.1; or the given files. */
  tls?: boolean | RegistryTlsFiles;
  /** Address to listen on (default 127.0.0.1; any loopback address). */
  address?: string;
  /** Name clients use in `host` and `url` (default: the address). */
  hostname?: string;
}

export async function startRegistry(opts: StartRegistryOptions = {}): Promise<TestRegistry> {
  const dir = mkdtempSync(join(tmpdir(), 'berth-registry-'));
  let proc: ChildProcess | undefined;
  try {
    const address = opts.address ?? '127.0.0.1';
    const port = await freePort(address);
    const bracketed = address.includes(':') ? `[${address}]` : address;
    const lines = [
      'version: 0.1',
      'log:', '  level: error', '  accesslog:', '    disabled: true',
      'storage:', '  filesystem:', `    rootdirectory: ${join(dir, 'data')}`,
      'http:', `  addr: ${bracketed}:${port}`, `  secret: ${randomBytes(16).toString('hex')}`,
    ];
    if (opts.tls === true) {
      // Self-signed: only an insecure (unverified) HTTPS client can talk to it.
      execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', join(dir, 'tls.key'), '-out', join(dir, 'tls.crt'),
        '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
      lines.push('  tls:', `    certificate: ${join(dir, 'tls.crt')}`, `    key: ${join(dir, 'tls.key')}`);
    } else if (opts.tls) {
      lines.push('  tls:', `    certificate: ${opts.tls.cert}`, `    key: ${opts.tls.key}`);
      if (opts.tls.clientCas?.length) lines.push('    clientcas:', ...opts.tls.clientCas.map((p) => `      - ${p}`));
    }
    if (opts.htpasswd) {
      const entry = execFileSync('htpasswd', ['-Bbn', opts.htpasswd.user, opts.htpasswd.password], { encoding: 'utf8' });
      writeFileSync(join(dir, 'htpasswd'), entry.trim() + '\n');
      lines.push('auth:', '  htpasswd:', '    realm: berth-test', `    path: ${join(dir, 'htpasswd')}`);
    } else if (opts.token) {
      writeFileSync(join(dir, 'token-ca.pem'), opts.token.certPem);
      lines.push('auth:', '  token:', `    realm: ${opts.token.realm}`, `    service: ${opts.token.service}`,
        `    issuer: ${opts.token.issuer}`, `    rootcertbundle: ${join(dir, 'token-ca.pem')}`);
    }
    writeFileSync(join(dir, 'config.yml'), lines.join('\n') + '\n');
    const logPath = join(dir, 'registry.log');
    proc = spawn('/usr/bin/docker-registry', ['serve', join(dir, 'config.yml')], { stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    proc.stderr!.on('data', (d: Buffer) => {
      log += d.toString();
      writeFileSync(logPath, log);
    });
    const name = opts.hostname ?? bracketed;
    const url = `${opts.tls ? 'https' : 'http'}://${name}:${port}`;
    const started = Date.now();
    for (;;) {
      if (proc.exitCode !== null) throw new Error(`docker-registry exited (${proc.exitCode}): ${log}`);
      if (await listening(port, address)) break;
      if (Date.now() - started > 15_000) throw new Error(`docker-registry did not start: ${log}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const p = proc;
    return { host: `${name}:${port}`, url, pid: p.pid!, stop: () => stopProcess(p).finally(() => rmSync(dir, { recursive: true, force: true })) };
  } catch (err) {
    if (proc) await stopProcess(proc);
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

function listening(port: number, address: string): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = connect(port, address);
    sock.once('connect', () => {
      sock.destroy();
      resolve(true);
    });
    sock.once('error', () => resolve(false));
  });
}

function stopProcess(p: ChildProcess): Promise<void> {
  if (p.exitCode !== null || p.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const kill = setTimeout(() => p.kill('SIGKILL'), 5000);
    p.once('exit', () => {
      clearTimeout(kill);
      resolve();
    });
    p.kill('SIGTERM');
  });
}

function authHeader(auth?: Credentials | string): Record<string, string> {
  if (auth === undefined) return {};
  if (typeof auth === 'string') return { authorization: `Bearer ${auth}` };
  return { authorization: `Basic ${Buffer.from(`${auth.user}:${auth.password}`).toString('base64')}` };
}

/** Where pushes go; `clientCert` (PEM) for registries that require one. */
export interface PushTarget {
  url: string;
  clientCert?: { cert: string; key: string };
}

/** Monolithic upload: POST for a session, then PUT with the digest and the bytes. */
export async function pushBlob(reg: PushTarget, repo: string, data: Buffer, mediaType: string, auth?: Credentials | string): Promise<Descriptor> {
  const digest = sha256Of(data);
  const start = await call(reg, 'POST', new URL(`/v2/${repo}/blobs/uploads/`, reg.url), authHeader(auth));
  if (start.status !== 202) throw new Error(`upload start: ${start.status} ${start.body}`);
  const loc = new URL(start.headers.location as string, reg.url);
  loc.searchParams.set('digest', digest);
  const put = await call(reg, 'PUT', loc, { ...authHeader(auth), 'content-type': 'application/octet-stream' }, data);
  if (put.status !== 201) throw new Error(`upload put: ${put.status} ${put.body}`);
  return { mediaType, digest, size: data.length };
}

export async function pushManifest(reg: PushTarget, repo: string, reference: string, body: Buffer, mediaType: string, auth?: Credentials | string): Promise<Digest> {
  const res = await call(reg, 'PUT', new URL(`/v2/${repo}/manifests/${reference}`, reg.url), { ...authHeader(auth), 'content-type': mediaType }, body);
  if (res.status !== 201) throw new Error(`manifest put: ${res.status} ${res.body}`);
  return sha256Of(body);
}

/** One request; TLS is not verified (test registries use self-signed certificates). */
function call(reg: PushTarget, method: string, url: URL, headers: Record<string, string>, body?: Buffer): Promise<{ status: number; headers: IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = (url.protocol === 'https:' ? httpsRequest : httpRequest)(url, { method, headers, rejectUnauthorized: false, ...reg.clientCert });
    req.on('error', reject);
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
      res.on('error', reject);
    });
    req.end(body);
  });
}

export interface PushedImage {
  manifestDigest: Digest;
  manifestBytes: Buffer;
  config: Buffer;
  layers: Array<{ desc: Descriptor; data: Buffer }>;
  descriptor: Descriptor;
}

/** Pushes a one- or two-layer image (layers are opaque random bytes: the registry does not look). */
export async function pushImage(reg: PushTarget, repo: string, tag: string | undefined, opts: { platform?: Platform; layerSizes?: number[]; auth?: Credentials | string; oci?: boolean } = {}): Promise<PushedImage> {
  const platform = opts.platform ?? { os: 'linux', architecture: 'amd64' };
  const layers = [];
  for (const size of opts.layerSizes ?? [1024]) {
    const data = randomBytes(size);
    layers.push({ desc: await pushBlob(reg, repo, data, opts.oci ? MediaType.ociLayerGzip : MediaType.dockerLayerGzip, opts.auth), data });
  }
  const config = Buffer.from(JSON.stringify({
    architecture: platform.architecture, os: platform.os, ...(platform.variant ? { variant: platform.variant } : {}),
    config: { Cmd: ['/bin/sh'] }, rootfs: { type: 'layers', diff_ids: layers.map((l) => sha256Of(l.data)) },
  }));
  const configDesc = await pushBlob(reg, repo, config, opts.oci ? MediaType.ociConfig : MediaType.dockerConfig, opts.auth);
  const mediaType = opts.oci ? MediaType.ociManifest : MediaType.dockerManifest;
  const manifestBytes = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType, config: configDesc, layers: layers.map((l) => l.desc) }, null, 3));
  const manifestDigest = await pushManifest(reg, repo, tag ?? sha256Of(manifestBytes), manifestBytes, mediaType, opts.auth);
  return { manifestDigest, manifestBytes, config, layers, descriptor: { mediaType, digest: manifestDigest, size: manifestBytes.length, platform } };
}

/** Pushes an index over already pushed manifests. */
export async function pushIndex(reg: PushTarget, repo: string, tag: string, manifests: Descriptor[], auth?: Credentials | string): Promise<{ digest: Digest; bytes: Buffer }> {
  const bytes = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: MediaType.ociIndex, manifests }));
  return { digest: await pushManifest(reg, repo, tag, bytes, MediaType.ociIndex, auth), bytes };
}

/** A JWT token service the registry trusts through an `x5c` certificate (self-signed, test-only). */
export interface TokenServer {
  realm: string;
  service: string;
  issuer: string;
  certPem: string;
  /** Requests seen: method and query/form parameters. */
  requests: Array<{ method: string; params: URLSearchParams; authorization?: string }>;
  /** Mints a token directly (for registrytoken tests). */
  mint(subject: string, repo: string, actions: string[]): string;
  close(): Promise<void>;
}

export async function startTokenServer(
  users: Record<string, string>,
  opts: { expiresIn?: number; tls?: { cert: string; key: string }; address?: string; hostname?: string } = {},
): Promise<TokenServer> {
  const dir = mkdtempSync(join(tmpdir(), 'berth-token-'));
  let key: KeyObject;
  let certPem: string;
  try {
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'),
      '-days', '1', '-subj', '/CN=berth-test-token'], { stdio: 'ignore' });
    key = createPrivateKey(readFileSync(join(dir, 'key.pem')));
    certPem = readFileSync(join(dir, 'cert.pem'), 'utf8');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const x5c = certPem.replace(/-----[A-Z ]+-----/g, '').replace(/\s+/g, '');
  const service = 'berth-test-registry';
  const issuer = 'berth-test-issuer';
  const refreshTokens = new Map<string, string>();
  const requests: TokenServer['requests'] = [];
  const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const mint = (subject: string, repo: string, actions: string[]) => {
    const now = Math.floor(Date.now() / 1000);
    const head = b64({ typ: 'JWT', alg: 'RS256', x5c: [x5c] });
    const claims = b64({
      iss: issuer, sub: subject, aud: service, exp: now + (opts.expiresIn ?? 300), nbf: now - 10, iat: now, jti: randomBytes(8).toString('hex'),
      access: repo ? [{ type: 'repository', name: repo, actions }] : [],
    });
    return `${head}.${claims}.${sign('sha256', Buffer.from(`${head}.${claims}`), key).toString('base64url')}`;
  };
  const handler = async (req: IncomingMessage, res: import('node:http').ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const params = req.method === 'POST' ? new URLSearchParams(await bodyText(req)) : url.searchParams;
    const authorization = req.headers.authorization;
    requests.push({ method: req.method ?? '', params, ...(authorization ? { authorization } : {}) });
    let user: string | undefined;
    if (req.method === 'POST' && params.get('grant_type') === 'refresh_token') {
      user = refreshTokens.get(params.get('refresh_token') ?? '');
      if (!user) return deny(res);
    } else if (authorization?.startsWith('Basic ')) {
      const [u, ...rest] = Buffer.from(authorization.slice(6), 'base64').toString().split(':');
      if (u === undefined || users[u] !== rest.join(':')) return deny(res);
      user = u;
    }
    // Anonymous users get a token with no access; users get pull on everything they ask for.
    const scope = (req.method === 'POST' ? params.get('scope')?.split(' ')[0] : params.getAll('scope')[0]) ?? '';
    const repo = /^repository:([^:]+):/.exec(scope)?.[1] ?? '';
    const body: Record<string, unknown> = { token: mint(user ?? '', user ? repo : '', ['pull']), expires_in: opts.expiresIn ?? 300 };
    if (user && (params.get('offline_token') === 'true' || params.get('access_type') === 'offline')) {
      const rt = randomBytes(12).toString('hex');
      refreshTokens.set(rt, user);
      body.refresh_token = rt;
    }
    if (req.method === 'POST') {
      body.access_token = body.token;
      delete body.token;
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  };
  // With `tls` (PEM contents): an HTTPS realm, for registries whose token service has its own certificate.
  const server: Server = opts.tls ? createHttpsServer({ cert: opts.tls.cert, key: opts.tls.key }, handler) as unknown as Server : createServer(handler);
  const address = opts.address ?? '127.0.0.1';
  await new Promise<void>((r) => server.listen(0, address, r));
  const port = (server.address() as { port: number }).port;
  const name = opts.hostname ?? (address.includes(':') ? `[${address}]` : address);
  return {
    realm: `${opts.tls ? 'https' : 'http'}://${name}:${port}/token`, service, issuer, certPem, requests, mint,
    close: () => new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    }),
  };
}

function deny(res: import('node:http').ServerResponse): void {
  res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ details: 'incorrect username or password' }));
}

async function bodyText(req: IncomingMessage): Promise<string> {
  let s = '';
  for await (const chunk of req) s += chunk;
  return s;
}
