import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { buildSpec } from './build-spec.js';
import { SECCOMP_BPF_ANNOTATION, SeccompBpfCache } from './seccomp-cache.js';
import { removeDir, specInput, tempDir } from '../../test/fixtures/runtime.js';

let dir = '';
after(() => removeDir(dir));

test('a miss, then the compiled filter replaces the JSON profile', async () => {
  dir = await tempDir('berth-bpf-');
  await mkdir(join(dir, 'c1'));
  await writeFile(join(dir, 'c1', 'seccomp.bpf'), Buffer.from([1, 2, 3, 4]));
  const cache = new SeccompBpfCache('crun-test');
  const spec = buildSpec(specInput('c1', '/r', ['true']));
  const first = cache.apply(spec);
  assert.equal(first.spec, spec);
  assert.ok(first.missKey);
  await cache.remember(first.missKey, dir, 'c1');

  const second = cache.apply(buildSpec(specInput('c2', '/r', ['sh'])));
  assert.equal(second.missKey, undefined);
  assert.equal(second.spec.linux.seccomp, undefined);
  assert.equal(second.spec.annotations?.[SECCOMP_BPF_ANNOTATION], Buffer.from([1, 2, 3, 4]).toString('base64'));

  // A different profile (other capabilities) or compiler is a different entry.
  const admin = buildSpec(specInput('c3', '/r', ['true'], { process: { args: ['true'], env: [], cwd: '/', user: { uid: 0, gid: 0 }, terminal: false, capabilities: ['CAP_SYS_ADMIN'] } }));
  assert.ok(cache.apply(admin).missKey);
  assert.ok(new SeccompBpfCache('other-crun').apply(spec).missKey);
  // No profile, nothing to do.
  const unconfined = buildSpec(specInput('c4', '/r', ['true'], { seccomp: 'unconfined' }));
  assert.deepEqual(cache.apply(unconfined), { spec: unconfined });
});
