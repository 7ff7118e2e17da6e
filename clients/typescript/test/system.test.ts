/** Ping, version, negotiation and login against a real berthd. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { BadRequestError, BerthClient, CLIENT_API_VERSION, UnauthorizedError, compareVersions } from '@berth-engine/client';
import { loadTestEnv, tempDir } from './test-env.js';

const env = loadTestEnv();

test('fromEnv reads DOCKER_HOST; ping reports the daemon; version answers', async () => {
  const client = BerthClient.fromEnv({ DOCKER_HOST: env.dockerHost, DOCKER_CONFIG: tempDir() });
  try {
    const ping = await client.ping();
    assert.match(ping.apiVersion ?? '', /^1\.\d+$/);
    assert.equal(ping.osType, 'linux');
    const v = await client.version();
    assert.equal(v.ApiVersion, ping.apiVersion);
    assert.equal(v.Os, 'linux');
  } finally {
    client.close();
  }
});

test('negotiation settles on the lower of client and daemon versions', async () => {
  const client = new BerthClient({ host: env.dockerHost });
  try {
    const daemon = (await client.ping()).apiVersion!;
    const expected = compareVersions(daemon, CLIENT_API_VERSION) < 0 ? daemon : CLIENT_API_VERSION;
    assert.equal(await client.apiVersion(), expected);
    await client.version(); // works at that version
  } finally {
    client.close();
  }
});

test('a pinned version newer than the daemon offers is refused with the daemon message', async () => {
  const client = BerthClient.fromEnv({ DOCKER_HOST: env.dockerHost, DOCKER_API_VERSION: '1.99' });
  try {
    assert.equal(await client.apiVersion(), '1.99');
    await assert.rejects(client.version(), (e: Error) => e instanceof BadRequestError && /client version 1\.99 is too new/.test(e.message));
  } finally {
    client.close();
  }
});

test('login checks credentials (basic and token registries) and stores only when asked', async () => {
  const configDir = tempDir();
  const client = new BerthClient({ host: env.dockerHost, configDir });
  try {
    for (const reg of [env.registries.basic, env.registries.token]) {
      const ok = await client.login({ username: reg.username!, password: reg.password!, serveraddress: reg.host });
      assert.equal(ok.Status, 'Login Succeeded');
      await assert.rejects(
        client.login({ username: reg.username!, password: 'wrong-password', serveraddress: reg.host }),
        (e: Error) => e instanceof UnauthorizedError && e.message.length > 0,
      );
    }
    assert.throws(() => readFileSync(join(configDir, 'config.json')), /ENOENT/);

    const reg = env.registries.basic;
    await client.login({ username: reg.username!, password: reg.password!, serveraddress: reg.host }, { store: true });
    const cfg = JSON.parse(readFileSync(join(configDir, 'config.json'), 'utf8'));
    assert.equal(Buffer.from(cfg.auths[reg.host].auth, 'base64').toString(), `${reg.username}:${reg.password}`);
  } finally {
    client.close();
  }
});
