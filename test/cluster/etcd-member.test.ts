/**
 * The etcd member berthd runs, on loopback without a daemon: one started on another key file (an
 * older berthd named the data root's, which auto-lock now seals) is started again on the file named
 * now, on the same data, and answers there. One that dies while berthd runs is started again; one
 * etcd removed from the cluster is not (it would die at every start), and says so. And a node's
 * watches on that etcd: one etcd cancels (its user lost the read) neither holds up a rewatch nor
 * stays gone once the user may read again.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Range } from 'etcd3';
import { EtcdMember, exitReason, freePortOn, peerUrl, type MemberConfig } from '../../src/engine/swarm/cluster/etcd-member.js';
import { EtcdState } from '../../src/engine/swarm/cluster/etcd-state.js';
import { newCa, newCsr, signNode } from '../../src/engine/swarm/cluster/pki.js';
import { isRunning as alive, run } from '../harness/index.js';
import { eventually } from './support.js';

describe('etcd member', () => {
  it('a running member started on another key file starts again on the one named now, keeping its data', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'berth-etcd-member-'));
    let member: EtcdMember | undefined;
    try {
      const ca = await newCa(dir);
      const { key, csr } = await newCsr(dir);
      const cert = await signNode(dir, ca, csr, { nodeId: 'm1', role: 'manager', clusterId: 'c1', ips: ['127.0.0.1'], seconds: 86400 });
      const file = (name: string, text: string) => {
        writeFileSync(join(dir, name), text, { mode: 0o600 });
        return join(dir, name);
      };
      const [caFile, certFile, oldKey] = [file('ca.pem', ca.cert), file('node.pem', cert), file('old-key.pem', key)];
      const [clientPort, peerPort] = [await freePortOn('127.0.0.1'), await freePortOn('127.0.0.1')];
      const config: MemberConfig = {
        name: 'm1', dataDir: join(dir, 'etcd', 'data'), addr: '127.0.0.1', clientPort, peerPort,
        initialCluster: `m1=${peerUrl('127.0.0.1', peerPort)}`, initialState: 'new', clusterToken: 'c1', caFile, certFile, keyFile: oldKey,
      };
      const etcdctl = (keyFile: string, args: string[]) =>
        run('etcdctl', ['--endpoints', `https://127.0.0.1:${clientPort}`, '--cacert', caFile, '--cert', certFile, '--key', keyFile, '--dial-timeout', '3s', '--command-timeout', '5s', ...args], {
          env: { ...process.env, ETCDCTL_API: '3' },
          timeoutMs: 20_000,
        });
      member = new EtcdMember(config);
      await member.start();
      const first = Number(readFileSync(member.pidFile, 'utf8'));
      await eventually('the member answers', async () => (await etcdctl(oldKey, ['put', 'kept', 'yes'])).code === 0, 30_000, 200);

      const newKey = join(dir, 'run-key.pem');
      copyFileSync(oldKey, newKey);
      member.detach();
      member = new EtcdMember({ ...config, keyFile: newKey });
      await member.start();
      const second = Number(readFileSync(member.pidFile, 'utf8'));
      assert.notEqual(second, first);
      assert.equal(alive(first), false, 'the member on the old key file was stopped');
      assert.ok(readFileSync(`/proc/${second}/cmdline`, 'utf8').split('\0').includes(newKey));
      rmSync(oldKey);
      const got = await eventually('the member answers again, with its data', async () => {
        const r = await etcdctl(newKey, ['get', 'kept', '--print-value-only']);
        return r.code === 0 && r.stdout.trim();
      }, 30_000, 200);
      assert.equal(got, 'yes');

      // Named the same file, the running member is kept.
      const again = new EtcdMember({ ...config, keyFile: newKey });
      member.detach();
      member = again;
      await member.start();
      assert.equal(Number(readFileSync(member.pidFile, 'utf8')), second);

      // Killed, it is started again on its data; detached (berthd stops), it is left alone.
      process.kill(second, 'SIGKILL');
      const third = await eventually('the member started again', async () => {
        const pid = Number(readFileSync(member!.pidFile, 'utf8'));
        return pid !== second && alive(pid) ? pid : undefined;
      }, 10_000, 100);
      assert.equal(await eventually('it answers with its data', async () => {
        const r = await etcdctl(newKey, ['get', 'kept', '--print-value-only']);
        return r.code === 0 && r.stdout.trim();
      }, 30_000, 200), 'yes');
      member.detach();
      process.kill(third, 'SIGKILL');
      await new Promise((r) => setTimeout(r, 2500));
      assert.equal(Number(readFileSync(member.pidFile, 'utf8')), third, 'no berthd, no restart');
    } finally {
      await member?.stop(true);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a member etcd removed from the cluster is not started again, and says why', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'berth-etcd-member-'));
    const members: EtcdMember[] = [];
    try {
      const pki = await loopbackPki(dir, ['m1', 'm2']);
      const first = await loopbackMember(dir, pki, 'm1');
      members.push(first.member);
      await eventually('m1 answers', async () => (await pki.etcdctl(first.clientPort, 'm1', ['endpoint', 'health'])).code === 0, 30_000, 200);
      const peerPort = await freePortOn('127.0.0.1');
      const add = await pki.etcdctl(first.clientPort, 'm1', ['member', 'add', 'm2', '--learner', '--peer-urls', peerUrl('127.0.0.1', peerPort)]);
      assert.equal(add.code, 0, add.stderr);
      const second = await loopbackMember(dir, pki, 'm2', { peerPort, initialCluster: `m1=${peerUrl('127.0.0.1', first.peerPort)},m2=${peerUrl('127.0.0.1', peerPort)}` });
      members.push(second.member);
      const id = await eventually('m2 listed under its name', async () => {
        const r = await pki.etcdctl(first.clientPort, 'm1', ['member', 'list']);
        return r.stdout.split('\n').find((l) => l.includes(', m2, '))?.split(',')[0];
      }, 30_000, 200);
      const pid = Number(readFileSync(second.member.pidFile, 'utf8'));
      const rm = await pki.etcdctl(first.clientPort, 'm1', ['member', 'remove', id]);
      assert.equal(rm.code, 0, rm.stderr);
      await eventually('m2 knows etcd removed it', async () => second.member.lastExit?.removed, 20_000, 100);
      assert.equal(alive(pid), false);
      await new Promise((r) => setTimeout(r, 2500));
      assert.equal(Number(readFileSync(second.member.pidFile, 'utf8')), pid, 'a removed member is started again');
      // What etcd logs otherwise is told as its last error.
      const line = (level: string, msg: string, error?: string) => JSON.stringify({ level, ts: 'x', msg, ...(error ? { error } : {}) });
      assert.deepEqual(exitReason([line('info', 'starting'), line('fatal', 'discovery failed', 'error validating peerURLs'), line('info', 'after')].join('\n')), { removed: false, last: 'discovery failed: error validating peerURLs' });
      assert.deepEqual(exitReason(line('info', 'ok')), { removed: false, last: undefined });
    } finally {
      for (const m of members) await m.stop(true);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a watch etcd cancels (its user lost the read) holds up no rewatch, and comes back once the user may read again', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'berth-etcd-member-'));
    let member: EtcdMember | undefined;
    let state: EtcdState | undefined;
    try {
      const pki = await loopbackPki(dir, ['m1', 'root', 'n1']);
      const m = await loopbackMember(dir, pki, 'm1');
      member = m.member;
      const ctl = async (args: string[]) => {
        const r = await pki.etcdctl(m.clientPort, 'root', args);
        assert.equal(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
      };
      await eventually('m1 answers', async () => (await pki.etcdctl(m.clientPort, 'root', ['endpoint', 'health'])).code === 0, 30_000, 200);
      for (const args of [['user', 'add', 'root', '--new-user-password=x'], ['user', 'grant-role', 'root', 'root'], ['user', 'add', 'n1', '--new-user-password=x'], ['user', 'grant-role', 'n1', 'root'],
        ['role', 'add', 'open'], ['role', 'grant-permission', '--prefix=true', 'open', 'read', '/p/open/'], ['auth', 'enable']]) await ctl(args);

      state = new EtcdState({ endpoints: [`https://127.0.0.1:${m.clientPort}`], ca: pki.ca, cert: pki.certs.n1!, key: pki.key }, 'n1', '/p/');
      // A document as nodes write them (etcd-docs.ts), by a writer other than n1.
      const doc = JSON.stringify({ w: 'root', d: 1 });
      const heard: string[] = [];
      await state.watch((await state.snapshot()).revision, (key) => heard.push(key));
      await ctl(['put', '/p/first', doc]);
      await eventually('the watch hears a key', async () => heard.includes('first'), 10_000, 100);

      // etcd checks a watch's permission when it is made, as etcd3 makes it again on a new stream (the
      // member restarted, as a removed one's does): without root, the whole-prefix watch is cancelled.
      const restart = async () => {
        const pid = Number(readFileSync(m.member.pidFile, 'utf8'));
        process.kill(pid, 'SIGKILL');
        await eventually('the member started again and answering', async () => Number(readFileSync(m.member.pidFile, 'utf8')) !== pid && (await pki.etcdctl(m.clientPort, 'root', ['endpoint', 'health'])).code === 0, 30_000, 200);
        // etcd3 makes its watches again within its backoff (2 s at most, etcd-client.ts).
        await new Promise((r) => setTimeout(r, 3000));
      };
      await ctl(['user', 'revoke-role', 'n1', 'root']);
      await restart();
      await ctl(['put', '/p/while-denied', doc]);
      // Root given back, the watch is there again, from where it was.
      await ctl(['user', 'grant-role', 'n1', 'root']);
      await ctl(['put', '/p/back', doc]);
      await eventually('the cancelled watch started again, from where it was', async () => heard.includes('back') && heard.includes('while-denied'), 20_000, 100);

      // Cancelled again, then watched anew over the range it may read: the rewatch does not wait for
      // etcd to answer a cancellation of a watch it no longer has.
      await ctl(['user', 'revoke-role', 'n1', 'root']);
      await ctl(['user', 'grant-role', 'n1', 'open']);
      await restart();
      state.restrictReads([Range.prefix('/p/open/')]);
      const rev = (await state.snapshot()).revision;
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([state.rewatch(rev), new Promise((_, reject) => (timer = setTimeout(() => reject(new Error('the rewatch still waits after 8 s')), 8000)))]);
      clearTimeout(timer);
      await ctl(['put', '/p/open/later', doc]);
      await eventually('the new watch hears its range', async () => heard.includes('open/later'), 10_000, 100);
    } finally {
      await state?.close(false);
      await member?.stop(true);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

interface LoopbackPki {
  ca: string;
  caFile: string;
  /** One key for every certificate (each names another user), and its file. */
  key: string;
  keyFile: string;
  certs: Record<string, string>;
  certFile(name: string): string;
  etcdctl(clientPort: number, as: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }>;
}

