/**
 * Removes everything a daemon's networking left on the host, without a running daemon or its database:
 * for test harnesses after a berthd stopped (or was killed), and for uninstall. Everything is found by
 * the daemon's prefix and exec root: aardvark-dns (by its pid file), namespace mounts, devices named
 * `<prefix>...`, the nftables tables (`inet`, the `bridge` one of the overlays' ARP guard, the `ip` one of
 * the routing mesh) and the prefix claim.
 * Never call it for a prefix a live daemon uses.
 */
import { readdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { prefixClaimPath } from './host-lock.js';
import { mountPoints } from './netns.js';
import { runTool } from './run-tool.js';

export async function purgeHostState(opts: { prefix: string; execRoot: string }): Promise<void> {
  const stateDir = join(opts.execRoot, 'network');
  await stopAardvark(join(stateDir, 'dns', 'config'));
  const netnsDir = join(stateDir, 'netns');
  const mounts = await mountPoints();
  for (const f of await readdir(netnsDir).catch(() => [] as string[])) {
    const p = join(netnsDir, f);
    if (mounts.has(p)) await runTool('umount', [p]).catch(() => {});
  }
  if (mounts.has(netnsDir)) await runTool('umount', [netnsDir]).catch(() => {});
  const links = JSON.parse(await runTool('ip', ['-j', 'link', 'show']).catch(() => '[]')) as { ifname: string }[];
  const ours = links.map((l) => l.ifname).filter((n) => n.startsWith(opts.prefix));
  if (ours.length) {
    await runTool('ip', ['-force', '-batch', '-'], { input: ours.map((n) => `link del dev ${n}\n`).join('') }).catch(() => {});
  }
  for (const family of ['inet', 'bridge', 'ip']) {
    await runTool('nft', ['delete', 'table', family, opts.prefix]).catch(() => {});
  }
  await rm(stateDir, { recursive: true, force: true }).catch(() => {});
  await rm(prefixClaimPath(opts.prefix), { force: true });
}

async function stopAardvark(configDir: string): Promise<void> {
  let pid: number;
  try {
    pid = Number((await readFile(join(configDir, 'aardvark.pid'), 'utf8')).trim());
    const cmdline = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0');
    if (!cmdline.includes(configDir)) return; // not ours (a recycled pid)
  } catch {
    return;
  }
  process.kill(pid, 'SIGTERM');
  for (let i = 0; i < 200; i++) {
    try {
      const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
      if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) return;
    } catch {
      return;
    }
    await sleep(5);
  }
}
