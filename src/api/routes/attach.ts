/**
 * POST /containers/{id}/attach (hijacked), GET /containers/{id}/attach/ws (websocket) and
 * POST /containers/{id}/resize.
 */
import { PassThrough } from 'node:stream';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import type { Router } from '../router.js';
import { queryBool, queryString, sendNoContent, type RequestContext } from '../request.js';
import { attachClient, hijack, writeStreamError } from '../hijack.js';
import { streamContentType } from '../stdcopy.js';
import { versionAtLeast } from '../api-version.js';
import { invalidArgument } from '../../lib/errors.js';
import { log } from '../../lib/log.js';
import type { AttachOptions, AttachService } from '../../engine/containers/attach.js';
import type { ContainerService } from '../../engine/containers/container-service.js';
import type { AttachClient } from '../../engine/containers/attach-bridge.js';

export function attachRoutes(r: Router, containers: ContainerService): void {
  const attach = containers.attach;
  r.on('POST', '/containers/:id/attach', (ctx) => attachHijacked(ctx, attach));
  r.on('GET', '/containers/:id/attach/ws', (ctx) => attachWebsocket(ctx, attach));
  r.on('POST', '/containers/:id/resize', async (ctx) => {
    const { height, width } = sizeFromQuery(ctx);
    await attach.resize(ctx.params.id!, height, width);
    sendNoContent(ctx, 200);
  });
}

/** `h` and `w` as dockerd reads them: unsigned 16-bit integers, both required. */
export function sizeFromQuery(ctx: RequestContext): { height: number; width: number } {
  const read = (name: string) => {
    const v = ctx.query.get(name) ?? '';
    if (!/^\d+$/.test(v) || Number(v) > 65535) throw invalidArgument(`invalid value for "${name}": ${JSON.stringify(v)}: must be an integer between 0 and 65535`);
    return Number(v);
  };
  return { height: read('h'), width: read('w') };
}

function attachOptions(ctx: RequestContext): AttachOptions {
  const q = ctx.query;
  return {
    stdin: queryBool(q, 'stdin'),
    stdout: queryBool(q, 'stdout'),
    stderr: queryBool(q, 'stderr'),
    logs: queryBool(q, 'logs'),
    stream: queryBool(q, 'stream'),
    detachKeys: queryString(q, 'detachKeys'),
  };
}

async function attachHijacked(ctx: RequestContext, attach: AttachService): Promise<void> {
  const opts = attachOptions(ctx);
  const prepared = attach.prepare(ctx.params.id!, opts);
  const framed = !prepared.tty;
  const h = hijack(ctx, streamContentType(prepared.tty, ctx.version, versionAtLeast));
  try {
    const end = await prepared.run(attachClient(h, framed));
    log.debug('attach ended', { id: prepared.container.id, end });
  } catch (err) {
    log.warn('attach failed', { id: prepared.container.id, err });
    writeStreamError(h, framed, err);
  }
  h.end();
}

const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false });

/** The websocket attach: never framed; binary messages from API 1.42 on, text before. */
async function attachWebsocket(ctx: RequestContext, attach: AttachService): Promise<void> {
  if (!ctx.socket) throw invalidArgument('websocket upgrade required');
  const opts = attachOptions(ctx);
  const prepared = attach.prepare(ctx.params.id!, opts);
  const socket = ctx.socket;
  const ws = await new Promise<WebSocket>((resolve) => wss.handleUpgrade(ctx.req, socket as never, ctx.head ?? Buffer.alloc(0), resolve));
  const binary = versionAtLeast(ctx.version, '1.42');
  const client = websocketClient(ws, socket, binary);
  try {
    await prepared.run(client);
  } catch (err) {
    log.warn('websocket attach failed', { id: prepared.container.id, err });
  }
  ws.close();
}

function websocketClient(ws: WebSocket, socket: Duplex, binary: boolean): AttachClient {
  const input = new PassThrough();
  ws.on('message', (data: Buffer | ArrayBuffer | Buffer[]) => {
    const buf = Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);
    if (!input.write(buf)) {
      ws.pause();
      input.once('drain', () => ws.resume());
    }
  });
  const gone = new Promise<void>((resolve) => ws.once('close', () => resolve()));
  void gone.then(() => input.end());
  ws.on('error', () => undefined);
  return {
    input,
    write: (_stream, data) => {
      if (ws.readyState !== ws.OPEN) return true;
      ws.send(data, { binary });
      return ws.bufferedAmount < 1024 * 1024;
    },
    drained: () => (ws.bufferedAmount < 1024 * 1024 ? Promise.resolve() : Promise.race([new Promise<void>((r) => socket.once('drain', () => r())), gone])),
    backlog: () => ws.bufferedAmount,
    gone,
  };
}
