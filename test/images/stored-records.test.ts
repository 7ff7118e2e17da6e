/**
 * Image rows damaged in a stopped daemon's database: the daemon starts (its start-up sweep reads
 * every image), `docker images` lists them all, lost chain ids and blob descriptors read as repaired,
 * a config that does not parse is read back from its blob, and an image whose config is lost for
 * good gives a clear error on inspect and can still be removed.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { dockerOk as ok, useDaemon, useSeededRegistry } from '../harness/index.js';

describe('stored image records', () => {
  const daemon = useDaemon();
  const reg = useSeededRegistry('open');

  it('a damaged row stops neither the daemon nor the listing; what can be saved is', async () => {
    const d = daemon();
    const { refs } = reg().seeded;
    for (const ref of [refs.layered, refs.multiarch]) await ok(d, ['pull', '-q', ref]);
    const commit = async (name: string) => {
      await ok(d, ['run', '--name', `to-${name}`, refs.multiarch, 'sh', '-c', `echo ${name} > /${name}`]);
      const imageId = await ok(d, ['commit', `to-${name}`, `${name}:1`]);
      await ok(d, ['rm', `to-${name}`]);
      return imageId;
    };
    const id = async (ref: string) => ok(d, ['image', 'inspect', '--format', '{{.Id}}', ref]);
    const ids = { layered: await id(refs.layered), multiarch: await id(refs.multiarch), blobless: await commit('blobless'), lost: await commit('lost') };
    const arch = await ok(d, ['image', 'inspect', '--format', '{{.Architecture}}', refs.multiarch]);
    await d.stop();

    const db = new Database(join(d.dataRoot, 'berth.db'));
    try {
      const set = (column: string, imageId: string, text: string) => assert.equal(db.prepare(`UPDATE images SET ${column} = ? WHERE id = ?`).run(text, imageId).changes, 1);
      set('chain_ids', ids.layered, '["sha256:trunc');
      set('layer_blobs', ids.blobless, '{"not": "a list"}');
      set('config', ids.multiarch, '{"architecture": ');
      set('config', ids.lost, 'garbage');
    } finally {
      db.close();
    }
    // The committed image's config blob goes too: nothing is left to repair it from.
    rmSync(join(d.dataRoot, 'blobs', 'sha256', ids.lost.slice(7)), { force: true });
    await d.restart();

    const listed = (await ok(d, ['images', '-q', '--no-trunc'])).split('\n');
    for (const i of Object.values(ids)) assert.ok(listed.includes(i), `${i} is listed: ${listed.join(' ')}`);
    assert.ok(d.logs().includes('stored image record was damaged; repaired'));

    // Chain ids derived again from the config, and the row mended: the layers are found, the image runs.
    const db2 = new Database(join(d.dataRoot, 'berth.db'), { readonly: true });
    try {
      const chains = JSON.parse((db2.prepare('SELECT chain_ids FROM images WHERE id = ?').get(ids.layered) as { chain_ids: string }).chain_ids) as string[];
      assert.equal(chains.length, 3);
    } finally {
      db2.close();
    }
    assert.equal(await ok(d, ['run', '--rm', '--entrypoint', 'cat', refs.layered, '/data/keep']), 'keep');
    assert.equal((await d.docker(['run', '--rm', '--entrypoint', 'test', refs.layered, '-e', '/etc/removeme'])).code, 1, 'the whiteout layer is there too');
    // Blob descriptors lost: the image runs, and its layers are compressed again when they have to leave.
    assert.equal(await ok(d, ['run', '--rm', 'blobless:1', 'cat', '/blobless']), 'blobless');
    await ok(d, ['save', '-o', join(d.dir, 'blobless.tar'), 'blobless:1']);
    // The config read back from its blob, checked against the id.
    assert.equal(await ok(d, ['image', 'inspect', '--format', '{{.Architecture}}', refs.multiarch]), arch);

    // Lost for good: a clear error naming it, and removable.
    const insp = await d.request('GET', `/images/${ids.lost}/json`);
    assert.equal(insp.status, 500);
    assert.match(insp.json().message, new RegExp(`^the stored config of image ${ids.lost} is unreadable \\(.+\\) and no intact copy of it is kept`));
    await ok(d, ['rmi', 'lost:1']);
    assert.equal((await d.request('GET', `/images/${ids.lost}/json`)).status, 404);
    assert.ok(!(await ok(d, ['images', '-q', '--no-trunc'])).includes(ids.lost));
  });
});
