/**
 * The guarded writes of cluster/etcd-writes.ts against a real etcd (one member on loopback, no TLS):
 * a leader's write lands only while its election key holds, a read-modify-write only on the revision
 * it was read at; a write queued behind one of the same key builds on it; refused writes are dropped
 * and told; an immediate write behind a queued one of its key builds on it; a creation takes its
 * name key with it (one of two at once lands), a deletion frees it. And cluster/etcd-watches.ts on
 * the same etcd: what it hands on (watched, or read back) stops once it closed.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { Etcd3 } from 'etcd3';
import { freePort, makeTempDir, onExitCleanup, removeDir } from '../harness/index.js';
import { killProcess, spawnLogged, type LoggedProcess } from '../harness/child-process.js';
import { EtcdWrites, type LeaderTerm, type WriteGuard, type WriteRefusal } from '../../src/engine/swarm/cluster/etcd-writes.js';
import { LeaderCampaign } from '../../src/engine/swarm/cluster/leader-campaign.js';
import { EtcdWatches } from '../../src/engine/swarm/cluster/etcd-watches.js';
import { encodeDoc } from '../../src/engine/swarm/cluster/etcd-docs.js';
import { eventually } from './support.js';

const PREFIX = '/t/';

describe('guarded etcd writes', () => {
  let etcd: LoggedProcess | undefined;
  let dir = '';
  let client: Etcd3;
  const refused: [string, WriteRefusal][] = [];
  let writes: EtcdWrites;

  before(async () => {
    dir = makeTempDir('etcd');
    onExitCleanup(() => {
      if (etcd && !etcd.hasExited()) process.kill(etcd.pid, 'SIGKILL');
    });
    const url = `http://127.0.0.1:${await freePort()}`;
    const peer = `http://127.0.0.1:${await freePort()}`;
    etcd = spawnLogged('etcd', ['--name', 'w', '--data-dir', join(dir, 'data'), '--listen-client-urls', url, '--advertise-client-urls', url, '--listen-peer-urls', peer, '--initial-advertise-peer-urls', peer, '--initial-cluster', `w=${peer}`], { logFile: join(dir, 'etcd.log') });
    client = new Etcd3({ hosts: url });
    await eventually('etcd answers', async () => (await client.get('ping').exec().then(() => true).catch(() => false)) || undefined, 20_000, 100);
    writes = new EtcdWrites(() => client, PREFIX, (key, why) => refused.push([key, why]));
  });
  after(async () => {
    writes?.close();
    client?.close();
    if (etcd) await killProcess(etcd);
    if (dir) await removeDir(dir);
  });

  const value = async (key: string) => (await client.get(PREFIX + key).string()) ?? undefined;

  it("a leader's write lands while its election key holds, and is refused once the key is gone", async () => {
    let term: LeaderTerm | undefined;
    const campaign = new LeaderCampaign(client, 'election-test', 'me', 5, { elected: (t) => (term = t), lost: () => undefined });
    const t = await eventually('elected', async () => term, 10_000, 50);
    assert.equal((await client.get(t.key).exec()).kvs[0]?.create_revision, t.revision);
    assert.deepEqual(await writes.commit('tasks/a', 'one', { term: t }), { landed: true, revision: (await client.get(PREFIX + 'tasks/a').exec()).kvs[0]!.mod_revision });
    // What etcd does when the lease expires unheard (the leader cut off): the key goes.
    await client.delete().key(t.key).exec();
    const out = await writes.commit('tasks/a', 'two', { term: t });
    assert.deepEqual(out, { landed: false, why: 'deposed' });
    assert.equal(await value('tasks/a'), 'one');
    // Queued, it is dropped and told.
    writes.put('tasks/b', 'three', { term: t });
    await writes.flushed();
    assert.deepEqual(refused, [['tasks/b', 'deposed']]);
    assert.equal(await value('tasks/b'), undefined);
    await campaign.resign();
  });

  it('a read-modify-write lands on the revision it was read at only: of two at one revision, one wins', async () => {
    refused.length = 0;
    await writes.commit('services/s', 'v1', {});
    const base = writes.revisionOf('services/s');
    assert.notEqual(base, '0');
    const [a, b] = await Promise.all([writes.commit('services/s', 'v2a', { base }), writes.commit('services/s', 'v2b', { base })]);
    assert.deepEqual([a.landed, b.landed].sort(), [false, true]);
    const lost = (a.landed ? b : a) as { landed: false; why: WriteRefusal };
    assert.equal(lost.why, 'conflict');
    assert.equal(await value('services/s'), a.landed ? 'v2a' : 'v2b');
    // Absent is revision 0: a create lands once.
    assert.equal((await writes.commit('services/new', 'x', { base: '0' })).landed, true);
    assert.deepEqual(await writes.commit('services/new', 'y', { base: '0' }), { landed: false, why: 'conflict' });
  });

  it('a write queued behind one of the same key builds on it; one on a stale base is dropped and told', async () => {
    refused.length = 0;
    const base = writes.revisionOf('services/s');
    const guard: WriteGuard = { base };
    writes.put('services/s', 'q1', guard);
    // Queued while the first is under way, derived from the cache with the first in it: the same base.
    writes.put('nodes/other', 'n', {});
    writes.put('services/s', 'q2', { base });
    await writes.flushed();
    assert.equal(await value('services/s'), 'q2');
    assert.deepEqual(refused, []);
    // Someone else writes meanwhile: the cache's base is stale.
    await client.put(PREFIX + 'services/s').value('theirs').exec();
    writes.put('services/s', 'mine', { base: writes.revisionOf('services/s') });
    await writes.flushed();
    assert.equal(await value('services/s'), 'theirs');
    assert.deepEqual(refused, [['services/s', 'conflict']]);
  });

  it('an immediate write right behind a queued one of the same key, made from a cache holding it, replaces it or builds on it', async () => {
    refused.length = 0;
    await writes.commit('services/q', 'v1', {});
    // On its way already: the immediate write waits for it and compares the revision it made.
    let base = writes.revisionOf('services/q');
    writes.put('services/q', 'queued', { base });
    assert.equal((await writes.commit('services/q', 'api', { base })).landed, true);
    assert.equal(await value('services/q'), 'api');
    // Still queued behind another key's write: it is replaced, never sent.
    base = writes.revisionOf('services/q');
    writes.put('nodes/busy', 'n', {});
    writes.put('services/q', 'queued again', { base });
    assert.equal((await writes.commit('services/q', 'api again', { base })).landed, true);
    await writes.flushed();
    assert.equal(await value('services/q'), 'api again');
    assert.deepEqual(refused, []);
  });

  it('a creation takes its name in the same transaction: of two at once with one name, one lands; a deletion frees only its own name', async () => {
    const name = (id: string) => ({ key: 'names/services/web', id });
    const [a, b] = await Promise.all([
      writes.commit('services/ida', 'A', { base: '0', takes: name('ida') }),
      writes.commit('services/idb', 'B', { base: '0', takes: name('idb') }),
    ]);
    assert.deepEqual([a.landed, b.landed].sort(), [false, true]);
    const [won, lost] = a.landed ? ['ida', 'idb'] : ['idb', 'ida'];
    assert.deepEqual(a.landed ? b : a, { landed: false, why: 'taken' });
    assert.equal(await value('names/services/web'), won);
    assert.equal(await value(`services/${lost}`), undefined, 'the refused record was not written either');
    // The same creation again (an answer lost, the write retried): it landed already.
    assert.equal((await writes.commit(`services/${won}`, won === 'ida' ? 'A' : 'B', { base: '0', takes: name(won) })).landed, true);
    // A record of the name without its key (an older berthd's), deleted: the key, another's, stays.
    await client.put(PREFIX + 'services/old').value('O').exec();
    assert.equal((await writes.commit('services/old', null, { frees: name('old') })).landed, true);
    assert.equal(await value('services/old'), undefined);
    assert.equal(await value('names/services/web'), won);
    // The holder's deletion frees the name with it; then a creation takes it again.
    assert.equal((await writes.commit(`services/${won}`, null, { frees: name(won) })).landed, true);
    assert.equal(await value('names/services/web'), undefined);
    assert.equal((await writes.commit('services/idc', 'C', { base: '0', takes: name('idc') })).landed, true);
    assert.equal(await value('names/services/web'), 'idc');
  });

  it('the watches hand on changes, watched or read back, until they close: nothing after', async () => {
    const prefix = '/watched/';
    const heard: [string, unknown][] = [];
    const watches = new EtcdWatches({ client: () => client, prefix, writer: 'me', writes: new EtcdWrites(() => client, prefix, () => undefined), renew: () => undefined });
    await watches.start((await client.get(prefix).exec()).header.revision, (key, doc) => heard.push([key, doc]));
    await client.put(prefix + 'tasks/a').value(encodeDoc('other', { n: 1 })).exec();
    await eventually('the watched change', async () => heard.length > 0, 10_000, 50);
    // A key read back (EtcdState.reread) goes where the watched ones go.
    watches.deliver('tasks/b', { n: 2 });
    const before = [['tasks/a', { n: 1 }], ['tasks/b', { n: 2 }]];
    assert.deepEqual(heard, before);
    await watches.close();
    // The node left: a late read-back answer and a later change in etcd reach nothing.
    watches.deliver('tasks/c', { n: 3 });
    await client.put(prefix + 'tasks/d').value(encodeDoc('other', { n: 4 })).exec();
    await new Promise((r) => setTimeout(r, 500));
    assert.deepEqual(heard, before);
  });
});
