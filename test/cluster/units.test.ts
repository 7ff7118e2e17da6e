/** The cluster's pure parts, without daemons: placement over nodes, sealing, join tokens, the CA pin, key files. */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { X509Certificate } from 'node:crypto';
import { schedule } from '../../src/engine/swarm/placement.js';
import { newDataKey, seal, unseal } from '../../src/engine/swarm/cluster/data-key.js';
import { isSealedSync, lockKeyOf, openKeyFile, readKeyFile, writeKeyFile } from '../../src/engine/swarm/cluster/key-files.js';
import { tokenDigest } from '../../src/engine/swarm/cluster/join-protocol.js';
import { caDigest, newCa, newCsr, signNode } from '../../src/engine/swarm/cluster/pki.js';
import { newJoinTokens } from '../../src/engine/swarm/swarm-ids.js';
import type { NodeRecord, TaskRecord } from '../../src/engine/swarm/swarm-model.js';
import type { HostFacts } from '../../src/engine/system.js';

const host: HostFacts = { kernelVersion: '', operatingSystem: '', osVersion: '', architecture: 'x86_64', goArch: 'amd64', ncpu: 2, memTotal: 4e9, name: 'here' };
const node = (id: string, o: Partial<NodeRecord['spec']> = {}, cpus = 2): NodeRecord => ({
  id, version: 1, createdAt: '', updatedAt: '', addr: '10.0.0.1', managerAddr: '',
  spec: { Role: 'worker', Availability: 'active', Labels: {}, ...o },
  description: { hostname: `h-${id}`, architecture: 'x86_64', ncpu: cpus, memTotal: 4e9 },
});
const task = (id: string, serviceId: string, nodeId = '', spec: TaskRecord['spec'] = {}): TaskRecord => ({
  id, version: 1, createdAt: '', updatedAt: '', serviceId, serviceName: serviceId, slot: 1, nodeId, spec, templateVersion: 1,
  desiredState: 'running', status: { timestamp: '', state: nodeId ? 'running' : 'new', message: '', err: '', containerId: '', pid: 0 }, restarts: [],
});

describe('placement over nodes', () => {
  it('spreads a service: the node with the fewest of its tasks, then the fewest tasks', () => {
    const nodes = [node('a'), node('b'), node('c')];
    const tasks = [task('1', 's', 'a'), task('2', 's', 'b'), task('3', 'other', 'c'), task('4', 'other', 'c')];
    assert.equal(schedule(task('n', 's'), nodes, tasks, host).node?.id, 'c');
    assert.equal(schedule(task('n', 'other'), nodes, tasks, host).node?.id, 'a');
  });

  it('says why no node fits, per reason and count', () => {
    const nodes = [node('a', { Availability: 'drain' }), node('b', { Labels: { zone: 'x' } }), node('c', { Role: 'manager' })];
    const t = task('n', 's', '', { Placement: { Constraints: ['node.labels.zone==y'] } });
    // The reason most nodes failed on comes first, as swarmkit sorts it.
    assert.equal(schedule(t, nodes, [], host).problem, 'no suitable node (scheduling constraints not satisfied on 2 nodes; 1 node not available for new tasks)');
    const big = task('n', 's', '', { Resources: { Reservations: { NanoCPUs: 3e9 } } });
    assert.equal(schedule(big, [node('a'), node('b', {}, 4)], [], host).node?.id, 'b');
    assert.equal(schedule(big, [node('a')], [], host).problem, 'no suitable node (insufficient resources on 1 node)');
    const byHost = task('n', 's', '', { Placement: { Constraints: ['node.hostname==h-b'] } });
    assert.equal(schedule(byHost, [node('a'), node('b')], [], host).node?.id, 'b');
    // A node failing several filters counts for the first in swarmkit's order: resources before constraints.
    const both = task('n', 's', '', { Resources: { Reservations: { NanoCPUs: 3e9 } }, Placement: { Constraints: ['node.role==manager'] } });
    assert.equal(schedule(both, [node('a'), node('b', {}, 4)], [], host).problem, 'no suitable node (insufficient resources on 1 node; scheduling constraints not satisfied on 1 node)');
  });

  it('keeps two tasks publishing one host-mode port off one node', () => {
    const ports = (t: TaskRecord) => (t.serviceId === 'web' ? ['tcp/8080'] : t.serviceId === 'udp' ? ['udp/8080'] : []);
    const tasks = [task('1', 'web', 'a'), task('2', 'other', 'b'), task('3', 'other', 'b')];
    assert.equal(schedule(task('n', 'web'), [node('a'), node('b')], tasks, host, ports).node?.id, 'b');
    assert.equal(schedule(task('n', 'web'), [node('a')], tasks, host, ports).problem, 'no suitable node (host-mode port already in use on 1 node)');
    // Another protocol is another port.
    assert.equal(schedule(task('n', 'udp'), [node('a')], tasks, host, ports).node?.id, 'a');
    // A finished task holds no port.
    const done = { ...task('1', 'web', 'a'), status: { ...task('1', 'web', 'a').status, state: 'failed' as const } };
    assert.equal(schedule(task('n', 'web'), [node('a')], [done], host, ports).node?.id, 'a');
  });

  it('checks the platforms the CLI names, x86_64 and amd64 alike', () => {
    const on = (Architecture: string) => task('n', 's', '', { Placement: { Platforms: [{ Architecture, OS: 'linux' }] } });
    assert.equal(schedule(on('amd64'), [node('a')], [], host).node?.id, 'a');
    assert.equal(schedule(on('arm64'), [node('a'), node('b')], [], host).problem, 'no suitable node (unsupported platform on 2 nodes)');
    const arm = { ...node('c'), description: { hostname: 'h-c', architecture: 'aarch64', ncpu: 2, memTotal: 4e9 } };
    assert.equal(schedule(on('arm64'), [node('a'), arm], [], host).node?.id, 'c');
  });

  it('spreads over the values of a label first, then over the nodes of each', () => {
    const spread = (...labels: string[]) => ({ Placement: { Preferences: labels.map((l) => ({ Spread: { SpreadDescriptor: `node.labels.${l}` } })) } });
    const nodes = [node('a', { Labels: { zone: 'x' } }), node('b', { Labels: { zone: 'x' } }), node('c', { Labels: { zone: 'y' } })];
    const placed: TaskRecord[] = [];
    for (let i = 0; i < 4; i++) {
      const t = task(`t${i}`, 's', '', spread('zone'));
      t.nodeId = schedule(t, nodes, placed, host).node!.id;
      t.status.state = 'running';
      placed.push(t);
    }
    // Half to zone y's one node, half over zone x's two.
    const count = (id: string) => placed.filter((t) => t.nodeId === id).length;
    assert.deepEqual([count('a'), count('b'), count('c')], [1, 1, 2]);
    // Nodes without the label are a group of their own (the value "").
    const unlabelled = [node('a', { Labels: { zone: 'x' } }), node('b'), node('c')];
    const held = [task('1', 's', 'b'), task('2', 's', 'c')];
    assert.equal(schedule(task('n', 's', '', spread('zone')), unlabelled, held, host).node?.id, 'a');
    // Without the preference the same tasks go to the node with the fewest.
    const plain = [task('1', 's', 'a'), task('2', 's', 'a'), task('3', 's', 'c')];
    assert.equal(schedule(task('n', 's'), nodes, plain, host).node?.id, 'b');
    assert.equal(schedule(task('n', 's', '', spread('zone')), nodes, plain, host).node?.id, 'c');
    // Two levels: rack within zone.
    const racks = [node('a', { Labels: { zone: 'x', rack: '1' } }), node('b', { Labels: { zone: 'x', rack: '2' } }), node('c', { Labels: { zone: 'y', rack: '1' } })];
    assert.equal(schedule(task('n', 's', '', spread('zone', 'rack')), racks, [task('1', 's', 'c'), task('2', 's', 'a')], host).node?.id, 'b');
  });
});

