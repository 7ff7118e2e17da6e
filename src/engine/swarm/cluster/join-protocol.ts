/**
 * Joining, over TLS on the swarm port (2377 by default). The manager serves `POST /join` with its
 * node certificate and the cluster CA; the joining node trusts the connection only when the CA's
 * digest is the one in its join token and the manager's certificate is signed by that CA. The token's
 * secret then tells the manager which role the node joins as; it signs the node's certificate request
 * and answers with what the node needs to reach etcd.
 */
import { createServer, type Server } from 'node:https';
import { request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { timingSafeEqual, X509Certificate } from 'node:crypto';
import { connect, type TLSSocket } from 'node:tls';
import { createSocket } from 'node:dgram';
import { createServer as createTcpServer } from 'node:net';
import { BerthError, errorMessage, internal, invalidArgument, isKind, unavailable } from '../../../lib/errors.js';
import { caDigest } from './pki.js';
import { replyJson, splitRemote } from './peer-tls.js';
import { log } from '../../../lib/log.js';

export interface JoinAsk {
  token: string;
  csr: string;
  addr: string;
  hostname: string;
  architecture: string;
  ncpu: number;
  memTotal: number;
  availability: string;
  /** Ports the node's etcd member will use, when it joins as a manager. */
  clientPort?: number;
  peerPort?: number;
  listenPort?: number;
}

export interface JoinAnswer {
  nodeId: string;
  role: 'manager' | 'worker';
  cert: string;
  ca: string;
  /** Managers sign later joins: they get the CA key. */
  caKey?: string;
  /** base64: the key secrets and configs are sealed with (managers only). */
  dataKey?: string;
  endpoints: string[];
  /** For a manager with a berth-managed etcd: the members it starts with. */
  initialCluster?: string;
  /** The cluster's etcd is external: the node needs its own client settings for it. */
  externalEtcd?: boolean;
  cluster: unknown;
  node: unknown;
}

/** `SWMTKN-1-<ca digest>-<secret>`: the digest part, or a 400 for anything else. */
export function tokenDigest(token: string): string {
  const m = /^SWMTKN-1-([0-9a-z]{50})-([0-9a-z]{25})$/.exec(token.trim());
  if (!m) throw invalidArgument('invalid join token');
  return m[1]!;
}

/**
 * The role a join token admits as, given the cluster's tokens; undefined for any other token. A
 * token this manager does not know (empty: it could not open them) admits nobody, and the
 * comparison takes as long wherever the tokens differ.
 */
export function roleOfToken(token: unknown, tokens: { worker: string; manager: string }): 'manager' | 'worker' | undefined {
  if (typeof token !== 'string') return undefined;
  const same = (known: string) => {
    if (!known) return false;
    const a = Buffer.from(token.trim());
    const b = Buffer.from(known);
    return a.length === b.length && timingSafeEqual(a, b);
  };
  return same(tokens.manager) ? 'manager' : same(tokens.worker) ? 'worker' : undefined;
}

/** The first port of a join request that is there but no integer 1–65535 (they go into etcd's URLs and node records). */
export function malformedPort(ask: Pick<JoinAsk, 'clientPort' | 'peerPort' | 'listenPort'>): string | undefined {
  return (['clientPort', 'peerPort', 'listenPort'] as const).find((k) => {
    const v: unknown = ask[k];
    return v !== undefined && !(Number.isInteger(v) && (v as number) >= 1 && (v as number) <= 65535);
  });
}

export class JoinListener {
  #server: Server | undefined;
  port = 0;

  constructor(
    private readonly handle: (ask: JoinAsk) => Promise<JoinAnswer>,
    /** Other nodes' requests (a task's log or secrets, managers' keys, address claims): false when none of them. */
    private readonly peers?: (req: IncomingMessage, res: ServerResponse) => boolean,
  ) {}

  /**
   * Listens on host:port (port 0: any free one). A port that is taken refuses the init or join with
   * dockerd's error naming the address, never another port: the cluster knows nodes by this one.
   */
  async listen(tls: { cert: string; ca: string; key: string }, host: string, port: number, manager: boolean): Promise<number> {
    // A client certificate is asked for but not required: joining nodes have none yet; the log route checks it.
    const server = createServer({ cert: tls.cert + tls.ca, key: tls.key, ca: tls.ca, requestCert: true, rejectUnauthorized: false, minVersion: 'TLSv1.2' }, (req, res) => {
      if (req.url !== '/join' && this.#peer(req, res)) return;
      const chunks: Buffer[] = [];
      let size = 0;
      req.on('data', (c: Buffer) => {
        size += c.length;
        if (size > 1 << 20) req.destroy();
        else chunks.push(c);
      });
      req.on('end', () => {
        if (req.method !== 'POST' || req.url !== '/join') return replyJson(res, 404, { message: 'not found' });
        let ask: JoinAsk;
        try {
          ask = JSON.parse(Buffer.concat(chunks).toString('utf8')) as JoinAsk;
        } catch {
          return replyJson(res, 400, { message: 'invalid JSON' });
        }
        this.handle(ask).then(
          (answer) => replyJson(res, 200, answer),
          (err) => {
            // The joining node shows the message; the manager's log says what it failed on.
            log.warn('a join was refused', { addr: typeof ask.addr === 'string' ? ask.addr : undefined, err: errorMessage(err), stack: isKind(err, 'invalid-argument') ? undefined : (err as Error)?.stack });
            replyJson(res, isKind(err, 'invalid-argument') ? 400 : 503, { message: errorMessage(err) });
          },
        );
      });
    });
    server.on('tlsClientError', () => undefined);
    const tryListen = (p: number) =>
      new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(p, host, () => {
          server.off('error', reject);
          resolve();
        });
      });
    try {
      await tryListen(port);
    } catch (err) {
      throw listenError(err, host, port, manager);
    }
    this.#server = server;
    this.port = (server.address() as { port: number }).port;
    return this.port;
  }

  /** Another node's request, if it is one; a handler that throws answers 500 (thrown here, it would end berthd). */
  #peer(req: IncomingMessage, res: ServerResponse): boolean {
    try {
      return this.peers?.(req, res) ?? false;
    } catch (err) {
      log.warn('a request of another node failed', { url: req.url, err: errorMessage(err) });
      replyJson(res, 500, { message: errorMessage(err) });
      return true;
    }
  }

  /** A renewed certificate: new connections get it, those open keep theirs. */
  setCert(tls: { cert: string; ca: string; key: string }): void {
    this.#server?.setSecureContext({ cert: tls.cert + tls.ca, key: tls.key, ca: tls.ca, minVersion: 'TLSv1.2' });
  }

  close(): void {
    this.#server?.close();
    this.#server?.closeAllConnections();
    this.#server = undefined;
  }
}

