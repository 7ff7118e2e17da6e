/**
 * Layers that try to write outside their directory: `../` names, absolute names, symlinks followed
 * by writes (same and next layer), hardlinks to host files, device nodes. Each pull must either be
 * refused (an in-stream error, nothing left behind) or stay inside the image's own layer dirs; the
 * host path an escape would create must not exist, /etc/passwd must not change, and the daemon
 * keeps serving.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, lstatSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { HOSTILE_CASES, seedHostile, useDaemon, useSeededRegistry, type SeededHostile } from '../harness/index.js';
import { assertStoreUnchanged, imageIds, pull, pullOk, storeSnapshot } from '../api/support.js';

interface FileFingerprint {
  sha256: string;
  ino: number;
  nlink: number;
  mtimeMs: number;
  mode: number;
}

function fingerprint(path: string): FileFingerprint {
  const st = statSync(path);
  return { sha256: createHash('sha256').update(readFileSync(path)).digest('hex'), ino: st.ino, nlink: st.nlink, mtimeMs: st.mtimeMs, mode: st.mode };
}

/** Every path under dir whose name is `name` (no symlinks followed). */
function findNamed(dir: string, name: string, out: string[] = []): string[] {
  let entries: string[];
  try {
    entries = readdirSync(dir);
  } catch {
    return out;
  }
  for (const e of entries) {
    const p = join(dir, e);
    if (e === name) out.push(p);
    let st;
    try {
      st = lstatSync(p);
    } catch {
      continue;
    }
    if (st.isDirectory()) findNamed(p, name, out);
  }
  return out;
}

/** Places outside any rootfs where a naive extractor running in the daemon's dirs could write. */
function hostSpots(daemonDir: string): string[] {
  return ['/', '/tmp', '/etc', '/root', '/var/tmp', process.cwd(), daemonDir, dirname(daemonDir)];
}

describe('hostile layers', () => {
  const d = useDaemon();
  const reg = useSeededRegistry('open');
  let cases: SeededHostile[] = [];
  let passwd: FileFingerprint;

  before(async () => {
    // Clear leftovers of an earlier, broken run so this one judges only itself.
    for (const c of HOSTILE_CASES) if (c.hostPath && existsSync(c.hostPath)) rmSync(c.hostPath, { force: true });
    cases = await seedHostile(reg().registry);
    passwd = fingerprint('/etc/passwd');
    // The busybox base every hostile image starts from, recorded, so a refused pull's leftovers show.
    await pullOk(d(), reg().seeded.refs.busybox);
  });

  after(() => {
    // Never leave an escaped file on the host, whatever happened above.
    for (const c of HOSTILE_CASES) if (c.hostPath && existsSync(c.hostPath)) rmSync(c.hostPath, { force: true, recursive: true });
  });

  it('every hostile case is seeded', () => {
    assert.equal(cases.length, HOSTILE_CASES.length);
  });

  for (const hc of HOSTILE_CASES) {
    it(`${hc.tag}: ${hc.description}`, async () => {
      const c = cases.find((x) => x.case.tag === hc.tag)!;
      assert.ok(c, 'seeded');
      const snap = storeSnapshot(d());
      const ids = await imageIds(d());
      const out = await pull(d(), c.ref);
      try {
        if (hc.hostPath) assert.equal(existsSync(hc.hostPath), false, `escape: ${hc.hostPath} exists`);
        for (const spot of hostSpots(d().dir)) {
          assert.equal(existsSync(join(spot, hc.marker)), false, `escape: ${join(spot, hc.marker)} exists`);
        }
        assert.deepEqual(fingerprint('/etc/passwd'), passwd, '/etc/passwd changed (content, inode, link count or mode)');

        const layerRoot = join(d().dataRoot, 'layers');
        if (out.status !== 200 || out.error !== undefined) {
          // Refused: a clear message, no image, nothing left on disk.
          assert.ok(out.error && out.error.length > 0, `refused without a message: ${out.raw}`);
          assert.deepEqual(await imageIds(d()), ids, 'a refused pull records no image');
          assertStoreUnchanged(snap, storeSnapshot(d()), hc.tag);
          assert.deepEqual(findNamed(d().dir, hc.marker), [], `the marker survived a refused pull`);
        } else {
          // Accepted: whatever the layer made lives inside this image's layer dirs, nowhere else.
          const img = (await d().request('GET', `/images/${c.ref}/json`)).json();
          const dirs = [img.GraphDriver.Data.UpperDir, ...String(img.GraphDriver.Data.LowerDir ?? '').split(':').filter(Boolean)] as string[];
          for (const found of findNamed(d().dir, hc.marker)) {
            const inside = dirs.some((dir) => !relative(dir, found).startsWith('..'));
            assert.ok(inside, `${found} is outside the image's layer dirs`);
          }
          for (const found of findNamed(layerRoot, hc.marker)) {
            const st = lstatSync(found);
            if (st.isCharacterDevice() || st.isBlockDevice()) {
              assert.fail(`${found}: a device node from a layer was created (${st.rdev})`);
            }
          }
        }
        const ping = await d().request('GET', '/_ping');
        assert.equal(ping.status, 200, 'the daemon still serves');
      } finally {
        if (hc.hostPath && existsSync(hc.hostPath)) rmSync(hc.hostPath, { force: true, recursive: true });
      }
    });
  }

  it('the cases that can only be escapes are refused', async () => {
    // These have no meaning inside a rootfs: a correct extractor must refuse them.
    const mustRefuse = ['dotdot', 'dotdot-nested', 'dotdot-deep', 'abs-symlink', 'rel-symlink', 'hardlink-dotdot'];
    for (const tag of mustRefuse) {
      const c = cases.find((x) => x.case.tag === tag)!;
      const out = await pull(d(), c.ref);
      assert.ok(out.status !== 200 || out.error !== undefined, `${tag} was accepted`);
      assert.match(out.error!, /refus|escape|outside|symlink|\.\./i, `${tag}: ${out.error}`);
    }
  });
});
