/**
 * The crash test: a bounded mixed workload (create, start, stop, rm, pull, commit, exec, pause) with
 * berthd SIGKILLed at seeded random moments, repeated. After each restart every container has the state
 * the API last acknowledged for it (or, for an operation cut off by the kill, the state that operation
 * leads to), and its log lines are neither lost nor repeated; after the final cleanup the host has
 * exactly the mounts, links, nft chains, cgroups and processes it had before.
 * BERTH_CRASH_SEED and BERTH_CRASH_ROUNDS pick another seed and number of kills.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { leftoverProcesses, mountsUnder, useDaemon, useSeededRegistry, type TestDaemon, seededRandom } from '../harness/index.js';

const SEED = Number(process.env.BERTH_CRASH_SEED ?? 23);
const ROUNDS = Number(process.env.BERTH_CRASH_ROUNDS ?? 10);
const WORKERS = 3;
const LOOP = 'i=0; while :; do echo line-$i; i=$((i+1)); sleep 0.05; done';

type State = 'created' | 'running' | 'paused' | 'exited' | 'gone';

interface Tracked {
  name: string;
  id?: string;
  acked: State;
  /** States operations still in flight (cut off by a kill) may have left it in. */
  maybe: Set<State>;
  started: boolean;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** What this daemon owns on the host, by its data dir and network prefix. */