describe('sealed documents and join tokens', () => {
  it('seals with AES-GCM: the text is not in the sealed form, a wrong key or a flipped byte fails', () => {
    const key = newDataKey();
    const sealed = seal(key, { spec: { Data: Buffer.from('sesame').toString('base64') } });
    assert.doesNotMatch(JSON.stringify(sealed), /c2VzYW1l/);
    assert.deepEqual(unseal(key, sealed), { spec: { Data: 'c2VzYW1l' } });
    assert.throws(() => unseal(newDataKey(), sealed));
    const flipped = { ...sealed, data: Buffer.from(Buffer.from(sealed.data, 'base64').map((b, i) => (i === 0 ? b ^ 1 : b))).toString('base64') };
    assert.throws(() => unseal(key, flipped));
  });

  it('tokens carry the CA digest; malformed ones are a 400', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'berth-pki-'));
    try {
      const ca = await newCa(dir);
      const digest = caDigest(ca.cert);
      assert.match(digest, /^[0-9a-z]{50}$/);
      const { worker, manager } = newJoinTokens(digest);
      assert.equal(tokenDigest(worker), digest);
      assert.equal(tokenDigest(manager), digest);
      assert.notEqual(worker, manager);
      assert.throws(() => tokenDigest('SWMTKN-1-abc-def'), /invalid join token/);
      // A node certificate: signed by the CA, for the node's address, both TLS roles.
      const { csr } = await newCsr(dir);
      const pem = await signNode(dir, ca, csr, { nodeId: 'n1', role: 'worker', clusterId: 'c1', ips: ['10.1.2.3'], seconds: 86400 });
      const cert = new X509Certificate(pem);
      assert.ok(cert.verify(new X509Certificate(ca.cert).publicKey));
      assert.match(cert.subjectAltName ?? '', /IP Address:10\.1\.2\.3/);
      assert.match(cert.subject, /CN=n1/);
      assert.match(cert.subject, /OU=swarm-worker/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('key files under auto-lock', () => {
  it('seals under the unlock key, opens with it only, and refuses a malformed key with dockerd\'s text', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'berth-keyfiles-'));
    try {
      const key = 'SWMKEY-1-' + Buffer.alloc(32, 7).toString('base64').replace(/=+$/, '');
      const other = 'SWMKEY-1-' + Buffer.alloc(32, 8).toString('base64').replace(/=+$/, '');
      const path = join(dir, 'data.key');
      await writeKeyFile(path, 'the-data-key', lockKeyOf(key));
      assert.equal(isSealedSync(path), true);
      assert.equal(readFileSync(path, 'utf8').includes('the-data-key'), false);
      const found = await readKeyFile(path);
      assert.equal(openKeyFile(found!.sealed!, lockKeyOf(` ${key}\n`)), 'the-data-key');
      assert.throws(() => openKeyFile(found!.sealed!, lockKeyOf(other)));
      await writeKeyFile(path, 'the-data-key', undefined);
      assert.equal(isSealedSync(path), false);
      assert.deepEqual(await readKeyFile(path), { text: 'the-data-key' });
      assert.equal(await readKeyFile(join(dir, 'absent')), undefined);
      for (const bad of ['', 'SWMKEY-1-', 'SWMTKN-1-abc', 'SWMKEY-1-not base64!']) assert.throws(() => lockKeyOf(bad), /invalid key string/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
