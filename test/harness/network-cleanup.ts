/**
 * Each test daemon gets its own network prefix; at teardown every device and the nftables table
 * carrying it are removed (berthd itself leaves bridges in place when it stops, as dockerd does).
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';

export function newNetworkPrefix(): string {
  return `bt${randomBytes(3).toString('hex')}`;
}

export function removeNetworkLeftovers(prefix: string): void {
  let links: { ifname: string }[] = [];
  try {
    links = JSON.parse(execFileSync('ip', ['-j', 'link', 'show'], { encoding: 'utf8' })) as { ifname: string }[];
  } catch {
    /* no iproute2: nothing was created either */
  }
  for (const l of links) {
    if (!l.ifname.startsWith(prefix)) continue;
    try {
      execFileSync('ip', ['link', 'del', l.ifname], { stdio: 'ignore' });
    } catch {
      /* a veth goes with its peer */
    }
  }
  for (const family of ['inet', 'bridge']) {
    try {
      execFileSync('nft', ['delete', 'table', family, prefix], { stdio: 'ignore' });
    } catch {
      /* never created (the bridge table only with overlay networks) */
    }
  }
}