/** dockerd's refusal of a swarm port it cannot listen on (a 500 naming the address). */
function listenError(err: unknown, host: string, port: number, manager: boolean): BerthError {
  const why = { EADDRINUSE: 'address already in use', EADDRNOTAVAIL: 'cannot assign requested address', EACCES: 'permission denied' }[(err as NodeJS.ErrnoException).code ?? ''] ?? errorMessage(err);
  const addr = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
  return internal(`${manager ? 'manager stopped: ' : ''}failed to listen on remote API address: listen tcp ${addr}: bind: ${why}`);
}

/**
 * Before a join asks the manager: a port taken here refuses it before the cluster counts this node.
 * Answers the port (port 0: the free one the kernel chose, which the manager then records).
 */
export function freeSwarmPort(host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createTcpServer();
    probe.once('error', (err) => reject(listenError(err, host, port, false)));
    probe.listen(port, host, () => {
      const chosen = (probe.address() as { port: number }).port;
      probe.close(() => resolve(chosen));
    });
  });
}

/** The local address this host would use to reach `host` (no packet is sent). */
export function sourceAddressFor(host: string, port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = createSocket(host.includes(':') ? 'udp6' : 'udp4');
    s.on('error', (err) => {
      s.close();
      reject(err);
    });
    s.connect(port, host, () => {
      const a = s.address().address;
      s.close();
      resolve(a);
    });
  });
}

/**
 * Asks the manager at `remote` to let this node in. The TLS session is checked against the token's CA
 * digest before anything (the token included) is sent over it.
 */
export async function askToJoin(remote: string, ask: JoinAsk, timeoutMs = 20_000): Promise<JoinAnswer> {
  const digest = tokenDigest(ask.token);
  const { host, port } = splitRemote(remote);
  const sock = await new Promise<TLSSocket>((resolve, reject) => {
    const s = connect({ host, port, rejectUnauthorized: false, timeout: timeoutMs });
    s.once('secureConnect', () => resolve(s));
    s.once('timeout', () => s.destroy(unavailable(`timeout joining the manager at ${remote}`)));
    s.once('error', (err) => reject(err instanceof BerthError ? err : unavailable(`could not reach the manager at ${remote}: ${errorMessage(err)}`)));
  });
  const problem = pinProblem(sock, digest);
  if (problem) {
    sock.destroy();
    throw unavailable(problem);
  }
  return new Promise((resolve, reject) => {
    const body = JSON.stringify(ask);
    const req = httpRequest(
      { createConnection: () => sock, method: 'POST', path: '/join', timeout: timeoutMs, headers: { Host: remote, 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          sock.end();
          let parsed: { message?: string } & JoinAnswer;
          try {
            parsed = JSON.parse(Buffer.concat(chunks).toString('utf8'));
          } catch {
            return reject(unavailable(`the manager at ${remote} gave no answer`));
          }
          if (res.statusCode === 200) return resolve(parsed);
          reject(res.statusCode === 400 ? invalidArgument(parsed.message ?? 'join refused') : unavailable(parsed.message ?? `join refused (${res.statusCode})`));
        });
      },
    );
    req.on('timeout', () => req.destroy(unavailable(`timeout joining the manager at ${remote}`)));
    req.on('error', (err) => reject(err instanceof BerthError ? err : unavailable(`could not reach the manager at ${remote}: ${errorMessage(err)}`)));
    req.end(body);
  });
}

/** Why the manager's chain does not prove the token's CA, or undefined when it does. */
function pinProblem(sock: TLSSocket, digest: string): string | undefined {
  const leaf = sock.getPeerCertificate(true);
  const issuer = leaf?.issuerCertificate;
  if (!leaf?.raw || !issuer?.raw) return "the manager's certificate chain is incomplete";
  if (caDigest(issuer.raw) !== digest) return "the manager's CA does not match the join token";
  if (!new X509Certificate(leaf.raw).verify(new X509Certificate(issuer.raw).publicKey)) return "the manager's certificate is not signed by the cluster CA";
  return undefined;
}
