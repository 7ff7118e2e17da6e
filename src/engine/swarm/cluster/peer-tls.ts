/**
 * Small requests between nodes over the swarm port, with mutual TLS: both sides show a node
 * certificate of the cluster CA, whose CN is the node's id. The asking node's id is what a server
 * decides on (a task's secrets go to the node the task is assigned to, managers' keys to managers).
 */
import { request } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { errorMessage, unavailable } from '../../../lib/errors.js';
import { splitRemote } from './join-protocol.js';

export interface NodeTls {
  ca: string;
  cert: string;
  key: string;
}

/** Answers are small JSON documents (a task's secrets and configs at most): more is refused. */
const MAX_ANSWER = 8 << 20;

export function replyJson(res: ServerResponse, status: number, body: unknown): void {
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

/** GET `path` from the node at `addr` (host:port of its swarm port); its JSON answer. */
export async function peerGetJson<T>(addr: string, tls: NodeTls, path: string, timeoutMs = 15_000): Promise<T> {
  const { host, port } = splitRemote(addr);
  return new Promise<T>((resolve, reject) => {
    const req = request({
      host, port, method: 'GET', path, ca: tls.ca, cert: tls.cert, key: tls.key, timeout: timeoutMs,
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
    req.end();
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
