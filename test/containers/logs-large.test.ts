/**
 * Logs larger than one read: the plain read (no since/until/timestamps/tail) rewrites each chunk
 * of conmon's file into the response in place, so lines cut by chunk boundaries, long lines
 * conmon split into P records, stream selection and a client hanging up mid-read are checked on
 * a real log of several MiB.
 */
import { describe, it, before } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync, readlinkSync } from 'node:fs';
import { useDaemon, useSeededRegistry } from '../harness/index.js';
import type { TestDaemon } from '../harness/daemon.js';
import { demuxChecked } from '../harness/multiplexed.js';

const LINES = 200_000;
const LONG = 100_000;
/** o<i> on stdout, every 1000th line e<i> on stderr, and one line of LONG y's in the middle of stdout. */
const SCRIPT =
  `awk 'BEGIN { long = sprintf("%${LONG}s", ""); gsub(/ /, "y", long);` +
  ` for (i = 0; i < ${LINES}; i++) { if (i % 1000 == 999) print "e" i > "/dev/stderr"; else print "o" i; if (i == ${LINES / 2}) print long } }'`;

function expected(): { stdout: string; stderr: string } {
  const out: string[] = [];
  const err: string[] = [];
  for (let i = 0; i < LINES; i++) {
    if (i % 1000 === 999) err.push(`e${i}\n`);
    else out.push(`o${i}\n`);
    if (i === LINES / 2) out.push('y'.repeat(LONG) + '\n');
  }
  return { stdout: out.join(''), stderr: err.join('') };
}

