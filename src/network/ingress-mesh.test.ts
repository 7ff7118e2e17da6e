import { test } from 'node:test';
import assert from 'node:assert/strict';
import { meshRules } from './ingress-mesh.js';
import { runTool } from './run-tool.js';

const spec = {
  bridge: 'bxtest-ingress',
  nodeAddress: '10.0.0.2',
  ports: [
    { protocol: 'udp' as const, publishedPort: 30001, targetPort: 53, backends: ['10.0.0.250'] },
    { protocol: 'tcp' as const, publishedPort: 30000, targetPort: 80, backends: ['10.0.0.253', '10.0.0.252', '10.0.0.253'] },
    { protocol: 'tcp' as const, publishedPort: 30002, targetPort: 80, backends: [] },
  ],
};

test('a published port goes round robin to its tasks on ingress, SNATed to the node', () => {
  const text = meshRules('bxtest', spec);
  assert.match(text, /^table ip bxtest\ndelete table ip bxtest\n/, 'replaces the table whole');
  assert.match(text, /tcp dport 30000 dnat ip to numgen inc mod 2 map \{ 0 : 10\.0\.0\.252 \. 80, 1 : 10\.0\.0\.253 \. 80 \}/, 'each task once');
  assert.match(text, /udp dport 30001 dnat ip to numgen inc mod 1 map \{ 0 : 10\.0\.0\.250 \. 53 \}/);
  assert.doesNotMatch(text, /30002/, 'a port without running tasks is not taken from the host');
  assert.match(text, /oifname "bxtest-ingress" ct status dnat snat ip to 10\.0\.0\.2/);
  // Both the node's own connections (output, loopback too) and others' (prerouting).
  assert.equal(text.match(/fib daddr type local jump mesh/g)?.length, 2);
});

test('without ports, the table goes', () => {
  assert.equal(meshRules('bxtest', undefined), 'table ip bxtest\ndelete table ip bxtest\n');
  assert.equal(meshRules('bxtest', { ...spec, ports: [spec.ports[2]!] }), 'table ip bxtest\ndelete table ip bxtest\n');
});

test('nft accepts the rules', async () => {
  await runTool('nft', ['-c', '-f', '-'], { input: meshRules('bxtest', spec) });
});
