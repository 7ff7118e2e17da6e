import { X509Certificate, createPrivateKey, randomBytes, sign, timingSafeEqual, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { join } from 'node:path';
import { run } from './child-process.js';
import { readAll } from './http-client.js';

/**
 * A small Docker token server (the "Bearer realm" of the distribution token flow) for docker-registry's
 * `auth.token` mode. It checks Basic credentials, limits the grant to the requested scope, and signs
 * ES256 JWTs whose x5c header carries the self-signed certificate the registry trusts.
 */

export interface TokenServerOptions {
  /** Directory for the key and certificate files. */
  dir: string;
  username: string;
  password: string;
  service: string;
  issuer: string;
  /** Anonymous requests get pull access when true; by default they get a token that grants nothing. */
  anonymousPull?: boolean;
  /** Token lifetime; clients treat anything below 60 s as 60 s. */
  ttlSeconds?: number;
}

export interface ResourceAccess {
  type: string;
  name: string;
  actions: string[];
}

/** One request the server answered, so tests can check what a client asked for. */
export interface TokenRequestRecord {
  method: string;
  grantType: string;
  account: string | undefined;
  /** 'ok' when credentials were right, 'anonymous' without any, 'denied' when they were wrong. */
  auth: 'ok' | 'anonymous' | 'denied';
  scopes: string[];
  granted: ResourceAccess[];
}

export interface TokenServer {
  /** The realm, e.g. http://127.0.0.1:40123/token */
  readonly url: string;
  readonly certPath: string;
  readonly service: string;
  readonly issuer: string;
  readonly requests: TokenRequestRecord[];
  /** Signs a token directly (for tests that need a token without the HTTP round trip). */
  issue(subject: string, access: ResourceAccess[], ttlSeconds?: number): string;
  stop(): Promise<void>;
}

const ALL_ACTIONS = ['pull', 'push', 'delete', '*'];

/** Parses `repository:name:pull,push` (names never hold ':', but a `type(class)` prefix may). */
export function parseScope(scope: string): ResourceAccess | undefined {
  const first = scope.indexOf(':');
  const last = scope.lastIndexOf(':');
  if (first <= 0 || last === first) return undefined;
  const type = scope.slice(0, first).replace(/\(.*\)$/, '');
  return { type, name: scope.slice(first + 1, last), actions: scope.slice(last + 1).split(',').filter(Boolean) };
}

function base64url(data: Buffer | string): string {
  return Buffer.from(data).toString('base64url');
}

export async function startTokenServer(opts: TokenServerOptions): Promise<TokenServer> {
  const keyPath = join(opts.dir, 'token.key');
  const certPath = join(opts.dir, 'token.crt');
  const gen = await run('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
    '-keyout', keyPath, '-out', certPath, '-days', '3', '-subj', '/CN=berth-test-token-issuer',
  ], { timeoutMs: 15000 });
  if (gen.code !== 0) throw new Error(`openssl could not make the token signing certificate: ${gen.stderr}`);
  const key: KeyObject = createPrivateKey(readFileSync(keyPath));
  const certDer = new X509Certificate(readFileSync(certPath)).raw;
  const ttl = opts.ttlSeconds ?? 300;
  const requests: TokenRequestRecord[] = [];
  const refreshTokens = new Map<string, string>();

  function issue(subject: string, access: ResourceAccess[], ttlSeconds = ttl): string {
    const now = Math.floor(Date.now() / 1000);
    const header = { typ: 'JWT', alg: 'ES256', x5c: [certDer.toString('base64')] };
    const claims = {
      iss: opts.issuer,
      sub: subject,
      aud: opts.service,
      exp: now + ttlSeconds,
      // A little slack for clock skew between processes reading the same clock at different moments.
      nbf: now - 5,
      iat: now,
      jti: randomBytes(12).toString('hex'),
      access,
    };
    const signingInput = `${base64url(JSON.stringify(header))}.${base64url(JSON.stringify(claims))}`;
    // JWS wants the raw r||s form of the ECDSA signature, not DER.
    const sig = sign('sha256', Buffer.from(signingInput), { key, dsaEncoding: 'ieee-p1363' });
    return `${signingInput}.${base64url(sig)}`;
  }

  function credentialsMatch(user: string, pass: string): boolean {
    const a = Buffer.from(`${user}\0${pass}`);
    const b = Buffer.from(`${opts.username}\0${opts.password}`);
    return a.length === b.length && timingSafeEqual(a, b);
  }

  function grant(account: string | undefined, scopes: string[]): ResourceAccess[] {
    const out: ResourceAccess[] = [];
    for (const s of scopes) {
      const want = parseScope(s);
      if (!want) continue;
      let allowed: string[];
      if (account !== undefined) {
        allowed = want.actions.filter((a) => ALL_ACTIONS.includes(a));
      } else {
        allowed = opts.anonymousPull && want.type === 'repository' ? want.actions.filter((a) => a === 'pull') : [];
      }
      if (allowed.length) out.push({ type: want.type, name: want.name, actions: allowed });
    }
    return out;
  }

  function reply(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
    const text = JSON.stringify(body);
    res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text), ...headers });
    res.end(text);
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://token.invalid');
    if (url.pathname !== '/token') return reply(res, 404, { errors: [{ code: 'NOT_FOUND', message: 'not found' }] });
    let params: URLSearchParams;
    if (req.method === 'GET') params = url.searchParams;
    else if (req.method === 'POST') params = new URLSearchParams((await readAll(req)).toString('utf8'));
    else return reply(res, 405, { errors: [{ code: 'UNSUPPORTED', message: 'method not allowed' }] });

    const service = params.get('service');
    if (service !== null && service !== opts.service) {
      return reply(res, 400, { errors: [{ code: 'DENIED', message: `unknown service ${service}` }] });
    }
    // GET repeats `scope=`; the OAuth2 POST form puts several scopes in one space-separated value.
    const scopes = params.getAll('scope').flatMap((s) => s.split(' ')).filter(Boolean);
    const grantType = req.method === 'POST' ? (params.get('grant_type') ?? '') : 'basic';

    let account: string | undefined;
    let auth: TokenRequestRecord['auth'] = 'anonymous';
    if (grantType === 'password') {
      const user = params.get('username') ?? '';
      auth = credentialsMatch(user, params.get('password') ?? '') ? 'ok' : 'denied';
      if (auth === 'ok') account = user;
    } else if (grantType === 'refresh_token') {
      const user = refreshTokens.get(params.get('refresh_token') ?? '');
      auth = user !== undefined ? 'ok' : 'denied';
      account = user;
    } else if (grantType !== 'basic') {
      return reply(res, 400, { error: 'unsupported_grant_type' });
    } else {
      const header = req.headers.authorization ?? '';
      if (header) {
        const m = /^Basic\s+(.+)$/i.exec(header);
        const decoded = m ? Buffer.from(m[1]!, 'base64').toString('utf8') : '';
        const colon = decoded.indexOf(':');
        const user = colon >= 0 ? decoded.slice(0, colon) : '';
        auth = colon >= 0 && credentialsMatch(user, decoded.slice(colon + 1)) ? 'ok' : 'denied';
        if (auth === 'ok') account = user;
      }
    }

    const record: TokenRequestRecord = { method: req.method ?? '', grantType, account, auth, scopes, granted: [] };
    requests.push(record);
    if (auth === 'denied') {
      return reply(res, 401, { errors: [{ code: 'UNAUTHORIZED', message: 'incorrect username or password' }] }, {
        'WWW-Authenticate': 'Basic realm="berth-test-token"',
      });
    }
    record.granted = grant(account, scopes);
    const token = issue(account ?? '', record.granted);
    const body: Record<string, unknown> = {
      token,
      access_token: token,
      expires_in: ttl,
      issued_at: new Date().toISOString(),
    };
    if (account !== undefined && req.method === 'POST') {
      const refresh = randomBytes(16).toString('hex');
      refreshTokens.set(refresh, account);
      body.refresh_token = refresh;
    }
    reply(res, 200, body);
  }

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) reply(res, 500, { errors: [{ code: 'UNKNOWN', message: String(err) }] });
      else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const addr = server.address();
  if (addr === null || typeof addr === 'string') throw new Error('token server has no TCP address');

  return {
    url: `http://127.0.0.1:${addr.port}/token`,
    certPath,
    service: opts.service,
    issuer: opts.issuer,
    requests,
    issue,
    stop: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