/** A CA and a certificate per name (its CN), for members and users on 127.0.0.1. */
async function loopbackPki(dir: string, names: string[]): Promise<LoopbackPki> {
  const ca = await newCa(dir);
  const { key, csr } = await newCsr(dir);
  const file = (name: string, text: string) => {
    writeFileSync(join(dir, name), text, { mode: 0o600 });
    return join(dir, name);
  };
  const certs: Record<string, string> = {};
  for (const n of names) {
    certs[n] = await signNode(dir, ca, csr, { nodeId: n, role: 'manager', clusterId: 'c1', ips: ['127.0.0.1'], seconds: 86400 });
    file(`${n}.pem`, certs[n]!);
  }
  const caFile = file('ca.pem', ca.cert);
  const keyFile = file('key.pem', key);
  return {
    ca: ca.cert, caFile, key, keyFile, certs,
    certFile: (n) => join(dir, `${n}.pem`),
    etcdctl: (clientPort, as, args) =>
      run('etcdctl', ['--endpoints', `https://127.0.0.1:${clientPort}`, '--cacert', caFile, '--cert', join(dir, `${as}.pem`), '--key', keyFile, '--dial-timeout', '3s', '--command-timeout', '5s', ...args], {
        env: { ...process.env, ETCDCTL_API: '3' },
        timeoutMs: 20_000,
      }),
  };
}

/** Member `name` started on loopback: a new cluster of its own unless `join` names the cluster it joins. */
async function loopbackMember(dir: string, pki: LoopbackPki, name: string, join_?: { peerPort: number; initialCluster: string }) {
  const clientPort = await freePortOn('127.0.0.1');
  const peerPort = join_?.peerPort ?? (await freePortOn('127.0.0.1'));
  const member = new EtcdMember({
    name, dataDir: join(dir, name, 'etcd', 'data'), addr: '127.0.0.1', clientPort, peerPort,
    initialCluster: join_?.initialCluster ?? `${name}=${peerUrl('127.0.0.1', peerPort)}`, initialState: join_ ? 'existing' : 'new', clusterToken: 'c1',
    caFile: pki.caFile, certFile: pki.certFile(name), keyFile: pki.keyFile,
  });
  await member.start();
  return { member, clientPort, peerPort };
}
