import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveUser } from './container-user.js';

describe('resolveUser', () => {
  let root: string;
  before(() => {
    root = mkdtempSync(join(tmpdir(), 'berth-user-'));
    mkdirSync(join(root, 'etc'));
    writeFileSync(join(root, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/sh\nberth:x:1000:1000::/home/berth:/bin/sh\n');
    writeFileSync(join(root, 'etc/group'), 'root:x:0:\nberth:x:1000:\nstaff:x:50:berth\naudio:x:29:\n');
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  it('finds users, their groups and GroupAdd entries by name and id', async () => {
    assert.deepEqual(await resolveUser(root, 'berth'), { uid: 1000, gid: 1000, additionalGids: [50], home: '/home/berth' });
    assert.deepEqual(await resolveUser(root, 'berth', ['audio', '4242', 'staff']), { uid: 1000, gid: 1000, additionalGids: [50, 29, 4242], home: '/home/berth' });
    await assert.rejects(resolveUser(root, '', ['nogroup']), /Unable to find group nogroup: no matching entries in group file/);
  });

  it('turns a hostile passwd or group into an error naming the file', async () => {
    const fifoRoot = mkdtempSync(join(tmpdir(), 'berth-user-fifo-'));
    try {
      mkdirSync(join(fifoRoot, 'etc'));
      execFileSync('mkfifo', [join(fifoRoot, 'etc/passwd')]);
      mkdirSync(join(fifoRoot, 'etc/group'));
      await assert.rejects(resolveUser(fifoRoot, 'berth'), /unable to find user berth: \/etc\/(passwd: not a regular file|group: is a directory)/);
    } finally {
      rmSync(fifoRoot, { recursive: true, force: true });
    }
  });
});
