/** The multi-node harness itself: nodes in namespaces reach the registry and each other, and go away. */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { describe, it } from 'node:test';
import { useSeededRegistry } from '../harness/index.js';
import { startCluster } from './harness.js';

describe('cluster harness', () => {
  const reg = useSeededRegistry('open');

  it('runs two nodes in their own namespaces that pull through the bridge, and removes everything', async () => {
    const c = await startCluster(2, reg());
    try {
      for (const n of c.nodes) {
        const pull = await n.daemon.docker(['pull', '-q', c.image]);
        assert.equal(pull.code, 0, pull.stderr);
      }
      // Node 1's namespace reaches node 2's address over the bridge and has no other address.
      const ping = execFileSync('ip', ['netns', 'exec', c.net.netns(1), 'busybox', 'ping', '-c1', '-W2', c.node(2).addr], { encoding: 'utf8' });
      assert.match(ping, /1 packets received/);
      const addrs = execFileSync('ip', ['-n', c.net.netns(1), '-4', '-o', 'addr'], { encoding: 'utf8' });
      assert.match(addrs, new RegExp(c.node(1).addr.replaceAll('.', '\\.')));
      assert.doesNotMatch(addrs, new RegExp(c.node(2).addr.replaceAll('.', '\\.') + '/'));
    } finally {
      await c.teardown();
    }
    assert.equal(existsSync(`/run/netns/${c.net.netns(1)}`), false);
    assert.throws(() => execFileSync('ip', ['link', 'show', c.net.bridge], { stdio: 'ignore' }));
  });
});
