/** Exec: POST /containers/{id}/exec, POST /exec/{id}/start (hijacked), /exec/{id}/resize, GET /exec/{id}/json. */
import type { Router } from '../router.js';
import { checkJsonBody, readJsonObject, sendJson, sendNoContent, type RequestContext } from '../request.js';
import { attachClient, hijack, readUpgradeBody, writeStreamError } from '../hijack.js';
import { streamContentType } from '../stdcopy.js';
import { versionAtLeast } from '../api-version.js';
import { sizeFromQuery } from './attach.js';
import { invalidArgument } from '../../lib/errors.js';
import { log } from '../../lib/log.js';
import type { ExecRecord, ExecService } from '../../engine/containers/exec.js';
import type { ContainerService } from '../../engine/containers/container-service.js';
import type { ExecConfig } from '../../lib/docker-api-types.js';

export function execRoutes(r: Router, containers: ContainerService): void {
  const execs = containers.execs;
  r.on('POST', '/containers/:id/exec', async (ctx) => {
    const config = parseExecConfig(await readJsonObject(ctx));
    const rec = execs.create(ctx.params.id!, config);
    sendJson(ctx, 201, { Id: rec.id });
  });
  r.on('POST', '/exec/:id/start', (ctx) => startExec(ctx, execs));
  r.on('POST', '/exec/:id/resize', async (ctx) => {
    const { height, width } = sizeFromQuery(ctx);
    await execs.resize(ctx.params.id!, height, width);
    sendNoContent(ctx, 200);
  });
  r.on('GET', '/exec/:id/json', (ctx) => sendJson(ctx, 200, inspectExec(execs.get(ctx.params.id!))));
}

function field<T>(body: Record<string, unknown>, name: string, type: 'string' | 'boolean', dflt: T): T {
  const v = body[name];
  if (v === undefined || v === null) return dflt;
  if (typeof v !== type) throw invalidArgument(`invalid JSON: ${name} must be a ${type}`);
  return v as T;
}

function stringList(body: Record<string, unknown>, name: string): string[] {
  const v = body[name];
  if (v === undefined || v === null) return [];
  if (typeof v === 'string') return [v];
  if (!Array.isArray(v) || v.some((x) => typeof x !== 'string')) throw invalidArgument(`invalid JSON: ${name} must be a list of strings`);
  return v as string[];
}

function consoleSize(body: Record<string, unknown>): [number, number] | undefined {
  const v = body.ConsoleSize;
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v) || v.length !== 2 || v.some((x) => !Number.isInteger(x) || x < 0)) throw invalidArgument('invalid JSON: ConsoleSize must be [height, width]');
  const [h, w] = v as [number, number];
  return h === 0 && w === 0 ? undefined : [h, w];
}

function parseExecConfig(body: Record<string, unknown>): ExecConfig {
  return {
    Cmd: stringList(body, 'Cmd'),
    Env: stringList(body, 'Env'),
    User: field(body, 'User', 'string', ''),
    WorkingDir: field(body, 'WorkingDir', 'string', ''),
    Tty: field(body, 'Tty', 'boolean', false),
    AttachStdin: field(body, 'AttachStdin', 'boolean', false),
    AttachStdout: field(body, 'AttachStdout', 'boolean', false),
    AttachStderr: field(body, 'AttachStderr', 'boolean', false),
    Privileged: field(body, 'Privileged', 'boolean', false),
    DetachKeys: field(body, 'DetachKeys', 'string', ''),
    ConsoleSize: consoleSize(body),
  };
}

async function startExec(ctx: RequestContext, execs: ExecService): Promise<void> {
  const raw = ctx.socket ? await readUpgradeBody(ctx) : undefined;
  let body: Record<string, unknown>;
  if (raw === undefined) {
    body = await readJsonObject(ctx);
  } else {
    const text = raw.toString('utf8').trim();
    try {
      body = text ? (JSON.parse(text) as Record<string, unknown>) : {};
    } catch (err) {
      throw invalidArgument(`invalid JSON: ${(err as Error).message}`);
    }
    if (typeof body !== 'object' || body === null || Array.isArray(body)) throw invalidArgument('invalid JSON: expected an object');
    checkJsonBody(ctx, body);
  }
  const detach = field(body, 'Detach', 'boolean', false);
  const size = consoleSize(body);
  if (detach) {
    // A detached start is a plain request, even if the client asked to upgrade.
    await execs.startDetached(ctx.params.id!, { consoleSize: size });
    if (ctx.socket) {
      ctx.socket.end('HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
    } else {
      sendNoContent(ctx, 200);
    }
    return;
  }
  const prepared = execs.prepareStart(ctx.params.id!, { consoleSize: size });
  // As dockerd: the start request's Tty decides the framing.
  const tty = field(body, 'Tty', 'boolean', prepared.record.config.Tty);
  const framed = !tty;
  const h = hijack(ctx, streamContentType(tty, ctx.version, versionAtLeast));
  try {
    await prepared.run(attachClient(h, framed));
  } catch (err) {
    log.warn('exec start failed', { id: prepared.record.id, err });
    writeStreamError(h, framed, err);
  }
  h.end();
}

export function inspectExec(rec: ExecRecord): Record<string, unknown> {
  const [entrypoint = '', ...args] = rec.config.Cmd;
  return {
    ID: rec.id,
    Running: rec.running,
    ExitCode: rec.exitCode,
    ProcessConfig: { tty: rec.config.Tty, entrypoint, arguments: args, privileged: rec.config.Privileged, user: rec.config.User },
    OpenStdin: rec.config.AttachStdin,
    OpenStderr: rec.config.AttachStderr,
    OpenStdout: rec.config.AttachStdout,
    CanRemove: false,
    ContainerID: rec.containerId,
    DetachKeys: rec.config.DetachKeys,
    Pid: rec.pid,
  };
}
