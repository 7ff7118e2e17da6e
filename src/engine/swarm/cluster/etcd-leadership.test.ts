/**
 * The leader campaign on a real etcd (a member of its own, plain HTTP on loopback, stopped by pid).
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Etcd3 } from 'etcd3';
import { ETCD_BINARY, freePortOn } from './etcd-member.js';
import { EtcdLeadership } from './etcd-leadership.js';
import { EtcdWrites, type LeaderTerm } from './etcd-writes.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A campaign of node n1 under `prefix` through whichever client `clientOf` gives; its terms as heard, once elected. */
async function electedOn(clientOf: () => Etcd3, prefix: string, closed: () => boolean = () => false) {
  const writes = new EtcdWrites(clientOf, prefix, () => undefined);
  const leadership = new EtcdLeadership({ client: clientOf, prefix, closed, writes, reread: () => undefined, watched: () => 0n, encode: (d) => JSON.stringify(d) });
  const terms: (LeaderTerm | undefined)[] = [];
  leadership.campaign('n1', 2, (t) => terms.push(t));
  for (let i = 0; i < 100 && !terms.length; i++) await sleep(50);
  const term = terms[0];
  assert.ok(term, 'elected');
  return { leadership, terms, term };
}

describe('etcd leadership', () => {
  let dir: string;
  let etcd: ChildProcess;
  let client: Etcd3;
  let url: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-leadership-'));
    const [clientPort, peerPort] = [await freePortOn('127.0.0.1'), await freePortOn('127.0.0.1')];
    url = `http://127.0.0.1:${clientPort}`;
    etcd = spawn(ETCD_BINARY, ['--name', 'a', '--data-dir', join(dir, 'data'), '--listen-client-urls', url, '--advertise-client-urls', url,
      '--listen-peer-urls', `http://127.0.0.1:${peerPort}`, '--initial-advertise-peer-urls', `http://127.0.0.1:${peerPort}`,
      '--initial-cluster', `a=http://127.0.0.1:${peerPort}`, '--log-outputs', 'stderr', '--logger', 'zap'], { stdio: 'ignore' });
    client = new Etcd3({ hosts: url });
    for (let i = 0; ; i++) {
      try {
        await client.get('ping').exec();
        break;
      } catch (err) {
        if (i > 100) throw err;
        await sleep(100);
      }
    }
  });
  after(async () => {
    client?.close();
    if (etcd?.pid) process.kill(etcd.pid, 'SIGKILL');
    await rm(dir, { recursive: true, force: true });
  });

  it('a campaign lost just before the node resigns (demoted) is not run again', async () => {
    const prefix = '/t1/';
    let closed = false;
    const { leadership, terms, term } = await electedOn(() => client, prefix, () => closed);
    // etcd refused a write of this term: the campaign is over, another is due in a moment...
    leadership.deposed(term);
    assert.deepEqual(terms, [term, undefined]);
    // ...but the node stops campaigning first.
    await leadership.resign();
    await sleep(1500);
    assert.deepEqual(terms, [term, undefined], 'no campaign after resign()');
    assert.equal(leadership.term, undefined);
    const keys = await client.getAll().prefix(`election/${prefix}leader`).keys();
    assert.deepEqual(keys, [], 'no election key of this node');
    closed = true;
    await leadership.close();
  });

  it('a leader whose client is replaced keeps its term: the new client keeps the lease alive, and resigns', async () => {
    const prefix = '/t2/';
    let now = new Etcd3({ hosts: url });
    const { leadership, terms, term } = await electedOn(() => now, prefix);
    const old = now;
    now = new Etcd3({ hosts: url });
    assert.equal(leadership.leave(now), false, 'no campaign anew');
    leadership.resume(false);
    // The old client goes: only the new one keeps the lease alive, past twice its TTL.
    old.close();
    await sleep(5000);
    assert.deepEqual(terms, [term], 'still elected');
    assert.equal(leadership.term, term);
    assert.deepEqual(await client.getAll().prefix(`election/${prefix}leader`).keys(), [term.key], 'its election key stays');
    // Resigning goes through the new client: the key goes at once.
    await leadership.resign();
    assert.deepEqual(await client.getAll().prefix(`election/${prefix}leader`).keys(), []);
    await leadership.close();
    now.close();
  });
});
