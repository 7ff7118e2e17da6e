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
    assert.equal(schedule(t, nodes, [], host).problem, 'no suitable node (1 node not available for new tasks; scheduling constraints not satisfied on 2 nodes)');
    const big = task('n', 's', '', { Resources: { Reservations: { NanoCPUs: 3e9 } } });
    assert.equal(schedule(big, [node('a'), node('b', {}, 4)], [], host).node?.id, 'b');
    assert.equal(schedule(big, [node('a')], [], host).problem, 'no suitable node (insufficient resources on 1 node)');
    const byHost = task('n', 's', '', { Placement: { Constraints: ['node.hostname==h-b'] } });
    assert.equal(schedule(byHost, [node('a'), node('b')], [], host).node?.id, 'b');
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
      const pem = await signNode(dir, ca, csr, { nodeId: 'n1', role: 'worker', clusterId: 'c1', ips: ['10.1.2.3'], days: 1 });
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
