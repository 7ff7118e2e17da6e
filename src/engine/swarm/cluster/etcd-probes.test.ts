import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Etcd3 } from 'etcd3';
import { MemberProbes } from './etcd-probes.js';

describe('MemberProbes', () => {
  it('a round whose check throws is no unhandled rejection (which would end berthd), and the next round comes', async () => {
    const rejections: unknown[] = [];
    const onRejection = (err: unknown) => rejections.push(err);
    process.on('unhandledRejection', onRejection);
    // A member that always answers with a leader: only the round's check can fail.
    const client = { maintenance: { status: async () => ({ leader: '1' }) }, close: () => undefined } as unknown as Etcd3;
    let rounds = 0;
    const probes = new MemberProbes(['a', 'b'], () => client, () => {
      rounds++;
      throw new Error('check failed');
    });
    try {
      for (let i = 0; i < 60 && rounds < 2; i++) await new Promise((r) => setTimeout(r, 50));
      await new Promise((r) => setImmediate(r));
      assert.ok(rounds >= 2, `rounds: ${rounds}`);
      assert.deepEqual(rejections, []);
    } finally {
      probes.close();
      process.off('unhandledRejection', onRejection);
    }
  });

  it('a member that fails in a round this process was late for is not down, nor steady any more', async () => {
    let answers = true;
    const client = {
      maintenance: { status: async () => { if (!answers) throw new Error('unavailable'); return { leader: '1' }; } },
      close: () => undefined,
    } as unknown as Etcd3;
    const rounds: { down: boolean; steady: boolean }[] = [];
    const probes = new MemberProbes(['a'], () => client, (r) => rounds.push({ down: r.down.has('a'), steady: r.steady.has('a') }));
    try {
      for (let i = 0; i < 100 && !rounds.some((r) => r.steady); i++) await new Promise((r) => setTimeout(r, 50));
      assert.ok(rounds.some((r) => r.steady), 'steady after answering');
      // This process is held up past two rounds; the member fails the round that comes late.
      answers = false;
      const seen = rounds.length;
      const until = Date.now() + 2200;
      while (Date.now() < until);
      for (let i = 0; i < 60 && rounds.length === seen; i++) await new Promise((r) => setTimeout(r, 50));
      assert.deepEqual(rounds[seen], { down: false, steady: false });
    } finally {
      probes.close();
    }
  });
});
