/**
 * The small files dockerd bind-mounts into every container: /etc/hostname, /etc/hosts and
 * /etc/resolv.conf, written into the container's dir once its network is prepared. Their texts
 * come from the one generator, network/container-files.ts.
 */
import { writeFile } from 'node:fs/promises';

export async function writeEtcFiles(opts: {
  hostnamePath: string;
  hostsPath: string;
  resolvConfPath: string;
  hostname: string;
  resolvConf: string;
  hosts: string;
}): Promise<void> {
  await Promise.all([
    writeFile(opts.hostnamePath, `${opts.hostname}\n`),
    writeFile(opts.hostsPath, opts.hosts),
    writeFile(opts.resolvConfPath, opts.resolvConf),
  ]);
}
