/**
 * A swarm kept in an etcd berthd does not run (daemon flags `--swarm-etcd-*` on one node, the same in
 * daemon.json on the other): the test starts etcd on the bridge's address with client certificates,
 * two nodes use it, no node starts a member of its own.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort, makeTempDir, onExitCleanup, removeDir, run, useSeededRegistry } from '../harness/index.js';
import { killProcess, spawnLogged, type LoggedProcess } from '../harness/child-process.js';
import { createCa } from '../tls/pki.js';
import { forwardPort, startCluster, type TestCluster } from './harness.js';
import { LOOP, eventually, formSwarm, waitSpread } from './support.js';

describe('swarm in an external etcd', () => {
  const reg = useSeededRegistry('open');
  let c: (TestCluster & { teardown(): Promise<void> }) | undefined;
  let etcd: LoggedProcess | undefined;
  let dir = '';
  let endpoint = '';
  let client: { ca: string; cert: string; key: string };

  before(async () => {
    dir = makeTempDir('etcd');
    onExitCleanup(() => {
      if (etcd && !etcd.hasExited()) process.kill(etcd.pid, 'SIGKILL');
    });
    c = await startCluster(2, reg(), { args: [] });
    const hostAddr = c.net.hostAddr;
    const ca = createCa(dir, 'etcd-ca');
    const server = ca.issue('server', { cn: 'etcd', ip: [hostAddr], usage: 'both' });
    const cli = ca.issue('client', { cn: 'berth', usage: 'client' });
    client = { ca: ca.cert, cert: cli.cert, key: cli.key };
    // A port free on the bridge address (the forwarder helper finds one and gives it back).
    const probe = await forwardPort(hostAddr, 1);
    const port = probe.port;
    probe.server.close();
    endpoint = `https://${hostAddr}:${port}`;
    const peer = `http://127.0.0.1:${await freePort()}`;
    etcd = spawnLogged('etcd', [
      '--name', 'ext', '--data-dir', join(dir, 'data'),
      '--listen-client-urls', endpoint, '--advertise-client-urls', endpoint,
      '--listen-peer-urls', peer, '--initial-advertise-peer-urls', peer, '--initial-cluster', `ext=${peer}`,
      '--cert-file', server.cert, '--key-file', server.key, '--client-cert-auth', '--trusted-ca-file', ca.cert,
    ], { logFile: join(dir, 'etcd.log') });
    // Node 1 is told by flags, node 2 by its daemon.json.
    const flags = ['--swarm-etcd-endpoint', endpoint, '--swarm-etcd-cacert', client.ca, '--swarm-etcd-cert', client.cert, '--swarm-etcd-key', client.key];
    const daemonJson = join(dir, 'daemon.json');
    writeFileSync(daemonJson, JSON.stringify({ 'swarm-etcd-endpoints': [endpoint], 'swarm-etcd-cacert': client.ca, 'swarm-etcd-cert': client.cert, 'swarm-etcd-key': client.key }));
    for (const n of c.nodes) {
      const how = n.index === 1 ? flags : ['--config-file', daemonJson];
      await n.daemon.restart({ args: ['--insecure-registry', `${c.net.base}.0/24`, ...how], wrap: ['nsenter', `--net=/run/netns/${c.net.netns(n.index)}`, '--'], readyTimeoutMs: 40_000 });
    }
  });
  after(async () => {
    await c?.teardown();
    if (etcd) await killProcess(etcd);
    if (dir) await removeDir(dir);
  });

  it('init and join use it; no node runs an etcd member; services spread', async () => {
    const cluster = c!;
    await formSwarm(cluster);
    for (const n of cluster.nodes) assert.equal(existsSync(join(n.daemon.dataRoot, 'swarm', 'cluster', 'etcd', 'etcd.pid')), false, `node ${n.index} runs no member`);
    const r = await cluster.node(1).daemon.docker(['service', 'create', '-d', '--name', 'ext', '--replicas', '4', cluster.image, 'sh', '-c', LOOP]);
    assert.equal(r.code, 0, r.stderr);
    const ids = [];
    for (const n of cluster.nodes) ids.push((await n.daemon.docker(['info', '--format', '{{.Swarm.NodeID}}'])).stdout.trim());
    await waitSpread(cluster.node(1).daemon, 'ext', Object.fromEntries(ids.map((id) => [id, 2])));
    const keys = await eventually('the service in the external etcd', async () => {
      const g = await run('etcdctl', ['--endpoints', endpoint, '--cacert', client.ca, '--cert', client.cert, '--key', client.key, 'get', '--prefix', '--keys-only', '/berth/swarm/services/'], { env: { ...process.env, ETCDCTL_API: '3' }, timeoutMs: 20_000 });
      return g.code === 0 && g.stdout.trim() ? g.stdout : undefined;
    });
    assert.match(keys, /\/berth\/swarm\/services\/[0-9a-z]{25}/);
  });
});