describe('large logs', () => {
  const daemon = useDaemon();
  const reg = useSeededRegistry('open');
  let image = '';

  before(async () => {
    image = reg().seeded.refs.busybox;
    const pull = await daemon().docker(['pull', image]);
    assert.equal(pull.code, 0, pull.stderr);
  });

  async function runToExit(d: TestDaemon, body: Record<string, unknown>): Promise<string> {
    const c = await d.request('POST', '/containers/create', { body: { Image: image, Cmd: ['sh', '-c', SCRIPT], HostConfig: { NetworkMode: 'none' }, ...body } });
    assert.equal(c.status, 201, c.text());
    const id = c.json().Id as string;
    assert.equal((await d.request('POST', `/containers/${id}/start`)).status, 204);
    const w = await d.request('POST', `/containers/${id}/wait`, { timeoutMs: 120_000 });
    assert.equal(w.json().StatusCode, 0);
    return id;
  }

  it('reads every line of both streams across many chunks, long lines joined; one stream alone', async () => {
    const d = daemon();
    const id = await runToExit(d, {});
    const want = expected();
    const both = await d.request('GET', `/containers/${id}/logs?stdout=1&stderr=1`, { timeoutMs: 120_000 });
    assert.equal(both.status, 200);
    const got = demuxChecked(both.body);
    assert.equal(got.stdout.length, want.stdout.length);
    assert.ok(got.stdout === want.stdout, 'stdout intact');
    assert.ok(got.stderr === want.stderr, 'stderr intact');
    assert.deepEqual(demuxChecked((await d.request('GET', `/containers/${id}/logs?stderr=1`, { timeoutMs: 120_000 })).body), { stdout: '', stderr: want.stderr });
    const out = demuxChecked((await d.request('GET', `/containers/${id}/logs?stdout=1`, { timeoutMs: 120_000 })).body);
    assert.ok(out.stdout === want.stdout && out.stderr === '', 'stdout alone');
    // The CLI's own demultiplexing agrees.
    const cli = await d.docker(['logs', id], { timeoutMs: 120_000 });
    assert.ok(cli.stdout === want.stdout, 'docker logs stdout');
    assert.ok(cli.stderr === want.stderr, 'docker logs stderr');
  });

  it('with a TTY: the raw bytes, no frames', async () => {
    const d = daemon();
    const id = await runToExit(d, { Tty: true });
    const r = await d.request('GET', `/containers/${id}/logs?stdout=1&stderr=1`, { timeoutMs: 120_000 });
    const text = r.body.toString();
    assert.equal(r.headers['content-type'], 'application/vnd.docker.raw-stream');
    assert.equal(text.replace(/\r\n/g, '\n'), mergedLines());
  });

  it('rotated files: read in order, and a tail reaching back into a rotated file is the end of the whole', async () => {
    const d = daemon();
    const id = await runToExit(d, { HostConfig: { NetworkMode: 'none', LogConfig: { Type: 'k8s-file', Config: { 'max-size': '1m', 'max-file': '3' } } } });
    const logPath = (await d.request('GET', `/containers/${id}/json`)).json().LogPath as string;
    assert.ok(existsSync(`${logPath}.1`), 'rotated');
    const whole = demuxChecked((await d.request('GET', `/containers/${id}/logs?stdout=1`, { timeoutMs: 120_000 })).body).stdout;
    assert.ok(expected().stdout.endsWith(whole), 'what is left is the end of the output, in order');
    // One line more than the live file holds: the tail must start in the rotated file.
    const live = readFileSync(logPath).toString().split('\n').length - 1;
    const n = live + 1000;
    const tail = demuxChecked((await d.request('GET', `/containers/${id}/logs?stdout=1&tail=${n}`, { timeoutMs: 120_000 })).body).stdout;
    assert.ok(whole.endsWith(tail), 'the tail is the end of the whole');
    assert.ok(tail.split('\n').length - 1 > live, 'the tail goes back past the live file');
    // The streams come through two pipes, so only each one's own order is known; the tail counts the selected streams.
    assert.equal(demuxChecked((await d.request('GET', `/containers/${id}/logs?stdout=1&tail=3`)).body).stdout, `o${LINES - 4}\no${LINES - 3}\no${LINES - 2}\n`);
    // stderr lines are sparse: how many of them the kept files still hold depends on when rotation ran.
    const keptErr = demuxChecked((await d.request('GET', `/containers/${id}/logs?stderr=1`, { timeoutMs: 120_000 })).body).stderr;
    assert.ok(keptErr.endsWith(`e${LINES - 1}\n`), 'the last stderr line is kept');
    assert.equal(demuxChecked((await d.request('GET', `/containers/${id}/logs?stderr=1&tail=2`)).body).stderr, keptErr.split('\n').slice(-3).join('\n'));
  });

  it('a client hanging up mid-read: the daemon lets go of the log file and serves the next read whole', async () => {
    const d = daemon();
    const id = await runToExit(d, {});
    const logPath = (await d.request('GET', `/containers/${id}/json`)).json().LogPath as string;
    const res = await d.stream('GET', `/containers/${id}/logs?stdout=1&stderr=1`);
    assert.equal(res.statusCode, 200);
    // Read a little and hang up, with most of the log unsent.
    await new Promise<void>((resolve, reject) => {
      res.once('data', () => {
        res.pause();
        resolve();
      });
      res.once('error', reject);
    });
    res.destroy();
    // Bounded wait for the daemon to notice and close the file.
    for (let i = 0; i < 200 && openFds(d.pid).includes(logPath); i++) await new Promise((r) => setTimeout(r, 25));
    assert.ok(!openFds(d.pid).includes(logPath), 'the log file is closed after the hang-up');
    const again = demuxChecked((await d.request('GET', `/containers/${id}/logs?stdout=1&stderr=1`, { timeoutMs: 120_000 })).body);
    assert.ok(again.stdout === expected().stdout, 'a later read is whole');
  });
});

/** Both streams as one text, in the order the container wrote them (a TTY has one stream). */
function mergedLines(): string {
  const all: string[] = [];
  for (let i = 0; i < LINES; i++) {
    all.push(i % 1000 === 999 ? `e${i}\n` : `o${i}\n`);
    if (i === LINES / 2) all.push('y'.repeat(LONG) + '\n');
  }
  return all.join('');
}

function openFds(pid: number): string[] {
  const dir = `/proc/${pid}/fd`;
  const out: string[] = [];
  for (const fd of readdirSync(dir)) {
    try {
      out.push(readlinkSync(`${dir}/${fd}`));
    } catch {
      // closed meanwhile
    }
  }
  return out;
}
