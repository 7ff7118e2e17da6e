/**
 * The etcd member berthd runs, on loopback without a daemon: one started on another key file (an
 * older berthd named the data root's, which auto-lock now seals) is started again on the file named
 * now, on the same data, and answers there. One that dies while berthd runs is started again.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EtcdMember, freePortOn, peerUrl, type MemberConfig } from '../../src/engine/swarm/cluster/etcd-member.js';
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
});
