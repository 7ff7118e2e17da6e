/** One instruction of a stage applied to its state: metadata instructions here, the rest in their modules. */
import { mkdir } from 'node:fs/promises';
import { posix } from 'node:path';
import { BuildError, DEFAULT_SHELL, type Stage, type State, type StepContext } from './build-step.js';
import type { DockerfileNode } from './dockerfile/parser.js';
import { processWords } from './dockerfile/shell-word.js';
import { resolveInRoot } from './fs-in-root.js';
import { copyStep, fsStep } from './fs-step.js';
import { describeHealthcheck, expandPort, goQuoteList, healthcheck, parseFlags, triples } from './instruction-args.js';
import { runStep } from './run-step.js';
import { metadataStep } from './step-cache.js';

/** Values instructions expand with: the stage's args, overridden by ENV. */
export function stepEnv(state: State): Map<string, string> {
  const m = new Map<string, string>();
  for (const [k, v] of state.args) if (v !== undefined) m.set(k, v);
  for (const kv of state.config.Env ?? []) {
    const eq = kv.indexOf('=');
    m.set(eq < 0 ? kv : kv.slice(0, eq), eq < 0 ? '' : kv.slice(eq + 1));
  }
  return m;
}

export async function dispatchInstruction(ctx: StepContext, node: DockerfileNode, s: State, all: Stage[]): Promise<void> {
  // Flags are read by the instructions that have them; elsewhere (RUN --mount...) they are refused.
  if (!['copy', 'add', 'healthcheck'].includes(node.name)) parseFlags(node.flags, []);
  const env = stepEnv(s);
  const shell = s.config.Shell?.length ? s.config.Shell : DEFAULT_SHELL;
  switch (node.name) {
    case 'env': {
      const pairs = triples(node.args).map(([k, v]) => [ctx.expand(k, env), ctx.expand(v, env)] as const);
      if (pairs.length === 0) throw new BuildError('ENV requires at least one argument');
      const list = [...(s.config.Env ?? [])];
      for (const [k, v] of pairs) {
        const i = list.findIndex((e) => e === k || e.startsWith(`${k}=`));
        if (i >= 0) list[i] = `${k}=${v}`;
        else list.push(`${k}=${v}`);
      }
      s.config.Env = list;
      return metadataStep(ctx, s, 'ENV ' + pairs.map(([k, v]) => `${k}=${v}`).join(' '));
    }
    case 'label': {
      const pairs = triples(node.args).map(([k, v]) => [ctx.expand(k, env), ctx.expand(v, env)] as const);
      if (pairs.length === 0) throw new BuildError('LABEL requires at least one argument');
      s.config.Labels = { ...(s.config.Labels ?? {}) };
      for (const [k, v] of pairs) s.config.Labels[k] = v;
      return metadataStep(ctx, s, 'LABEL ' + pairs.map(([k, v]) => `${k}=${v}`).join(' '));
    }
    case 'arg': {
      if (node.args.length === 0) throw new BuildError('ARG requires exactly one argument');
      const shown = ctx.declareArgs(node, s.args, env);
      return metadataStep(ctx, s, 'ARG ' + shown.join(' '));
    }
    case 'maintainer':
      s.author = node.args[0] ?? '';
      return metadataStep(ctx, s, `MAINTAINER ${s.author}`);
    case 'cmd': {
      s.config.Cmd = node.json ? node.args : [...shell, node.args[0] ?? ''];
      s.cmdSet = true;
      return metadataStep(ctx, s, `CMD ${goQuoteList(s.config.Cmd)}`);
    }
    case 'entrypoint': {
      s.config.Entrypoint = node.json ? node.args : node.args.length ? [...shell, node.args[0]!] : null;
      if (!s.cmdSet) s.config.Cmd = null;
      return metadataStep(ctx, s, `ENTRYPOINT ${goQuoteList(s.config.Entrypoint ?? [])}`);
    }
    case 'shell':
      if (!node.json || node.args.length === 0) throw new BuildError('SHELL requires the arguments to be in JSON form');
      s.config.Shell = node.args;
      return metadataStep(ctx, s, `SHELL [${node.args.join(' ')}]`);
    case 'expose': {
      if (node.args.length === 0) throw new BuildError('EXPOSE requires at least one argument');
      const ports = node.args.flatMap((a) => processWords(a, env, ctx.escape));
      s.config.ExposedPorts = { ...(s.config.ExposedPorts ?? {}) };
      for (const p of ports) for (const q of expandPort(p)) s.config.ExposedPorts[q] = {};
      return metadataStep(ctx, s, `EXPOSE ${ports.join(' ')}`);
    }
    case 'volume': {
      const vols = node.args.map((a) => ctx.expand(a, env)).filter((v) => v.trim() !== '');
      if (vols.length === 0) throw new BuildError('VOLUME specified can not be an empty string');
      s.config.Volumes = { ...(s.config.Volumes ?? {}) };
      for (const v of vols) s.config.Volumes[v] = {};
      return metadataStep(ctx, s, `VOLUME [${vols.join(' ')}]`);
    }
    case 'user':
      if (node.args.length === 0) throw new BuildError('USER requires exactly one argument');
      s.config.User = ctx.expand(node.args[0]!, env);
      return metadataStep(ctx, s, `USER ${s.config.User}`);
    case 'stopsignal':
      if (node.args.length === 0) throw new BuildError('STOPSIGNAL requires exactly one argument');
      s.config.StopSignal = ctx.expand(node.args[0]!, env);
      return metadataStep(ctx, s, `STOPSIGNAL ${s.config.StopSignal}`);
    case 'onbuild': {
      const sub = node.sub;
      if (!sub) throw new BuildError('ONBUILD requires at least one argument');
      if (sub.name === 'onbuild') throw new BuildError('Chaining ONBUILD via `ONBUILD ONBUILD` isn\'t allowed');
      if (sub.name === 'from' || sub.name === 'maintainer') throw new BuildError(`${sub.name.toUpperCase()} isn't allowed as an ONBUILD trigger`);
      const expr = node.original.trim().replace(/^onbuild\s+/i, '');
      s.config.OnBuild = [...(s.config.OnBuild ?? []), expr];
      return metadataStep(ctx, s, `ONBUILD ${expr}`);
    }
    case 'healthcheck':
      s.config.Healthcheck = healthcheck(node, shell);
      return metadataStep(ctx, s, `HEALTHCHECK ${describeHealthcheck(s.config.Healthcheck)}`);
    case 'workdir': {
      if (node.args.length === 0) throw new BuildError('WORKDIR requires exactly one argument');
      const dir = ctx.expand(node.args[0]!, env);
      s.config.WorkingDir = posix.isAbsolute(dir) ? posix.normalize(dir) : posix.join(s.config.WorkingDir || '/', dir);
      return fsStep(ctx, s, `WORKDIR ${s.config.WorkingDir}`, async (root) => {
        const abs = resolveInRoot(root, s.config.WorkingDir!);
        await mkdir(abs, { recursive: true, mode: 0o755 });
      }, { emptyIfUnchanged: true, stepContainer: true });
    }
    case 'run':
      return runStep(ctx, node, s, shell);
    case 'copy': case 'add':
      return copyStep(ctx, node, s, env, all);
    case 'from':
      throw new BuildError('FROM is not allowed here');
    default:
      throw new BuildError(`unknown instruction: ${node.name.toUpperCase()}`);
  }
}
