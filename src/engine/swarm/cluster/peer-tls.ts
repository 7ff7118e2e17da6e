/**
 * Small requests between nodes over the swarm port, with mutual TLS: both sides show a node
 * certificate of the cluster CA, whose CN is the node's id. The asking node's id is what a server
 * decides on (a task's secrets go to the node the task is assigned to, managers' keys to managers).
 */
import { request } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { errorMessage, invalidArgument, unavailable } from '../../../lib/errors.js';

export interface NodeTls {
  ca: string;
  cert: string;
  key: string;
}

/** Answers are small JSON documents (a task's secrets and configs at most): more is refused. */
const MAX_ANSWER = 8 << 20;

export function replyJson(res: ServerResponse, status: number, body: unknown): void {
  // A failure after the answer began (an error path's reply) cannot be sent: the peer sees the cut.
  if (res.headersSent) return void res.destroy();
  res.writeHead(status, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify(body));
}

/** The node id of the peer's certificate, or undefined (and a 403 sent) for a peer without one. */
export function peerNodeId(req: IncomingMessage, res: ServerResponse): string | undefined {
  const sock = req.socket as TLSSocket;
  const cn = sock.authorized ? sock.getPeerCertificate().subject?.CN : undefined;
  const id = Array.isArray(cn) ? cn[0] : cn;
  if (id) return id;
  replyJson(res, 403, { message: 'a node certificate of this cluster is required' });
  return undefined;
}

/** The role the peer's certificate was signed for (its OU, `swarm-manager` or `swarm-worker`); '' without one. */
export function peerCertRole(req: IncomingMessage): string {
  const sock = req.socket as TLSSocket;
  const ou = sock.authorized ? sock.getPeerCertificate().subject?.OU : undefined;
  return (Array.isArray(ou) ? ou[0] : ou) ?? '';
}

/**
 * Whether a peer is a manager now: its certificate was signed for one, and the cluster's record of
 * it still says manager. Certificates are not revoked, so a demoted or removed node keeps its
 * manager certificate; and a record alone is not enough where etcd lets nodes write their own (an
 * external etcd set up without berth's access control).
 */
export function isCurrentManager(certRole: string, record: unknown): boolean {
  const spec = (record as { spec?: { Role?: unknown } } | undefined)?.spec;
  return certRole === 'swarm-manager' && typeof spec === 'object' && spec !== null && spec.Role !== 'worker';
}

/** A percent-encoded part of a request's path, or undefined when it does not decode (decodeURIComponent would throw). */
export function decodePathPart(part: string): string | undefined {
  try {
    return decodeURIComponent(part);
  } catch {
    return undefined;
  }
}

/** The JSON body of another node's request (small documents only), or undefined (and a 400 sent). */
export async function readPeerJson(req: IncomingMessage, res: ServerResponse): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req as AsyncIterable<Buffer>) {
    size += c.length;
    if (size > 64 << 10) return void replyJson(res, 413, { message: 'request too large' });
    chunks.push(c);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
  } catch {
    return void replyJson(res, 400, { message: 'invalid JSON' });
  }
}

/** `host:port` (port 2377 when left out), `[v6]:port`. */
export function splitRemote(addr: string): { host: string; port: number } {
  const v6 = /^\[([^\]]+)\](?::(\d+))?$/.exec(addr);
  if (v6) return { host: v6[1]!, port: Number(v6[2] ?? 2377) };
  const m = /^([^:]+)(?::(\d+))?$/.exec(addr);
  if (!m) throw invalidArgument(`invalid remote address ${addr}`);
  return { host: m[1]!, port: Number(m[2] ?? 2377) };
}

/** GET `path` from the node at `addr` (host:port of its swarm port); its JSON answer. */
export function peerGetJson<T>(addr: string, tls: NodeTls, path: string, timeoutMs = 15_000): Promise<T> {
  return peerJson<T>(addr, tls, path, undefined, timeoutMs);
}

/** POSTs `body` (JSON) to `path` of the node at `addr`; its JSON answer. */
export function peerPostJson<T>(addr: string, tls: NodeTls, path: string, body: unknown, timeoutMs = 15_000): Promise<T> {
  return peerJson<T>(addr, tls, path, JSON.stringify(body), timeoutMs);
}

async function peerJson<T>(addr: string, tls: NodeTls, path: string, body: string | undefined, timeoutMs: number): Promise<T> {
  const { host, port } = splitRemote(addr);
  return new Promise<T>((resolve, reject) => {
    const req = request({
      host, port, method: body === undefined ? 'GET' : 'POST', path, ca: tls.ca, cert: tls.cert, key: tls.key, timeout: timeoutMs,
      ...(body === undefined ? {} : { headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) } }),
      // Node certificates name the node's address, not a host name: the CA's signature is what counts.
      checkServerIdentity: () => undefined,
    }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size > MAX_ANSWER) req.destroy(unavailable(`the node at ${addr} answered too much`));
        else chunks.push(c);
      });
      res.on('end', () => {
        let body: { message?: string };
        try {
          body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        } catch {
          return reject(unavailable(`the node at ${addr} gave no answer to ${path}`));
        }
        if (res.statusCode === 200) resolve(body as T);
        else reject(unavailable(`the node at ${addr} refused ${path}: ${body.message ?? res.statusCode}`));
      });
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(unavailable(`timeout asking the node at ${addr} for ${path}`)));
    req.on('error', (err) => reject(unavailable(`could not reach the node at ${addr}: ${errorMessage(err)}`)));
    req.end(body);
  });
}

/** Asks each address in turn until one answers; the last refusal when none does. */
export async function askAny<T>(addrs: string[], ask: (addr: string) => Promise<T>): Promise<T> {
  let last: unknown = unavailable('no manager to ask');
  for (const addr of addrs) {
    try {
      return await ask(addr);
    } catch (err) {
      last = err;
    }
  }
  throw last;
}
