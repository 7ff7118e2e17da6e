/**
 * The keys only managers hold. A worker promoted to manager can sign joins (the CA key reaches it
 * sealed in etcd), so a node joins through it; demoted, it holds the key no more. Workers never hold
 * the data key: a task's secrets reach its worker opened by a manager, over mutual TLS, and only
 * that worker gets them.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { closeSync, existsSync, openSync, readFileSync, readSync, readdirSync, rmSync } from 'node:fs';
import { request } from 'node:https';
import { join } from 'node:path';
import { isRunning as alive, useSeededRegistry, type TestDaemon } from '../harness/index.js';
import { SWARM_LOCKED } from '../../src/engine/swarm/swarm.js';
import { startCluster, type TestCluster } from './harness.js';
import { LOOP, eventually, nodesOf, runningOn, tasksOf, waitSpread } from './support.js';

const keyFile = (d: TestDaemon, name: string) => join(d.dataRoot, 'swarm', 'cluster', name);
/** A sealed key file holds JSON; a plain one a PEM or base64 text. */
const sealed = (d: TestDaemon, name: string) => readFileSync(keyFile(d, name), 'utf8').startsWith('{');

/** Whether the file holds a PEM private key in the clear (read in 1 MiB chunks: etcd's WAL is large). */
function holdsPlainKey(path: string): boolean {
  const needle = Buffer.from('PRIVATE KEY-----');
  const fd = openSync(path, 'r');
  try {
    const buf = Buffer.alloc(1 << 20);
    let tail = Buffer.alloc(0);
    for (let n = readSync(fd, buf); n > 0; n = readSync(fd, buf)) {
      const chunk = Buffer.concat([tail, buf.subarray(0, n)]);
      if (chunk.includes(needle)) return true;
      tail = chunk.subarray(Math.max(0, chunk.length - needle.length));
    }
    return false;
  } finally {
    closeSync(fd);
  }
}

/** The files under `dir` (links not followed) that hold a plain PEM private key. */
function plainKeysUnder(dir: string, depth = 0): string[] {
  if (depth > 40) return [];
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return plainKeysUnder(p, depth + 1);
    return e.isFile() && holdsPlainKey(p) ? [p] : [];
  });
}

const etcdPid = (d: TestDaemon) => Number(readFileSync(join(d.dataRoot, 'swarm', 'cluster', 'etcd', 'etcd.pid'), 'utf8'));
/** The etcd member's copy of the node key, in the exec root. */
const memberKey = (d: TestDaemon) => join(d.execRoot, 'swarm', 'etcd-node-key.pem');

