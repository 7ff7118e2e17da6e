/**
 * Measures per-container network setup and teardown with the real controller and bridge driver:
 *   node bench/dist/bench/tools/measure-network-setup.js [containers=20]
 * Uses a temporary root, a random prefix and its own networks; removes everything at the end.
 * Prints medians and p90 for: setup() (namespace + endpoint in one step; on the default bridge it takes
 * a namespace made ahead, topped up in between as the engine does), createNetns() + attach(), and
 * detach() + removeNetns(), on the default bridge and on a user network with DNS, with and without a
 * published port. The kernel's removal of released veths runs in the background and is not counted.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase } from '../../src/state/db.js';
import { NetworkRecords } from '../../src/state/network-records.js';
import { BridgeDriver } from '../../src/network/bridge-driver.js';
import { NetworkController, type AttachSpec } from '../../src/engine/networks/network-controller.js';
import { purgeHostState } from '../../src/network/purge-host-state.js';

const count = Number(process.argv[2] ?? 20);
const stats = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return `median ${s[s.length >> 1]!.toFixed(1)} ms, p90 ${s[Math.floor(s.length * 0.9)]!.toFixed(1)} ms`;
};

async function main(): Promise<void> {
  const root = await mkdtemp(join(tmpdir(), 'berth-net-measure-'));
  await writeFile(join(root, 'resolv.conf'), 'nameserver 127.0.0.1\n');
  const db = openDatabase(join(root, 'berth.db'));
  const prefix = `bm${randomBytes(2).toString('hex')}`;
  const driver = new NetworkController({
    records: new NetworkRecords(db),
    driver: new BridgeDriver({ execRoot: join(root, 'exec'), prefix, hostResolvConf: join(root, 'resolv.conf') }),
  });
  try {
    await driver.init();
    await driver.create({ name: 'measure' });
    const port = [{ containerPort: 80, protocol: 'tcp' as const, hostIp: '127.0.0.1', hostPort: 0 }];
    for (const [label, network, ports] of [
      ['default bridge, no ports', 'bridge', []],
      ['default bridge, one published port', 'bridge', port],
      ['user network (DNS), no ports', 'measure', []],
      ['user network (DNS), one published port', 'measure', port],
    ] as [string, string, AttachSpec['ports']][]) {
      const setup: number[] = [];
      const split: number[] = [];
      const teardown: number[] = [];
      // Keep one container attached so the DNS server is already running, as on a busy host.
      const keep = randomBytes(32).toString('hex');
      await driver.setup({ containerId: keep, name: 'keep', networks: [{ network }], dns: ['127.0.0.1'] });
      for (let i = 0; i < count; i++) {
        const id = randomBytes(32).toString('hex');
        const spec = { containerId: id, name: `m${i}`, networks: [{ network }], ports, dns: ['127.0.0.1'] };
        let t = performance.now();
        if (i % 2 === 0) {
          await driver.setup(spec);
          setup.push(performance.now() - t);
          driver.replenish(); // as the engine does once the process exists
        } else {
          const netnsPath = await driver.createNetns(id);
          await driver.attach({ ...spec, netnsPath });
          split.push(performance.now() - t);
        }
        t = performance.now();
        await driver.detach(id);
        await driver.removeNetns(id);
        teardown.push(performance.now() - t);
      }
      await driver.detach(keep);
      await driver.removeNetns(keep);
      console.log(`${label}:\n  setup()                 ${stats(setup)}\n  createNetns()+attach()  ${stats(split)}\n  detach()+removeNetns()  ${stats(teardown)}`);
    }
    await driver.remove('measure');
  } finally {
    await driver.destroy();
    // The default bridge outlives a daemon by design; a measurement leaves nothing behind.
    await purgeHostState({ prefix, execRoot: join(root, 'exec') });
    db.close();
    await rm(root, { recursive: true, force: true });
  }
}

await main();
