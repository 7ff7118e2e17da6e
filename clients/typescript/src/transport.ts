/**
 * Plain HTTP to the daemon over a unix socket, TCP, or TCP with (mutual) TLS. One keep-alive agent
 * per client; responses are handed back as soon as headers arrive so bodies can be streamed.
 */
import http from 'node:http';
import https from 'node:https';
import type { IncomingMessage } from 'node:http';
import { parseDockerHost, type DaemonAddress } from './docker-host.js';
import type { TlsSettings } from './environment.js';

export interface RawRequest {
  method: string;
  /** Path and query, already versioned. */
  path: string;
  headers?: Record<string, string>;
  body?: Buffer;
  signal?: AbortSignal;
}

export class Transport {
  readonly address: DaemonAddress;
  readonly #agent: http.Agent;
  readonly #tls: TlsSettings | undefined;

  constructor(host: string, tls?: TlsSettings) {
    this.address = parseDockerHost(host, Boolean(tls));
    this.#tls = tls;
    if (tls) {
      this.#agent = new https.Agent({
        keepAlive: true,
        ...(tls.ca && { ca: tls.ca }),
        ...(tls.cert && { cert: tls.cert }),
        ...(tls.key && { key: tls.key }),
        rejectUnauthorized: tls.verify,
      });
    } else {
      this.#agent = new http.Agent({ keepAlive: true });
    }
  }

  /** Sends a request; resolves with the response once its headers are in, whatever the status. */
  request(req: RawRequest): Promise<IncomingMessage> {
    const headers: Record<string, string> = { ...req.headers };
    if (req.body) headers['Content-Length'] = String(req.body.length);
    const options: http.RequestOptions = {
      method: req.method,
      path: req.path,
      headers,
      agent: this.#agent,
      ...(req.signal && { signal: req.signal }),
    };
    if (this.address.kind === 'unix') {
      options.socketPath = this.address.socketPath;
      // The name is a placeholder: a unix socket has no host, and the daemon does not read it.
      options.host = 'localhost';
    } else {
      options.host = this.address.host;
      options.port = this.address.port;
    }
    const send = this.#tls ? https.request : http.request;
    return new Promise((resolve, reject) => {
      const r = send(options, resolve);
      r.on('error', reject);
      r.end(req.body);
    });
  }

  /** Closes every socket of this client, streams still being read included. */
  close(): void {
    this.#agent.destroy();
  }
}

/** Reads a small body whole (error messages, JSON replies), refusing anything past `limit` bytes. */
export async function readBody(res: IncomingMessage, limit = 64 * 1024 * 1024): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) {
      res.destroy();
      throw new Error(`response body larger than ${limit} bytes`);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}