/** GET on a node's swarm port with node `as`'s certificate: status and body. */
function asNode(as: TestDaemon, addr: string, path: string): Promise<{ status: number; body: string }> {
  const f = (n: string) => readFileSync(keyFile(as, n), 'utf8');
  return new Promise((resolve, reject) => {
    const req = request({ host: addr, port: 2377, path, ca: f('ca.pem'), cert: f('node.pem'), key: f('node-key.pem'), checkServerIdentity: () => undefined, timeout: 10_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end();
  });
}

describe('manager keys', () => {
  const reg = useSeededRegistry('open');
  let c: TestCluster & { teardown(): Promise<void> };
  const ids: string[] = [];
  let workerToken = '';

  before(async () => {
    c = await startCluster(3, reg());
    const d1 = c.node(1).daemon;
    const init = await d1.docker(['swarm', 'init', '--advertise-addr', c.node(1).addr, '--dispatcher-heartbeat', '1s']);
    assert.equal(init.code, 0, init.stderr);
    workerToken = (await d1.docker(['swarm', 'join-token', '-q', 'worker'])).stdout.trim();
    const join2 = await c.node(2).daemon.docker(['swarm', 'join', '--token', workerToken, `${c.node(1).addr}:2377`]);
    assert.equal(join2.code, 0, join2.stderr);
    for (const i of [1, 2]) ids.push((await c.node(i).daemon.docker(['info', '--format', '{{.Swarm.NodeID}}'])).stdout.trim());
  });
  after(async () => {
    await c?.teardown();
  });

  it('a node joins through a promoted manager, which then holds the CA key; demoted, it drops it', async () => {
    const d2 = c.node(2).daemon;
    assert.equal(existsSync(keyFile(d2, 'ca-key.pem')), false, 'a worker holds no CA key');
    const p = await c.node(1).daemon.docker(['node', 'promote', ids[1]!]);
    assert.equal(p.code, 0, p.stderr);
    await eventually('node 2 a manager', async () => (await d2.docker(['info', '--format', '{{.Swarm.ControlAvailable}}'])).stdout.trim() === 'true', 60_000, 300);
    const j = await c.node(3).daemon.docker(['swarm', 'join', '--token', workerToken, `${c.node(2).addr}:2377`]);
    assert.equal(j.code, 0, `${j.stderr}\n${d2.logTail(30)}`);
    assert.match(j.stdout, /This node joined a swarm as a worker\./);
    assert.equal(existsSync(keyFile(d2, 'ca-key.pem')), true, 'the promoted manager kept the CA key it signed with');
    const id3 = (await c.node(3).daemon.docker(['info', '--format', '{{.Swarm.NodeID}}'])).stdout.trim();
    ids.push(id3);
    await eventually('node 3 ready, seen from node 1', async () => (await nodesOf(c.node(1).daemon)).find((n) => n.ID === id3)?.Status.State === 'ready', 30_000, 300);
    const d = await c.node(1).daemon.docker(['node', 'demote', ids[1]!]);
    assert.equal(d.code, 0, d.stderr);
    await eventually('node 2 a worker without the CA key', async () => !existsSync(keyFile(d2, 'ca-key.pem')) && (await d2.docker(['info', '--format', '{{.Swarm.ControlAvailable}}'])).stdout.trim() === 'false', 60_000, 300);
    await eventually('node 2 without the data key', async () => !existsSync(keyFile(d2, 'data.key')), 30_000, 300);
  });

  it('a worker holds no data key; its task gets its secret from a manager, and no other task\'s', async () => {
    const d1 = c.node(1).daemon;
    const d3 = c.node(3).daemon;
    assert.equal(existsSync(keyFile(d1, 'data.key')), true);
    assert.equal(existsSync(keyFile(d3, 'data.key')), false, 'a joined worker holds no data key');
    assert.equal((await d1.docker(['secret', 'create', 'pw', '-'], { input: 'on-the-worker' })).code, 0);
    for (const [name, node] of [['sec3', ids[2]!], ['sec1', ids[0]!]] as const) {
      const r = await d1.docker(['service', 'create', '-d', '--name', name, '--secret', 'pw', '--constraint', `node.id==${node}`, c.image, 'sh', '-c', LOOP]);
      assert.equal(r.code, 0, r.stderr);
    }
    const running = (name: string) => eventually(`${name} running`, async () => (await tasksOf(d1, name)).find((t) => t.Status.State === 'running'), 90_000, 300);
    const [t3, t1] = [await running('sec3'), await running('sec1')];
    const cid = (await d3.docker(['ps', '-q', '--filter', 'label=com.docker.swarm.service.name=sec3'])).stdout.trim();
    const cat = await d3.docker(['exec', cid, 'cat', '/run/secrets/pw']);
    assert.equal(cat.stdout, 'on-the-worker', cat.stderr);
    // Node 3's certificate: its own task's secret, not node 1's task's, and no keys.
    const own = await asNode(d3, c.node(1).addr, `/task-secrets/${t3.ID}`);
    assert.equal(own.status, 200, own.body);
    assert.equal(Buffer.from(Object.values(JSON.parse(own.body).secret as Record<string, string>)[0]!, 'base64').toString(), 'on-the-worker');
    assert.equal((await asNode(d3, c.node(1).addr, `/task-secrets/${t1.ID}`)).status, 404);
    assert.equal((await asNode(d3, c.node(1).addr, '/manager-keys')).status, 403);
    assert.equal(existsSync(keyFile(d3, 'data.key')), false);
    for (const name of ['sec3', 'sec1']) assert.equal((await d1.docker(['service', 'rm', name])).code, 0);
  });

  it('auto-lock: every manager seals its keys; a restarted one is locked until unlocked with the current key; off, they are plain again', async () => {
    const [d1, d2] = [c.node(1).daemon, c.node(2).daemon];
    const mark = d2.logs().length;
    assert.equal((await d1.docker(['node', 'promote', ids[1]!])).code, 0);
    await eventually('node 2 a manager with the data key', async () => existsSync(keyFile(d2, 'data.key')) && (await d2.docker(['info', '--format', '{{.Swarm.ControlAvailable}}'])).stdout.trim() === 'true', 60_000, 300);
    assert.equal(sealed(d2, 'data.key'), false);
    assert.ok(plainKeysUnder(d2.dataRoot).includes(keyFile(d2, 'node-key.pem')), 'without auto-lock the node key is plain (and the scan finds it)');
    const on = await d1.docker(['swarm', 'update', '--autolock=true']);
    assert.equal(on.code, 0, on.stderr);
    const first = /SWMKEY-1-\S+/.exec(on.stdout)?.[0];
    assert.ok(first, on.stdout);
    assert.equal((await d1.docker(['swarm', 'unlock-key', '-q'])).stdout.trim(), first);
    assert.ok(sealed(d1, 'data.key') && sealed(d1, 'ca-key.pem') && sealed(d1, 'node-key.pem'), 'the key files of the manager that turned it on are sealed');
    // Its etcd member a voter, and remembered (so that its restart below starts it again).
    await eventually('node 2 an etcd member', async () => d2.logs().slice(mark).includes('etcd membership changed'), 60_000, 200);
    const sealedOnce = await eventually('node 2 seals its data key', async () => sealed(d2, 'data.key') && readFileSync(keyFile(d2, 'data.key'), 'utf8'), 30_000, 200);
    const nodeKeyOnce = await eventually('node 2 seals its node key', async () => sealed(d2, 'node-key.pem') && readFileSync(keyFile(d2, 'node-key.pem'), 'utf8'), 30_000, 200);
    const rot = await d1.docker(['swarm', 'unlock-key', '--rotate', '-q']);
    assert.equal(rot.code, 0, rot.stderr);
    const key = rot.stdout.trim();
    assert.match(key, /^SWMKEY-1-\S+$/);
    assert.notEqual(key, first);
    await eventually('node 2 seals its data key again, under the new key', async () => sealed(d2, 'data.key') && readFileSync(keyFile(d2, 'data.key'), 'utf8') !== sealedOnce, 30_000, 200);
    await eventually('node 2 seals its node key again', async () => sealed(d2, 'node-key.pem') && readFileSync(keyFile(d2, 'node-key.pem'), 'utf8') !== nodeKeyOnce, 30_000, 200);
    assert.equal(readFileSync(keyFile(d2, 'data.key'), 'utf8').includes(key), false);

    // A task on every node, node 2's kept through its lock below.
    assert.equal((await d1.docker(['service', 'create', '-d', '--name', 'lk', '--replicas', '3', c.image, 'sh', '-c', LOOP])).code, 0);
    const oneEach = Object.fromEntries(ids.map((id) => [id, 1]));
    await waitSpread(d1, 'lk', oneEach, 90_000);

    // Node 2's host reboots: berthd and its etcd member stop, the exec root (a tmpfs) is emptied.
    await d2.stop();
    const oldEtcd = etcdPid(d2);
    process.kill(oldEtcd, 'SIGTERM');
    await eventually('node 2\'s etcd member gone', async () => !alive(oldEtcd), 15_000, 100);
    rmSync(memberKey(d2), { force: true });
    await d2.restart();
    assert.deepEqual(plainKeysUnder(d2.dataRoot), [], 'a locked manager\'s data root holds no plain private key');
    assert.equal(existsSync(memberKey(d2)), false);
    assert.equal(alive(etcdPid(d2)), false, 'a locked manager starts no etcd member: it has no key to start it with');
    const ls = await d2.docker(['node', 'ls']);
    assert.notEqual(ls.code, 0);
    assert.ok(ls.stderr.includes(SWARM_LOCKED), ls.stderr);
    const svc = await d2.docker(['service', 'ls']);
    assert.notEqual(svc.code, 0);
    assert.ok(svc.stderr.includes(SWARM_LOCKED), svc.stderr);
    assert.equal((await d2.docker(['info', '--format', '{{.Swarm.LocalNodeState}}'])).stdout.trim(), 'locked');
    // Locked, it keeps running its task container (containers outlive berthd), unmanaged until unlocked.
    assert.equal(await runningOn(d2, 'lk'), 1);
    assert.equal((await d2.request('GET', '/_ping')).headers['swarm'], 'locked');
    const wrong = await d2.docker(['swarm', 'unlock'], { input: first });
    assert.notEqual(wrong.code, 0);
    assert.match(wrong.stderr, /swarm could not be unlocked: invalid key provided/);
    const leave = await d2.request('POST', '/swarm/leave');
    assert.equal(leave.status, 503);
    assert.equal(leave.json<{ message: string }>().message, 'Swarm is encrypted and locked. Please unlock it first or use `--force` to ignore this message.');
    const malformed = await d2.request('POST', '/swarm/unlock', { body: { UnlockKey: 'not-a-key' } });
    assert.equal(malformed.status, 400, malformed.text());
    const ok = await d2.docker(['swarm', 'unlock'], { input: key });
    assert.equal(ok.code, 0, ok.stderr);
    await eventually('node 2 serves the swarm again', async () => (await d2.docker(['node', 'ls', '-q'])).stdout.trim().split('\n').length === 3, 60_000, 300);
    await eventually('unlocked, its etcd member runs again, on the key copy in the exec root', async () => alive(etcdPid(d2)) && existsSync(memberKey(d2)), 60_000, 200);
    assert.deepEqual(plainKeysUnder(d2.dataRoot), [], 'unlocked, the key files stay sealed on disk');
    // It reaches etcd again, with the key it opened: a change made on it shows on node 1.
    const label = await d2.docker(['node', 'update', '--label-add', 'unlocked=yes', ids[1]!]);
    assert.equal(label.code, 0, label.stderr);
    await eventually('node 1 sees node 2\'s change', async () => (await d1.docker(['node', 'inspect', '--format', '{{index .Spec.Labels "unlocked"}}', ids[1]!])).stdout.trim() === 'yes', 30_000, 300);
    assert.equal((await d2.docker(['secret', 'inspect', '--format', '{{.Spec.Name}}', 'pw'])).stdout.trim(), 'pw');
    await waitSpread(d1, 'lk', oneEach, 60_000);
    assert.equal((await d1.docker(['service', 'rm', 'lk'])).code, 0);
    const again = await d2.request('POST', '/swarm/unlock', { body: { UnlockKey: key } });
    assert.equal(again.status, 409);
    assert.equal(again.json<{ message: string }>().message, 'swarm is not locked');

    const off = await d1.docker(['swarm', 'update', '--autolock=false']);
    assert.equal(off.code, 0, off.stderr);
    assert.equal((await d1.docker(['swarm', 'unlock-key', '-q'])).stdout.trim(), '');
    assert.ok(!sealed(d1, 'data.key') && !sealed(d1, 'ca-key.pem') && !sealed(d1, 'node-key.pem'), 'the key files are plain again');
    await eventually('node 2 writes its data key and node key plain again', async () => !sealed(d2, 'data.key') && !sealed(d2, 'node-key.pem'), 30_000, 200);
  });
});
