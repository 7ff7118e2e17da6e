import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { PassThrough, Readable } from 'node:stream';
import zlib from 'node:zlib';
import { MediaType } from '../lib/oci.js';
import { isKind } from '../lib/errors.js';
import { decompressLayer } from './decompress.js';
import { makeTar } from '../../test/fixtures/tar.js';

async function collect(r: Readable): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of r) parts.push(c as Buffer);
  return Buffer.concat(parts);
}

function pieces(buf: Buffer, n: number): Readable {
  const out: Buffer[] = [];
  for (let i = 0; i < buf.length; i += n) out.push(buf.subarray(i, i + n));
  return Readable.from(out);
}

function zstd(buf: Buffer): Buffer {
  const r = spawnSync('zstd', ['-c', '-q'], { input: buf, maxBuffer: 64 * 1024 * 1024 });
  assert.equal(r.status, 0, r.stderr.toString());
  return r.stdout;
}

async function sampleTar(): Promise<Buffer> {
  return makeTar([
    { name: 'etc/', type: 'directory', mode: 0o755 },
    { name: 'etc/big', data: Buffer.alloc(3 * 1024 * 1024, 'abcdefgh') },
    { name: 'etc/small', data: 'hello' },
  ]);
}

test('gzip layers, by media type and by sniffing a mislabeled one', async () => {
  const tar = await sampleTar();
  const gz = zlib.gzipSync(tar);
  assert.deepEqual(await collect(decompressLayer(MediaType.dockerLayerGzip, pieces(gz, 1))), tar); // 1-byte chunks: the sniffer must wait
  assert.deepEqual(await collect(decompressLayer(MediaType.ociLayer, pieces(gz, 65536))), tar);
});

test('zstd layers through the zstd process', async () => {
  const tar = await sampleTar();
  assert.deepEqual(await collect(decompressLayer(MediaType.ociLayerZstd, pieces(zstd(tar), 10000))), tar);
});

test('uncompressed tar passes through, even labeled gzip; empty input gives empty output', async () => {
  const tar = await sampleTar();
  assert.deepEqual(await collect(decompressLayer(MediaType.dockerLayerGzip, pieces(tar, 1000))), tar);
  assert.deepEqual(await collect(decompressLayer(MediaType.ociLayer, Readable.from([]))), Buffer.alloc(0));
});

test('corrupt data and unsupported compression are stream errors', async () => {
  const tar = await sampleTar();
  const gz = zlib.gzipSync(tar);
  gz[gz.length - 5] ^= 0xff; // break the CRC / length trailer
  await assert.rejects(collect(decompressLayer(MediaType.ociLayerGzip, Readable.from([gz]))), (err: unknown) => isKind(err, 'invalid-argument'));
  const zs = zstd(tar);
  const cut = zs.subarray(0, zs.length - 100);
  await assert.rejects(collect(decompressLayer(MediaType.ociLayerZstd, Readable.from([cut]))), /zstd/);
  const xz = Buffer.from([0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00, 1, 2, 3]);
  await assert.rejects(collect(decompressLayer('application/x-xz', Readable.from([xz]))), /unsupported layer compression xz/);
});

test('a source error reaches the consumer', async () => {
  const src = new PassThrough();
  const out = decompressLayer(MediaType.ociLayerGzip, src);
  src.write(zlib.gzipSync(Buffer.alloc(1000)).subarray(0, 20));
  setTimeout(() => src.destroy(new Error('network gone')), 10);
  await assert.rejects(collect(out), (err: unknown) => (err as Error).message === 'network gone');
});

/** pids of zstd processes whose parent is this process */
function zstdChildren(): number[] {
  const out: number[] = [];
  for (const p of readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      const stat = readFileSync(`/proc/${p}/stat`, 'utf8');
      const m = /^\d+ \((.*)\) \S+ (\d+)/.exec(stat);
      if (m && m[1] === 'zstd' && Number(m[2]) === process.pid) out.push(Number(p));
    } catch {
      // exited meanwhile
    }
  }
  return out;
}

test('destroying the output kills the zstd process', async () => {
  const src = new PassThrough();
  const out = decompressLayer(MediaType.ociLayerZstd, src);
  // A zstd stream that never ends. Incompressible data, because zstd reads its input in
  // 128 KiB blocks before it writes anything.
  const zs = zstd(randomBytes(4 * 1024 * 1024));
  src.write(zs.subarray(0, zs.length - 10));
  const first = await new Promise<Buffer>((resolve) => out.once('data', resolve));
  assert.ok(first.length > 0);
  assert.equal(zstdChildren().length, 1);
  out.destroy();
  for (let i = 0; i < 50 && zstdChildren().length > 0; i++) await new Promise((r) => setTimeout(r, 20));
  assert.deepEqual(zstdChildren(), []);
  assert.equal(src.destroyed, true);
});
