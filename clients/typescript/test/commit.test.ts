/** Commit against a real berthd: a container's filesystem becomes an image that runs. */
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import { BerthClient } from '@berth-engine/client';
import { loadTestEnv, tempDir, uniqueName } from './test-env.js';

const env = loadTestEnv();
const busybox = `${env.registries.open.host}/busybox:latest`;
const c = new BerthClient({ host: env.dockerHost, configDir: tempDir() });
const LABEL = { 'berth-client-test': 'typescript' };

before(async () => {
  await c.images.pullAndWait(busybox);
});

async function cleanup(id: string | undefined): Promise<void> {
  if (id) await c.containers.remove(id, { force: true }).catch(() => undefined);
}

test('commit a container and run the committed image', async () => {
  const name = uniqueName('commit');
  const repo = `berth-client-test/${uniqueName('committed')}`;
  try {
    await c.containers.run(busybox, ['sh', '-c', 'echo committed-content > /marker'], { name, config: { Labels: LABEL } });
    const image = await c.containers.commit(name, { repo, tag: 'v1', changes: ['CMD ["cat", "/marker"]'], comment: 'from the TS client' });
    assert.match(image.Id, /^sha256:[0-9a-f]{64}$/);
    const inspect = await c.images.inspect(`${repo}:v1`);
    assert.equal(inspect.Id, image.Id);
    assert.deepEqual(inspect.Config?.Cmd, ['cat', '/marker']);
    assert.equal(inspect.Comment, 'from the TS client');
    const out = await c.containers.run(`${repo}:v1`, undefined, { remove: true, pull: false, config: { Labels: LABEL } });
    assert.equal(out.toString(), 'committed-content\n');
  } finally {
    await cleanup(name);
    await c.images.remove(`${repo}:v1`, { force: true }).catch(() => undefined);
  }
});

test.after(() => c.close());
