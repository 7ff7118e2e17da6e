import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isKind } from '../lib/errors.js';
import { hostDevices, resolveDevice, splitDev } from './devices.js';

test('splits dev_t like glibc', () => {
  assert.deepEqual(splitDev(0x0103), { major: 1, minor: 3 }); // /dev/null
  assert.deepEqual(splitDev(0x0ae5), { major: 10, minor: 229 }); // /dev/fuse style
  // Large minor numbers use the high bits: major 259, minor 0x12345.
  assert.deepEqual(splitDev(0x12310345), { major: 259, minor: 0x12345 });
});

test('resolves a host device node with its numbers and mode', async () => {
  const [d] = await resolveDevice('/dev/null', '/dev/mynull', 'rw');
  assert.deepEqual(
    { path: d?.pathInContainer, type: d?.type, major: d?.major, minor: d?.minor, perms: d?.cgroupPermissions },
    { path: '/dev/mynull', type: 'c', major: 1, minor: 3, perms: 'rw' },
  );
  assert.equal((d?.fileMode ?? 0) & 0o666, 0o666);
});

test('rejects non-devices, missing paths and bad permissions', async () => {
  await assert.rejects(resolveDevice('/etc/hostname'), (e: unknown) => isKind(e, 'invalid-argument'));
  await assert.rejects(resolveDevice('/dev/does-not-exist'), (e: unknown) => isKind(e, 'invalid-argument'));
  await assert.rejects(resolveDevice('/dev/null', '/dev/null', 'rwx'), (e: unknown) => isKind(e, 'invalid-argument'));
});

test('lists host devices for privileged containers', async () => {
  const all = await hostDevices();
  assert.ok(all.some((d) => d.pathInContainer === '/dev/null' && d.major === 1 && d.minor === 3));
  assert.ok(!all.some((d) => d.pathInContainer.startsWith('/dev/pts/')));
});