function hostSnapshot(d: TestDaemon, prefix: string, ids: Iterable<string>): Record<string, string[]> {
  const links = execFileSync('ip', ['-o', 'link', 'show'], { encoding: 'utf8' })
    .split('\n')
    .map((l) => l.split(':')[1]?.trim().split('@')[0] ?? '')
    .filter((n) => n.startsWith(prefix))
    // Veths (of containers and of the ready pool of namespaces made ahead) have random names: count them.
    .map((n) => (n.length > prefix.length + 1 ? `${prefix}<veth>` : n))
    .sort();
  const nft = execFileSync('nft', ['list', 'ruleset'], { encoding: 'utf8' });
  const chains: string[] = [];
  let table = '';
  for (const line of nft.split('\n')) {
    const t = /^table (\S+) (\S+)/.exec(line);
    if (t) table = `${t[1]} ${t[2]}`;
    const c = /^\s+chain (\S+)/.exec(line);
    if (c && table.includes(prefix)) chains.push(`${table} ${c[1]}`);
  }
  // The running daemon's long-lived shells (lib/long-lived-shell.ts: its children named sh) are not
  // leftovers: their pools grow with bursts of work and they end with their daemon (stdin closed).
  const procs = leftoverProcesses(d.dir, [])
    .filter((p) => p.pid !== d.pid)
    .map((p) => {
      try {
        const comm = readFileSync(`/proc/${p.pid}/comm`, 'utf8').trim();
        const ppid = Number(readFileSync(`/proc/${p.pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]);
        return comm === 'sh' && ppid === d.pid ? '' : comm;
      } catch {
        return '';
      }
    })
    .filter((c) => c && c !== 'node')
    .sort();
  const cgroupRoots = readdirSync('/sys/fs/cgroup').map((m) => join('/sys/fs/cgroup', m, 'berth'));
  const cgroups = [...ids].flatMap((id) => cgroupRoots.map((r) => join(r, id)).filter((p) => existsSync(p))).sort();
  // The ready pool's namespaces have random names too.
  const mounts = mountsUnder(d.dir).map((m) => m.replace(/\/ready-[0-9a-f]+$/, '/ready-<id>')).sort();
  return { mounts, links, chains: chains.sort(), processes: procs, cgroups };
}

function demuxLines(buf: Buffer): string[] {
  const out: string[] = [];
  let i = 0;
  let text = '';
  while (i + 8 <= buf.length) {
    const size = buf.readUInt32BE(i + 4);
    text += buf.subarray(i + 8, i + 8 + size).toString('utf8');
    i += 8 + size;
  }
  for (const l of text.split('\n')) if (l) out.push(l);
  return out;
}

describe('crash test: kill -9 at seeded random moments', () => {
  const daemon = useDaemon();
  const reg = useSeededRegistry('open');

  it(`${ROUNDS} kills (seed ${SEED}): acknowledged state kept, logs whole, host clean`, { timeout: 230_000 }, async () => {
    const d = daemon();
    const random = seededRandom(SEED);
    const pick = <T>(xs: T[]): T | undefined => (xs.length ? xs[Math.floor(random() * xs.length)] : undefined);
    const image = reg().seeded.refs.busybox;
    const pullRef = reg().seeded.refs.busybox135;
    const prefix = /--network-prefix (\S+)/.exec(d.logs())?.[1];
    assert.ok(prefix, 'the harness names a network prefix');
    assert.equal((await d.request('POST', `/images/create?fromImage=${encodeURIComponent(image)}`)).status, 200);
    const before = hostSnapshot(d, prefix, []);

    const tracked: Tracked[] = [];
    const everId = new Set<string>();
    const images = new Map<string, 'acked' | 'maybe'>();
    let serial = 0;
    let killed = false;

    /** Runs one operation: its target state is possible while it runs and acknowledged once it answers. */
    async function op(c: Tracked, target: State, call: () => Promise<{ status: number }>, okStatus: number[]): Promise<void> {
      c.maybe.add(target);
      let r: { status: number } | undefined;
      try {
        r = await call();
      } catch {
        return; // the daemon died under it: stays a maybe
      }
      if (killed) return;
      if (okStatus.includes(r.status)) {
        c.acked = target;
        c.maybe.clear();
        if (target === 'running') c.started = true;
      } else {
        c.maybe.delete(target);
      }
    }

    async function step(): Promise<void> {
      const live = tracked.filter((c) => c.acked !== 'gone' && c.maybe.size === 0);
      const roll = random();
      if (roll < 0.2 || live.length < 2) {
        const c: Tracked = { name: `crash${SEED}-${serial++}`, acked: 'gone', maybe: new Set(), started: false };
        tracked.push(c);
        c.maybe.add('created');
        try {
          const r = await d.request('POST', `/containers/create?name=${c.name}`, { body: { Image: image, Cmd: ['sh', '-c', LOOP], HostConfig: { NetworkMode: random() < 0.5 ? 'none' : 'bridge' } } });
          if (r.status === 201) {
            c.id = r.json().Id;
            everId.add(c.id!);
            if (!killed) {
              c.acked = 'created';
              c.maybe.clear();
            }
          }
        } catch {
          // cut off by the kill
        }
        return;
      }
      const c = pick(live)!;
      const path = `/containers/${c.name}`;
      if (roll < 0.4 && (c.acked === 'created' || c.acked === 'exited')) {
        await op(c, 'running', () => d.request('POST', `${path}/start`), [204]);
      } else if (roll < 0.5 && c.acked === 'running') {
        await op(c, 'exited', () => d.request('POST', `${path}/stop?t=1`), [204]);
      } else if (roll < 0.6) {
        await op(c, 'gone', () => d.request('DELETE', `${path}?force=1`), [204]);
      } else if (roll < 0.7 && c.acked === 'running') {
        await op(c, 'paused', () => d.request('POST', `${path}/pause`), [204]);
      } else if (roll < 0.75 && c.acked === 'paused') {
        await op(c, 'running', () => d.request('POST', `${path}/unpause`), [204]);
      } else if (roll < 0.85 && (c.acked === 'running' || c.acked === 'exited')) {
        const tag = `crash-commit:${serial++}`;
        images.set(tag, 'maybe');
        // No 'paused' in flight: commit's pause is undone by the restart.
        const r = await d.request('POST', `/commit?container=${c.name}&repo=crash-commit&tag=${tag.split(':')[1]}&pause=1`).catch(() => undefined);
        if (r?.status === 201 && !killed) images.set(tag, 'acked');
      } else if (roll < 0.93 && c.acked === 'running') {
        const r = await d.request('POST', `${path}/exec`, { body: { Cmd: ['sh', '-c', 'echo exec > /dev/null; sleep 0.3'] } }).catch(() => undefined);
        if (r?.status === 201) await d.request('POST', `/exec/${r.json().Id}/start`, { body: { Detach: true } }).catch(() => undefined);
      } else {
        images.set(pullRef, images.get(pullRef) === 'acked' ? 'acked' : 'maybe');
        const r = await d.request('POST', `/images/create?fromImage=${encodeURIComponent(pullRef)}`).catch(() => undefined);
        if (r?.status === 200 && !killed && !r.text().includes('"error"')) images.set(pullRef, 'acked');
      }
    }

    async function verify(round: number): Promise<void> {
      for (const c of tracked) {
        if (!c.id) {
          // Created when the kill came, answer never seen: either way is fine, but it must be whole.
          const r = await d.request('GET', `/containers/${c.name}/json`);
          if (r.status === 200) {
            c.id = r.json().Id;
            everId.add(c.id!);
            c.acked = r.json().State.Status as State;
            c.maybe.clear();
          } else {
            c.acked = 'gone';
            c.maybe.clear();
          }
          continue;
        }
        const r = await d.request('GET', `/containers/${c.id}/json`);
        const state: State = r.status === 404 ? 'gone' : (r.json().State.Status as State);
        const allowed = new Set([c.acked, ...c.maybe]);
        // A stop or a pause cut off halfway leaves the process running or stopped; an exit of a
        // running container is never a loss as long as the record says exited.
        assert.ok(allowed.has(state), `round ${round}: ${c.name} is ${state}, acknowledged ${c.acked}, in flight ${[...c.maybe].join(',') || 'none'}`);
        c.acked = state;
        c.maybe.clear();
        if (state === 'running' || state === 'exited' || state === 'paused') c.started = true;
        if (state !== 'gone' && c.started) {
          const logs = await d.request('GET', `/containers/${c.id}/logs?stdout=1&stderr=1`);
          assert.equal(logs.status, 200);
          let expect = 0;
          for (const line of demuxLines(logs.body)) {
            const n = Number(/^line-(\d+)$/.exec(line)?.[1] ?? NaN);
            assert.ok(Number.isInteger(n), `round ${round}: ${c.name}: unexpected log line ${JSON.stringify(line)}`);
            // Each start begins again at line-0; within a run, every line once and in order.
            if (n === 0) expect = 0;
            assert.equal(n, expect, `round ${round}: ${c.name}: line-${n} where line-${expect} was due`);
            expect++;
          }
        }
      }
      for (const [tag, how] of images) {
        const r = await d.request('GET', `/images/${encodeURIComponent(tag)}/json`);
        if (how === 'acked') assert.equal(r.status, 200, `round ${round}: image ${tag} was acknowledged`);
        else if (r.status === 200) images.set(tag, 'acked');
      }
      // Listing works for everything that is left.
      assert.equal((await d.request('GET', '/containers/json?all=1')).status, 200);
    }

    for (let round = 0; round < ROUNDS; round++) {
      killed = false;
      const until = Date.now() + 300 + Math.floor(random() * 1200);
      const workers = Array.from({ length: WORKERS }, async () => {
        for (let n = 0; n < 40 && Date.now() < until && !killed; n++) await step();
      });
      await sleep(Math.max(0, until - Date.now()));
      killed = true;
      await d.kill9();
      await Promise.all(workers);
      await d.restart();
      await verify(round);
    }

    // Final cleanup: every container and committed image goes; the host is as it was.
    for (const c of tracked) if (c.id) await d.request('DELETE', `/containers/${c.id}?force=1`);
    for (const tag of images.keys()) if (tag.startsWith('crash-commit')) await d.request('DELETE', `/images/${tag}?force=1`);
    assert.deepEqual((await d.request('GET', '/containers/json?all=1')).json(), []);
    let after = hostSnapshot(d, prefix, everId);
    // Unmounts and veth removals of the last containers may finish just after the answers.
    for (let k = 0; k < 20 && JSON.stringify(after) !== JSON.stringify(before); k++) {
      await sleep(250);
      after = hostSnapshot(d, prefix, everId);
    }
    assert.deepEqual(after, before);
  });
});
