/** Image operations against a real berthd pulling from real registries (open, Basic, token). */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BerthClient, NotFoundError, StreamError, type ProgressMessage } from '@berth-engine/client';
import { loadTestEnv, pushBrokenImage, tempDir, uniqueName } from './test-env.js';

const env = loadTestEnv();

function client(configDir = tempDir()): BerthClient {
  return new BerthClient({ host: env.dockerHost, configDir });
}

async function removeQuietly(c: BerthClient, ref: string): Promise<void> {
  await c.images.remove(ref, { force: true }).catch(() => undefined);
}

test('pull from an open registry yields progress as a stream, then list and inspect see the image', async () => {
  const c = client();
  const ref = `${env.registries.open.host}/busybox:latest`;
  try {
    await removeQuietly(c, ref);
    const seen: ProgressMessage[] = [];
    for await (const m of c.images.pull(ref)) seen.push(m);
    assert.ok(seen.length >= 2, 'several progress records');
    assert.ok(seen.some((m) => /^Digest: sha256:[0-9a-f]{64}$/.test(m.status ?? '')), JSON.stringify(seen));
    assert.match(seen.at(-1)?.status ?? '', /Downloaded newer image|Image is up to date/);
    const listed = await c.images.list({ filters: { reference: [ref] } });
    assert.equal(listed.length, 1);
    assert.ok(listed[0]!.RepoTags.includes(ref));
    const inspect = await c.images.inspect(ref);
    assert.equal(inspect.Id, listed[0]!.Id);
    assert.equal(inspect.Os, 'linux');
  } finally {
    c.close();
  }
});

test('pull progress is consumed incrementally: breaking out early closes the stream', async () => {
  const c = client();
  const ref = `${env.registries.open.host}/layered:latest`;
  try {
    await removeQuietly(c, ref);
    for await (const m of c.images.pull(ref)) {
      assert.ok(m.status);
      break;
    }
    // The daemon keeps going or stops; either way the client is free for the next call.
    await c.ping();
  } finally {
    await removeQuietly(c, ref);
    c.close();
  }
});

test('pull with explicit credentials from Basic and token registries; anonymous is refused', async () => {
  const c = client();
  try {
    for (const reg of [env.registries.basic, env.registries.token]) {
      const ref = `${reg.host}/busybox:latest`;
      await removeQuietly(c, ref);
      await assert.rejects(c.images.pullAndWait(ref, { auth: false }), (e: Error) => e.message.length > 0, `${reg.host} anonymous`);
      await c.images.pullAndWait(ref, { auth: { username: reg.username!, password: reg.password!, serveraddress: reg.host } });
      assert.ok((await c.images.inspect(ref)).RepoTags.includes(ref));
      await c.images.remove(ref);
    }
  } finally {
    c.close();
  }
});

test('pull uses credentials stored in config.json and in a credential helper', async () => {
  const dir = tempDir();
  const basic = env.registries.basic;
  const token = env.registries.token;
  // A real helper program answering `get` for the token registry.
  const bin = join(dir, 'bin');
  mkdirSync(bin);
  writeFileSync(
    join(bin, 'docker-credential-berthtest'),
    `#!/bin/sh\nread url\nif [ "$1" = get ] && [ "$url" = "${token.host}" ]; then printf '{"ServerURL":"%s","Username":"${token.username}","Secret":"${token.password}"}' "$url"; exit 0; fi\necho "credentials not found in native keychain"; exit 1\n`,
  );
  chmodSync(join(bin, 'docker-credential-berthtest'), 0o755);
  const configDir = join(dir, 'cfg');
  mkdirSync(configDir);
  writeFileSync(
    join(configDir, 'config.json'),
    JSON.stringify({
      auths: { [basic.host]: { auth: Buffer.from(`${basic.username}:${basic.password}`).toString('base64') } },
      credHelpers: { [token.host]: 'berthtest' },
    }),
  );
  const savedPath = process.env.PATH;
  process.env.PATH = `${bin}:${savedPath}`;
  const c = client(configDir);
  try {
    for (const reg of [basic, token]) {
      const ref = `${reg.host}/busybox:1.35`;
      await removeQuietly(c, ref);
      await c.images.pullAndWait(ref);
      assert.ok((await c.images.inspect(ref)).RepoTags.includes(ref));
      await c.images.remove(ref);
    }
  } finally {
    process.env.PATH = savedPath;
    c.close();
  }
});

test('tag, inspect by the new name, remove; missing images are NotFoundError with the daemon text', async () => {
  const c = client();
  const ref = `${env.registries.open.host}/busybox:latest`;
  const target = `berth-client-test/${uniqueName('tag')}:v1`;
  try {
    await c.images.pullAndWait(ref);
    await c.images.tag(ref, target);
    const a = await c.images.inspect(ref);
    const b = await c.images.inspect(target);
    assert.equal(a.Id, b.Id);
    const removed = await c.images.remove(target);
    assert.deepEqual(removed, [{ Untagged: target }]);
    await assert.rejects(c.images.inspect(target), (e: Error) => e instanceof NotFoundError && e.message.includes('No such image'));
    await assert.rejects(
      c.images.pullAndWait(`${env.registries.open.host}/${uniqueName('absent')}:latest`),
      (e: Error) => e instanceof NotFoundError || e.name === 'StreamError',
    );
  } finally {
    await removeQuietly(c, target);
    c.close();
  }
});

test('an error reported inside the pull stream is thrown as StreamError after the progress before it', async () => {
  const c = client();
  try {
    const ref = await pushBrokenImage(env.registries.open.host);
    const seen: ProgressMessage[] = [];
    await assert.rejects(
      (async () => {
        for await (const m of c.images.pull(ref)) seen.push(m);
      })(),
      (e: Error) => e instanceof StreamError && e.statusCode === 200 && e.message.length > 0,
    );
    assert.ok(seen.length >= 1, 'progress records came before the error');
  } finally {
    c.close();
  }
});
