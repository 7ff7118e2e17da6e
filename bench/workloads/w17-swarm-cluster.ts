import { startCluster } from '../../test/cluster/harness.js';
import { formDockerdSwarm, startDockerdCluster } from '../engines/dockerd-cluster.js';
import { formSwarm, spread } from '../../test/cluster/support.js';
import type { SeededRegistry } from '../../test/harness/index.js';
import type { ApiClient } from '../lib/api-client.js';
import { errorText, type Ctx, type Workload } from './context.js';

/**
 * 17. Swarm across three nodes (three berthd, each in its own network namespace on a test bridge, the
 * state in the manager's etcd member): the time for `service create --replicas N` to have N tasks
 * running, spread over the nodes, and after a worker's berthd is killed, the time until the service
 * runs N tasks again on the other two. With dockerd selected, the same with three dockerd in
 * namespaces (engines/dockerd-cluster.ts); its recovery includes its own node-down timeout, as is.
 */

const LOOP = 'trap "exit 0" TERM; while :; do sleep 1; done';

async function until(what: string, timeoutMs: number, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export const swarmCluster: Workload = {
  id: 17,
  name: 'swarm across three nodes',
  metrics: (opts) => [
    { id: 'swarm-converge', workload: 17, title: `3-node swarm: \`service create --replicas ${opts.swarmReplicas}\` until all run`, unit: 's', better: 'lower' },
    { id: 'swarm-recover', workload: 17, title: `3-node swarm: a worker's daemon killed -9 until ${opts.swarmReplicas} run again`, unit: 's', better: 'lower' },
  ],
  async run(ctx: Ctx) {
    if (ctx.engines.some((e) => e.name === 'berth')) await runBerth(ctx);
    if (ctx.engines.some((e) => e.name === 'dockerd')) await runDockerd(ctx);
  },
};

async function runBerth(ctx: Ctx): Promise<void> {
    const n = ctx.opts.swarmReplicas;
    for (let i = 0; i < ctx.opts.swarmIterations; i++) {
      // The cluster harness wants a seeded registry; it only reads the registry's port and busybox.
      const host = ctx.refs.busybox.split('/')[0]!;
      const reg = { registry: { url: `http://${host}` }, seeded: { refs: { busybox: ctx.refs.busybox } } } as unknown as SeededRegistry;
      const c = await startCluster(3, reg, { args: ['--log-level', ctx.opts.berthLogLevel] });
      try {
        await formSwarm(c);
        const d1 = c.node(1).daemon;
        for (const node of c.nodes) {
          const pull = await node.daemon.docker(['pull', '-q', c.image]);
          if (pull.code !== 0) throw new Error(`pull on node ${node.index}: ${pull.stderr.trim()}`);
        }
        const running = async () => [...(await spread(d1, 'bench')).values()].reduce((a, b) => a + b, 0);
        const t0 = Date.now();
        const r = await d1.docker(['service', 'create', '-d', '--name', 'bench', '--replicas', String(n), c.image, 'sh', '-c', LOOP]);
        if (r.code !== 0) throw new Error(`service create: ${r.stderr.trim()}`);
        await until(`${n} running tasks`, 300_000, async () => (await running()) === n);
        ctx.rec.sample('swarm-converge', 'berth', (Date.now() - t0) / 1000);
        const t1 = Date.now();
        await c.node(3).daemon.kill9();
        const deadId = (await d1.request('GET', '/nodes')).json<{ ID: string; Description: { Hostname: string }; Status: { Addr: string } }[]>().find((x) => x.Status.Addr === c.node(3).addr)!.ID;
        await until(`${n} running tasks on the other nodes`, 300_000, async () => {
          const s = await spread(d1, 'bench');
          return !s.has(deadId) && [...s.values()].reduce((a, b) => a + b, 0) === n;
        });
        ctx.rec.sample('swarm-recover', 'berth', (Date.now() - t1) / 1000);
      } catch (err) {
        ctx.log(`  berth: Errored: ${errorText(err)}`);
        ctx.rec.error('swarm-converge', 'berth', errorText(err));
        ctx.rec.error('swarm-recover', 'berth', errorText(err));
        return;
      } finally {
        await c.teardown();
      }
    }
}

/** Running tasks of `service` per node ID, as node 1 (the manager) sees them. */
async function runningByNode(api: ApiClient, service: string): Promise<Map<string, number>> {
  const filters = encodeURIComponent(JSON.stringify({ service: [service], 'desired-state': ['running'] }));
  const r = await api.request('GET', `/tasks?filters=${filters}`);
  if (r.status !== 200) throw new Error(`GET /tasks: ${r.status} ${r.text().slice(0, 200)}`);
  const out = new Map<string, number>();
  for (const t of r.json<{ NodeID?: string; Status?: { State?: string } }[]>()) {
    if (t.Status?.State === 'running' && t.NodeID) out.set(t.NodeID, (out.get(t.NodeID) ?? 0) + 1);
  }
  return out;
}

async function runDockerd(ctx: Ctx): Promise<void> {
  const n = ctx.opts.swarmReplicas;
  for (let i = 0; i < ctx.opts.swarmIterations; i++) {
    let c: Awaited<ReturnType<typeof startDockerdCluster>> | undefined;
    try {
      c = await startDockerdCluster(3, ctx.refs.busybox);
      await formDockerdSwarm(c);
      for (const node of c.nodes) {
        const pull = await node.docker(['pull', '-q', c.image]);
        if (pull.code !== 0) throw new Error(`pull on node ${node.index}: ${pull.stderr.trim()}`);
      }
      const m = c.nodes[0]!;
      const total = (s: Map<string, number>) => [...s.values()].reduce((a, b) => a + b, 0);
      const t0 = Date.now();
      // --no-resolve-image: the nodes run the tag they pulled, as Berth's nodes do.
      const r = await m.docker(['service', 'create', '-d', '--no-resolve-image', '--name', 'bench', '--replicas', String(n), c.image, 'sh', '-c', LOOP]);
      if (r.code !== 0) throw new Error(`service create: ${r.stderr.trim()}`);
      await until(`${n} running tasks`, 300_000, async () => total(await runningByNode(m.api, 'bench')) === n);
      ctx.rec.sample('swarm-converge', 'dockerd', (Date.now() - t0) / 1000);
      const spreadNow = await runningByNode(m.api, 'bench');
      ctx.log(`  dockerd: ${n} running on ${spreadNow.size} nodes (${[...spreadNow.values()].join('/')})`);
      const dead = c.nodes[2]!;
      const deadId = (await dead.api.request('GET', '/info')).json<{ Swarm: { NodeID: string } }>().Swarm.NodeID;
      const t1 = Date.now();
      dead.kill9();
      await until(`${n} running tasks on the other nodes`, 300_000, async () => {
        const s = await runningByNode(m.api, 'bench');
        return !s.has(deadId) && total(s) === n;
      });
      ctx.rec.sample('swarm-recover', 'dockerd', (Date.now() - t1) / 1000);
    } catch (err) {
      ctx.log(`  dockerd: Errored: ${errorText(err)}`);
      ctx.rec.error('swarm-converge', 'dockerd', errorText(err));
      ctx.rec.error('swarm-recover', 'dockerd', errorText(err));
      return;
    } finally {
      await c?.teardown();
    }
  }
}
