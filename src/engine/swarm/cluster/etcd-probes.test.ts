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
});
